"""What a mirrored range needs around its copy (the copy is :mod:`mm.source.shard_run`).

Runs inside a Spark Python worker (called from the data source's ``read``);
records never enter the JVM. Here: the range's result row, the client settings a
task derives, the committed state read from the target
(:func:`read_states`), the range's preparation from that state
(:func:`prepare_range`: offset syncs written again, a lost position put right or
recovered, a position past the source end refused, an idle position refreshed),
and offset syncs on the source.

Offset syncs: with ``offset-syncs.topic.location=target`` they are written in
the same transaction as the records. On the source (the default) they are
produced right after the commit and acknowledged before the next commit, so only
the last committed transaction's syncs can be missing after a crash; they are
also kept in the committed offset's metadata, and a task that does not know
whether the previous transaction's syncs reached the source writes them again
first. Duplicated syncs are harmless to readers (same pairs). (Brokers that keep
no commit metadata, the embedded one among them (:mod:`mm.kafka.profile`), lose
that one transaction's syncs on a crash at that moment: its offsets then
translate to the sync before it, which is earlier, never later.)
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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
    new_producer,
    produce_retrying,
    reader_conf,
)
from mm_client.kafka.pool import ClientPool, close_client
from mm_client.records import SYNC_WRITER_HEADER, TXN_FIRST_HEADER, OffsetSync

from mm.errors import KafkaOperationError, MirrorError
from mm.kafka.errors import wrap
from mm.source.clients import DEFAULT_CLIENTS, MirrorClients
from mm.source.spec import DEFAULT_TXN_TIMEOUT_MS, FlowRuntime, RangeSpec
from mm.source.state import decode_state

if TYPE_CHECKING:
    from mm.source.position import Probes

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
# the mirror run (FlowRuntime.run_id) the state above belongs to (see enter_run)
_WORKER_RUN = ""


# marks the sync of a transaction's first record (see mm_client.records)
def sync_headers(batch_id: str, first: bool) -> list[tuple[str, str | bytes | None]]:
    """Headers of a sync of transaction ``batch_id``: its writer (every sync), and the
    transaction-first flag on the first (see :mod:`mm_client.translation`)."""
    writer: tuple[str, str | bytes | None] = (
        SYNC_WRITER_HEADER,
        batch_id.encode("ascii", "replace"),
    )
    return [writer, (TXN_FIRST_HEADER, b"1")] if first else [writer]


def enter_run(rt: FlowRuntime) -> None:
    """Start of a task of run ``rt.run_id``: state this worker kept for another run is
    dropped (its clients closed). Spark keeps Python workers for the life of the
    SparkContext, and one context can run the mirror job more than once (`mm run`
    restarting a failed job); a run starts from what the target holds, never from
    a previous run's pooled producers, floors or syncs."""
    global _WORKER_POOL, _WORKER_RUN
    with _WORKER_POOL_LOCK:
        if rt.run_id == _WORKER_RUN:
            return
        pool, probes = _WORKER_POOL, list(_END_PROBES.values())
        _WORKER_POOL, _WORKER_RUN = None, rt.run_id
        _SYNCS_WRITTEN.clear()
        _SYNC_PRODUCERS.clear()  # syncs are acknowledged before each commit: none pending
        _END_PROBES.clear()
    if pool is not None:
        pool.clear()
    for _admin, consumer in probes:
        if consumer is not None:
            close_client(consumer)


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
    # a ``refresh`` range committed its idle partition's position again (not in the row)
    refreshed: bool = False

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
            "transaction.timeout.ms": conf.get("transaction.timeout.ms", DEFAULT_TXN_TIMEOUT_MS),
        }
    )
    return conf


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


def start_sync_producer(rt: FlowRuntime, clients: MirrorClients = DEFAULT_CLIENTS) -> None:
    """Build this worker's offset-syncs producer now, when the flow writes its syncs
    to the source and the worker has none yet. An idempotent producer gets its
    producer id in the background about 0.5 s after it is built (librdkafka asks
    again after 500 ms when no broker connection was up at its first try; measured
    on Apache Kafka 4.3.1), and a worker's first flush of syncs, at the end of its
    first shard run, waited for all of it; built before the fence, that wait
    overlaps the shard's fence, prepare and copy."""
    if not rt.offset_syncs_on_target and clients.sync_producer is None:
        _sync_producer(rt)


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


def prepare_range(
    rt: FlowRuntime,
    spec: RangeSpec,
    commit: Callable[[RangeSpec, int, str], None],
    state: tuple[int, str | None],
    cached: tuple[int, str | None] | None,
    result: RangeResult,
    syncs: _SourceSyncWriter | None,
    clients: MirrorClients,
    pool: ClientPool,
    log: Callable[..., None] | None,
    probes: Probes | None = None,
) -> tuple[int, int, str | None]:
    """Where a range starts copying, from its partition's committed ``state`` read
    after its producer was fenced or reused, and what that producer committed last
    (``cached``; None: unknown). Returns (start, committed position, its metadata).

    On the way it writes again the syncs the last transaction may not have written,
    puts right a position a broker lost (:func:`_resume_floor`), recovers a missing
    one, refuses a position past the source end (PartitionStoppedError) and refreshes
    an idle partition's (``refresh`` ranges). Each position to record goes to
    ``commit(spec, position, metadata)``, which must commit it before any record of
    the partition is copied (the shard commits them in one transaction). Raises
    STATE_MOVED when ``cached`` is not what is committed. Safe to run for several
    ranges at once (threads): it reads and writes syncs, it commits nothing itself.
    ``probes``: the watermark probes the ranges share (:class:`mm.source.position.Probes`).
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
        commit(spec, resumed, "")
        result.metadata = ""
        committed = resumed
    result.resumed_from = result.position = committed
    if committed < 0:
        # no position: a new partition, or the state was lost (never re-mirror blindly)
        start = position.start_without_state(rt, spec, clients, log, probes)
        if start != spec.start:
            # recovered: record it before anything else
            commit(spec, start, "")
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
        commit(spec, committed, metadata or "")
        result.metadata = metadata or ""
        result.refreshed = True  # routine: the shard logs it below its warnings
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


_TARGET_SYNCS_LOCK = threading.Lock()
