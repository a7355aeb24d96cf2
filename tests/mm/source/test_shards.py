"""Grouping a micro-batch's ranges into Spark tasks (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mm.source.shards import MirrorShard, plan_shards, planned_records, shard_count
from mm.source.spec import RangeSpec

pytestmark = pytest.mark.unit


def _ranges(sizes: list[int]) -> list[RangeSpec]:
    return [
        RangeSpec(f"t{i // 4}", i % 4, f"A.t{i // 4}", 100, 100 + n) for i, n in enumerate(sizes)
    ]


def test_a_small_batch_is_one_task() -> None:
    shards = plan_shards(_ranges([31] * 96), records_per_task=100_000)
    assert len(shards) == 1 and len(shards[0].ranges) == 96


def test_a_backlog_spreads_one_range_per_task_at_most() -> None:
    shards = plan_shards(_ranges([250_000] * 4), records_per_task=100_000)
    assert len(shards) == 4 and all(len(s.ranges) == 1 for s in shards)


def test_many_partitions_spread_over_tasks_of_bounded_size() -> None:
    shards = plan_shards(_ranges([2] * 1000), records_per_task=100_000, ranges_per_task=256)
    assert len(shards) == 4 and sorted(len(s.ranges) for s in shards) == [250] * 4


def test_refresh_ranges_plan_one_task() -> None:
    assert shard_count(0, 5, 100) == 1
    assert shard_count(0, 0, 100) == 0
    assert plan_shards([], 100) == []


@given(
    sizes=st.lists(st.integers(0, 5_000), min_size=1, max_size=60),
    per_task=st.integers(1, 20_000),
    ranges_per_task=st.integers(1, 70),
)
def test_every_range_in_exactly_one_shard_balanced(
    sizes: list[int], per_task: int, ranges_per_task: int
) -> None:
    ranges = _ranges(sizes)
    shards = plan_shards(ranges, per_task, ranges_per_task)
    assert all(isinstance(s, MirrorShard) and s.ranges for s in shards)
    placed = [r for s in shards for r in s.ranges]
    assert sorted(placed, key=ranges.index) == ranges  # each once, none split
    for s in shards:  # a shard keeps the planner's order
        assert list(s.ranges) == sorted(s.ranges, key=ranges.index)
    assert len(shards) == shard_count(sum(sizes), len(sizes), per_task, ranges_per_task)
    # greedy balance: no shard exceeds the mean by more than its largest range
    loads = [s.records() for s in shards]
    biggest = max(planned_records(r) for r in ranges)
    assert max(loads) <= sum(sizes) / len(shards) + biggest
