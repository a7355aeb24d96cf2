"""Grouping a micro-batch's ranges into shards by the shard map, and the shards into
Spark tasks (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mm.source.shard_map import ShardMap, balanced
from mm.source.shards import MirrorShard, MirrorTask, plan_shards, plan_tasks, planned_records
from mm.source.spec import RangeSpec

pytestmark = pytest.mark.unit


def _ranges(sizes: list[int]) -> list[RangeSpec]:
    return [
        RangeSpec(f"t{i // 4}", i % 4, f"A.t{i // 4}", 100, 100 + n) for i, n in enumerate(sizes)
    ]


def _map(ranges: list[RangeSpec], shards: int, generation: int = 3) -> ShardMap:
    return ShardMap(generation, shards, balanced([(r.target_topic, r.partition) for r in ranges],
                                                 shards))  # fmt: skip


def test_a_shard_per_shard_with_work_named_by_its_transactional_id() -> None:
    ranges = _ranges([31] * 8)
    tasks = plan_shards(ranges, _map(ranges, 4), "mm.A.B")
    assert [t.shard for t in tasks] == [0, 1, 2, 3]
    assert [t.transactional_id for t in tasks] == [f"mm.A.B.g3.s{s}" for s in range(4)]
    assert all(t.generation == 3 and len(t.ranges) == 2 for t in tasks)
    # shards without work this batch get no task
    assert [t.shard for t in plan_shards(ranges[:2], _map(ranges, 4), "p")] == [0, 1]
    assert plan_shards([], _map(ranges, 4), "p") == []


def test_a_partition_the_map_does_not_hold_is_refused() -> None:
    ranges = _ranges([1] * 3)
    with pytest.raises(ValueError, match=r"A.t0\[2\] is in no shard of map generation 3"):
        plan_shards(ranges, _map(ranges[:2], 2), "p")


@given(sizes=st.lists(st.integers(0, 5_000), min_size=1, max_size=60), shards=st.integers(1, 9))
def test_every_range_in_the_task_of_its_shard_once(sizes: list[int], shards: int) -> None:
    ranges = _ranges(sizes)
    shard_map = _map(ranges, shards)
    tasks = plan_shards(ranges, shard_map, "p")
    assert all(isinstance(t, MirrorShard) and t.ranges for t in tasks)
    placed = [r for t in tasks for r in t.ranges]
    assert sorted(placed, key=ranges.index) == ranges  # each once, none split
    for t in tasks:
        assert list(t.ranges) == sorted(t.ranges, key=ranges.index)  # the planner's order
        assert {shard_map.assignment[(r.target_topic, r.partition)] for r in t.ranges} == {t.shard}
    assert sum(t.records() for t in tasks) == sum(planned_records(r) for r in ranges)


def _shards(sizes: list[int]) -> list[MirrorShard]:
    return [
        MirrorShard((RangeSpec("t", k, "A.t", 0, n),), k, 1, f"p.g1.s{k}")
        for k, n in enumerate(sizes)
    ]


def test_no_more_tasks_than_cores_the_largest_shards_spread_first() -> None:
    # a continuous task holds its core for its continue window: a fifth task on four
    # cores would wait that long every batch
    tasks = plan_tasks(_shards([10, 500, 20, 400, 30]), 2)
    assert all(isinstance(t, MirrorTask) for t in tasks)
    assert [[s.shard for s in t.shards] for t in tasks] == [[0, 2, 3, 4], [1]]
    assert [t.records() for t in tasks] == [460, 500]
    # fewer shards than cores: one task each
    assert [[s.shard for s in t.shards] for t in plan_tasks(_shards([5, 6]), 8)] == [[0], [1]]
    assert plan_tasks([], 4) == []
    with pytest.raises(ValueError, match="at least 1, got 0"):
        plan_tasks(_shards([1]), 0)


@given(sizes=st.lists(st.integers(0, 5_000), min_size=1, max_size=40), slots=st.integers(1, 12))
def test_every_shard_in_one_task_and_the_tasks_balanced(sizes: list[int], slots: int) -> None:
    shards = _shards(sizes)
    tasks = plan_tasks(shards, slots)
    assert len(tasks) == min(slots, len(shards))
    placed = [s for t in tasks for s in t.shards]
    assert sorted(placed, key=lambda s: s.shard) == shards  # each once
    assert all(t.shards for t in tasks)
    loads = [t.records() for t in tasks]
    # greedy, largest first: no task exceeds another by more than its smallest shard
    for t in tasks:
        smallest = min(s.records() for s in t.shards)
        assert t.records() - smallest <= min(loads)
