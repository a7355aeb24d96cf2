"""Failback's pure logic: a target offset back to its source offset (the A->B offset
syncs read backwards), the reverse flow's forward translation, the per-group plan."""

from __future__ import annotations

import pytest

from mm.checkpoint.store import PartitionHistory
from mm.config import MirrorConfig
from mm.dr.failback import (
    LOCAL,
    REMOTE,
    Back,
    BackRow,
    forward_offset,
    history,
    identity_overlap,
    inverse_from_history,
    inverse_offset,
    not_exact,
    plan_group,
    translations,
)

pytestmark = pytest.mark.unit

# Source offsets 0-9 mirrored in one transaction (target 0-9, its commit marker at
# 10); source offset 10 is a marker on A; 11-14 mirrored in the next transaction
# (target 11-14, marker at 15); the mirror's position is 16 (A's marker at 15).
UPS = [0, 9, 11, 14]
DOWNS = [0, 9, 11, 14]
FIRST = [True, False, True, False]


def back(downstream: int, written_after: bool = False) -> Back:
    return inverse_offset(
        UPS, DOWNS, downstream, txn_first=FIRST, position=16, written_after=written_after
    )


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
    got = inverse_offset(UPS, DOWNS, 10, position=16)
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


def test_records_written_after_the_copies_have_no_source_offset() -> None:
    got = back(20, written_after=True)
    assert got.offset is None and not got.exact
    assert "did not come from the source" in got.how


def test_below_the_oldest_sync_and_without_syncs() -> None:
    got = inverse_offset([100, 150], [50, 100], 10, position=200)
    assert got.offset is None and "below the oldest offset sync" in got.how
    assert inverse_offset([], [], 0, position=0).offset is None


def test_compacted_source_offsets_in_one_transaction() -> None:
    # source 0-2, 3-6 compacted away, 7-8: target 0-4 contiguous, two runs
    ups, downs = [0, 2, 7, 8], [0, 2, 3, 4]
    first = [True, False, False, False]
    assert [inverse_offset(ups, downs, d, txn_first=first).offset for d in range(5)] == [
        0,
        1,
        2,
        7,
        8,
    ]
    # the same gap across a transaction boundary: B's marker at 3
    ups, downs, first = [0, 2, 7, 8], [0, 2, 4, 5], [True, False, True, False]
    got = inverse_offset(ups, downs, 3, txn_first=first, position=9)
    assert (got.offset, got.exact) == (7, True)
    assert inverse_offset(ups, downs, 6, txn_first=first, position=9).offset == 9


def test_an_interval_with_missing_syncs_answers_low_and_says_so() -> None:
    got = inverse_offset([0, 10], [0, 20], 5, complete=[True, False])
    assert (got.offset, got.exact) == (1, False)
    # nothing can lie between 0 and 1 on the source: exact
    got = inverse_offset([0, 1], [0, 5], 3, complete=[True, False])
    assert (got.offset, got.exact) == (1, True)


def test_history_with_pending_syncs_of_the_last_transaction() -> None:
    # the topic has the first transaction; the last one (after B's marker at 5) only
    # in the mirror's commit metadata, as with the syncs topic on a dead source
    h = history([(0, 0, True), (4, 4, False)])
    h.set_pending([(5, 6), (9, 10)])
    ups, downs, first, complete = h.all_syncs()
    assert (ups, downs) == ([0, 4, 5, 9], [0, 4, 6, 10])
    assert first == [True, False, True, False]
    assert complete[2:] == [False, True]
    got = inverse_from_history(h, 5, 10, False)
    assert (got.offset, got.exact) == (5, True)  # between 4 and 5: nothing else on A
    assert inverse_from_history(h, 8, 10, False).offset == 7
    assert inverse_from_history(h, 11, 10, False).offset == 10
    assert inverse_from_history(None, 3, 10, False).offset is None


def test_history_takes_a_rewind_as_the_checkpoint_store_does() -> None:
    # the range from 5 was re-mirrored to other target offsets: the old pairs go
    h = history([(0, 0, True), (9, 9, False), (5, 20, True), (9, 24, False)])
    assert h.upstreams == [0, 5, 9] and h.downstreams == [0, 20, 24]


def test_forward_translation_of_the_reverse_flow() -> None:
    h = PartitionHistory([0, 4], [0, 4], txn_first=[True, False])
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
