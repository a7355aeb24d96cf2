"""What one `mm backup` pass copies (pure): a range of offsets per partition.

Inputs, all read by the driver (:mod:`mm.backup.job`): the cluster's topics and
partition counts, each partition's (log start, end) where the end is Kafka's
read_committed end (the last stable offset, from a fetch:
:func:`mm.kafka.watermarks.watermarks`), and where each partition's backup
stands (:attr:`mm.backup.catalog.PartitionCatalog.next_offset`).

Per partition:

* never backed up (no visible segment): ``[log start, end)``. Offsets below
  the log start when the backup began are not the backup's to recover and are
  not counted as lost;
* backed up to ``next``: ``[next, end)``. When the source's retention already
  deleted records from ``next`` on, the range still starts at ``next``: the task
  reads from the first offset the log still holds and records the offsets in
  between as *lost* (``lost_before`` of its first segment), never as a gap;
* ``next == end``: up to date, nothing to copy;
* ``next > end``: the log ends below what the backup holds (the topic was
  deleted and recreated, or an unclean leader election truncated it). Nothing is
  planned: the partition is reported as a problem for a person to decide.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

Key = tuple[str, int]


@dataclass(frozen=True)
class PartitionPlan:
    topic: str
    partition: int
    log_start: int
    end: int  # the read_committed end: first offset not to copy
    next_offset: int | None  # where the backup stands (None: nothing backed up)
    start: int  # first offset to copy (== end: nothing to copy)
    problem: str | None = None

    @property
    def key(self) -> Key:
        return (self.topic, self.partition)

    @property
    def has_data(self) -> bool:
        return self.problem is None and self.start < self.end


def select_topics(partitions: Mapping[str, int], selected: Callable[[str], bool]) -> list[str]:
    """The topics of ``partitions`` that ``selected(topic)`` accepts, sorted."""
    return sorted(t for t in partitions if selected(t))


def plan_partition(
    topic: str,
    partition: int,
    bounds: tuple[int, int],
    next_offset: int | None,
    backup_dirs: tuple[str, ...] = (),
) -> PartitionPlan:
    """``backup_dirs``: where the topic's backup lives (named in a problem's way out)."""
    log_start, end = bounds
    if next_offset is None:
        return PartitionPlan(topic, partition, log_start, end, None, min(log_start, end))
    if next_offset > end:
        return PartitionPlan(
            topic,
            partition,
            log_start,
            end,
            next_offset,
            end,
            problem=(
                f"the log ends at {end}, below the backup's next offset {next_offset}: "
                "the topic was recreated or truncated; nothing backed up (move the topic's "
                f"old backup aside: {' and '.join(backup_dirs) or 'its directories'}, both to "
                "the same relative places under another path, where it stays restorable "
                "with that backup.path; or choose another backup.region)"
            ),
        )
    return PartitionPlan(topic, partition, log_start, end, next_offset, next_offset)


def plan_backup(
    partitions: Mapping[str, int],
    bounds: Mapping[Key, tuple[int, int]],
    next_offsets: Mapping[Key, int | None],
    backup_dirs: Callable[[str], tuple[str, ...]] = lambda _topic: (),
) -> list[PartitionPlan]:
    """One plan per partition of ``partitions`` (topic -> partition count), by
    topic and partition. A partition missing from ``bounds`` is a problem.
    ``backup_dirs(topic)``: where the topic's backup lives (see :func:`plan_partition`)."""
    out = []
    for topic in sorted(partitions):
        for p in range(partitions[topic]):
            if (topic, p) not in bounds:
                out.append(
                    PartitionPlan(
                        topic, p, 0, 0, next_offsets.get((topic, p)), 0, "no log bounds read"
                    )
                )
                continue
            out.append(
                plan_partition(
                    topic, p, bounds[(topic, p)], next_offsets.get((topic, p)), backup_dirs(topic)
                )
            )
    return out
