"""Mirrors one source partition range into the target, exactly once.

Runs inside a Spark Python worker (called from the data source's ``read``);
records never enter the JVM.

How exactly-once works
----------------------
* Each target partition has one transactional producer whose
  ``transactional.id`` is derived from the flow, target topic and partition.
  ``init_transactions`` fences any older producer with the same id (a zombie
  task, a killed process, a second instance of the job) and aborts whatever it
  left open, so at most one writer per partition can commit.
* After fencing, the task reads the *truth* from the target: the offset the
  flow's state group has committed for ``(target topic, partition)`` is the next
  source offset to mirror. That offset is committed in the **same transaction**
  as the records (``send_offsets_to_transaction``), so records and position
  move together or not at all. Spark's own checkpoint only plans ranges; a
  range that the target already holds is skipped, one it does not hold is
  mirrored from the committed position, whatever Spark remembers.
* Offset syncs: with ``offset-syncs.topic.location=target`` they are written in
  the same transaction. On the source (the default) they are produced right
  after the commit and acknowledged before the next commit, so only the last
  committed transaction's syncs can be missing after a crash; they are also kept
  in the committed offset's metadata, and a task that does not know whether the
  previous transaction's syncs reached the source writes them again first.
  Duplicated syncs are harmless to readers (same pairs). (Brokers that keep no
  commit metadata, the embedded one among them (:mod:`mm.kafka.profile`), lose
  that one transaction's syncs on a crash at that moment: its offsets then
  translate to the sync before it, which is earlier, never later.)

A zombie that was fenced fails at its next transactional call and its open
transaction is aborted by the broker; it can never commit, so the target never
holds a record twice.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
import warnings
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from mm_client.kafka import (
    AcknowledgedProducer,
    cause_code,
    is_refusal,
    kafka_cause,
    new_producer,
    produce_retrying,
    reader_conf,
)
from mm_client.kafka.pool import ClientPool
from mm_client.records import SYNC_WRITER_HEADER, TXN_FIRST_HEADER, OffsetSync

from mm.errors import KafkaOperationError, MirrorError
from mm.kafka.errors import wrap
from mm.kafka.txn import Transaction
from mm.source.clients import DEFAULT_CLIENTS, MirrorClients
from mm.source.runs import RunTracker
from mm.source.spec import FlowRuntime, RangeSpec
from mm.source.state import decode_state, encode_state

# (flow prefix, target topic, partition) -> batch id whose source-side syncs this
# worker process wrote; lets a task skip re-writing them (see module docstring)
_SYNCS_WRITTEN: dict[tuple[str, str, int], str] = {}
# client pool (one per worker process) -> (flow prefix, target topic, partition) ->
# the highest position committed through that pool's producers (commit_transaction
# returned): the target holds the records below it, so a committed position read
# lower is a commit the broker lost (see _resume_floor), never a reason to mirror
# them again
_COMMITTED_FLOORS: weakref.WeakKeyDictionary[ClientPool, dict[tuple[str, str, int], int]] = (
    weakref.WeakKeyDictionary()
)
_FLOORS_LOCK = threading.Lock()
# source cluster producer settings -> the worker's producer for offset syncs
_SYNC_PRODUCERS: dict[tuple[tuple[str, str], ...], Producer] = {}

# the worker process's clients, kept between tasks and micro-batches (see worker_pool)
_WORKER_POOL: ClientPool | None = None
_WORKER_POOL_LOCK = threading.Lock()

_CONSUME_BATCH = 5000


# marks the sync of a transaction's first record (see mm_client.records)
def sync_headers(batch_id: str, first: bool) -> list[tuple[str, str | bytes | None]]:
    """Headers of a sync of transaction ``batch_id``: its writer (every sync), and the
    transaction-first flag on the first (see :mod:`mm_client.translation`)."""
    writer: tuple[str, str | bytes | None] = (
        SYNC_WRITER_HEADER,
        batch_id.encode("ascii", "replace"),
    )
    return [writer, (TXN_FIRST_HEADER, b"1")] if first else [writer]


def worker_pool(rt: FlowRuntime) -> ClientPool:
    """This Python worker's client pool (Spark reuses the worker between tasks, so the
    pooled clients outlive a task; they die with the worker)."""
    global _WORKER_POOL
    with _WORKER_POOL_LOCK:
        if _WORKER_POOL is None:
            _WORKER_POOL = ClientPool(rt.pool_max_clients)
        return _WORKER_POOL


# source cluster consumer settings -> this worker's (admin, probe consumer) that read
# source ends for continuation sweeps (mm.source.sweep)
_END_PROBES: dict[tuple[tuple[str, str], ...], tuple[Any, Any]] = {}


def source_ends(rt: FlowRuntime, keys: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """The source's end offsets (read_committed) of ``keys``, read with clients this
    worker keeps: two batched ListOffsets, and on a broker whose ListOffsets is not
    exact (its profile) one tail fetch."""
    from mm_client.kafka.clients import new_admin, new_consumer

    from mm.kafka.watermarks import probe_consumer_conf, watermarks

    profile = rt.source_profile
    key = (
        ("mm.broker.profile", profile.name),
        *sorted((k, str(v)) for k, v in rt.source_consumer.items()),
    )
    with _WORKER_POOL_LOCK:
        probe = _END_PROBES.get(key)
        if probe is None:
            probe = (
                new_admin(rt.source_admin or rt.source_consumer),
                # ListOffsets alone where it is exact: no fetch, no consumer to keep
                None
                if profile.list_offsets_exact
                else new_consumer(probe_consumer_conf(rt.source_consumer)),
            )
            _END_PROBES[key] = probe
        admin, consumer = probe
        marks = watermarks(
            rt.source_consumer, keys, admin=admin, consumer=consumer, profile=profile
        )
    return {k: hi for k, (_lo, hi) in marks.items()}


class PartitionStoppedError(MirrorError):
    """This partition cannot go on (the others do); reported every batch until fixed.

    Nothing was skipped: the partition's position stays where the error names.
    """

    def __init__(self, message: str, result: RangeResult | None = None) -> None:
        super().__init__(message)
        self.result = result


class RecordTooLargeError(PartitionStoppedError):
    """A record the target cannot take: the partition stops at it (nothing skipped)."""


@dataclass
class RangeResult:
    topic: str
    partition: int
    target_topic: str
    planned_start: int
    planned_end: int
    resumed_from: int = -1
    position: int = -1
    records: int = 0
    bytes: int = 0
    transactions: int = 0
    syncs: int = 0
    lost: int = 0
    lost_from: int = -1
    lost_to: int = -1
    dead_lettered: int = 0
    error: str | None = None
    # ``error`` is a cluster's refusal (an ACL missing): the flow stops, not the partition
    refused: bool = False
    # metadata of the last offset this range committed (not part of the row): with
    # ``position``, what a reused producer knows of its partition's state
    metadata: str | None = None

    def row(self) -> tuple[Any, ...]:
        return (
            self.topic,
            self.partition,
            self.target_topic,
            self.planned_start,
            self.planned_end,
            self.resumed_from,
            self.position,
            self.records,
            self.bytes,
            self.transactions,
            self.syncs,
            self.lost,
            self.lost_from,
            self.lost_to,
            self.dead_lettered,
            self.error,
            self.refused,
        )


def _quick(conf: dict[str, Any]) -> dict[str, Any]:
    """Client settings for a task's short-lived clients (the user's settings win).

    librdkafka waits ``reconnect.backoff.ms`` (default 100 ms) before its first
    connection to a broker learnt from metadata, which every fresh client pays
    (the coordinator, the partition leader): ~80 ms of a small task's ~140 ms.
    The backoff still grows exponentially up to ``reconnect.backoff.max.ms``
    while a broker stays unreachable.
    """
    return {"reconnect.backoff.ms": 10, **conf}


def transactional_producer_conf(base: dict[str, Any], transactional_id: str) -> dict[str, Any]:
    """A copying task's transactional producer: ``base`` (the user's settings win where
    they set them) with the transactional id and the batching a bulk copy wants."""
    conf = dict(base)
    conf.update(
        {
            "transactional.id": transactional_id,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": conf.get("linger.ms", 5),
            "batch.size": conf.get("batch.size", 1_000_000),
            "queue.buffering.max.messages": conf.get("queue.buffering.max.messages", 500_000),
            "queue.buffering.max.kbytes": conf.get("queue.buffering.max.kbytes", 1_048_576),
            # the broker, not the client, decides what is too large; the mirror
            # pre-checks against the target topic's limit to name the record
            "message.max.bytes": conf.get("message.max.bytes", 100_000_000),
            "transaction.timeout.ms": conf.get("transaction.timeout.ms", 120_000),
        }
    )
    return conf


def _producer_conf(rt: FlowRuntime, spec: RangeSpec) -> dict[str, Any]:
    return transactional_producer_conf(
        _quick(rt.target_producer), rt.transactional_id(spec.target_topic, spec.partition)
    )


def _consumer_conf(rt: FlowRuntime) -> dict[str, Any]:
    base = _quick(rt.source_consumer)
    # the state group is named but never joined nor committed to: assign() only
    return reader_conf(
        base,
        {
            # data deleted before it was mirrored: start at the log start and
            # report the loss (detected below), never stall
            "auto.offset.reset": "earliest",
            "fetch.max.bytes": base.get("fetch.max.bytes", 52_428_800),
            "max.partition.fetch.bytes": base.get("max.partition.fetch.bytes", 10_485_760),
            "queued.min.messages": base.get("queued.min.messages", 200_000),
            # a range's data is on the broker when it is planned: the broker never
            # needs to wait for more, and a partition assigned while an earlier fetch
            # waits (default 500 ms) joins only the next fetch request
            "fetch.wait.max.ms": base.get("fetch.wait.max.ms", 10),
        },
        group=rt.state_group,
    )


def _state_consumer_conf(rt: FlowRuntime) -> dict[str, Any]:
    return _quick(
        {
            **rt.target_consumer,
            "group.id": rt.state_group,
            "enable.auto.commit": False,
            # librdkafka asks the broker for stable offsets only under read_committed;
            # under read_uncommitted a position committed by a transaction that is
            # still completing can be read stale and that transaction mirrored twice
            "isolation.level": "read_committed",
        }
    )


def read_state(
    rt: FlowRuntime,
    spec: RangeSpec,
    timeout: float = 30.0,
    clients: MirrorClients = DEFAULT_CLIENTS,
    pool: ClientPool | None = None,
) -> tuple[int, str | None]:
    """Committed (next source offset, metadata) for the range's target partition."""
    return read_states(rt, [spec], timeout, clients, pool)[(spec.target_topic, spec.partition)]


def read_states(
    rt: FlowRuntime,
    specs: list[RangeSpec],
    timeout: float = 30.0,
    clients: MirrorClients = DEFAULT_CLIENTS,
    pool: ClientPool | None = None,
) -> dict[tuple[str, int], tuple[int, str | None]]:
    """Committed (next source offset, metadata) per (target topic, partition) of
    ``specs``, in one OffsetFetch request."""
    tps = sorted({(s.target_topic, s.partition) for s in specs})
    where = ", ".join(f"{t}[{p}]" for t, p in tps[:3]) + (" ..." if len(tps) > 3 else "")
    with (
        _leased(pool) as p,
        p.lease("state-consumer", _state_consumer_conf(rt), clients.consumer) as c,
    ):
        consumer = c.client
        try:
            got = consumer.committed([TopicPartition(t, p) for t, p in tps], timeout)
        except KafkaException as exc:
            raise wrap(exc, f"read mirror state of {where} on cluster {rt.target}") from exc
        out: dict[tuple[str, int], tuple[int, str | None]] = {}
        for tp in got:
            if tp.error is not None:
                raise KafkaOperationError(
                    f"read mirror state of {tp.topic}[{tp.partition}] on cluster {rt.target}: "
                    f"{tp.error}",
                    code=tp.error.name() if hasattr(tp.error, "name") else None,
                )
            out[(tp.topic, tp.partition)] = (tp.offset, tp.metadata)
        missing = [tp for tp in tps if tp not in out]
        if missing:
            raise KafkaOperationError(
                f"read mirror state: no answer for {missing[0][0]}[{missing[0][1]}]"
            )
        return out


def reused_producer_states(
    rt: FlowRuntime,
    specs: list[RangeSpec],
    pool: ClientPool,
    clients: MirrorClients = DEFAULT_CLIENTS,
) -> dict[tuple[str, int], tuple[int, str | None]]:
    """Committed states of the ranges whose transactional producer ``pool`` holds, in
    one OffsetFetch (the :func:`mirror_range` ``state_hint`` of each).

    Only those: a pooled producer stays the partition's one writer until fenced, so
    the state read now is what it committed last. A range whose producer is new must
    fence first (``init_transactions``) and read after, in :func:`mirror_range`; read
    before, the position could miss a zombie's last commit, and a transaction a killed
    worker left open would hold the read (UNSTABLE_OFFSET_COMMIT) until it times out.
    """
    held = [s for s in specs if pool.holds("txn-producer", _producer_conf(rt, s))]
    return read_states(rt, held, clients=clients, pool=pool) if len(held) > 1 else {}


@contextmanager
def _leased(pool: ClientPool | None) -> Iterator[ClientPool]:
    """``pool``, or a pool for this call only whose clients are closed when it ends."""
    if pool is not None:
        yield pool
        return
    own = ClientPool()
    try:
        yield own
    finally:
        own.clear()


class _SourceSyncWriter:
    """Writes a range's offset syncs to the source cluster's offset-syncs topic.

    Syncs are produced right after each commit and acknowledged before the next
    commit and when the range is done, so the loop does not wait for them and at
    most the last committed transaction's syncs are ever unwritten (those the
    committed offset's metadata lets a restarted task write again). The producer
    is kept for the worker process's life (one per source cluster configuration):
    creating one (connect, InitProducerId) costs a few hundred ms per task.
    """

    def __init__(
        self,
        rt: FlowRuntime,
        spec: RangeSpec,
        key: tuple[str, str, int],
        clients: MirrorClients = DEFAULT_CLIENTS,
    ) -> None:
        self._rt, self._spec, self._key, self._clients = rt, spec, key, clients
        self._batch: str | None = None  # newest batch whose syncs were produced
        self._acks: AcknowledgedProducer | None = None

    def write(self, syncs: list[tuple[int, int]], batch_id: str) -> None:
        if self._acks is None:
            factory = self._clients.sync_producer
            if factory is None:
                self._acks = AcknowledgedProducer(_sync_producer(self._rt))
            else:
                self._acks = AcknowledgedProducer(factory(_sync_producer_conf(self._rt)))
        spec = self._spec
        for i, (u, d) in enumerate(syncs):
            s = OffsetSync(spec.topic, spec.partition, u, d)
            self._acks.produce(
                self._rt.offset_syncs_topic,
                s.value_bytes(),
                s.key_bytes(),
                partition=0,
                headers=sync_headers(batch_id, i == 0),
            )
        self._acks.producer.poll(0)
        self._batch = batch_id

    def flush(self, timeout: float = 30.0) -> None:
        """Wait for every produced sync; raises when one was not written."""
        if self._acks is None:
            return
        spec = self._spec
        rt = self._rt
        where = rt.target if rt.offset_syncs_on_target else rt.source
        error = self._acks.wait(timeout).error(
            f"offset syncs for {spec.topic}[{spec.partition}] not written to "
            f"topic {rt.offset_syncs_topic} on cluster {where}",
            code="_TIMED_OUT",
        )
        if error is not None:
            _SYNC_PRODUCERS.pop(_sync_producer_key(self._rt), None)  # start afresh next time
            raise error
        if self._batch is not None:
            _SYNCS_WRITTEN[self._key] = self._batch


def _sync_producer_key(rt: FlowRuntime) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, str(v)) for k, v in rt.source_producer.items()))


def _sync_producer_conf(rt: FlowRuntime) -> dict[str, Any]:
    return _quick({**rt.source_producer, "enable.idempotence": True, "acks": "all"})


def _sync_producer(rt: FlowRuntime) -> Producer:
    """The worker's producer of offset syncs (shared by a task's threads: syncs are
    not transactional, so one producer serves every partition)."""
    key = _sync_producer_key(rt)
    with _WORKER_POOL_LOCK:
        producer = _SYNC_PRODUCERS.get(key)
        if producer is None:
            producer = new_producer(_sync_producer_conf(rt))
            _SYNC_PRODUCERS[key] = producer
    return producer


class _Delivery:
    """Captures the target offset of a transaction's first record.

    The rest follow contiguously: one transactional producer per target
    partition, and (as with MM2) nothing else writes to mirrored topics.
    """

    __slots__ = ("error", "first")

    def __init__(self) -> None:
        self.first = -1
        self.error: KafkaError | None = None

    def on_first(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.error = err
        else:
            self.first = msg.offset() or 0


# the partition's committed position is not the one a cached producer committed
# last: someone else wrote it (or the broker did not keep the commit)
STATE_MOVED = "_MIRROR_STATE_MOVED"

# error codes of a transactional producer that another instance fenced (or that a
# fatal error made unusable): a cached producer showing one is replaced
FENCED_CODES = frozenset(
    {
        STATE_MOVED,
        "_FENCED",
        "PRODUCER_FENCED",
        "INVALID_PRODUCER_EPOCH",
        "_FATAL",
        "INVALID_PRODUCER_ID_MAPPING",
    }
)


def mirror_range(
    rt: FlowRuntime,
    spec: RangeSpec,
    log: Callable[..., None] | None = None,
    clients: MirrorClients = DEFAULT_CLIENTS,
    pool: ClientPool | None = None,
    pending_syncs: list[_SourceSyncWriter] | None = None,
    state_hint: tuple[int, str | None] | None = None,
) -> RangeResult:
    """Mirror ``spec`` and return what happened. Raises on errors that stop the partition.

    ``state_hint`` is the partition's committed state read (:func:`read_states`, one
    request for many ranges) after this worker's last commit for it. It stands for
    the range's own read only with a reused producer: a fresh one must fence first
    and read after, or a zombie's last commit could be missed.

    With ``pending_syncs``, a range that ends well leaves the acknowledgement of
    its last offset syncs to the caller (:func:`flush_syncs`, once for all the
    ranges of a task: the syncs of many ranges then share produce requests).

    With ``pool`` (the worker's :class:`~mm_client.kafka.pool.ClientPool`), the
    clients outlive the range: the partition's transactional producer is reused
    without ``init_transactions`` while it stays valid. A reused producer that
    another worker fenced (the partition moved) fails at its next transactional
    call and commits nothing more; it is dropped, and the range goes on with a
    fresh producer, whose ``init_transactions`` fences the other worker in turn
    and whose state read sees whatever was committed. While a reused producer stays
    valid, nobody else can have committed for its partition (committing needs this
    ``transactional.id``, and initialising it fences us), so the position read must
    be the one it committed last. It is read every range all the same, and a
    position that moved under a producer believed valid (a broker that did not keep
    a commit it acknowledged, a fence it did not enforce) is handled as a fence:
    the range starts over with a fresh producer and the position read.
    """
    result = RangeResult(spec.topic, spec.partition, spec.target_topic, spec.start, spec.end)
    with _leased(pool) as p:
        conf = _producer_conf(rt, spec)
        reused = False
        try:
            with p.lease("txn-producer", conf, _TxnWriter.factory(clients)) as lease:
                reused = not lease.fresh
                _mirror_with(
                    rt,
                    spec,
                    lease.client,
                    lease.fresh,
                    result,
                    log,
                    clients,
                    p,
                    pending_syncs,
                    None if lease.fresh else state_hint,
                )
                return result
        except (KafkaOperationError, KafkaException, SystemError) as exc:
            # (a fatal error raised while librdkafka served a delivery callback
            # reaches Python as a SystemError caused by the KafkaException)
            if not reused or cause_code(exc) not in FENCED_CODES:
                raise
            if log is not None:
                log(
                    (
                        "cached producer's state is out of date (another writer, or the "
                        "position moved: reset, deleted, or a commit the broker did not "
                        "keep); initialising a new one"
                    ),
                    target_topic=spec.target_topic,
                    error=str(kafka_cause(exc)),
                )
        with p.lease("txn-producer", conf, _TxnWriter.factory(clients)) as lease:
            _mirror_with(
                rt, spec, lease.client, lease.fresh, result, log, clients, p, pending_syncs
            )
            return result


class _TxnWriter:
    """A pooled transactional producer and the state it last committed for its partition."""

    __slots__ = ("producer", "state")

    def __init__(self, producer: Any) -> None:
        self.producer = producer
        # (next source offset, metadata) as committed by this producer; None = unknown
        self.state: tuple[int, str | None] | None = None

    @staticmethod
    def factory(clients: MirrorClients) -> Callable[[dict[str, Any]], _TxnWriter]:
        return lambda conf: _TxnWriter(clients.producer(conf))

    def close(self) -> None:
        close = getattr(self.producer, "close", None)
        if close is not None:
            with warnings.catch_warnings():
                # a producer is dropped because it failed (often: fenced); that
                # aborting its transaction fails too is expected, not news
                warnings.simplefilter("ignore", RuntimeWarning)
                close()


def _mirror_with(
    rt: FlowRuntime,
    spec: RangeSpec,
    writer: _TxnWriter,
    fresh: bool,
    result: RangeResult,
    log: Callable[..., None] | None,
    clients: MirrorClients,
    pool: ClientPool,
    pending_syncs: list[_SourceSyncWriter] | None,
    state_hint: tuple[int, str | None] | None = None,
) -> None:
    key = (rt.transactional_id_prefix, spec.target_topic, spec.partition)
    syncs = None if rt.offset_syncs_on_target else _SourceSyncWriter(rt, spec, key, clients)
    producer = writer.producer
    try:
        if fresh:
            try:
                # (measured: 96 concurrent inits 1.5 s without the metadata request
                # Transaction.init makes first, 0.75 s with it)
                Transaction(producer).init(spec.target_topic, 60)
            except KafkaException as exc:
                raise wrap(
                    exc,
                    f"init transactions for {spec.target_topic}[{spec.partition}] "
                    f"on cluster {rt.target}",
                ) from exc
        # read also for a cached producer (the task reads all its ranges' states in
        # one request: state_hint): one OffsetFetch is cheap, and a position
        # that moved under a producer nobody fenced (a broker that did not keep a
        # commit it acknowledged, a second writer it failed to fence) must not let
        # this worker resume from its own, stale idea of the position
        committed, metadata = (
            state_hint
            if state_hint is not None
            else read_state(rt, spec, clients=clients, pool=pool)
        )
        cached, writer.state = writer.state, None  # unknown until this range ends well
        start, committed, metadata = prepare_range(
            rt, spec, producer, (committed, metadata), cached, result, syncs, clients, pool, log
        )
        if start >= spec.end:
            writer.state = _known_state(committed, metadata, result)
            return
        with pool.lease(
            "source-consumer",
            _consumer_conf(rt),
            _SourceReader.factory(clients),
            reset=_SourceReader.reset,
        ) as lease:
            reader = lease.client
            consumer = reader.consumer
            if spec.topic not in reader.topics:
                # metadata first: a fetch assigned before the leader is known waits
                # ~0.5 s for it
                consumer.list_topics(spec.topic, timeout=30)
                reader.topics.add(spec.topic)
            consumer.assign([TopicPartition(spec.topic, spec.partition, start)])
            _mirror_loop(
                rt,
                spec,
                producer,
                consumer,
                _group_metadata(rt, clients, pool),
                result,
                syncs,
                start,
                # no position on the target yet: whatever the range ends with (even
                # a stop at its first record) is committed, or the next range would
                # start from its own planned start and skip what this one stopped at
                start if committed >= 0 or start != spec.start else -1,
                log,
            )
        writer.state = _known_state(committed, metadata, result)
    except BaseException:
        _raise_floor(_floors(pool), key, result)
        if syncs is not None:
            # also when the loop failed: what it committed gets its syncs
            syncs.flush()
        raise
    _raise_floor(_floors(pool), key, result)
    if syncs is not None:
        if pending_syncs is None:
            syncs.flush()
        else:
            pending_syncs.append(syncs)


def prepare_range(
    rt: FlowRuntime,
    spec: RangeSpec,
    producer: Any,
    state: tuple[int, str | None],
    cached: tuple[int, str | None] | None,
    result: RangeResult,
    syncs: _SourceSyncWriter | None,
    clients: MirrorClients,
    pool: ClientPool,
    log: Callable[..., None] | None,
) -> tuple[int, int, str | None]:
    """Where a range starts copying, from its partition's committed ``state`` read
    after its producer was fenced or reused, and what that producer committed last
    (``cached``; None: unknown). Returns (start, committed position, its metadata).

    On the way it writes again the syncs the last transaction may not have written,
    puts right a position a broker lost (:func:`_resume_floor`), recovers a missing
    one, refuses a position past the source end (PartitionStoppedError) and refreshes
    an idle partition's (``refresh`` ranges), each a position-only transaction of
    ``producer``. Raises STATE_MOVED when ``cached`` is not what is committed.
    """
    from mm.source import position

    committed, metadata = state
    if cached is not None:
        if committed != cached[0]:
            raise KafkaOperationError(
                f"mirror position of {spec.target_topic}[{spec.partition}] is "
                f"{committed}, not {cached[0]} as this worker's producer committed "
                "last: another writer, or a commit the broker did not keep",
                code=STATE_MOVED,
            )
        # what we committed (brokers that do not store commit metadata lose it)
        metadata = cached[1]
    key = (rt.transactional_id_prefix, spec.target_topic, spec.partition)
    decoded = decode_state(metadata)
    if syncs is not None and decoded is not None and _SYNCS_WRITTEN.get(key) != decoded[0]:
        # the last committed transaction's syncs may not have reached the source
        syncs.write(decoded[1], decoded[0])
    # only where the broker may lose an acknowledged commit: on Apache Kafka a
    # position below ours is an operator's reset, and it is honoured
    floor = -1 if rt.target_profile.keeps_acknowledged_commits else _floors(pool).get(key, -1)
    resumed, metadata = _resume_floor(floor, committed, metadata, spec, log)
    if resumed != committed:
        # the broker's position is behind the records it holds: put it right first,
        # or a partition with nothing more to mirror would keep reporting it
        _commit_position_only(producer, _group_metadata(rt, clients, pool), spec, resumed)
        result.metadata = ""
        committed = resumed
    result.resumed_from = result.position = committed
    if committed < 0:
        # no position: a new partition, or the state was lost (never re-mirror blindly)
        start = position.start_without_state(rt, spec, clients, log)
        if start != spec.start:
            # recovered: record it before anything else
            _commit_position_only(producer, _group_metadata(rt, clients, pool), spec, start)
            result.metadata = ""
    else:
        start = committed
        if start > spec.end:
            # behind the planner is normal (Spark's checkpoint was lost); past the
            # source log end is not
            position.check_not_past_source_end(rt, spec, committed, clients, result)
    result.resumed_from = start
    result.position = start
    if spec.extra.get("refresh") and committed >= 0:
        # an idle partition: commit the same position and metadata again, so
        # the broker does not expire them (mm.source.keepalive)
        _commit_position_only(
            producer, _group_metadata(rt, clients, pool), spec, committed, metadata or ""
        )
        result.metadata = metadata or ""
        if log is not None:
            log("mirror position refreshed", target_topic=spec.target_topic, position=committed)
    return start, committed, metadata


def _floors(pool: ClientPool) -> dict[tuple[str, str, int], int]:
    with _FLOORS_LOCK:
        floors = _COMMITTED_FLOORS.get(pool)
        if floors is None:
            floors = _COMMITTED_FLOORS[pool] = {}
        return floors


def _resume_floor(
    floor: int,
    committed: int,
    metadata: str | None,
    spec: RangeSpec,
    log: Callable[..., None] | None,
) -> tuple[int, str | None]:
    """The position to resume from: the committed one, unless this worker process
    (its client pool) has itself committed a higher one, ``floor``, for the partition.

    Asked only for a target whose profile says it may lose an acknowledged commit
    (``keeps_acknowledged_commits`` False: the embedded broker, see
    :mod:`mm.kafka.profile`, when a fenced epoch's late produce leaves a transaction
    it never ends). There a position below one this process saw committed means a
    lost commit: the records below ours are on the target all the same, and
    mirroring from the lower position would copy every one of them again, at each
    range, for as long as the broker keeps losing the commits. On Apache Kafka
    every writer reads the committed position after fencing the previous one and
    commits at or past it, so a lower position is an operator's reset (or a
    deleted and re-created target), and the worker resumes from it.
    """
    if committed < 0 or committed >= floor:
        return committed, metadata
    if log is not None:
        log(
            "the committed mirror position is below one this worker committed; resuming "
            "from its own (the broker lost an acknowledged commit, or the position was "
            "reset while the mirror ran)",
            target_topic=spec.target_topic,
            committed=committed,
            resumed_from=floor,
        )
    return floor, None


def _raise_floor(
    floors: dict[tuple[str, str, int], int], key: tuple[str, str, int], result: RangeResult
) -> None:
    # result.position is always a committed position (or the one the range found)
    if result.position > floors.get(key, -1):
        floors[key] = result.position


def flush_syncs(pending: list[_SourceSyncWriter]) -> None:
    """Wait for the offset syncs of ranges mirrored with ``pending_syncs``; raises when
    one was not written (its partition's next task writes it again first)."""
    for syncs in pending:
        syncs.flush()


def _known_state(
    committed: int, metadata: str | None, result: RangeResult
) -> tuple[int, str | None] | None:
    """The partition's committed (position, metadata) after a range that ended well:
    what the range committed last, else what it found; None when nothing is committed."""
    if result.metadata is not None:
        return result.position, result.metadata
    if committed >= 0 and result.position == committed:
        return committed, metadata
    return None


class _SourceReader:
    """A pooled source consumer and the topics whose metadata it already has."""

    __slots__ = ("consumer", "topics")

    def __init__(self, consumer: Any) -> None:
        self.consumer = consumer
        self.topics: set[str] = set()

    @staticmethod
    def factory(clients: MirrorClients) -> Callable[[dict[str, Any]], _SourceReader]:
        return lambda conf: _SourceReader(clients.consumer(conf))

    @staticmethod
    def reset(reader: _SourceReader) -> None:
        # nothing fetched for this range may reach the next user of the consumer
        reader.consumer.unassign()

    def close(self) -> None:
        self.consumer.close()


def _group_metadata(rt: FlowRuntime, clients: MirrorClients, pool: ClientPool | None = None) -> Any:
    """The state group's metadata for send_offsets_to_transaction (a copy: it outlives
    the consumer it comes from)."""
    with (
        _leased(pool) as p,
        p.lease("state-consumer", _state_consumer_conf(rt), clients.consumer) as lease,
    ):
        return lease.client.consumer_group_metadata()


def _mirror_loop(
    rt: FlowRuntime,
    spec: RangeSpec,
    producer: Producer,
    consumer: Consumer,
    group_metadata: Any,
    result: RangeResult,
    syncs: _SourceSyncWriter | None,
    start: int,
    committed_pos: int,
    log: Callable[..., None] | None,
) -> None:
    topic, partition, target_topic, end = spec.topic, spec.partition, spec.target_topic, spec.end
    txn = Transaction(producer)
    produce = producer.produce
    poll = producer.poll
    max_bytes = spec.max_record_bytes
    max_records, max_points = rt.max_records_per_txn, rt.max_sync_points_per_txn
    last_in_range = end - 1
    # records up to this size skip the too-large check's slow path
    fast_max = max_bytes if max_bytes else 1 << 62
    # next source offset not yet accounted for: past the last mirrored record,
    # or past a gap the fetch proved (EOF, or a record at/after the range end)
    expected = start
    first_event = True
    done = False
    stop_error: str | None = None
    idle_since = time.monotonic()
    # Fetched messages outlive the transaction that was filling when they came:
    # a full transaction breaks out mid-batch and the next one continues with
    # the rest of the same iterator (dropping them would lose committed records).
    fetched: Iterator[Message] = iter(())
    exhausted = True

    while not done:
        tracker = RunTracker()
        delivery = _Delivery()
        txn_bytes = 0
        in_txn = False
        full = False
        # the open run of consecutive offsets, handed to the tracker when it ends
        # (plain integers here: this loop runs once per record)
        n = 0
        run_start = last_off = -2
        run_len = 0
        points = 0
        while not done and not full:
            if exhausted:
                # short wait: consume() waits out its timeout even after the EOF event
                msgs = consumer.consume(_CONSUME_BATCH, 0.02)
                if not msgs:
                    if time.monotonic() - idle_since > rt.fetch_timeout_s:
                        raise KafkaOperationError(
                            f"no data from {topic}[{partition}] at offset {expected} for "
                            f"{rt.fetch_timeout_s:.0f}s although the planner saw data up to {end}",
                            code="_TIMED_OUT",
                            retriable=True,
                        )
                    continue
                idle_since = time.monotonic()
                fetched = iter(msgs)
                exhausted = False
            for m in fetched:
                # Fast path, once per record: a data record inside the range that
                # continues an open transaction and fits the target is produced with
                # the fewest calls. Everything else (first record of a transaction,
                # events, range end, oversize) takes the general path.
                # set on records and end-of-partition events; None on some errors
                off: int = m.offset()  # type: ignore[assignment]
                fast = False
                if n and m.error() is None and expected <= off < end:
                    value = m.value()
                    k = m.key()
                    size = (len(value) if value else 0) + (len(k) if k else 0)
                    if size <= fast_max:
                        fast = True
                        try:
                            produce(
                                target_topic,
                                value,
                                k,
                                partition,
                                timestamp=m.timestamp()[1],
                                headers=m.headers(),
                            )
                        except BufferError:
                            _produce_waiting(
                                producer,
                                target_topic,
                                value,
                                k,
                                partition,
                                timestamp=m.timestamp()[1],
                                headers=m.headers(),
                            )
                        except KafkaException as exc:
                            raise wrap(
                                exc,
                                f"produce to {target_topic}[{partition}] on cluster {rt.target}",
                            ) from exc
                if not fast:
                    err = m.error()
                    if err is not None and err.code() != KafkaError._PARTITION_EOF:
                        # an error event may carry no offset (a refused fetch, say);
                        # the group is named: Apache Kafka checks DESCRIBE on it
                        raise wrap(
                            KafkaException(err),
                            f"fetch {topic}[{partition}] on cluster {rt.source} "
                            f"(reader group {rt.state_group})",
                        )
                    if off < expected:
                        # the consumer reset to the log start: the position is past the
                        # log end (the topic recreated or truncated since the planner
                        # looked). Copying from there would append the new log to the
                        # old one's copy: stop the partition, this transaction aborted.
                        if in_txn:
                            txn.abort(30)
                        raise PartitionStoppedError(
                            _past_end(rt, spec, consumer, expected, log), result
                        )
                    if first_event:
                        first_event = False
                        if off > expected:
                            _check_loss(
                                consumer, topic, partition, expected, min(off, end), result, log
                            )
                            # the fetch proved nothing readable before off (a gap, or
                            # data deleted and now counted): also when the partition
                            # stops at off, its position must not count it again
                            expected = min(off, end)
                    if err is not None:  # end of partition
                        # end of what is readable now (log end or last stable offset)
                        expected = max(expected, min(off, end))
                        done = True
                        break
                    if off >= end:
                        expected = end
                        done = True
                        break
                    value = m.value()
                    k = m.key()
                    size = (len(value) if value else 0) + (len(k) if k else 0)
                    if max_bytes and size > max_bytes:
                        reason = (
                            f"record {topic}[{partition}]@{off} is {size} bytes; target topic "
                            f"{target_topic} accepts at most {max_bytes} (max.message.bytes)"
                        )
                        if rt.errors_tolerance != "all" or not rt.dead_letter_topic:
                            # commit what precedes it, then stop this partition here
                            stop_error = (
                                f"{reason}. Nothing from this offset on is mirrored for this "
                                "partition (set errors.tolerance=all and "
                                "errors.deadletterqueue.topic.name to divert such records; "
                                "or skip this record, leaving it out of the target: "
                                "`mm position -c "
                                f"<config> --flow {rt.source}->{rt.target} --topic {topic} "
                                f"--set {partition}={off + 1}`, while the mirror runs or not)"
                            )
                            done = True
                            break
                        if not in_txn:
                            txn.begin()
                            in_txn = True
                        _dead_letter(producer, rt.dead_letter_topic, m, reason)
                        result.dead_lettered += 1
                        if log is not None:
                            log(
                                "record sent to the dead-letter topic",
                                offset=off,
                                size=size,
                                dead_letter_topic=rt.dead_letter_topic,
                            )
                        expected = off + 1
                        if off == end - 1:
                            done = True
                            break
                        continue
                    if not in_txn:
                        txn.begin()
                        in_txn = True
                    # here only for a transaction's first record (n == 0): its
                    # delivery report gives the target offset the syncs start from
                    # (a KafkaException here is typically a fence: another task took
                    # this transactional.id, a retry or a second mirror of the flow)
                    _produce_waiting(
                        producer,
                        target_topic,
                        value,
                        k,
                        partition,
                        on_delivery=delivery.on_first,
                        timestamp=m.timestamp()[1],
                        headers=m.headers(),
                    )
                if off != last_off + 1:
                    if run_len:
                        tracker.add_contiguous(run_start, run_len)
                    run_start = off
                    run_len = 0
                    points += 2
                run_len += 1
                last_off = off
                n += 1
                txn_bytes += size
                expected = off + 1
                if off == last_in_range:
                    done = True
                    break
                if n >= max_records or points >= max_points:
                    full = True
                    break
            else:
                exhausted = True
            poll(0)
        if done:
            # everything of the range is read: stop fetching before the commit's round
            # trips (an assigned consumer keeps fetching every fetch.wait.max.ms;
            # measured at 96 partitions, those empty fetches were most of the source
            # broker's requests)
            consumer.unassign()
        if run_len:
            tracker.add_contiguous(run_start, run_len)
        if not in_txn:
            if expected > committed_pos:
                # only a gap (markers, aborted or compacted records) or lost data
                # since the last commit: record the position past it, so it equals
                # the source end (an exactly-once source always ends with a marker)
                # and a loss is reported once; or no position was known at all
                if syncs is not None:
                    syncs.flush()  # the metadata below no longer carries their syncs
                _commit_position_only(producer, group_metadata, spec, expected)
                result.metadata = ""
            result.position = expected
            break
        _commit(
            rt,
            spec,
            producer,
            group_metadata,
            tracker,
            delivery,
            expected,
            result,
            syncs,
            txn_bytes,
        )
        result.position = committed_pos = expected
    if stop_error is not None:
        raise RecordTooLargeError(stop_error, result)


def _produce_waiting(producer: Producer, topic: str, *args: Any, **kwargs: Any) -> None:
    """Produce once the producer's queue has room; Kafka errors wrapped, naming where."""
    try:
        produce_retrying(producer, topic, *args, **kwargs)
    except KafkaException as exc:
        partition = args[2] if len(args) > 2 else kwargs.get("partition", -1)
        raise wrap(exc, f"produce to {topic}[{partition}]") from exc


def _dead_letter(
    producer: Producer,
    dlq_topic: str,
    m: Message,
    reason: str,
) -> None:
    """Divert a record to the dead-letter topic, in the same transaction, with
    Kafka Connect's error headers saying where it came from and why."""
    # consumed messages carry headers as a list of pairs (order and duplicates kept)
    headers: list[tuple[str, str | bytes | None]] = list(m.headers() or [])  # type: ignore[arg-type]
    headers += [
        ("__connect.errors.topic", str(m.topic())),
        ("__connect.errors.partition", str(m.partition())),
        ("__connect.errors.offset", str(m.offset())),
        ("__connect.errors.exception.class.name", "mm.source.task.RecordTooLargeError"),
        ("__connect.errors.exception.message", reason),
    ]
    _produce_waiting(
        producer, dlq_topic, m.value(), m.key(), timestamp=m.timestamp()[1], headers=headers
    )


def _commit_position_only(
    producer: Producer, group_metadata: Any, spec: RangeSpec, position: int, metadata: str = ""
) -> None:
    try:
        Transaction(producer).commit_positions(
            [TopicPartition(spec.target_topic, spec.partition, position, metadata=metadata)],
            group_metadata,
            60,
        )
    except KafkaException as exc:
        raise wrap(exc, f"commit position of {spec.target_topic}[{spec.partition}]") from exc


def _past_end(
    rt: FlowRuntime,
    spec: RangeSpec,
    consumer: Consumer,
    position: int,
    log: Callable[..., None] | None,
) -> str:
    """The refusal for a fetch that found ``position`` past the source log end."""
    from mm.source.position import past_source_end_message

    try:
        _low, end = consumer.get_watermark_offsets(
            TopicPartition(spec.topic, spec.partition), timeout=10
        )
    except KafkaException as exc:
        raise wrap(exc, f"log end of {spec.topic}[{spec.partition}]") from exc
    if log is not None:
        log("mirror position past the source log end at fetch time", position=position, end=end)
    return past_source_end_message(rt, spec, position, int(end))


def _check_loss(
    consumer: Consumer,
    topic: str,
    partition: int,
    expected: int,
    first: int,
    result: RangeResult,
    log: Callable[..., None] | None,
) -> None:
    """A jump at the very start of a read is either a gap or data deleted before mirroring."""
    try:
        low, _ = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    except KafkaException as exc:
        raise wrap(exc, f"log start of {topic}[{partition}]") from exc
    if low > expected:
        lost_to = min(low, first)
        result.lost += lost_to - expected
        result.lost_from = expected
        result.lost_to = lost_to
        if log is not None:
            log(
                "source data lost before it was mirrored",
                topic=topic,
                partition=partition,
                lost_from=expected,
                lost_to=lost_to,
                lost=lost_to - expected,
            )


def _commit(
    rt: FlowRuntime,
    spec: RangeSpec,
    producer: Producer,
    group_metadata: Any,
    tracker: RunTracker,
    delivery: _Delivery,
    next_pos: int,
    result: RangeResult,
    syncs: _SourceSyncWriter | None,
    txn_bytes: int,
) -> None:
    where = f"{spec.target_topic}[{spec.partition}] on cluster {rt.target}"
    txn = Transaction(producer)
    remaining = txn.delivered(120)
    error = txn.cause(delivery.error)  # set by the reports delivered() served
    if remaining or error is not None or (tracker.count and delivery.first < 0):
        txn.abort(30)
        code = error.name() if error else "_TIMED_OUT"
        raise KafkaOperationError(
            f"produce to {where} failed: "
            f"{error.str() if error else f'{remaining} records unacknowledged'}",
            code=code,
            retriable=not is_refusal(code),
        )
    pairs = tracker.syncs(delivery.first)
    batch_id = uuid.uuid4().hex[:12]
    metadata = encode_state(batch_id, pairs)
    # syncs on the target: one transaction at a time of this process holds the shared
    # offset-syncs partition (a broker may lose the offsets of transactions that overlap
    # on a partition and stall its last stable offset, as the embedded one does;
    # Apache Kafka does not)
    syncs_lock = _TARGET_SYNCS_LOCK if rt.offset_syncs_on_target else contextlib.nullcontext()
    with syncs_lock:
        _commit_with_syncs(
            rt, spec, producer, group_metadata, next_pos, pairs, batch_id, metadata, syncs
        )
    result.metadata = metadata
    result.records += tracker.count
    result.bytes += txn_bytes
    result.transactions += 1
    result.syncs += len(pairs)
    if syncs is not None:
        syncs.write(pairs, batch_id)


_TARGET_SYNCS_LOCK = threading.Lock()


def _commit_with_syncs(
    rt: FlowRuntime,
    spec: RangeSpec,
    producer: Producer,
    group_metadata: Any,
    next_pos: int,
    pairs: list[tuple[int, int]],
    batch_id: str,
    metadata: str,
    syncs: _SourceSyncWriter | None,
) -> None:
    where = f"{spec.target_topic}[{spec.partition}] on cluster {rt.target}"
    try:
        if rt.offset_syncs_on_target:
            for i, (u, d) in enumerate(pairs):
                s = OffsetSync(spec.topic, spec.partition, u, d)
                producer.produce(
                    rt.offset_syncs_topic,
                    s.value_bytes(),
                    s.key_bytes(),
                    0,
                    headers=sync_headers(batch_id, i == 0),
                )
        Transaction(producer).commit(
            [TopicPartition(spec.target_topic, spec.partition, next_pos, metadata=metadata)],
            group_metadata,
            offsets_timeout=60,
            commit_timeout=120,
            # keep "only the last committed transaction's syncs may be unwritten",
            # which is what a restarted task recovers (the previous transaction's
            # syncs were produced long ago: this rarely waits)
            before_commit=None if syncs is None else syncs.flush,
        )
    except KafkaException as exc:
        raise wrap(exc, f"commit transaction for {where}") from exc
