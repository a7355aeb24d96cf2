"""One backed-up partition restored into its target partition, inside a Spark Python task.

Exactly once, with the mirror's design: the partition has one transactional
producer (:func:`mm.restore.plan.transactional_id`); ``init_transactions`` fences
any earlier restore of it (a killed task, a second job) and aborts what it left
open. Then the task reads the restore's position (the next *original* offset to
restore), committed in the restore's state group on the target, and writes the
records from there in transactions of bounded size. Each transaction carries,
atomically: the records, their offset mapping (one record per run of consecutive
original offsets, to :func:`mm.restore.plan.mapping_topic`) and the new position
(``send_offsets_to_transaction``). A task killed at any moment leaves the target
with whole transactions only, and the next restore continues at the committed
position: nothing twice, nothing skipped.

The position is also read from the mapping itself (read_committed, see
:mod:`mm.restore.mapping_read`): one past the last original offset of the
partition's last committed run. On Apache Kafka the two agree; where they do not,
the mapping wins, because it commits with the records: a broker that lost an
acknowledged offset commit (the embedded broker does, see :mod:`mm.kafka.profile`,
when a killed producer's late batch leaves a transaction it never ends on the
shared mapping partition) would otherwise make the next restore write records
twice, and one that applied an aborted transaction's offsets would make it skip
them.

The records of a transaction must land one after another (its first and last
delivery reports span exactly its record count), which holds when the restore is
the partition's only writer. When another producer writes into the partition at
the same time, the mapping could not be exact: the transaction is aborted and
the partition fails, naming it.

Segments are read in offset order from the catalog's visible ones. A segment
whose file disappears while the restore reads (a compaction replaced it and
deleted it) is looked up again in a fresh catalog, from the same offset.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition
from mm_client.kafka.clients import new_consumer, new_producer
from mm_client.kafka.errors import wrap

from mm.backup.groups import OffsetRun
from mm.backup.layout import PartitionRef
from mm.backup.segment import SegmentRow, iter_segment_rows
from mm.backup.storage import Storage, open_storage
from mm.kafka.txn import Transaction
from mm.restore.plan import (
    current_runs,
    lost_mapping_message,
    mapping_topic,
    segments_from,
    start_position,
    state_group,
    transaction_runs,
    transactional_id,
)

# a file that vanished under the read is looked up again at most this many times
_RELOADS = 5


class RestoreError(Exception):
    """The partition could not be restored as planned (names where and why)."""


@dataclass(frozen=True)
class RestoreTask:
    topic: str  # the backed-up topic
    partition: int
    target_topic: str


@dataclass(frozen=True)
class RestoreContext:
    """What every task of a restore shares; travels to the workers as :meth:`to_dict`."""

    path: str  # backup.path, resolved
    region: str
    producer: dict[str, str]  # the target cluster's librdkafka producer settings
    consumer: dict[str, str]  # ... and consumer settings (the position read)
    admin: dict[str, str]  # ... and admin settings (the mapping topic's leader)
    target: str  # the target cluster's alias, for messages
    until_ms: int | None
    timeout: float
    txn_records: int = 50_000
    txn_bytes: int = 32 << 20
    profile: str = "kafka"  # the target's broker profile (mm.kafka.profile), by name

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict[str, Any]) -> RestoreContext:
        return RestoreContext(**d)


@dataclass(frozen=True)
class RestoreSummary:
    topic: str
    partition: int
    target_topic: str
    resumed_from: int  # original offset the task started at (-1: unknown, it failed first)
    position: int  # next original offset to restore after the task
    records: int = 0
    transactions: int = 0
    first_restored: int | None = None  # target offsets this task wrote
    last_restored: int | None = None
    until_stop: int | None = None  # original offset of the first record past --until
    error: str | None = None


class _Ends:
    """Delivery reports of a transaction's first and last record."""

    def __init__(self) -> None:
        self.first = self.last = -1
        self.error: KafkaError | None = None

    def on_first(self, err: KafkaError | None, msg: Message) -> None:
        self._take(err, msg, True)

    def on_last(self, err: KafkaError | None, msg: Message) -> None:
        self._take(err, msg, False)

    def _take(self, err: KafkaError | None, msg: Message, first: bool) -> None:
        if err is not None:
            self.error = err
        elif first:
            self.first = msg.offset() or 0
        else:
            self.last = msg.offset() or 0


def producer_conf(ctx: RestoreContext, task: RestoreTask) -> dict[str, Any]:
    from mm.source.task import transactional_producer_conf

    txn_id = transactional_id(ctx.region, task.target_topic, task.partition)
    return transactional_producer_conf(ctx.producer, txn_id)


def _state_consumer_conf(ctx: RestoreContext) -> dict[str, Any]:
    return {
        **ctx.consumer,
        "group.id": state_group(ctx.region),
        "enable.auto.commit": False,
        # asks the broker for stable offsets: a position a transaction still
        # completes is not read stale
        "isolation.level": "read_committed",
    }


def _log() -> Any:
    from mm.logs import get_logger

    return get_logger("mm.restore.task")


def restore_partition(ctx_dict: dict[str, Any], task: RestoreTask) -> RestoreSummary:
    """Restore ``task``'s partition from its position to the backup's end (or the first
    record past ``until_ms``); errors end up in the summary, never raised."""
    ctx = RestoreContext.from_dict(ctx_dict)
    run = _Run(ctx, task)
    try:
        run.restore()
    except Exception as exc:  # reported per partition: the others go on
        run.error = f"{type(exc).__name__}: {exc}" if not str(exc) else str(exc)
    finally:
        run.close()
    return run.summary()


class _Run:
    def __init__(self, ctx: RestoreContext, task: RestoreTask) -> None:
        self.ctx, self.task = ctx, task
        self.where = f"{task.target_topic}[{task.partition}] on cluster {ctx.target}"
        self.producer: Any = None
        self.state: Any = None
        self.resumed_from = self.position = -1
        self.records = self.transactions = 0
        self.first_restored: int | None = None
        self.last_restored: int | None = None
        self.until_stop: int | None = None
        self.error: str | None = None

    def summary(self) -> RestoreSummary:
        return RestoreSummary(
            self.task.topic,
            self.task.partition,
            self.task.target_topic,
            self.resumed_from,
            self.position,
            self.records,
            self.transactions,
            self.first_restored,
            self.last_restored,
            self.until_stop,
            self.error,
        )

    def close(self) -> None:
        if self.state is not None:
            self.state.close()
        if self.producer is not None:
            # an open transaction (a failure mid-way) is aborted by the next
            # init_transactions of this id, or by the broker's transaction timeout
            try:
                self.producer.flush(0)
            except KafkaException:
                pass  # a producer a failure left fatal: that failure is the one reported

    def restore(self) -> None:
        ctx, task = self.ctx, self.task
        self.producer = new_producer(producer_conf(ctx, task))
        txn = Transaction(self.producer)
        try:
            txn.init(task.target_topic, ctx.timeout)
        except KafkaException as exc:
            raise wrap(exc, f"init transactions for {self.where}") from exc
        self.state = new_consumer(_state_consumer_conf(ctx))
        committed = self._committed()
        storage = open_storage(ctx.path)
        ref = PartitionRef(storage.prefix, ctx.region, task.topic, task.partition)
        _version, catalog = storage.catalogs.load(ref)
        position = start_position(catalog, committed)
        runs = self._mapping_runs()
        if runs:
            end = self._end()
            now = current_runs(runs, end)
            if now is None:
                where = f"cluster {ctx.target}"
                raise RestoreError(
                    lost_mapping_message(task.target_topic, task.partition, runs, end, where)
                )
            if not now:
                # the restored topic was deleted and is new: what the mapping and the
                # state group say was restored went with the old one
                _log().info(
                    "restored topic is new: restoring from the backup's start",
                    target_topic=task.target_topic,
                    partition=task.partition,
                    committed=committed,
                )
                position = start_position(catalog, -1)
            elif now[-1].original_last + 1 != position:
                # the mapping commits with the records; the group's offset is only a
                # copy (a broker that lost an acknowledged offset commit, or applied an
                # aborted one, would make this restore write records twice or skip them)
                _log().warning(
                    "restore position differs from the offset mapping; resuming from the mapping",
                    target_topic=task.target_topic,
                    partition=task.partition,
                    committed=committed,
                    mapped=now[-1].original_last + 1,
                )
                position = now[-1].original_last + 1
        self.resumed_from = self.position = position
        group_metadata = self.state.consumer_group_metadata()
        try:
            self._stream(_records_from(storage, ref, self.position), txn, group_metadata)
        except KafkaException as exc:
            txn.abort(10)
            raise wrap(exc, f"restore transaction into {self.where}") from exc
        except RestoreError:
            txn.abort(10)
            raise

    def _stream(self, rows: Iterator[SegmentRow], txn: Transaction, group_metadata: Any) -> None:
        """Produce ``rows`` in transactions as they are read: one pass, once per record.

        Each record is produced when the next one is read (the last one of a
        transaction is held back, so that it can carry the delivery callback that
        gives the transaction's last target offset)."""
        ctx, producer = self.ctx, self.producer
        topic, partition = self.task.target_topic, self.task.partition
        produce = producer.produce
        until, max_records, max_bytes = ctx.until_ms, ctx.txn_records, ctx.txn_bytes
        originals: list[int] = []
        ends = _Ends()
        held: tuple[Any, ...] | None = None
        size = 0
        for offset, ts, key, value, headers in rows:
            if until is not None and ts > until and ts >= 0:
                # the first record past --until (plan.past_until; no timestamp never is)
                self.until_stop = offset
                break
            if ts < 0:
                ts = 0
            if not originals:
                ends = _Ends()
                txn.begin()
                txn.produce(topic, value, key, partition, on_delivery=ends.on_first,
                            timestamp=ts, headers=headers)  # fmt: skip
            else:
                if held is not None:
                    try:
                        produce(
                            topic, held[0], held[1], partition, timestamp=held[2], headers=held[3]
                        )
                    except BufferError:
                        txn.produce(topic, held[0], held[1], partition, timestamp=held[2],
                                    headers=held[3])  # fmt: skip
                held = (value, key, ts, headers)
            originals.append(offset)
            size += len(key or b"") + len(value or b"")
            if len(originals) >= max_records or size >= max_bytes:
                self._commit(txn, originals, held, ends, group_metadata)
                originals, held, size = [], None, 0
        if originals:
            self._commit(txn, originals, held, ends, group_metadata)

    def _mapping_runs(self) -> tuple[OffsetRun, ...]:
        """The offset mapping held committed for this partition (empty: none)."""
        from mm.kafka.profile import broker_profile
        from mm.restore.mapping_read import read_mapping_runs

        key = (self.task.target_topic, self.task.partition)
        return read_mapping_runs(
            self.ctx.admin,
            self.ctx.consumer,
            self.ctx.region,
            {key},
            self.ctx.timeout,
            f"cluster {self.ctx.target}",
            broker_profile(self.ctx.profile),
        ).get(key, ())

    def _end(self) -> int:
        """The target partition's end (past its last record), read as its broker
        profile says ends are read: an end read short would restart a restore."""
        from mm.kafka.profile import broker_profile
        from mm.kafka.watermarks import watermarks

        key = (self.task.target_topic, self.task.partition)
        marks = watermarks(
            self.ctx.consumer, [key], self.ctx.timeout, profile=broker_profile(self.ctx.profile)
        )
        return marks[key][1]

    def _committed(self) -> int:
        tp = TopicPartition(self.task.target_topic, self.task.partition)
        try:
            (got,) = self.state.committed([tp], self.ctx.timeout)
        except KafkaException as exc:
            raise wrap(exc, f"read the restore position of {self.where}") from exc
        if got.error is not None:
            raise RestoreError(f"read the restore position of {self.where}: {got.error}")
        return int(got.offset) if got.offset >= 0 else -1

    def _commit(
        self,
        txn: Transaction,
        originals: list[int],
        held: tuple[Any, ...] | None,
        ends: _Ends,
        group_metadata: Any,
    ) -> None:
        """End the open transaction: its last record, the offset mapping, the position."""
        ctx, task = self.ctx, self.task
        topic, partition = task.target_topic, task.partition
        if held is not None:
            txn.produce(topic, held[0], held[1], partition, on_delivery=ends.on_last,
                        timestamp=held[2], headers=held[3])  # fmt: skip
        left = txn.delivered(ctx.timeout)
        error = txn.cause(ends.error)  # set by the reports delivered() served
        if left or error is not None:
            raise RestoreError(
                f"write to {self.where}: "
                + (
                    f"{error.str()} (code={error.name()})"
                    if error is not None
                    else f"{left} records unacknowledged"
                )
            )
        if held is None:  # one record: its callback was the first's
            ends.last = ends.first
        n = len(originals)
        if ends.last - ends.first != n - 1:
            raise RestoreError(
                f"{self.where}: the transaction's {n} records landed at offsets "
                f"{ends.first}-{ends.last}: another producer writes into this partition, "
                "so the offset mapping cannot be exact. Restore into a topic nobody else "
                "writes to (--topic-prefix), or stop the other producer"
            )
        mapping = mapping_topic(ctx.region)
        for m in transaction_runs(topic, partition, originals, ends.first):
            txn.produce(mapping, m.value(), m.key(), partition=0)
        position = originals[-1] + 1
        txn.commit([TopicPartition(topic, partition, position)], group_metadata,
                   offsets_timeout=ctx.timeout, commit_timeout=ctx.timeout)  # fmt: skip
        self.position = position
        self.records += n
        self.transactions += 1
        if self.first_restored is None:
            self.first_restored = ends.first
        self.last_restored = ends.last


def _records_from(storage: Storage, ref: PartitionRef, position: int) -> Iterator[SegmentRow]:
    """The backed-up records at or past ``position`` in offset order, across segments;
    a segment file that vanished (compaction) is found again in a fresh catalog."""
    reloads = 0
    _version, catalog = storage.catalogs.load(ref)
    while True:
        segments = segments_from(catalog, position)
        if not segments:
            return
        try:
            for entry in segments:
                for row in iter_segment_rows(storage.fs, f"{storage.prefix}/{entry.key}"):
                    if row[0] >= position:
                        position = row[0] + 1
                        yield row
                position = max(position, entry.end + 1)
            return
        except FileNotFoundError:
            reloads += 1
            if reloads > _RELOADS:
                raise
            time.sleep(0.2 * reloads)
            _version, catalog = storage.catalogs.load(ref)
