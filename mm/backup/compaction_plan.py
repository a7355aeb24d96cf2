"""Which segments `mm backup compact` merges (pure).

A partition's visible segments, by offset, are cut into **stretches** of
consecutive segments that may be merged together:

* all at the level being compacted (a segment of another level ends a stretch);
* old enough: with ``min_age_ms > 0``, a segment qualifies when its newest
  record is at least that old (one without timestamps qualifies: nothing says
  it is recent); ``0`` means no age condition;
* no lost range inside: a segment with a ``lost_before`` can only *start* a
  run, so the merged segment keeps the lost range before it (its own
  ``lost_before``) and never hides one (a segment records one lost range).

Each stretch is packed from its first segment: a run grows while its records
and bytes stay within the limits; a run of at least ``min_segments`` segments
is merged, a shorter one drops its first segment and the packing goes on from
the next. Runs therefore hold whole segments, are contiguous, never exceed a
limit, and never overlap. A stretch's tail shorter than ``min_segments`` waits
for more segments (a later run merges it).

``max_bytes`` compares the segments' file sizes as the catalog lists them (the
merged file is about their sum: the same records, compressed the same way).

:func:`plan_partition_work` is the whole partition's plan, in the order
:mod:`mm.backup.compaction` carries it out: crashed compaction copies undone,
retention, pending deletes, then the runs over what stays visible.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mm.backup.catalog import DELETING, STARTED, PartitionCatalog, SegmentEntry
from mm.backup.layout import MAX_LEVEL
from mm.backup.ranges import LostRange, Range


@dataclass(frozen=True)
class CompactionLimits:
    min_segments: int = 4
    max_records: int = 10_000_000
    max_bytes: int = 1 << 30
    min_age_ms: int = 0

    def __post_init__(self) -> None:
        if self.min_segments < 2 or self.max_records < 1 or self.max_bytes < 1:
            raise ValueError(
                f"compaction limits {self}: expected min_segments >= 2, max_records >= 1 "
                "and max_bytes >= 1"
            )
        if self.min_age_ms < 0:
            raise ValueError(f"compaction limits {self}: expected min_age_ms >= 0")


@dataclass(frozen=True)
class MergeRun:
    """Consecutive visible segments of one level, merged into one of the next level."""

    segments: tuple[SegmentEntry, ...]

    def __post_init__(self) -> None:
        if not self.segments:
            raise ValueError("a merge run needs at least one segment")

    @property
    def level(self) -> int:
        return self.segments[0].level

    @property
    def start(self) -> int:
        return self.segments[0].start

    @property
    def end(self) -> int:
        return self.segments[-1].end

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(e.key for e in self.segments)

    @property
    def record_count(self) -> int:
        return sum(e.record_count for e in self.segments)

    @property
    def size_bytes(self) -> int:
        return sum(e.size_bytes for e in self.segments)

    @property
    def lost_before(self) -> LostRange | None:
        return self.segments[0].lost_before

    def merged_entry(self, key: str) -> SegmentEntry:
        """The merged segment's started entry (its size is known once written)."""
        lows = [e.min_timestamp for e in self.segments if e.min_timestamp is not None]
        highs = [e.max_timestamp for e in self.segments if e.max_timestamp is not None]
        return SegmentEntry(
            level=self.level + 1,
            start=self.start,
            end=self.end,
            key=key,
            record_count=self.record_count,
            size_bytes=0,
            min_timestamp=min(lows) if lows else None,
            max_timestamp=max(highs) if highs else None,
            state=STARTED,
            lost_before=self.lost_before,
        )


def _old_enough(e: SegmentEntry, limits: CompactionLimits, now_ms: int) -> bool:
    if limits.min_age_ms == 0 or e.max_timestamp is None:
        return True
    return e.max_timestamp <= now_ms - limits.min_age_ms


def _stretches(
    visible: Sequence[SegmentEntry], level: int, limits: CompactionLimits, now_ms: int
) -> list[list[SegmentEntry]]:
    out: list[list[SegmentEntry]] = []
    current: list[SegmentEntry] = []
    for e in visible:
        if e.level != level or not _old_enough(e, limits, now_ms):
            if current:
                out.append(current)
            current = []
            continue
        if e.lost_before is not None and current:
            out.append(current)  # the lost range stays between two runs
            current = []
        current.append(e)
    if current:
        out.append(current)
    return out


def _pack(stretch: list[SegmentEntry], limits: CompactionLimits) -> list[MergeRun]:
    runs: list[MergeRun] = []
    i = 0
    while i < len(stretch):
        records = size = 0
        j = i
        while j < len(stretch):
            records += stretch[j].record_count
            size += stretch[j].size_bytes
            if records > limits.max_records or size > limits.max_bytes:
                break
            j += 1
        if j - i >= limits.min_segments:
            runs.append(MergeRun(tuple(stretch[i:j])))
            i = j
        else:
            i += 1
    return runs


def plan_compaction(
    visible: Sequence[SegmentEntry], level: int, limits: CompactionLimits, now_ms: int
) -> tuple[MergeRun, ...]:
    """The runs of ``visible`` (a catalog's visible segments, by offset) to merge from
    ``level`` into ``level + 1``, by offset (see the module docstring)."""
    if not 0 <= level < MAX_LEVEL:
        raise ValueError(f"compaction level {level}: expected 0 <= level < {MAX_LEVEL}")
    runs: list[MergeRun] = []
    for stretch in _stretches(visible, level, limits, now_ms):
        runs += _pack(stretch, limits)
    return tuple(runs)


def joined_gaps(gap_lists: Sequence[Sequence[Range]]) -> tuple[Range, ...]:
    """The gaps of consecutive segments as one segment has them: adjacent ranges
    (one segment's trailing gap, the next one's leading gap) joined."""
    out: list[Range] = []
    for gaps in gap_lists:
        for a, b in gaps:
            if out and out[-1][1] + 1 == a:
                out[-1] = (out[-1][0], b)
            else:
                out.append((a, b))
    return tuple(out)


@dataclass(frozen=True)
class PartitionWork:
    """What compaction and retention do to one partition, from its catalog alone."""

    crashed: tuple[str, ...]  # started compaction copies of a crashed run: aborted
    expiring: tuple[SegmentEntry, ...]  # visible segments retention deletes
    deleting: tuple[str, ...]  # all the segments whose files are deleted (incl. expiring)
    runs: tuple[MergeRun, ...]  # merges, after the above

    @property
    def has_work(self) -> bool:
        return bool(self.crashed or self.deleting or self.runs)


def plan_partition_work(
    catalog: PartitionCatalog,
    level: int,
    limits: CompactionLimits,
    now_ms: int,
    retention_ms: int | None,
) -> PartitionWork:
    """Crashed compaction copies are aborted (level >= 1: the backup's own copies are
    level 0 and may be in flight), retention expires, pending deletes are
    finished, then the runs are planned on what stays visible."""
    crashed = tuple(e.key for e in catalog.in_state(STARTED) if e.level > 0)
    for key in crashed:
        catalog = catalog.abort_copy(key)
    expiring: tuple[SegmentEntry, ...] = ()
    if retention_ms is not None:
        kept = catalog.expire(now_ms - retention_ms)
        expiring = tuple(e for e in catalog.visible() if e.key in _keys(kept.in_state(DELETING)))
        catalog = kept
    deleting = tuple(e.key for e in catalog.in_state(DELETING))
    return PartitionWork(
        crashed, expiring, deleting, plan_compaction(catalog.visible(), level, limits, now_ms)
    )


def _keys(entries: Sequence[SegmentEntry]) -> set[str]:
    return {e.key for e in entries}
