"""One partition's planned range, backed up inside a Spark Python task.

**Reading.** A confluent-kafka consumer (built by
:func:`mm_client.kafka.clients.new_consumer` from the cluster's librdkafka
consumer settings, so TLS and SASL work) is assigned the partition at the
planned start: ``isolation.level=read_committed``, ``enable.partition.eof``
(the read knows when it reached the end), ``auto.offset.reset=earliest`` (a
start that retention deleted resumes at the log start instead of failing).

**Gaps and lost offsets.** Offsets the read passes over without a record are
gaps (transaction markers, aborted or compacted records) unless the log start
moved past them: then they were records deleted by retention before the backup
read them, and they are recorded as *lost* (``lost_before`` of the next
segment) and counted in the task's summary, never taken for gaps. At the
first record the log start is asked of the broker; later jumps use the log
start the consumer's last fetch reported (librdkafka's cached low watermark),
so a transaction marker does not cost a request.

**Aborted transactions on brokers that serve them.** Apache Kafka's
read_committed consumer never returns an aborted transaction's records; a
broker that never lists aborted transactions in its fetch responses does (the
embedded test broker; see :mod:`mm.kafka.rawlog`). The consumer cannot tell
a transactional record from a plain one, so with the committed filter on
(``backup.committed.filter``: ``raw``, or ``auto`` on such a broker) the
task also streams the range with the raw log reader
(:func:`mm.kafka.rawlog.scan_committed`, Kafka's read_committed rule applied
to the stored batches and markers) and keeps a consumer record only where the
raw view has a committed record at that offset. A committed record the
consumer did not return stops the task (an error, never a silent gap); a
transaction still open inside the range stops it too (its records would be
taken for aborted ones). The price is reading the range twice, which is why
``broker`` (what ``auto`` is on Apache Kafka, whatever its listener) trusts
Kafka's own read_committed. The consumer stays the
reader of record so that the filter can be turned off where it is not needed.

**Writing.** Records are cut into segments (:mod:`mm.backup.segmenter`); each
segment is registered ``COPY_SEGMENT_STARTED`` in the partition's catalog (a
committed version), written to a temporary key and moved to its final key
(:func:`mm.backup.segment.store_segment`), then committed
``COPY_SEGMENT_FINISHED``. A crash in between leaves a started entry (and
perhaps a file) that the next run aborts and deletes before planning
(:func:`mm.backup.job.recover_partition`). A read that stops early (a fetch
error, no data for ``timeout`` seconds) still writes and commits what it
already read up to the first offset it could not account for; the catalog's
next offset never passes a record that is not in a segment.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_INVALID, KafkaError, KafkaException, TopicPartition
from mm_client.kafka.clients import new_consumer, reader_conf, throwaway_group
from mm_client.kafka.errors import wrap

from mm.backup.catalog import STARTED, PartitionCatalog, SegmentEntry
from mm.backup.catalog_store import FsCatalogStore
from mm.backup.errors import BackupError
from mm.backup.layout import PartitionRef
from mm.backup.rebuild import segment_entry
from mm.backup.segment import (
    TIMESTAMP_CREATE,
    TIMESTAMP_LOG_APPEND,
    TIMESTAMP_NONE,
    BackupRecord,
    store_segment,
)
from mm.backup.segmenter import SegmentCut, Segmenter
from mm.backup.settings import BackupSettings
from mm.backup.storage import open_storage

RAW = "raw"
BROKER = "broker"
_CONSUME_BATCH = 1000


class BackupReadError(BackupError):
    """The partition could not be read as planned (names where and why)."""


class _TailUnproven(BackupReadError):
    """The read cannot prove where its tail's records end: nothing more is cut."""


@dataclass(frozen=True)
class RangeTask:
    topic: str
    partition: int
    start: int  # first offset to back up (where the backup stands)
    end: int  # first offset not to back up (the read_committed end)
    leader: str | None = None  # host:port, for the raw committed filter


@dataclass(frozen=True)
class RangeSummary:
    topic: str
    partition: int
    start: int  # planned
    end: int  # planned
    next_offset: int  # where the backup stands after the task
    records: int = 0
    segments: int = 0
    lost: int = 0  # offsets found deleted before the backup read them
    lost_unrecorded: int = 0  # of those, not yet in the catalog (no later offset)
    aborted_dropped: int = 0  # records the consumer returned that the raw view aborts
    error: str | None = None


@dataclass
class _Progress:
    next_offset: int
    records: int = 0
    segments: int = 0
    lost: int = 0
    lost_unrecorded: int = 0
    aborted_dropped: int = 0

    def summary(self, task: RangeTask, error: str | None = None) -> RangeSummary:
        return RangeSummary(
            task.topic,
            task.partition,
            task.start,
            task.end,
            self.next_offset,
            self.records,
            self.segments,
            self.lost,
            self.lost_unrecorded,
            self.aborted_dropped,
            error,
        )


@dataclass(frozen=True)
class TaskContext:
    """What every task of a run shares; travels to the workers as :meth:`to_dict`."""

    settings: dict[str, Any]  # BackupSettings.to_dict()
    consumer: dict[str, str]  # librdkafka settings (may hold credentials: never logged)
    committed_filter: str  # RAW or BROKER
    timeout: float = 60.0
    page_bytes: int = 4 << 20

    def to_dict(self) -> dict[str, Any]:
        return {
            "settings": self.settings,
            "consumer": self.consumer,
            "committed_filter": self.committed_filter,
            "timeout": self.timeout,
            "page_bytes": self.page_bytes,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TaskContext:
        return cls(
            d["settings"], d["consumer"], d["committed_filter"], d["timeout"], d["page_bytes"]
        )


# the prefix of the readers' throwaway groups (one prefixed ACL grants them all)
READER_GROUP = "__mm-backup"


def consumer_conf(base: dict[str, str]) -> dict[str, Any]:
    # the user's settings win, except what makes this an assign-only committed reader
    quick = {"reconnect.backoff.ms": 10, **base}
    return reader_conf(
        quick,
        {
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": quick.get("fetch.wait.max.ms", 100),
        },
        group=throwaway_group(READER_GROUP),
        isolation="read_committed",
        eof=True,
    )


# confluent-kafka's TIMESTAMP_CREATE_TIME / TIMESTAMP_LOG_APPEND_TIME -> the segment's
_TIMESTAMP_KINDS = {1: TIMESTAMP_CREATE, 2: TIMESTAMP_LOG_APPEND}


def to_backup_record(m: Any) -> BackupRecord:
    ts_type, ts = m.timestamp()
    kind = _TIMESTAMP_KINDS.get(ts_type, TIMESTAMP_NONE)
    headers = m.headers() or ()
    return BackupRecord(
        offset=m.offset(),
        timestamp=ts if kind != TIMESTAMP_NONE else -1,
        timestamp_type=kind,
        key=m.key(),
        value=m.value(),
        headers=tuple((str(k), v) for k, v in headers),
    )


class _CatalogWriter:
    """Stores each cut segment and commits it to the partition's catalog."""

    def __init__(
        self,
        fs: Any,
        store: FsCatalogStore,
        ref: PartitionRef,
        compression: str,
        progress: _Progress,
        start: int,
    ) -> None:
        self.fs, self.store, self.ref = fs, store, ref
        self.compression = compression
        self.progress = progress
        self.failed = False
        self.version, self.catalog = store.load(ref)
        have = self.catalog.next_offset
        if have is not None and have != start:
            raise BackupError(
                f"{ref}: the catalog's next offset is {have}, the task was planned from "
                f"{start}: another backup wrote this partition since (one job per cluster)"
            )

    def _commit(self, catalog: PartitionCatalog) -> None:
        self.version = self.store.commit(self.ref, self.version, catalog)
        self.catalog = catalog

    def __call__(self, cut: SegmentCut) -> None:
        try:
            self._store(cut)
        except BaseException:
            self.failed = True  # the segmenter moved on: nothing more may be cut
            raise

    def _store(self, cut: SegmentCut) -> None:
        key = self.ref.segment(0, cut.start, cut.end)
        started = SegmentEntry(
            0,
            cut.start,
            cut.end,
            key.relative,
            len(cut.records),
            0,
            None,
            None,
            STARTED,
            cut.lost_before,
        )
        self._commit(self.catalog.begin_copy(started))
        stored = store_segment(
            self.fs, key, cut.records, lost_before=cut.lost_before, compression=self.compression
        )
        self._commit(self.catalog.finish_copy(segment_entry(stored)))
        self.progress.segments += 1
        self.progress.records += len(cut.records)
        self.progress.next_offset = cut.end + 1


class _RawCommitted:
    """The range's committed offsets by the raw log reader, walked in step with the
    consumer (only the batches of undecided transactions are held)."""

    def __init__(self, records: Iterator[Any], where: str) -> None:
        self._it = records
        self._head = next(self._it, None)
        self._where = where

    def none_below(self, offset: int) -> None:
        """No committed record before ``offset`` is left unread."""
        head = self._head
        if head is not None and head.offset < offset:
            raise BackupReadError(
                f"{self._where}: the log holds a committed record at offset {head.offset} "
                f"that the consumer did not return (it went on at {offset}); nothing from "
                f"{head.offset} on is backed up in this run"
            )

    def drain(self) -> None:
        """Reads the rest of the range (records past where the consumer stopped are
        left for the next run)."""
        for _ in self._it:
            pass
        self._head = None

    def take(self, offset: int) -> bool:
        """True when the record the consumer returned at ``offset`` is committed."""
        self.none_below(offset)
        if self._head is not None and self._head.offset == offset:
            self._head = next(self._it, None)
            return True
        return False


ConsumerFactory = Callable[[dict[str, Any]], Any]
RawFactory = Callable[[RangeTask, int, TaskContext], tuple[Iterator[Any], Any, Callable[[], None]]]


def _raw_scan(
    task: RangeTask, start: int, ctx: TaskContext
) -> tuple[Iterator[Any], Any, Callable[[], None]]:
    """(committed records of ``[start, task.end)``, their ScanStats, close)."""
    from mm.kafka.rawlog import Connection, ScanStats, scan_committed

    if not task.leader:
        raise BackupReadError(f"{task.topic}[{task.partition}]: no leader known for the raw read")
    conn = Connection(task.leader, ctx.timeout, client_id="mm-backup")
    stats = ScanStats()
    records = scan_committed(
        conn,
        task.topic,
        task.partition,
        start,
        task.end,
        stats,
        page_bytes=ctx.page_bytes,
        timeout=ctx.timeout,
        # the filter compares offsets only: the consumer's records are the ones kept
        offsets_only=True,
    )
    return records, stats, conn.close


def backup_range(
    ctx_dict: dict[str, Any],
    task: RangeTask,
    *,
    consumer_factory: ConsumerFactory = new_consumer,
    raw_factory: RawFactory = _raw_scan,
) -> RangeSummary:
    """Back up ``task``'s range (runs in a Spark Python worker); never raises: an
    error is the summary's ``error``, with what was committed before it."""
    ctx = TaskContext.from_dict(ctx_dict)
    progress = _Progress(task.start)
    try:
        _backup(ctx, task, progress, consumer_factory, raw_factory)
    except Exception as exc:  # reported per partition; the other tasks go on
        # the public name: a private subclass is no word for the operator
        name = BackupReadError.__name__ if isinstance(exc, _TailUnproven) else type(exc).__name__
        return progress.summary(task, f"{name}: {exc}")
    return progress.summary(task)


def _backup(
    ctx: TaskContext,
    task: RangeTask,
    progress: _Progress,
    consumer_factory: ConsumerFactory,
    raw_factory: RawFactory,
) -> None:
    settings = BackupSettings.from_dict(ctx.settings)
    storage = open_storage(settings.path)
    ref = PartitionRef(storage.prefix, settings.region, task.topic, task.partition)
    writer = _CatalogWriter(
        storage.fs, storage.catalogs, ref, settings.compression, progress, task.start
    )
    seg = Segmenter(
        task.start,
        writer,
        max_records=settings.segment_records,
        max_bytes=settings.segment_bytes,
        max_age_ms=settings.segment_ms,
    )
    consumer = consumer_factory(consumer_conf(ctx.consumer))
    closers: list[Callable[[], None]] = [consumer.close]
    try:
        consumer.assign([TopicPartition(task.topic, task.partition, task.start)])
        error: BaseException | None = None
        try:
            _read(ctx, task, consumer, seg, progress, raw_factory, closers)
        except Exception as exc:
            error = exc
        # What was read and accounted for is written, also when the read stopped
        # early; not after a failed write (the segmenter already moved past it) or
        # when the read could not prove its tail.
        if not writer.failed and not isinstance(error, _TailUnproven):
            try:
                seg.close(seg.next)
            except Exception as exc:
                error = error or exc
        if seg.unrecorded_lost is not None:
            progress.lost_unrecorded = seg.unrecorded_lost.count
        if error is not None:
            raise error
    finally:
        for close in reversed(closers):
            try:
                close()
            except Exception:
                pass  # closing must not hide the outcome


def _read(
    ctx: TaskContext,
    task: RangeTask,
    consumer: Any,
    seg: Segmenter,
    progress: _Progress,
    raw_factory: RawFactory,
    closers: list[Callable[[], None]],
) -> None:
    topic, partition, end = task.topic, task.partition, task.end
    where = f"{topic}[{partition}]"
    tp = TopicPartition(topic, partition)
    raw: _RawCommitted | None = None
    stats: Any = None
    first = True
    done = seg.next >= end
    idle_since = time.monotonic()

    def log_start(cached: bool) -> int:
        try:
            if cached:
                low, _ = consumer.get_watermark_offsets(tp, cached=True)
                if low != OFFSET_INVALID and low >= 0:
                    return int(low)
            low, _ = consumer.get_watermark_offsets(tp, timeout=ctx.timeout)
        except KafkaException as exc:
            raise wrap(exc, f"log start of {where}") from exc
        return int(low)

    def loss(upto: int, cached: bool) -> None:
        """Offsets from seg.next to ``upto`` hold no record the consumer returns:
        lost as far as the log start moved past them (the rest are gaps)."""
        expected = seg.next
        if upto <= expected:
            return
        low = log_start(cached)
        if low > expected:
            lost_to = min(low, upto)
            seg.lost(expected, lost_to - 1)
            progress.lost += lost_to - expected

    while not done:
        msgs = consumer.consume(_CONSUME_BATCH, 0.2)
        if not msgs:
            if time.monotonic() - idle_since > ctx.timeout:
                raise BackupReadError(
                    f"no data from {where} at offset {seg.next} for {ctx.timeout:.0f}s although "
                    f"the planner saw data up to {end}"
                )
            continue
        idle_since = time.monotonic()
        for m in msgs:
            err = m.error()
            eof = err is not None and err.code() == KafkaError._PARTITION_EOF
            if err is not None and not eof:
                # the cluster and the reader's group named: Apache Kafka checks
                # DESCRIBE on that group before it serves the fetch
                raise wrap(
                    KafkaException(err),
                    f"fetch {where} on cluster {ctx.settings['cluster']} "
                    f"(reader group {READER_GROUP}-*)",
                )
            off = int(m.offset())
            upto = min(off, end)
            # a jump from seg.next to upto: lost records first, then proven gaps
            loss(upto, cached=not first)
            if first:
                first = False
                if ctx.committed_filter == RAW:
                    # from the first offset the log still holds
                    records, stats, close = raw_factory(task, seg.next, ctx)
                    closers.append(close)
                    raw = _RawCommitted(records, where)
            if raw is not None:
                raw.none_below(upto)
            seg.gap_to(upto)
            if eof or off >= end:
                # EOF: nothing more is readable now; the range ends here (also below
                # the planned end, which the next run picks up)
                done = True
                break
            if raw is None or raw.take(off):
                seg.record(to_backup_record(m))
            else:
                progress.aborted_dropped += 1
                seg.gap_to(off + 1)  # the raw view says aborted
            if seg.next >= end:
                done = True
                break
    consumer.unassign()
    if raw is not None:
        raw.none_below(seg.next)
        raw.drain()  # to the range's end: the scan then knows its open transactions
        if stats is not None and stats.open_records:
            raise _TailUnproven(
                f"{where}: {stats.open_records} records of a transaction still open below "
                f"{end} (the broker's last stable offset is too high); the records read since "
                "the last segment are not written: run again once the transaction ended"
            )
