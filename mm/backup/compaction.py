"""One partition's compaction and retention, inside a Spark Python task (storage I/O).

What is done is planned from the partition's catalog by
:func:`mm.backup.compaction_plan.plan_partition_work`, in this order:

1. **crashed compactions**: ``COPY_SEGMENT_STARTED`` entries of level >= 1 (only
   compaction writes those; the backup's own copies are level 0 and may be in
   flight) are aborted, their file deleted if the crash left one at its key;
2. **retention** (``backup.retention.ms``): the leading visible segments whose
   newest record is older than the cut-off become ``DELETE_SEGMENT_STARTED``
   (:meth:`~mm.backup.catalog.PartitionCatalog.expire`; the newest segment is
   always kept);
3. **deletes**: the files of every ``DELETE_SEGMENT_STARTED`` segment (expired,
   or replaced by a compaction that crashed before its deletes) are deleted,
   then the entries committed ``DELETE_SEGMENT_FINISHED``;
4. **merges**, one run at a time, each as the backup copies a segment:

   a. the merged segment registered ``COPY_SEGMENT_STARTED`` (a committed version);
   b. the run's segments streamed (:func:`mm.backup.segment.iter_segment`) into
      one file at a temporary key, moved to its level ``n+1`` key; its record
      count and gaps checked against the run's footers;
   c. **one** commit that swaps them (:meth:`~mm.backup.catalog.PartitionCatalog.compact`):
      the merged segment visible, the run's segments ``DELETE_SEGMENT_STARTED``;
   d. the run's files deleted, then ``DELETE_SEGMENT_FINISHED`` committed.

A crash at any point leaves the visible segments covering every offset once:
before (c) they are the old ones (the merged file, if moved into place, holds
the same records and :mod:`mm.backup.rebuild` prefers the higher level); after
(c) the merged one, with the old files still present until (d). The next run
finishes the job from step 1. ``DELETE_SEGMENT_FINISHED`` entries stay until
the next run's first change to the partition (the catalog's history keeps
them).

**Concurrent writers.** A backup pass may append to the partition meanwhile.
When a commit meets :class:`~mm.backup.errors.ConcurrentCommitError`, the catalog
is reloaded: if the entries over the run's offsets are unchanged (the catalog
only gained segments after it, or lost a backup's aborted copy there), the
change is applied again to the new version; otherwise the partition fails
(:class:`CompactionConflict`) and what was committed before stands. One
compaction job per region at a time: step 1 takes any started compaction copy
for a crashed one.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow.fs as pafs

from mm.backup.catalog import DELETED, DELETING, STARTED, PartitionCatalog, SegmentEntry
from mm.backup.catalog_store import CatalogStore
from mm.backup.compaction_plan import (
    CompactionLimits,
    MergeRun,
    joined_gaps,
    plan_partition_work,
)
from mm.backup.errors import BackupError, ConcurrentCommitError
from mm.backup.layout import PartitionRef
from mm.backup.rebuild import segment_entry
from mm.backup.segment import BackupRecord, iter_segment, read_segment_meta, store_segment
from mm.backup.settings import BackupSettings
from mm.backup.storage import Storage, open_storage

COMMIT_ATTEMPTS = 5


class CompactionConflict(BackupError):
    """Another writer changed the segments being compacted (names which and where)."""


def limits_of(settings: BackupSettings) -> CompactionLimits:
    return CompactionLimits(
        settings.compact_min_segments,
        settings.compact_max_records,
        settings.compact_max_bytes,
        settings.compact_min_age_ms,
    )


@dataclass(frozen=True)
class CompactContext:
    """What every task of a run shares; travels to the workers as :meth:`to_dict`."""

    settings: dict[str, Any]  # BackupSettings.to_dict()
    level: int  # merged from level to level + 1
    now_ms: int  # one clock for every partition: retention cut-off and segment ages

    def to_dict(self) -> dict[str, Any]:
        return {"settings": self.settings, "level": self.level, "now_ms": self.now_ms}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CompactContext:
        return cls(d["settings"], int(d["level"]), int(d["now_ms"]))


@dataclass(frozen=True)
class CompactTask:
    topic: str
    partition: int


@dataclass(frozen=True)
class MergeResult:
    start: int
    end: int
    segments: int  # merged into one
    records: int
    bytes_before: int
    bytes_after: int  # 0 in a dry run


@dataclass
class PartitionCompaction:
    """What a task did to one partition (or, in a dry run, would do)."""

    topic: str
    partition: int
    level: int
    merges: list[MergeResult] = field(default_factory=list)
    expired_segments: int = 0
    expired_records: int = 0
    expired_bytes: int = 0
    deleted_files: int = 0  # of expired or replaced segments, incl. a crashed run's
    recovered: list[str] = field(default_factory=list)  # aborted crashed compactions
    error: str | None = None

    @property
    def segments_merged(self) -> int:
        return sum(m.segments for m in self.merges)

    @property
    def records(self) -> int:
        return sum(m.records for m in self.merges)

    @property
    def bytes_before(self) -> int:
        return sum(m.bytes_before for m in self.merges)

    @property
    def bytes_after(self) -> int:
        return sum(m.bytes_after for m in self.merges)

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "from_level": self.level,
            "merged_segments": len(self.merges),
            "segments_merged": self.segments_merged,
            "records": self.records,
            "bytes_before": self.bytes_before,
            "bytes_after": self.bytes_after,
            "merges": [
                {
                    "start": m.start,
                    "end": m.end,
                    "segments": m.segments,
                    "records": m.records,
                    "bytes_before": m.bytes_before,
                    "bytes_after": m.bytes_after,
                }
                for m in self.merges
            ],
            "expired_segments": self.expired_segments,
            "expired_records": self.expired_records,
            "expired_bytes": self.expired_bytes,
            "deleted_files": self.deleted_files,
            "recovered": list(self.recovered),
            "error": self.error,
        }


def _entries_over(catalog: PartitionCatalog, lo: int, hi: int) -> tuple[SegmentEntry, ...]:
    return tuple(e for e in catalog.entries if e.start <= hi and lo <= e.end)


class _PartitionCatalog:
    """The partition's catalog as last loaded or committed, and its changes."""

    def __init__(self, store: CatalogStore, ref: PartitionRef) -> None:
        self.store, self.ref = store, ref
        self.version, self.catalog = store.load(ref)
        # deletes a previous run finished: dropped by this run's first change
        self.forget = {e.key for e in self.catalog.in_state(DELETED)}

    def change(
        self,
        fn: Callable[[PartitionCatalog], PartitionCatalog],
        guard: tuple[int, int] | None = None,
    ) -> None:
        """Commits ``fn(catalog)``; after a concurrent commit, applies ``fn`` again to
        the reloaded catalog if the entries over ``guard`` (an offset range) did
        not change. The previous run's ``DELETE_SEGMENT_FINISHED`` entries are
        dropped on the way."""
        for _attempt in range(COMMIT_ATTEMPTS):
            if fn(self.catalog) == self.catalog:
                return
            new = fn(self._forgotten(self.catalog))
            try:
                self.version = self.store.commit(self.ref, self.version, new)
                self.catalog = new
                return
            except ConcurrentCommitError:
                version, reloaded = self.store.load(self.ref)
                if guard is not None and _entries_over(reloaded, *guard) != _entries_over(
                    self.catalog, *guard
                ):
                    raise CompactionConflict(
                        f"{self.ref}: another writer changed the segments over offsets "
                        f"{guard[0]}-{guard[1]} while they were being compacted (expected "
                        "only segments after them to be added); left for the next run"
                    ) from None
                self.version, self.catalog = version, reloaded
        raise CompactionConflict(
            f"{self.ref}: the catalog moved on each of {COMMIT_ATTEMPTS} commits "
            "(another writer busy on this partition); left for the next run"
        )

    def _forgotten(self, c: PartitionCatalog) -> PartitionCatalog:
        if not any(e.key in self.forget for e in c.entries):
            return c
        return replace(c, entries=tuple(e for e in c.entries if e.key not in self.forget))


def _delete_file(fs: pafs.FileSystem, path: str) -> None:
    """Deletes a segment file; one already gone is fine (a crashed run's leftovers)."""
    try:
        fs.delete_file(path)
    except FileNotFoundError:
        pass


def _exists(fs: pafs.FileSystem, path: str) -> bool:
    return bool(fs.get_file_info(path).type != pafs.FileType.NotFound)


def _finish_deletes(
    storage: Storage, ref: PartitionRef, pc: _PartitionCatalog, keys: tuple[str, ...]
) -> int:
    for key in keys:
        _delete_file(storage.fs, f"{ref.prefix}/{key}")

    def finish(c: PartitionCatalog) -> PartitionCatalog:
        return c.finish_delete(k for k in keys if k in {e.key for e in c.in_state(DELETING)})

    pc.change(finish)
    return len(keys)


def _records(storage: Storage, ref: PartitionRef, run: MergeRun) -> Iterator[BackupRecord]:
    return itertools.chain.from_iterable(
        iter_segment(storage.fs, f"{ref.prefix}/{key}") for key in run.keys
    )


def _swap(
    storage: Storage,
    ref: PartitionRef,
    pc: _PartitionCatalog,
    run: MergeRun,
    compression: str,
) -> MergeResult:
    """Steps a-c of a merge (see the module docstring); the old files stay."""
    guard = (run.start, run.end)
    metas = [read_segment_meta(storage.fs, f"{ref.prefix}/{e.key}") for e in run.segments]
    for e, m in zip(run.segments, metas, strict=True):
        if (m.start, m.end, m.record_count) != (e.start, e.end, e.record_count):
            raise BackupError(
                f"{e.key}: its footer says offsets {m.start}-{m.end} with {m.record_count} "
                f"records, the catalog {e.start}-{e.end} with {e.record_count}: not merged"
            )
    key = ref.segment(run.level + 1, run.start, run.end)
    started = run.merged_entry(key.relative)
    pc.change(lambda c: c.begin_compact(run.keys, started), guard)
    try:
        stored = store_segment(
            storage.fs,
            key,
            _records(storage, ref, run),
            lost_before=run.lost_before,
            compression=compression,
        )
        want = (run.record_count, joined_gaps([m.gaps for m in metas]))
        got = (stored.meta.record_count, stored.meta.gaps)
        if got != want:
            raise BackupError(
                f"{key}: merged {got[0]} records with gaps {list(got[1])}, expected {want[0]} "
                f"with gaps {list(want[1])} from the run's footers: not swapped in"
            )
        merged = segment_entry(stored)
        pc.change(lambda c: c.compact(run.keys, merged), guard)
    except BaseException:
        _undo_begin(storage, pc, key.key, started.key)
        raise
    return MergeResult(
        run.start, run.end, len(run.segments), run.record_count, run.size_bytes, merged.size_bytes
    )


def _undo_begin(storage: Storage, pc: _PartitionCatalog, path: str, key: str) -> None:
    """Best effort after a failed merge; what is left, the next run's step 1 cleans.

    The catalog is read again first: a swap commit that failed on the way back
    (a timeout) may have landed, and then the merged file is the data."""
    try:
        pc.version, pc.catalog = pc.store.load(pc.ref)
        if any(e.key == key for e in pc.catalog.visible()):
            return
        _delete_file(storage.fs, path)
        pc.change(lambda c: c.abort_copy(key) if _started(c, key) else c)
    except Exception:
        pass  # the error that brought us here is the one to report


def _started(c: PartitionCatalog, key: str) -> bool:
    return any(e.key == key and e.state is STARTED for e in c.entries)


def _compact(
    ctx: CompactContext, task: CompactTask, out: PartitionCompaction, storage: Storage
) -> None:
    settings = BackupSettings.from_dict(ctx.settings)
    ref = PartitionRef(storage.prefix, settings.region, task.topic, task.partition)
    pc = _PartitionCatalog(storage.catalogs, ref)
    work = plan_partition_work(
        pc.catalog, ctx.level, limits_of(settings), ctx.now_ms, settings.retention_ms
    )
    if work.crashed:
        for key in work.crashed:
            _delete_file(storage.fs, f"{ref.prefix}/{key}")
        crashed = work.crashed
        pc.change(lambda c: _abort_all(c, crashed))
        out.recovered = list(work.crashed)
    if work.expiring and settings.retention_ms is not None:
        before = ctx.now_ms - settings.retention_ms
        pc.change(lambda c: c.expire(before))
        out.expired_segments = len(work.expiring)
        out.expired_records = sum(e.record_count for e in work.expiring)
        out.expired_bytes = sum(e.size_bytes for e in work.expiring)
    deleting = tuple(e.key for e in pc.catalog.in_state(DELETING))
    if deleting:
        out.deleted_files += _finish_deletes(storage, ref, pc, deleting)
    for run in work.runs:
        out.merges.append(_swap(storage, ref, pc, run, settings.compression))
        # swapped: a failure from here leaves old files for the next run to delete
        out.deleted_files += _finish_deletes(storage, ref, pc, run.keys)


def _abort_all(c: PartitionCatalog, keys: tuple[str, ...]) -> PartitionCatalog:
    for key in keys:
        if _started(c, key):
            c = c.abort_copy(key)
    return c


def compact_partition(
    ctx_dict: dict[str, Any],
    task: CompactTask,
    *,
    storage: Storage | None = None,
) -> PartitionCompaction:
    """Compacts and expires one partition (runs in a Spark Python worker); never
    raises: an error is the summary's ``error``, with what was done before it."""
    ctx = CompactContext.from_dict(ctx_dict)
    out = PartitionCompaction(task.topic, task.partition, ctx.level)
    try:
        if storage is None:
            storage = open_storage(BackupSettings.from_dict(ctx.settings).path)
        _compact(ctx, task, out, storage)
    except Exception as exc:  # reported per partition; the other tasks go on
        out.error = f"{type(exc).__name__}: {exc}"
    return out
