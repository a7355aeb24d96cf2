"""The pure judgement of `mm verify`: digests, alignment, syncs, translations, checkpoints."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mm.verify.compare import (
    AHEAD,
    CONTENT,
    EXTRA,
    MISSING,
    REORDERED,
    CheckpointIn,
    PartitionInput,
    Sync,
    check_syncs,
    check_translations,
    compare_partition,
    exact_translation,
    first_difference,
    multiset_difference,
    sync_table,
)
from mm.verify.digest import DigestSeq, differing_fields, record_digest, split_ranges

pytestmark = pytest.mark.unit


def d(name: str) -> bytes:
    """A record digest named by its value."""
    return record_digest(None, name.encode(), (), 0)


def seq(names: Sequence[str], offsets: Sequence[int] | None = None) -> DigestSeq:
    offs = list(range(len(names))) if offsets is None else list(offsets)
    return DigestSeq.of(zip(offs, (d(n) for n in names), strict=True))


# --- digests ---------------------------------------------------------------------------------


def test_digest_tells_every_field_and_null_from_empty() -> None:
    base = record_digest(b"k", b"v", (("h", b"1"), ("h", b"2")), 5)
    variants = [
        record_digest(None, b"v", (("h", b"1"), ("h", b"2")), 5),
        record_digest(b"", b"v", (("h", b"1"), ("h", b"2")), 5),
        record_digest(b"k", None, (("h", b"1"), ("h", b"2")), 5),
        record_digest(b"k", b"v", (("h", b"2"), ("h", b"1")), 5),  # header order
        record_digest(b"k", b"v", (("h", b"1"),), 5),  # a duplicate header dropped
        record_digest(b"k", b"v", (("h", b"1"), ("h", None)), 5),
        record_digest(b"k", b"v", (("h", b"1"), ("h", b"")), 5),
        record_digest(b"k", b"v", (("h", b"1"), ("h", b"2")), 6),
        record_digest(b"kv", b"", (("h", b"1"), ("h", b"2")), 5),  # field boundaries
    ]
    assert len({base, *variants}) == len(variants) + 1
    assert base == record_digest(b"k", b"v", [("h", b"1"), ("h", b"2")], 5)


def test_differing_fields_names_them() -> None:
    a = (b"k", b"v", (("h", b"1"),), 5)
    assert differing_fields(a, (b"k", b"v", [("h", b"1")], 5)) == []
    assert differing_fields(a, (b"k", b"w", (("h", b"1"),), 7)) == ["value", "timestamp"]
    assert differing_fields(a, (None, b"v", (), 5)) == ["key", "headers"]


def test_split_ranges() -> None:
    assert split_ranges(0, 10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert split_ranges(5, 5, 4) == []
    with pytest.raises(ValueError):
        split_ranges(0, 1, 0)


def test_digest_seq_lookups_and_find_on_digest_boundaries() -> None:
    s = seq(["a", "b", "c"], [3, 7, 9])
    assert (s.index_of(7), s.index_of(8), s.first_at_or_after(8)) == (1, None, 2)
    assert s.find(d("c")) == 2 and s.find(d("a"), 1) is None
    # a "match" straddling two digests is not a record
    assert s.find(d("a")[8:] + d("b")[:8]) is None
    with pytest.raises(ValueError):
        s.append(9, d("x"))


# --- alignment -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "target", "matched", "kind", "src_off", "tgt_off"),
    [
        ("abcde", "abcde", 5, None, None, None),
        ("", "", 0, None, None, None),
        ("abcde", "abde", 2, MISSING, 2, 2),  # c never came
        ("abcde", "abcd", 4, MISSING, 4, None),  # the tail is missing
        ("abcde", "abxcde", 2, EXTRA, 2, 2),  # x inserted
        ("abcde", "abcdex", 5, EXTRA, None, 5),  # x appended
        ("abcde", "abdce", 2, REORDERED, 2, 2),  # c and d swapped
        ("abcde", "adbce", 1, REORDERED, 1, 1),  # d moved forward
        ("abcde", "abXde", 2, CONTENT, 2, 2),  # c replaced
        ("abcde", "xbcde", 0, CONTENT, 0, 0),
    ],
)
def test_first_difference(
    source: str,
    target: str,
    matched: int,
    kind: str | None,
    src_off: int | None,
    tgt_off: int | None,
) -> None:
    k, diff = first_difference(seq(source), seq(target))
    assert k == matched
    if kind is None:
        assert diff is None
    else:
        assert diff is not None
        assert (diff.kind, diff.source_offset, diff.target_offset) == (kind, src_off, tgt_off)


def test_multiset_difference_counts_duplicates() -> None:
    assert multiset_difference(seq("aabc"), seq("abcc")) == (1, 1)
    assert multiset_difference(seq("abc"), seq("cba")) == (0, 0)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from("abcdefgh"), max_size=30),
    st.lists(st.sampled_from("abcdefgh"), max_size=30),
)
def test_first_difference_is_the_first_unequal_position(
    source: list[str], target: list[str]
) -> None:
    k, diff = first_difference(seq(source), seq(target))
    assert source[:k] == target[:k]
    if source == target:
        assert diff is None and k == len(source)
        return
    assert diff is not None
    # k is the first position where they differ (or one side ended)
    assert k == len(source) or k == len(target) or source[k] != target[k]
    assert diff.source_offset == (k if k < len(source) else None)
    assert diff.target_offset == (k if k < len(target) else None)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.text("abcdefghijkl", min_size=1, max_size=3), min_size=2, max_size=30, unique=True),
    st.data(),
)
def test_single_edits_are_classified(records: list[str], data: st.DataObject) -> None:
    """One deletion, insertion of a new record, or adjacent swap is named as such."""
    i = data.draw(st.integers(0, len(records) - 1))
    edit = data.draw(st.sampled_from([MISSING, EXTRA, REORDERED]))
    target = list(records)
    if edit == MISSING:
        del target[i]
    elif edit == EXTRA:
        target.insert(i, "new!")
    else:
        i = min(i, len(records) - 2)
        target[i], target[i + 1] = target[i + 1], target[i]
    k, diff = first_difference(seq(records), seq(target))
    assert diff is not None and k == i
    assert diff.kind == edit


# --- syncs and translations ------------------------------------------------------------------

# source offsets 0-2 records, 3 marker, 4-5 records, 6-8 aborted + marker, 9 record
SRC_OFFSETS = [0, 1, 2, 4, 5, 9]
# the mirror's target: 0-2 (txn 1), 3 marker, 4-6 (txn 2), 7 marker
TGT_OFFSETS = [0, 1, 2, 4, 5, 6]
# the mirror's rule: a sync at the first and last record of every run
MIRROR_SYNCS = [
    Sync(0, 0, True, "t1"),
    Sync(2, 2, False, "t1"),
    Sync(4, 4, True, "t2"),
    Sync(5, 5, False, "t2"),
    Sync(9, 6, False, "t2"),
]


def test_true_and_false_syncs() -> None:
    src, tgt = seq("abcdef", SRC_OFFSETS), seq("abcdef", TGT_OFFSETS)
    ok = check_syncs(MIRROR_SYNCS, src, tgt, 0, 0)
    assert (ok.checked, ok.false, ok.first_false) == (5, 0, None)
    bad = check_syncs([*MIRROR_SYNCS, Sync(2, 1), Sync(3, 3), Sync(9, 9)], src, tgt, 0, 0)
    assert (bad.checked, bad.false) == (8, 3)
    assert bad.first_false == (2, 1, "source record 2 and target record 1 differ")
    deleted = check_syncs(MIRROR_SYNCS, src, tgt, 3, 0)
    assert (deleted.checked, deleted.not_checkable) == (3, 2)


def test_translations_of_records_gaps_and_head() -> None:
    table = sync_table(MIRROR_SYNCS)
    check = check_translations(SRC_OFFSETS, TGT_OFFSETS, table, gap_floor=0, head=10)
    # 6 records, gap 3, gap 6-8 (first and last), head 10
    assert (check.checked, check.wrong, check.not_checkable) == (10, 0, 0)
    # a sync pointing one record too far is caught at the record and in the gap before it
    wrong = sync_table(
        [
            Sync(0, 0, True, "t1"),
            Sync(2, 2, False, "t1"),
            Sync(4, 5, True, "t2"),
            Sync(9, 6, False, "t2"),
        ]
    )
    check = check_translations(SRC_OFFSETS, TGT_OFFSETS, wrong, gap_floor=0, head=10)
    assert check.wrong and check.first_wrong == (3, 4, 5)


def test_syncs_of_a_copy_mirrored_again_are_superseded_not_false() -> None:
    """The partition mirrored again (a position moved back, then the target topic
    deleted and mirrored anew): the syncs are read in the order written, as the
    checkpoint job reads them. The newest copy's syncs are judged and translate;
    the earlier copies' pairs that are not true of the target now are counted as
    superseded; a false sync among the newest ones is still false."""
    src, tgt = seq("abcdef", SRC_OFFSETS), seq("abcdef", TGT_OFFSETS)
    reset = [Sync(2, 7, True, "t3"), Sync(9, 9, False, "t3")]  # copied again from 2
    # then the topic deleted and copied anew (each mirror transaction has its own id)
    anew = [Sync(s.upstream, s.downstream, s.txn_first, f"new-{s.writer}") for s in MIRROR_SYNCS]
    syncs = [*MIRROR_SYNCS, *reset, *anew]
    table = sync_table(syncs)
    assert (table.upstreams, table.downstreams) == ([0, 2, 4, 5, 9], [0, 2, 4, 5, 6])
    assert table.conflicts == [(2, [2, 7]), (9, [6, 9])]
    check = check_syncs(syncs, src, tgt, 0, 0, table)
    assert (check.checked, check.false, check.superseded) == (7, 0, 2)
    translations = check_translations(SRC_OFFSETS, TGT_OFFSETS, table, gap_floor=0, head=10)
    assert (translations.checked, translations.wrong) == (10, 0)
    bad = [*syncs, Sync(10, 8, True, "t4")]  # past every record: no target record there
    assert check_syncs(bad, src, tgt, 0, 0, sync_table(bad)).false == 1


def test_translations_from_another_writers_syncs_are_conservative_not_wrong() -> None:
    # the same pairs without mm's writer header (MirrorMaker 2's, an older mirror's):
    # MM2's rule answers behind in the gaps, which is all such syncs allow
    theirs = sync_table([Sync(s.upstream, s.downstream) for s in MIRROR_SYNCS])
    check = check_translations(SRC_OFFSETS, TGT_OFFSETS, theirs, gap_floor=0, head=10)
    assert (check.checked, check.wrong) == (10, 0)
    assert check.conservative > 0
    # one sync pointing too far is still wrong: ahead is never conservative
    ahead = sync_table([Sync(0, 0), Sync(2, 3)])
    check = check_translations(SRC_OFFSETS, TGT_OFFSETS, ahead, gap_floor=0, head=None)
    assert check.wrong


def test_translations_below_the_oldest_sync_are_not_checkable() -> None:
    compacted = sync_table([Sync(5, 5), Sync(9, 6)])
    check = check_translations(SRC_OFFSETS, TGT_OFFSETS, compacted, gap_floor=0, head=10)
    assert check.not_checkable == 4  # records 0, 1, 2, 4
    assert check.wrong == 0


def test_sync_table_collapses_duplicates_and_reports_conflicts() -> None:
    t = sync_table([Sync(1, 1), Sync(1, 1, True), Sync(3, 2), Sync(3, 4)])
    assert (t.upstreams, t.downstreams, t.txn_first) == ([1, 3], [1, 4], [True, False])
    assert t.conflicts == [(3, [2, 4])]


def test_exact_translation() -> None:
    assert exact_translation(SRC_OFFSETS, TGT_OFFSETS, 3, complete=True) == 4
    assert exact_translation(SRC_OFFSETS, TGT_OFFSETS, 6, complete=True) == 6
    assert exact_translation(SRC_OFFSETS, TGT_OFFSETS, 10, complete=True) == 7
    assert exact_translation(SRC_OFFSETS, TGT_OFFSETS, 10, complete=False) is None


# --- whole partitions ------------------------------------------------------------------------


def part(
    source: DigestSeq,
    target: DigestSeq,
    *,
    position: int | None = 10,
    source_bounds: tuple[int, int] = (0, 10),
    target_bounds: tuple[int, int] = (0, 8),
    syncs: Sequence[Sync] = tuple(MIRROR_SYNCS),
    checkpoints: Sequence[CheckpointIn] = (),
) -> PartitionInput:
    return PartitionInput(
        "t", 0, "A.t", source, target, *source_bounds, *target_bounds, position, syncs, checkpoints
    )


def test_exact_mirror_passes_with_checkpoints_classified() -> None:
    cps = [
        CheckpointIn("exact", 3, 4),
        CheckpointIn("behind", 5, 4),
        CheckpointIn("ahead", 4, 5),
        CheckpointIn("head", 10, 7),
    ]
    rep = compare_partition(
        part(seq("abcdef", SRC_OFFSETS), seq("abcdef", TGT_OFFSETS), checkpoints=cps)
    )
    c = rep.checkpoints
    assert (c.exact, c.conservative, c.ahead) == (2, 1, 1)
    assert c.first_ahead == ("ahead", 4, 5, 4)
    assert rep.problems == [
        "1 checkpoints ahead of their group; first: group 'ahead' at source offset 4 "
        "checkpointed to 5, exact translation 4"
    ]
    assert rep.matched == 6 and rep.translations.checked == 10
    clean = compare_partition(part(seq("abcdef", SRC_OFFSETS), seq("abcdef", TGT_OFFSETS)))
    assert clean.ok and clean.complete and not clean.not_compared


def test_position_behind_is_not_yet_mirrored() -> None:
    rep = compare_partition(
        part(
            seq("abcdef", SRC_OFFSETS),
            seq("abcde", TGT_OFFSETS[:5]),
            position=6,
            syncs=MIRROR_SYNCS[:4],
        )
    )
    assert rep.not_yet_mirrored == 1 and rep.difference is None
    assert rep.problems == [
        "not yet mirrored: 1 committed records at source offsets 6-9 (position 6, source end 10)"
    ]
    assert not rep.complete and not rep.ok


def test_position_behind_over_markers_only_is_complete() -> None:
    # source offset 9's record is gone from the input: 6-9 hold markers/aborted records only
    rep = compare_partition(
        part(
            seq("abcde", SRC_OFFSETS[:5]),
            seq("abcde", TGT_OFFSETS[:5]),
            position=6,
            syncs=MIRROR_SYNCS[:4],
        )
    )
    assert rep.ok and rep.complete, rep.problems
    assert rep.notes == [
        "position 6 is behind the source end 10 over transaction markers or aborted records "
        "only: nothing to mirror there"
    ]


def test_no_position_with_data_fails() -> None:
    rep = compare_partition(part(seq("ab"), seq(""), position=None, syncs=()))
    assert rep.not_yet_mirrored == 2
    assert not rep.ok and "no mirror position" in rep.problems[0]
    markers_only = compare_partition(
        part(seq(""), seq(""), position=None, source_bounds=(0, 3), syncs=())
    )
    assert markers_only.ok and markers_only.notes, markers_only.problems


def test_empty_partition_passes() -> None:
    rep = compare_partition(
        part(seq(""), seq(""), position=None, source_bounds=(0, 0), target_bounds=(0, 0), syncs=())
    )
    assert rep.ok, rep.problems


def test_missing_syncs_fail_a_mirrored_partition() -> None:
    rep = compare_partition(part(seq("abcdef", SRC_OFFSETS), seq("abcdef", TGT_OFFSETS), syncs=()))
    assert any("no offset syncs" in p for p in rep.problems)


def test_source_retention_skips_the_targets_older_records() -> None:
    # the source deleted offsets 0-3; the target still has what was mirrored from them
    src = seq("def", [4, 5, 9])
    rep = compare_partition(part(src, seq("abcdef", TGT_OFFSETS), source_bounds=(4, 10)))
    assert rep.ok, rep.problems
    assert rep.matched == 3
    assert rep.not_compared[0].startswith("3 target records (offsets 0-2) mirrored from source")


def test_target_retention_skips_the_sources_older_records() -> None:
    tgt = seq("def", [4, 5, 6])
    rep = compare_partition(part(seq("abcdef", SRC_OFFSETS), tgt, target_bounds=(4, 8)))
    assert rep.ok, rep.problems
    assert rep.matched == 3
    assert rep.not_compared[0].startswith("3 source records (offsets 0-2) whose target copy")
    # syncs into the deleted part of the target cannot be checked
    assert rep.syncs.not_checkable == 2


def test_difference_is_reported_with_totals() -> None:
    rep = compare_partition(part(seq("abcdef", SRC_OFFSETS), seq("abXdef", TGT_OFFSETS)))
    assert rep.difference is not None and rep.difference.kind == CONTENT
    assert (rep.missing_total, rep.extra_total) == (1, 1)
    assert rep.problems[0] == "content differs at source offset 2, target offset 2"
    # translations only over the matched prefix
    assert rep.translations.checked == 2
    assert any("after the first difference" in n for n in rep.not_compared)


def test_report_json_is_plain_data() -> None:
    import json

    rep = compare_partition(part(seq("abcdef", SRC_OFFSETS), seq("abcde", TGT_OFFSETS[:5])))
    data = json.loads(json.dumps(rep.to_json()))
    assert data["first_difference"] == {
        "kind": MISSING,
        "source_offset": 9,
        "target_offset": None,
        "fields": [],
    }
    assert data["ok"] is False and data["checkpoints"]["ahead"] == 0
    assert AHEAD == "ahead"
