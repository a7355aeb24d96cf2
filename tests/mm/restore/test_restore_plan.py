"""The restore's pure decisions: names, start, point in time, the offset mapping
and where groups resume."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mm.backup.catalog import PartitionCatalog, SegmentEntry
from mm.backup.groups import GroupOffset, OffsetRun, resume_offset
from mm.restore.plan import (
    MappingRecord,
    check_topic_prefix,
    current_runs,
    decode_mapping,
    group_moves,
    lost_mapping_message,
    merge_runs,
    past_until,
    pick_group_snapshot,
    segments_from,
    start_position,
    transaction_runs,
)

pytestmark = pytest.mark.unit


def _catalog(*ranges: tuple[int, int]) -> PartitionCatalog:
    entries = tuple(
        SegmentEntry(0, a, b, f"r/t/partition=0/level=0/{a:020d}-{b:020d}.parquet", 1, 10, 1, 1)
        for a, b in ranges
    )
    return PartitionCatalog("r", "t", 0, entries)


def test_start_and_segments_from_a_position() -> None:
    cat = _catalog((5, 9), (10, 19), (20, 29))
    assert start_position(cat, -1) == 5  # nothing restored: the backup's first offset
    assert start_position(cat, 12) == 12
    assert [e.start for e in segments_from(cat, 12)] == [10, 20]
    assert [e.start for e in segments_from(cat, 30)] == []
    assert start_position(_catalog(), -1) == 0


def test_point_in_time_and_group_snapshot() -> None:
    assert not past_until(100, None)
    assert not past_until(100, 100) and past_until(101, 100)
    assert not past_until(-1, 0)  # no timestamp never stops a restore
    assert pick_group_snapshot([10, 20, 30], None) == 30
    assert pick_group_snapshot([10, 20, 30], 25) == 20
    assert pick_group_snapshot([10, 20, 30], 5) is None


def test_topic_prefix_is_checked() -> None:
    assert check_topic_prefix("restored.") == "restored."
    with pytest.raises(ValueError, match="letters, digits"):
        check_topic_prefix("a/b")


def test_mapping_records_round_trip_and_bad_ones_are_named() -> None:
    m = MappingRecord("r.orders", 3, 10, 0, 5)
    assert decode_mapping(m.value(), "x") == m and m.key() == b"r.orders:3"
    with pytest.raises(ValueError, match="mapping@7: not a restore offset mapping"):
        decode_mapping(b"{}", "mapping@7")
    with pytest.raises(ValueError, match="count >= 1"):
        decode_mapping(MappingRecord("t", 0, 1, 1, 0).value(), "m")


def test_transaction_runs_split_at_gaps() -> None:
    runs = transaction_runs("t", 0, [3, 4, 5, 8, 9, 11], 100)
    assert [(r.original, r.restored, r.count) for r in runs] == [
        (3, 100, 3),
        (8, 103, 2),
        (11, 105, 1),
    ]


def test_an_aborted_attempt_is_replaced_by_its_retry() -> None:
    # runs as a broker serving aborted records shows them: 0-9 committed, 10-19
    # attempted (aborted: 100..109 and its marker), then retried at 111..
    runs = [OffsetRun(0, 90, 10), OffsetRun(10, 100, 10), OffsetRun(10, 111, 10)]
    assert merge_runs(runs) == (OffsetRun(0, 90, 10), OffsetRun(10, 111, 10))
    # a retry that starts inside an earlier run trims it
    assert merge_runs([OffsetRun(0, 0, 10), OffsetRun(5, 20, 5)]) == (
        OffsetRun(0, 0, 5),
        OffsetRun(5, 20, 5),
    )


def test_runs_written_below_earlier_ones_belong_to_a_new_target_topic() -> None:
    """Target offsets only grow in one partition's log: a run below the restored
    offsets before it was written into a new topic of the same name (deleted and
    restored again), and the older runs describe records that are gone."""
    old = [OffsetRun(0, 0, 600)]
    assert merge_runs([*old, OffsetRun(0, 0, 300)]) == (OffsetRun(0, 0, 300),)
    # restored again with a backup starting later, then continued
    assert merge_runs([*old, OffsetRun(500, 0, 50), OffsetRun(550, 50, 10)]) == (
        OffsetRun(500, 0, 50),
        OffsetRun(550, 50, 10),
    )
    assert merge_runs([OffsetRun(0, 50, 10), OffsetRun(10, 55, 1)]) == (OffsetRun(10, 55, 1),)


def test_current_runs_against_the_partition_end() -> None:
    runs = (OffsetRun(0, 0, 300), OffsetRun(301, 301, 299))  # restored up to offset 599
    assert current_runs(runs, 600) == runs
    assert current_runs(runs, 700) == runs  # records written after the restore's
    assert current_runs((), 0) == ()
    assert current_runs(runs, 0) == ()  # a new, empty topic: start over
    assert current_runs(runs, 599) is None  # truncated: refused
    message = lost_mapping_message("r.orders", 1, runs, 599, "cluster B")
    assert "r.orders[1] on cluster B ends at offset 599" in message
    assert "up to offset 599" in message
    assert "Way out: delete topic r.orders on cluster B and run the restore again" in message


@given(
    st.lists(st.lists(st.integers(1, 3), min_size=1, max_size=5), min_size=1, max_size=20),
    st.integers(0, 120),
)
def test_a_group_resumes_at_the_first_restored_record_at_or_past_its_offset(
    transactions: list[list[int]], group_at: int
) -> None:
    """Against a brute-force model listing every (original, restored) pair: each
    transaction's records are written one after another, a commit marker after it;
    originals skip offsets (markers, aborted or compacted records on the source)."""
    pairs: list[tuple[int, int]] = []
    runs: list[OffsetRun] = []
    original, restored = -1, 0
    for steps in transactions:
        originals = []
        for step in steps:
            original += step
            originals.append(original)
        runs += [m.run for m in transaction_runs("t", 0, originals, restored)]
        pairs += [(o, restored + i) for i, o in enumerate(originals)]
        restored += len(originals) + 1  # the records, then the marker
    merged = merge_runs(runs)
    assert sum(r.count for r in merged) == len(pairs)
    end = restored
    expected = next((r for o, r in pairs if o >= group_at), end)
    assert resume_offset(merged, group_at, end) == expected


def test_group_moves_name_what_is_not_restored() -> None:
    offsets = [
        GroupOffset("g", "orders", 0, 12, 1),
        GroupOffset("g", "orders", 1, 3, 1),
        GroupOffset("g", "other", 0, 3, 1),
    ]
    moves = group_moves(
        offsets,
        {"orders": "r.orders"},
        {("r.orders", 0): (OffsetRun(10, 0, 5),)},
        {("r.orders", 0): 6},
    )
    assert [(m.partition, m.target_offset, m.reason) for m in moves] == [
        (0, 2, None),
        (1, None, "partition 1 of orders was not restored"),
    ]
    # the partition lost restored records: not moved, the reason names the way out
    (lost,) = group_moves(
        offsets[:1], {"orders": "r.orders"}, {("r.orders", 0): (OffsetRun(10, 0, 5),)},
        {("r.orders", 0): 3},
    )  # fmt: skip
    assert lost.target_offset is None and lost.reason is not None
    assert "delete topic r.orders" in lost.reason
    # ... or was deleted and is new and empty: the group lands at its end
    (fresh,) = group_moves(
        offsets[:1], {"orders": "r.orders"}, {("r.orders", 0): (OffsetRun(10, 0, 5),)},
        {("r.orders", 0): 0},
    )  # fmt: skip
    assert (fresh.target_offset, fresh.reason) == (0, None)
