"""A partition's backup catalog (pure): its segments, their states, what is lost.

Every segment entry has a state:

* ``COPY_SEGMENT_STARTED``: being written; not visible, its file may be missing
  or partial (a crashed copy leaves such an entry; :meth:`abort_copy` drops it);
* ``COPY_SEGMENT_FINISHED``: complete; **visible**: restores and lookups use it;
* ``DELETE_SEGMENT_STARTED``: replaced by compaction or expired by retention;
  not visible, its file is being deleted (deleting again is harmless);
* ``DELETE_SEGMENT_FINISHED``: its file is gone; the entry stays as the record
  that the file went on purpose, until :meth:`forget_deleted`.

Invariants, checked whenever a catalog is built (a violation raises
:class:`~mm.backup.errors.CatalogError` naming the segments):

* the visible segments, by start offset, cover contiguous offsets with no
  overlap: each starts at the previous one's end + 1, unless the offsets between
  are recorded as lost (the later segment's ``lost_before``, e.g. records the
  source's retention deleted before the backup read them). Lost ranges are
  counted and reported (:meth:`PartitionCatalog.lost`);
* keys are unique; a segment holds at most one record per offset it covers.

Changes return a new catalog; one change is one committed version
(:mod:`mm.backup.catalog_store`), so a compaction's swap of a run of level-``n``
segments for one level-``n+1`` segment is atomic.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import cached_property
from typing import Any

from mm.backup.errors import CatalogError
from mm.backup.ranges import LostRange

FORMAT_VERSION = 1


class SegmentState(StrEnum):
    COPY_SEGMENT_STARTED = "COPY_SEGMENT_STARTED"
    COPY_SEGMENT_FINISHED = "COPY_SEGMENT_FINISHED"
    DELETE_SEGMENT_STARTED = "DELETE_SEGMENT_STARTED"
    DELETE_SEGMENT_FINISHED = "DELETE_SEGMENT_FINISHED"


STARTED = SegmentState.COPY_SEGMENT_STARTED
FINISHED = SegmentState.COPY_SEGMENT_FINISHED
DELETING = SegmentState.DELETE_SEGMENT_STARTED
DELETED = SegmentState.DELETE_SEGMENT_FINISHED


@dataclass(frozen=True)
class SegmentEntry:
    level: int
    start: int  # first offset covered
    end: int  # last offset covered (inclusive)
    key: str  # relative to the backup prefix (SegmentKey.relative)
    record_count: int
    size_bytes: int
    min_timestamp: int | None  # over the records with a timestamp; None when none has one
    max_timestamp: int | None
    state: SegmentState = FINISHED
    lost_before: LostRange | None = None  # offsets just before start never backed up

    def __post_init__(self) -> None:
        problem = None
        if not 0 <= self.start <= self.end:
            problem = "expected 0 <= start <= end"
        elif not 0 <= self.record_count <= self.end - self.start + 1:
            problem = f"{self.record_count} records: expected 0 to end - start + 1"
        elif self.level < 0 or self.size_bytes < 0:
            problem = "expected level and size_bytes >= 0"
        elif (self.min_timestamp is None) != (self.max_timestamp is None):
            problem = "expected both or neither of min_timestamp and max_timestamp"
        elif (
            (lo := self.min_timestamp) is not None
            and (hi := self.max_timestamp) is not None
            and lo > hi
        ):
            problem = "expected min_timestamp <= max_timestamp"
        elif self.lost_before is not None and self.lost_before.end != self.start - 1:
            problem = f"lost range {self.lost_before}: expected it to end at start - 1"
        if problem:
            raise CatalogError(f"segment {self.key} ({self.start}-{self.end}): {problem}")

    def covers(self, offset: int) -> bool:
        return self.start <= offset <= self.end


def _order(e: SegmentEntry) -> tuple[int, int, int, str]:
    return (e.start, e.level, e.end, e.key)


@dataclass(frozen=True)
class PartitionCatalog:
    region: str
    topic: str
    partition: int
    entries: tuple[SegmentEntry, ...] = field(default=())

    def __post_init__(self) -> None:
        # one canonical order, so equal catalogs compare and serialize equal
        object.__setattr__(self, "entries", tuple(sorted(self.entries, key=_order)))
        keys = [e.key for e in self.entries]
        if len(set(keys)) != len(keys):
            dup = sorted(k for k in set(keys) if keys.count(k) > 1)
            raise self._error(f"segment keys listed twice: {dup}")
        prev: SegmentEntry | None = None
        for e in self.visible():
            if prev is not None:
                self._check_follows(prev, e)
            prev = e

    def _error(self, message: str) -> CatalogError:
        return CatalogError(f"catalog of {self.region}/{self.topic}[{self.partition}]: {message}")

    def _check_follows(self, prev: SegmentEntry, e: SegmentEntry) -> None:
        if e.start <= prev.end:
            raise self._error(
                f"segment {e.key} ({e.start}-{e.end}) overlaps {prev.key} ({prev.start}-"
                f"{prev.end}): expected it to start at {prev.end + 1}"
            )
        hole = None if e.start == prev.end + 1 else (prev.end + 1, e.start - 1)
        lost = None if e.lost_before is None else (e.lost_before.start, e.lost_before.end)
        if lost != hole:
            raise self._error(
                f"segment {e.key} starts at {e.start} after {prev.key} ending at {prev.end} "
                f"with lost range {lost}: expected lost range {hole} (the offsets between "
                "them, recorded as lost, or none when adjacent)"
            )

    # -- reading --------------------------------------------------------------

    def visible(self) -> tuple[SegmentEntry, ...]:
        """The finished segments, by offset: the backup's content."""
        return self._visible

    @cached_property
    def _visible(self) -> tuple[SegmentEntry, ...]:
        return tuple(e for e in self.entries if e.state is FINISHED)

    @cached_property
    def _starts(self) -> list[int]:
        return [e.start for e in self._visible]

    def in_state(self, state: SegmentState) -> tuple[SegmentEntry, ...]:
        return tuple(e for e in self.entries if e.state is state)

    def entry(self, key: str) -> SegmentEntry:
        for e in self.entries:
            if e.key == key:
                return e
        raise self._error(f"no segment {key}")

    @property
    def next_offset(self) -> int | None:
        """The first offset after the visible segments (None when there is none)."""
        return self._visible[-1].end + 1 if self._visible else None

    def segment_for(self, offset: int) -> SegmentEntry | None:
        """The visible segment covering ``offset``; None when no visible one does."""
        i = bisect_right(self._starts, offset) - 1
        if i >= 0 and self._visible[i].covers(offset):
            return self._visible[i]
        return None

    def lost(self) -> tuple[LostRange, ...]:
        """Offsets never backed up, before or between the visible segments."""
        return tuple(e.lost_before for e in self._visible if e.lost_before is not None)

    @property
    def lost_count(self) -> int:
        return sum(r.count for r in self.lost())

    @property
    def record_count(self) -> int:
        return sum(e.record_count for e in self._visible)

    # -- changes --------------------------------------------------------------

    def _with(self, entries: Iterable[SegmentEntry]) -> PartitionCatalog:
        return replace(self, entries=tuple(entries))

    def _set_state(self, changes: Mapping[str, SegmentState]) -> PartitionCatalog:
        return self._with(
            replace(e, state=changes[e.key]) if e.key in changes else e for e in self.entries
        )

    def begin_copy(self, entry: SegmentEntry) -> PartitionCatalog:
        """Registers a copy about to be written (COPY_SEGMENT_STARTED).

        Checked now, so a job does not write a segment it could never finish: it
        must follow the visible segments (see the module's invariants).
        """
        if self._visible:
            self._check_follows(self._visible[-1], entry)
        return self._with((*self.entries, replace(entry, state=STARTED)))

    def finish_copy(self, entry: SegmentEntry) -> PartitionCatalog:
        """Makes ``entry`` (its final sizes) visible, replacing its started entry if any."""
        others = [e for e in self.entries if e.key != entry.key]
        if len(others) < len(self.entries) and self.entry(entry.key).state is not STARTED:
            raise self._error(
                f"cannot finish copying {entry.key}: it is {self.entry(entry.key).state}, "
                f"expected {STARTED} or not listed"
            )
        return self._with((*others, replace(entry, state=FINISHED)))

    def abort_copy(self, key: str) -> PartitionCatalog:
        """Drops a copy that will not finish (its file, if any, is the caller's to delete)."""
        if self.entry(key).state is not STARTED:
            raise self._error(f"cannot abort {key}: it is {self.entry(key).state}")
        return self._with(e for e in self.entries if e.key != key)

    def _compaction_run(self, keys: Sequence[str], merged: SegmentEntry) -> None:
        """Checks that ``merged`` may replace the visible segments ``keys`` (see compact)."""
        index = {e.key: i for i, e in enumerate(self._visible)}
        missing = [k for k in keys if k not in index]
        if not keys or missing or len(set(keys)) != len(keys):
            raise self._error(f"compaction of {missing or 'nothing'}: expected visible segments")
        at = sorted(index[k] for k in keys)
        run = self._visible[at[0] : at[-1] + 1]
        if len(run) != len(keys):
            raise self._error(
                f"compaction of {sorted(keys)}: not a contiguous run (it skips "
                f"{[e.key for e in run if e.key not in keys]})"
            )
        first, last = run[0], run[-1]
        level = first.level
        expected = {
            "levels": ({e.level for e in run}, {level}),
            "merged level": (merged.level, level + 1),
            "range": ((merged.start, merged.end), (first.start, last.end)),
            "records": (merged.record_count, sum(e.record_count for e in run)),
            "lost ranges inside": ([e.lost_before for e in run[1:] if e.lost_before], []),
            "lost range before": (merged.lost_before, first.lost_before),
        }
        for what, (got, want) in expected.items():
            if got != want:
                raise self._error(
                    f"compaction of {first.key}..{last.key} into {merged.key}: {what} {got}, "
                    f"expected {want}"
                )

    def begin_compact(self, keys: Sequence[str], merged: SegmentEntry) -> PartitionCatalog:
        """Registers ``merged`` (COPY_SEGMENT_STARTED) before its file is written.

        Checked as :meth:`compact` checks it; unlike :meth:`begin_copy` the entry
        overlaps visible segments (the ones it will replace), which a started
        entry may: it is not visible.
        """
        self._compaction_run(keys, merged)
        if any(e.key == merged.key for e in self.entries):
            raise self._error(f"compaction into {merged.key}: that key is already listed")
        return self._with((*self.entries, replace(merged, state=STARTED)))

    def compact(self, keys: Sequence[str], merged: SegmentEntry) -> PartitionCatalog:
        """Swaps a contiguous run of visible level-n segments for ``merged`` (level n+1).

        ``merged`` covers exactly the run's range and holds its records (same
        count); a run cannot span a lost range (``merged`` inherits the first
        segment's). The run's entries become DELETE_SEGMENT_STARTED; ``merged``'s
        started entry (:meth:`begin_compact`), if any, is replaced.
        """
        self._compaction_run(keys, merged)
        listed = [e for e in self.entries if e.key == merged.key]
        if listed and listed[0].state is not STARTED:
            raise self._error(
                f"compaction into {merged.key}: that key is already listed as "
                f"{listed[0].state}, expected {STARTED} or not listed"
            )
        run_keys = set(keys)
        return self._with(
            (
                *(
                    replace(e, state=DELETING) if e.key in run_keys else e
                    for e in self.entries
                    if e.key != merged.key
                ),
                replace(merged, state=FINISHED),
            )
        )

    def expire(self, before_ms: int) -> PartitionCatalog:
        """Retention: marks DELETE_SEGMENT_STARTED the oldest visible segments whose
        records are all older than ``before_ms`` (a segment without timestamps goes
        with them).

        Only a leading run is expired, so the visible set stays contiguous; the
        newest segment is always kept, so the catalog still says where the next
        copy starts.
        """
        expiring: list[str] = []
        for e in self._visible[:-1]:
            if e.max_timestamp is not None and e.max_timestamp >= before_ms:
                break
            expiring.append(e.key)
        return self._set_state(dict.fromkeys(expiring, DELETING))

    def finish_delete(self, keys: Iterable[str]) -> PartitionCatalog:
        """The files of these DELETE_SEGMENT_STARTED segments are gone."""
        keys = list(keys)
        wrong = [k for k in keys if self.entry(k).state is not DELETING]
        if wrong:
            raise self._error(f"cannot finish deleting {wrong}: expected {DELETING}")
        return self._set_state(dict.fromkeys(keys, DELETED))

    def forget_deleted(self) -> PartitionCatalog:
        return self._with(e for e in self.entries if e.state is not DELETED)

    def settled(self) -> PartitionCatalog:
        """The visible segments alone: all the segment files can show (see rebuild)."""
        return self._with(self._visible)


# -- JSON form (used by mm.backup.catalog_store) ---------------------------------


def _entry_to_dict(e: SegmentEntry) -> dict[str, Any]:
    lost = e.lost_before
    return {
        "level": e.level,
        "start": e.start,
        "end": e.end,
        "key": e.key,
        "record_count": e.record_count,
        "size_bytes": e.size_bytes,
        "min_timestamp": e.min_timestamp,
        "max_timestamp": e.max_timestamp,
        "state": e.state.value,
        "lost_before": None
        if lost is None
        else {"start": lost.start, "end": lost.end, "reason": lost.reason},
    }


def catalog_to_dict(catalog: PartitionCatalog) -> dict[str, Any]:
    return {
        "format": FORMAT_VERSION,
        "region": catalog.region,
        "topic": catalog.topic,
        "partition": catalog.partition,
        "segments": [_entry_to_dict(e) for e in catalog.entries],
    }


def catalog_from_dict(doc: Mapping[str, Any]) -> PartitionCatalog:
    """Raises CatalogError naming what is wrong (bad fields or broken invariants)."""
    try:
        if doc["format"] != FORMAT_VERSION:
            raise ValueError(f"format {doc['format']!r}, expected {FORMAT_VERSION}")
        entries = []
        for s in doc["segments"]:
            lost = s["lost_before"]
            entries.append(
                SegmentEntry(
                    level=int(s["level"]),
                    start=int(s["start"]),
                    end=int(s["end"]),
                    key=str(s["key"]),
                    record_count=int(s["record_count"]),
                    size_bytes=int(s["size_bytes"]),
                    min_timestamp=s["min_timestamp"],
                    max_timestamp=s["max_timestamp"],
                    state=SegmentState(s["state"]),
                    lost_before=None
                    if lost is None
                    else LostRange(int(lost["start"]), int(lost["end"]), str(lost["reason"])),
                )
            )
        return PartitionCatalog(
            str(doc["region"]), str(doc["topic"]), int(doc["partition"]), tuple(entries)
        )
    except (KeyError, ValueError, TypeError) as exc:
        raise CatalogError(f"not a backup catalog document ({exc!r})") from None
