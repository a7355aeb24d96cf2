"""In-memory stand-ins for the confluent-kafka clients a mirror task uses.

They model Apache Kafka where the embedded test broker differs or cannot be
steered: a source log with any gaps (markers, aborted batches, compaction
holes) served read_committed, consume batches cut at chosen sizes, a
transactional target whose aborted records and markers occupy offsets, commit
metadata kept with committed offsets, and a producer queue that fills up.
They are deliberately strict: a call the real client would reject raises.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, KafkaError, KafkaException, TopicPartition

from mm.source.clients import MirrorClients
from mm.source.spec import FlowRuntime

Headers = tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True)
class Rec:
    key: bytes | None
    value: bytes | None
    headers: Headers = ()
    timestamp: int = 0

    def size(self) -> int:
        return (len(self.key) if self.key else 0) + (len(self.value) if self.value else 0)


@dataclass
class Entry:
    """One offset of a partition log: a data record or not (marker, aborted, compacted)."""

    offset: int
    rec: Rec | None  # None: a marker or a record gone (aborted, compacted)
    state: str = "committed"  # for data: "committed", "open", "aborted"
    marker: bool = False


@dataclass
class PartitionLog:
    entries: list[Entry] = field(default_factory=list)
    log_start: int = 0

    @property
    def end(self) -> int:
        return self.entries[-1].offset + 1 if self.entries else self.log_start

    def append(self, rec: Rec | None, state: str = "committed", marker: bool = False) -> int:
        off = self.end
        self.entries.append(Entry(off, rec, state, marker))
        return off

    def stable_end(self) -> int:
        """Last stable offset: the first offset of a still-open transaction, else the end."""
        for e in self.entries:
            if e.state == "open":
                return e.offset
        return self.end

    def committed(self) -> list[tuple[int, Rec]]:
        """What a read_committed consumer of Apache Kafka reads."""
        return [
            (e.offset, e.rec)
            for e in self.entries
            if e.rec is not None and e.state == "committed" and e.offset >= self.log_start
        ]


@dataclass
class FakeCluster:
    name: str
    logs: dict[tuple[str, int], PartitionLog] = field(default_factory=dict)
    # group -> (topic, partition) -> (offset, metadata)
    offsets: dict[str, dict[tuple[str, int], tuple[int, str]]] = field(default_factory=dict)
    # sizes of successive consume() batches (cycled); the consumer's batch limit caps them
    batch_sizes: Sequence[int] = (5000,)
    # produce() raises BufferError on every n-th call (0: never)
    buffer_full_every: int = 0
    _produce_calls: int = 0
    sync_headers: list[tuple[int, Headers]] = field(default_factory=list)
    # every committed offset, in commit order: (group, topic, partition, offset, metadata)
    commits: list[tuple[str, str, int, int, str]] = field(default_factory=list)
    # transactional.id -> the producer that initialised it last (the others are fenced)
    owners: dict[str, Any] = field(default_factory=dict)
    inits: int = 0

    def log(self, topic: str, partition: int) -> PartitionLog:
        return self.logs.setdefault((topic, partition), PartitionLog())


class FakeError:
    def __init__(self, code: int) -> None:
        self._code = code

    def code(self) -> int:
        return self._code

    def name(self) -> str:
        return str(self._code)

    def str(self) -> str:
        return f"fake error {self._code}"


class FakeMessage:
    def __init__(
        self, topic: str, partition: int, offset: int, rec: Rec | None, error: Any = None
    ) -> None:
        self._t, self._p, self._o, self._r, self._e = topic, partition, offset, rec, error

    def topic(self) -> str:
        return self._t

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o

    def error(self) -> Any:
        return self._e

    def key(self) -> bytes | None:
        return self._r.key if self._r else None

    def value(self) -> bytes | None:
        return self._r.value if self._r else None

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        return list(self._r.headers) if self._r and self._r.headers else None

    def timestamp(self) -> tuple[int, int]:
        return (1, self._r.timestamp if self._r else 0)


class FakeConsumer:
    def __init__(self, cluster: FakeCluster, conf: dict[str, Any]) -> None:
        self.cluster, self.conf = cluster, conf
        self.group = str(conf.get("group.id", ""))
        self._assigned: tuple[str, int] | None = None
        self._reset_error = False
        self._pos = 0
        self._eof_sent = False
        self._sizes: Iterator[int] = itertools.cycle(cluster.batch_sizes)
        self.closed = False
        self.paused: set[tuple[str, int]] = set()

    # --- group state ---
    def committed(self, tps: list[TopicPartition], timeout: float = 0) -> list[TopicPartition]:
        assert self.conf.get("isolation.level") == "read_committed", self.conf
        out = []
        for tp in tps:
            off, meta = self.cluster.offsets.get(self.group, {}).get(
                (tp.topic, tp.partition), (-1001, "")
            )
            res = TopicPartition(tp.topic, tp.partition, off)
            if meta:
                res = TopicPartition(tp.topic, tp.partition, off, metadata=meta)
            out.append(res)
        return out

    def consumer_group_metadata(self) -> str:
        return self.group

    # --- fetching ---
    def list_topics(self, topic: str | None = None, timeout: float = 0) -> None:
        return None

    def assign(self, tps: list[TopicPartition]) -> None:
        assert len(tps) == 1
        tp = tps[0]
        self._assigned = (tp.topic, tp.partition)
        log = self.cluster.log(tp.topic, tp.partition)
        self._pos = tp.offset if tp.offset >= 0 else log.log_start
        self._reset_error = False
        if self._pos < log.log_start or self._pos > log.end:
            if self.conf.get("auto.offset.reset") == "earliest":
                self._pos = log.log_start
            else:
                self._reset_error = True  # librdkafka reports it as a consumer error
        self._eof_sent = False

    def get_watermark_offsets(
        self, tp: TopicPartition, timeout: float = 0, cached: bool = False
    ) -> tuple[int, int]:
        log = self.cluster.log(tp.topic, tp.partition)
        return log.log_start, log.stable_end()

    def offsets_for_times(
        self, tps: list[TopicPartition], timeout: float = 0
    ) -> list[TopicPartition]:
        # only the two special "times" the mirror asks for: log start (-2), end (-1)
        out = []
        for tp in tps:
            assert tp.offset in (OFFSET_BEGINNING, OFFSET_END), tp
            log = self.cluster.log(tp.topic, tp.partition)
            offset = log.log_start if tp.offset == OFFSET_BEGINNING else log.stable_end()
            out.append(TopicPartition(tp.topic, tp.partition, offset))
        return out

    def consume(self, num_messages: int = 1, timeout: float = 0) -> list[FakeMessage]:
        assert self._assigned is not None
        topic, partition = self._assigned
        if self._assigned in self.paused:
            return []
        log = self.cluster.log(topic, partition)
        if self._reset_error:
            err = FakeError(KafkaError._AUTO_OFFSET_RESET)
            return [FakeMessage(topic, partition, self._pos, None, err)]
        want = min(num_messages, next(self._sizes))
        out: list[FakeMessage] = []
        lso = log.stable_end()
        for off, rec in log.committed():
            if len(out) >= want:
                break
            if off < self._pos or off >= lso:
                continue
            out.append(FakeMessage(topic, partition, off, rec))
        if out:
            self._pos = out[-1].offset() + 1
            self._eof_sent = False
        if len(out) < want and not self._eof_sent:
            # nothing more is readable: the position moves to the stable end
            self._pos = max(self._pos, lso)
            out.append(
                FakeMessage(topic, partition, lso, None, FakeError(KafkaError._PARTITION_EOF))
            )
            self._eof_sent = True
        return out

    def unassign(self) -> None:
        self._assigned = None

    def pause(self, tps: list[TopicPartition]) -> None:
        # the copy loop pauses a partition once its range is done: nothing is fetched
        # for it any more; a pause outlives unassign, as librdkafka's does
        self.paused.update((tp.topic, tp.partition) for tp in tps)

    def resume(self, tps: list[TopicPartition]) -> None:
        self.paused.difference_update((tp.topic, tp.partition) for tp in tps)

    def close(self) -> None:
        self.closed = True


class FakeProducer:
    """Transactional when ``transactional.id`` is set (the mirror's target producer)."""

    def __init__(self, cluster: FakeCluster, conf: dict[str, Any]) -> None:
        self.cluster, self.conf = cluster, conf
        self.transactional = "transactional.id" in conf
        self._in_txn = False
        self._open: list[tuple[str, int, int]] = []  # (topic, partition, offset)
        self._pending_offsets: list[tuple[str, TopicPartition]] = []
        self._callbacks: list[tuple[Any, FakeMessage]] = []

    def list_topics(self, topic: str | None = None, timeout: float = 0) -> None:
        return None

    def init_transactions(self, timeout: float = 0) -> None:
        assert self.transactional
        c = self.cluster
        c.inits += 1
        old = c.owners.get(self.conf["transactional.id"])
        if old is not None and old is not self and old._in_txn:
            old._end(commit=False)  # the broker aborts what the fenced producer left open
        c.owners[self.conf["transactional.id"]] = self

    def _check_not_fenced(self) -> None:
        if (
            self.transactional
            and self.cluster.owners.get(self.conf["transactional.id"]) is not self
        ):
            raise KafkaException(
                KafkaError(KafkaError._FENCED, "fenced by a newer instance (fake)", fatal=True)
            )

    def begin_transaction(self) -> None:
        assert self.transactional and not self._in_txn
        self._in_txn = True

    def produce(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        partition: int = -1,
        on_delivery: Any = None,
        timestamp: int = 0,
        headers: Any = None,
    ) -> None:
        c = self.cluster
        c._produce_calls += 1
        if c.buffer_full_every and c._produce_calls % c.buffer_full_every == 0:
            raise BufferError("fake queue full")
        assert not self.transactional or self._in_txn, "produce outside a transaction"
        self._check_not_fenced()
        p = max(partition, 0)
        hdrs: Headers = tuple((k, v) for k, v in (headers or []))
        state = "open" if self.transactional else "committed"
        off = c.log(topic, p).append(Rec(key, value, hdrs, timestamp), state)
        if self.transactional:
            self._open.append((topic, p, off))
        else:
            c.sync_headers.append((off, hdrs))
        if on_delivery is not None:
            self._callbacks.append((on_delivery, FakeMessage(topic, p, off, None)))

    def poll(self, timeout: float = 0) -> int:
        done, self._callbacks = self._callbacks, []
        for cb, msg in done:
            cb(None, msg)
        return len(done)

    def flush(self, timeout: float = 0) -> int:
        self.poll(0)
        return 0

    def send_offsets_to_transaction(
        self, tps: list[TopicPartition], group_metadata: Any, timeout: float = 0
    ) -> None:
        assert self._in_txn
        self._check_not_fenced()
        self._pending_offsets += [(str(group_metadata), tp) for tp in tps]

    def _end(self, commit: bool) -> None:
        assert self._in_txn
        self.poll(0)
        touched = {(t, p) for t, p, _ in self._open}
        for t, p, off in self._open:
            e = self.cluster.log(t, p).entries
            entry = next(x for x in e if x.offset == off)
            entry.state = "committed" if commit else "aborted"
        for t, p in sorted(touched):
            self.cluster.log(t, p).append(None, marker=True)
        if commit:
            for group, tp in self._pending_offsets:
                self.cluster.offsets.setdefault(group, {})[(tp.topic, tp.partition)] = (
                    tp.offset,
                    tp.metadata or "",
                )
                self.cluster.commits.append(
                    (group, tp.topic, tp.partition, tp.offset, tp.metadata or "")
                )
        self._open, self._pending_offsets, self._in_txn = [], [], False

    def commit_transaction(self, timeout: float = 0) -> None:
        self._check_not_fenced()
        self._end(commit=True)

    def abort_transaction(self, timeout: float = 0) -> None:
        self._end(commit=False)


def fake_clients(source: FakeCluster, target: FakeCluster, target_servers: str) -> MirrorClients:
    """Clients that talk to ``target`` when their bootstrap.servers is ``target_servers``."""

    def pick(conf: dict[str, Any]) -> FakeCluster:
        return target if conf.get("bootstrap.servers") == target_servers else source

    return MirrorClients(
        producer=lambda conf: FakeProducer(pick(conf), conf),
        consumer=lambda conf: FakeConsumer(pick(conf), conf),
        sync_producer=lambda conf: FakeProducer(pick(conf), conf),
    )


# --- a flow A -> B over fake clusters ---------------------------------------------------------

SOURCE, TARGET = "source:9092", "target:9092"
TOPIC, TARGET_TOPIC = "orders", "A.orders"
SYNCS = "mm2-offset-syncs.B.internal"
LIMIT = 10  # the target topic's largest record (key + value), in bytes


def runtime(**kw: Any) -> FlowRuntime:
    """The flow's runtime with clients pointing at the fake clusters (``kw`` overrides)."""
    base: dict[str, Any] = {
        "source": "A",
        "target": "B",
        "source_consumer": {"bootstrap.servers": SOURCE},
        "source_producer": {"bootstrap.servers": SOURCE},
        "target_producer": {"bootstrap.servers": TARGET},
        "target_consumer": {"bootstrap.servers": TARGET},
        "offset_syncs_topic": SYNCS,
        "offset_syncs_on_target": False,
        "state_group": "__mm.mirror.A.B",
        # per call: the worker-level record of written syncs is keyed by it
        "transactional_id_prefix": f"mm.A.B.{uuid.uuid4().hex}",
        "fetch_timeout_s": 1.0,
    }
    base.update(kw)
    return FlowRuntime(**base)


def build_source(entries: list[Rec | None], log_start: int, batch_sizes: list[int]) -> FakeCluster:
    source = FakeCluster("A", batch_sizes=batch_sizes)
    log = source.log(TOPIC, 0)
    for rec in entries:
        log.append(rec, state="committed" if rec is not None else "aborted")
    log.log_start = log_start
    return source
