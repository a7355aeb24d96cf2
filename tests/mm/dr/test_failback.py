"""Failback's pure logic: a target offset back to its source offset (the A->B offset
syncs read backwards), the reverse flow's forward translation, the per-group plan."""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from mm.checkpoint.store import PartitionHistory
from mm.config import MirrorConfig
from mm.dr.failback import (
    AHEAD_ON_A,
    AT_FAILOVER_POINT,
    LOCAL,
    REMOTE,
    Back,
    BackRow,
    forward_offset,
    history,
    identity_overlap,
    inverse_offset,
    inverse_with_tail,
    keep_ahead,
    not_exact,
    plan_group,
    tail_offset,
    translations,
)
from mm.verify.compare import Sync

pytestmark = pytest.mark.unit

# the transaction id of mm-written syncs (one writer: transaction boundaries are
# told by the txn_first flags, as before syncs carried the id)
W = "t"


def _history(syncs: Iterable[tuple[int, int, bool]]) -> PartitionHistory:
    """A history of mm's own syncs (one writer: the flags tell transactions apart)."""
    return history(Sync(u, d, first, W) for u, d, first in syncs)


def _no_tail(up: int, down: int) -> tuple[list[int], list[int]]:
    """Nothing after the last sync on either side (its syncs all arrived)."""
    return [], []


# Source offsets 0-9 mirrored in one transaction (target 0-9, its commit marker at
# 10); source offset 10 is a marker on A; 11-14 mirrored in the next transaction
# (target 11-14, marker at 15); the mirror's position is 16 (A's marker at 15).
UPS = [0, 9, 11, 14]
DOWNS = [0, 9, 11, 14]
FIRST = [True, False, True, False]


def back(downstream: int) -> Back:
    return inverse_offset(UPS, DOWNS, downstream, txn_first=FIRST, writers=[W] * 4, position=16)


def test_at_a_sync_is_its_source_offset() -> None:
    assert back(0) == Back(0, True, "at an offset sync")
    assert back(9).offset == 9
    assert back(11).offset == 11 and back(14).offset == 14


def test_between_syncs_of_one_run() -> None:
    got = back(5)
    assert (got.offset, got.exact, got.how) == (5, True, "inside a mirrored run")
    assert back(13).offset == 13


def test_a_target_gap_resumes_at_the_next_copy() -> None:
    # 10 is the first transaction's marker on B: the group reads the copy of 11 next
    got = back(10)
    assert (got.offset, got.exact) == (11, True)
    assert got.how == "in a target gap before the next mirrored run"


def test_without_transaction_flags_equal_widths_read_as_one_run() -> None:
    # 10 instead of 11: on A the group reads the same record next (10 is a marker)
    got = inverse_offset(UPS, DOWNS, 10, writers=[W] * 4, position=16)
    assert (got.offset, got.exact) == (10, True)


def test_past_the_last_copy_is_the_failover_point() -> None:
    for d in (15, 16, 40):  # B's marker, B's end, anything past (markers only)
        got = back(d)
        assert (got.offset, got.exact) == (16, True)
        assert "failover point" in got.how


def test_past_the_last_copy_without_a_usable_point() -> None:
    assert inverse_offset(UPS, DOWNS, 15).offset is None
    bad = inverse_offset(UPS, DOWNS, 15, position=14)
    assert bad.offset is None and "not past the last mirrored" in bad.how


def test_past_the_last_sync_records_are_counted_one_by_one() -> None:
    # the last transaction's syncs were lost: B holds copies at 16-18 (marker 19) of
    # A's 17, 18, 20 (A's markers at 16 and 19); the failover point is 22
    copies, originals = [16, 17, 18], [17, 18, 20]
    assert [tail_offset(copies, originals, 22, d).offset for d in range(15, 22)] == [
        17,  # B's marker before the copies
        17,
        18,
        20,
        22,  # B's marker after the last copy
        22,
        22,
    ]
    assert tail_offset(copies, originals, 22, 17).exact
    assert tail_offset([], [], 22, 30) == Back(
        22, True, "past the last mirrored record: the failover point"
    )


def test_past_the_last_sync_counts_that_differ_give_no_answer() -> None:
    # a record on B no mirror copied from A (the identity policy's shared names)
    got = tail_offset([16, 17, 18, 19], [17, 18, 20], 22, 16)
    assert got.offset is None and not got.exact
    assert "holds 4 records and the source 3" in got.how
    assert tail_offset([16], [17], None, 16).offset is None


def test_the_tail_is_read_only_past_the_last_sync() -> None:
    h = _history(zip(UPS, DOWNS, FIRST, strict=True))
    asked: list[tuple[int, int]] = []

    def tail(up: int, down: int) -> tuple[list[int], list[int]]:
        asked.append((up, down))
        return [16, 17], [16, 17]

    assert inverse_with_tail(h, 13, 18, tail).offset == 13 and not asked
    assert inverse_with_tail(h, 15, 18, tail).offset == 16 and asked == [(14, 14)]
    assert inverse_with_tail(h, 17, 18, tail).offset == 17
    assert inverse_with_tail(h, 18, 18, tail).offset == 18
    # a failover point not past the last sync is an error, not a tail
    bad = inverse_with_tail(h, 15, 14, tail)
    assert bad.offset is None and "not past the last mirrored" in bad.how


@st.composite
def mirrored_logs(
    draw: st.DrawFn,
) -> tuple[list[tuple[int, int, bool]], list[tuple[int, int]], int, int]:
    """A source partition (records and gaps), the mirror's transactions copying a
    prefix of it to the target (each followed by its commit marker), syncs for the
    first and last record of every run, the last transactions' syncs lost.

    Returns (kept syncs, copies as (source, target), failover point, lost count)."""
    kinds = draw(st.lists(st.booleans(), min_size=1, max_size=40))  # True: a record
    records = [o for o, is_record in enumerate(kinds) if is_record]
    assume(records)
    mirrored = records[: draw(st.integers(1, len(records)))]
    cuts = sorted(draw(st.sets(st.integers(1, len(mirrored)), max_size=5)) | {len(mirrored)})
    txns, start = [], 0
    for cut in cuts:
        if cut > start:
            txns.append(mirrored[start:cut])
            start = cut
    syncs: list[list[tuple[int, int, bool]]] = []
    copies: list[tuple[int, int]] = []
    target = 0
    for txn in txns:
        these: list[tuple[int, int, bool]] = []
        for i, u in enumerate(txn):
            copies.append((u, target + i))
            run_start = i == 0 or txn[i - 1] != u - 1
            run_end = i == len(txn) - 1 or txn[i + 1] != u + 1
            if run_start or run_end:
                these.append((u, target + i, i == 0))
        syncs.append(these)
        target += len(txn) + 1  # the commit marker
    lost = draw(st.integers(0, len(txns) - 1))
    kept = [s for these in syncs[: len(syncs) - lost] for s in these]
    # the mirror's position: past its last copy, and past any gap it read after it
    last = mirrored[-1]
    following = records[len(mirrored)] if len(records) > len(mirrored) else len(kinds)
    position = draw(st.integers(last + 1, following))
    return kept, copies, position, target


@given(mirrored_logs())
def test_every_target_offset_goes_back_to_the_next_record_it_would_read(
    log: tuple[list[tuple[int, int, bool]], list[tuple[int, int]], int, int],
) -> None:
    kept, copies, position, end = log
    h = _history(kept)

    def tail(up: int, down: int) -> tuple[list[int], list[int]]:
        return [d for _u, d in copies if d > down], [u for u, _d in copies if up < u < position]

    for d in range(kept[0][1], end + 2):
        want = next((u for u, t in copies if t >= d), position)
        got = inverse_with_tail(h, d, position, tail)
        assert (got.offset, got.exact) == (want, True), (d, got)


def test_below_the_oldest_sync_and_without_syncs() -> None:
    got = inverse_offset([100, 150], [50, 100], 10, position=200)
    assert got.offset is None and "below the oldest offset sync" in got.how
    assert inverse_offset([], [], 0, position=0).offset is None


def test_compacted_source_offsets_in_one_transaction() -> None:
    # source 0-2, 3-6 compacted away, 7-8: target 0-4 contiguous, two runs
    ups, downs = [0, 2, 7, 8], [0, 2, 3, 4]
    first = [True, False, False, False]
    assert [
        inverse_offset(ups, downs, d, txn_first=first, writers=[W] * len(ups)).offset
        for d in range(5)
    ] == [
        0,
        1,
        2,
        7,
        8,
    ]
    # the same gap across a transaction boundary: B's marker at 3
    ups, downs, first = [0, 2, 7, 8], [0, 2, 4, 5], [True, False, True, False]
    got = inverse_offset(ups, downs, 3, txn_first=first, writers=[W] * len(ups), position=9)
    assert (got.offset, got.exact) == (7, True)
    assert (
        inverse_offset(ups, downs, 6, txn_first=first, writers=[W] * len(ups), position=9).offset
        == 9
    )


def test_an_interval_with_missing_syncs_answers_low_and_says_so() -> None:
    got = inverse_offset([0, 10], [0, 20], 5, complete=[True, False])
    assert (got.offset, got.exact) == (1, False)
    # nothing can lie between 0 and 1 on the source: exact
    got = inverse_offset([0, 1], [0, 5], 3, complete=[True, False])
    assert (got.offset, got.exact) == (1, True)


def test_history_with_pending_syncs_of_the_last_transaction() -> None:
    # the topic has the first transaction; the last one (after B's marker at 5) only
    # in the mirror's commit metadata, as with the syncs topic on a dead source
    h = _history([(0, 0, True), (4, 4, False)])
    h.set_pending([(5, 6), (9, 10)], writer=W)
    ups, downs, first, complete, writers = h.all_syncs()
    assert (ups, downs) == ([0, 4, 5, 9], [0, 4, 6, 10])
    assert writers == [W, W, W, W]
    assert first == [True, False, True, False]
    assert complete[2:] == [False, True]
    got = inverse_with_tail(h, 5, 10, _no_tail)
    assert (got.offset, got.exact) == (5, True)  # between 4 and 5: nothing else on A
    assert inverse_with_tail(h, 8, 10, _no_tail).offset == 7
    assert inverse_with_tail(h, 11, 10, _no_tail).offset == 10
    assert inverse_with_tail(None, 3, 10, _no_tail).offset is None


def test_history_takes_a_rewind_as_the_checkpoint_store_does() -> None:
    # the range from 5 was re-mirrored to other target offsets: the old pairs go
    h = _history([(0, 0, True), (9, 9, False), (5, 20, True), (9, 24, False)])
    assert h.upstreams == [0, 5, 9] and h.downstreams == [0, 20, 24]


def test_forward_translation_of_the_reverse_flow() -> None:
    h = PartitionHistory([0, 4], [0, 4], txn_first=[True, False], writers=[W, W])
    h.position = 5
    assert forward_offset(h, 0) == Back(0, True, "translated")
    assert forward_offset(h, 3).offset == 3
    assert forward_offset(h, 5).offset == 5  # at the end: one past the last copy
    late = forward_offset(h, 7)
    assert late.offset is None and "not mirrored yet" in late.how
    assert forward_offset(None, 0).offset is None
    assert "nothing mirrored" in forward_offset(PartitionHistory(), 0).how


def test_plan_group_routes_each_topic_and_skips_others() -> None:
    routes = {"A.orders": (REMOTE, "orders"), "orders": (LOCAL, "B.orders")}
    seen = []

    def answer(kind: str, topic: str, p: int, off: int) -> Back:
        seen.append((kind, topic, p, off))
        return Back(off + 100, True, "x") if kind == LOCAL else Back(None, False, "why")

    rows = plan_group("g", {("A.orders", 0): 3, ("orders", 1): 7, ("other", 0): 1}, routes, answer)
    assert seen == [(REMOTE, "A.orders", 0, 3), (LOCAL, "orders", 1, 7)]
    assert [(r.topic, r.partition, r.after, r.from_topic, r.from_offset) for r in rows] == [
        ("orders", 0, None, "A.orders", 3),
        ("B.orders", 1, 107, "orders", 7),
    ]
    assert not_exact(rows) == [rows[0]]
    assert translations([rows[1]]) == {("B.orders", 1): (107, 7)}


def test_not_exact_counts_an_inexact_answer() -> None:
    row = BackRow("g", "A.t", 0, 5, REMOTE, "t", 1, False, "gaps")
    assert not_exact([row]) == [row]


def test_identity_overlap() -> None:
    assert identity_overlap(["A.orders"], ["orders", "payments"]) == []
    assert identity_overlap(["orders", "x"], ["orders", "payments"]) == ["orders"]


def _cfg(extra: str) -> MirrorConfig:
    from mm.config.loader import build_config
    from mm.config.properties import parse_properties

    text = (
        "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n"
        "A->B.enabled = true\n" + extra
    )
    return build_config(parse_properties(text))


@pytest.mark.parametrize("extra", ["", "B->A.enabled = false\n"])
def test_the_reverse_flow_must_be_enabled(extra: str) -> None:
    from mm.dr.failback_run import reverse_flow
    from mm.errors import ConfigError

    cfg = _cfg(extra)
    with pytest.raises(ConfigError, match=r"B->A\.enabled.*--quarantine-only"):
        reverse_flow(cfg, cfg.flow("A", "B"))


def test_the_reverse_flow_as_configured() -> None:
    from mm.dr.failback_run import reverse_flow

    cfg = _cfg("B->A.enabled = true\nB->A.topics = orders\n")
    rev = reverse_flow(cfg, cfg.flow("A", "B"))
    assert (rev.name, rev.topics) == ("B->A", ("orders",))


def test_a_group_already_past_the_failover_point_on_a_keeps_its_offset() -> None:
    def row(before: int | None, after: int, how: str, kind: str = REMOTE) -> BackRow:
        return BackRow("g", "A.t", 0, 50, kind, "t", after, True, how, before)

    ahead = row(218, 216, AT_FAILOVER_POINT)  # processed 216-217 on A before the disaster
    behind = row(210, 216, AT_FAILOVER_POINT)
    inside = row(300, 40, "inside a mirrored run")  # not caught up on B: goes back
    local = row(300, 216, AT_FAILOVER_POINT, LOCAL)
    new = row(None, 216, AT_FAILOVER_POINT)
    keep_ahead([ahead, behind, inside, local, new])
    assert (ahead.after, ahead.how) == (218, AHEAD_ON_A)
    assert [r.after for r in (behind, inside, local, new)] == [216, 40, 216, 216]
