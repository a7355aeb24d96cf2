"""Groups a micro-batch's partition ranges into Spark tasks (pure planning).

One Spark task per partition made every micro-batch pay a task's fixed cost
(scheduling, a Python worker round trip, client set-up) once per partition: with
96 small partitions that cost was the whole batch. A task now mirrors a *shard*:
several ranges, copied concurrently inside one Python worker with the worker's
pooled clients. Ranges are grouped by planned records so a small batch is one
task (one worker, whose cached producers stay valid) and a large backlog still
spreads over every core; a range is never split (one transactional producer per
target partition). A task also takes at most ``ranges_per_task`` ranges: a
process can hold only about 1,000 librdkafka clients (each takes a thread-local
storage key; the next one fails with "Failed to initialize thread local
storage"), and a worker keeps one producer per partition it mirrors.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field

from pyspark.sql.datasource import InputPartition

from mm.source.spec import RangeSpec


@dataclass(frozen=True)
class MirrorShard(InputPartition):
    """The ranges one Spark task mirrors."""

    ranges: tuple[RangeSpec, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", None)

    def records(self) -> int:
        return sum(planned_records(r) for r in self.ranges)


def planned_records(spec: RangeSpec) -> int:
    """Offsets the range spans (an upper bound on its records; 0 for a refresh)."""
    return max(0, spec.end - spec.start)


def shard_count(
    total_records: int, ranges: int, records_per_task: int, ranges_per_task: int = 1 << 30
) -> int:
    """Tasks for a batch: one per ``records_per_task`` planned records and at least one
    per ``ranges_per_task`` ranges, at least one, never more than there are ranges."""
    if ranges <= 0:
        return 0
    wanted = max(
        -(-total_records // max(1, records_per_task)), -(-ranges // max(1, ranges_per_task))
    )
    return max(1, min(ranges, wanted))


def plan_shards(
    ranges: Sequence[RangeSpec], records_per_task: int, ranges_per_task: int = 1 << 30
) -> list[MirrorShard]:
    """Ranges grouped into :func:`shard_count` shards of about equal planned records
    (largest range first onto the least loaded shard, ties to the shard with fewest
    ranges); each shard keeps its ranges in the order given."""
    n = shard_count(
        sum(planned_records(r) for r in ranges), len(ranges), records_per_task, ranges_per_task
    )
    if n == 0:
        return []
    order = {id(r): i for i, r in enumerate(ranges)}
    heap = [(0, 0, i) for i in range(n)]
    members: list[list[RangeSpec]] = [[] for _ in range(n)]
    for r in sorted(ranges, key=lambda r: (-planned_records(r), order[id(r)])):
        load, count, i = heapq.heappop(heap)
        members[i].append(r)
        heapq.heappush(heap, (load + planned_records(r), count + 1, i))
    return [MirrorShard(tuple(sorted(m, key=lambda r: order[id(r)]))) for m in members if m]
