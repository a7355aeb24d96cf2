"""A micro-batch's ranges grouped into shards by the flow's shard map, and the shards
into Spark tasks (pure planning).

A *shard* (:mod:`mm.source.shard_map`) is the ranges of the target partitions the
map gives it, written through the shard's one transactional producer
(:mod:`mm.source.shard_run`). The grouping into shards follows the map, not the
batch's load: a partition is only ever written through its shard's
``transactional.id``, which is what keeps two writers from one partition. Shards
with no range this batch are left out (a continuous mirror's planner gives every
partition a range, empty where nothing is new: mm.source.reader).

The shards then go into at most one Spark task per core, each task running its
shards side by side (one thread each). A continuous mirror's task keeps copying for
``mm.mirror.task.continue.seconds``: with more tasks than cores, the tasks beyond
the cores would wait that long for a core every micro-batch, and their partitions'
latency with them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pyspark.sql.datasource import InputPartition

from mm.source.shard_map import ShardMap
from mm.source.spec import RangeSpec


@dataclass(frozen=True)
class MirrorShard:
    """The ranges of shard ``shard`` of map generation ``generation`` in a batch,
    written through ``transactional_id``."""

    ranges: tuple[RangeSpec, ...] = field(default_factory=tuple)
    shard: int = 0
    generation: int = 0
    transactional_id: str = ""

    def records(self) -> int:
        return sum(planned_records(r) for r in self.ranges)


@dataclass(frozen=True)
class MirrorTask(InputPartition):
    """One Spark task: the shards it runs side by side; ``plan_mark``: the end of the
    flow's shard-map topic when the batch was planned (mm.source.replan; -1: the
    task does not watch for a new plan)."""

    shards: tuple[MirrorShard, ...] = field(default_factory=tuple)
    plan_mark: int = -1

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", None)

    def records(self) -> int:
        return sum(s.records() for s in self.shards)


def planned_records(spec: RangeSpec) -> int:
    """Offsets the range spans (an upper bound on its records; 0 for a refresh)."""
    return max(0, spec.end - spec.start)


def plan_shards(ranges: Sequence[RangeSpec], shard_map: ShardMap, prefix: str) -> list[MirrorShard]:
    """``ranges`` grouped by the shard the map gives their target partition, in shard
    order, each shard's ranges in the order given. Raises ValueError for a range
    whose partition the map does not hold (the driver extends the map first)."""
    members: dict[int, list[RangeSpec]] = {}
    for r in ranges:
        shard = shard_map.assignment.get((r.target_topic, r.partition))
        if shard is None:
            raise ValueError(
                f"{r.target_topic}[{r.partition}] is in no shard of map generation "
                f"{shard_map.generation}"
            )
        members.setdefault(shard, []).append(r)
    return [
        MirrorShard(
            tuple(members[s]), s, shard_map.generation, shard_map.transactional_id(prefix, s)
        )
        for s in sorted(members)
    ]


def plan_tasks(shards: Sequence[MirrorShard], slots: int) -> list[MirrorTask]:
    """``shards`` dealt into at most ``slots`` (the cores Spark runs tasks on) tasks,
    the largest shard first to the task with the fewest planned records; each task's
    shards in shard order, the tasks in the order of their first shard."""
    if slots < 1:
        raise ValueError(f"Spark task slots must be at least 1, got {slots}")
    bins: list[list[MirrorShard]] = [[] for _ in range(min(slots, len(shards)))]
    load = [0] * len(bins)
    for shard in sorted(shards, key=lambda s: (-s.records(), s.shard)):
        i = min(range(len(bins)), key=lambda b: (load[b], len(bins[b]), b))
        bins[i].append(shard)
        load[i] += shard.records()
    tasks = [tuple(sorted(b, key=lambda s: s.shard)) for b in bins]
    return [MirrorTask(t) for t in sorted(tasks, key=lambda t: t[0].shard)]
