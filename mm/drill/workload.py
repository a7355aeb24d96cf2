"""The drill's workload: sequence-numbered producers, consumer groups, a watcher on B.

Every record's value is ``{"p": producer, "s": seq, "t": produce time}`` so a
record is known by ``(producer, seq)`` wherever it is read
(:mod:`mm.drill.accounting`). Producers record what the cluster acknowledged
(a transactional producer: what it committed; records of aborted transactions
are never counted). Consumers record what they processed, in order, and commit
after processing (at-least-once, as most applications do), so a move between
clusters shows up as records processed twice or never.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from mm_client.kafka import error_code, new_consumer, new_producer

from mm.drill.accounting import RecordId

_SILENT = {"log_level": 0, "logger": lambda *_a: None}


def encode(producer: str, seq: int) -> bytes:
    return json.dumps({"p": producer, "s": seq, "t": time.time()}).encode()


def decode(value: bytes | None) -> tuple[RecordId, float] | None:
    """((producer, seq), produce time), or None for a value the drill did not write."""
    try:
        doc = json.loads(value or b"")
        return (str(doc["p"]), int(doc["s"])), float(doc["t"])
    except (ValueError, KeyError, TypeError):
        return None


class SeqProducer(threading.Thread):
    """Writes ``rate`` records/s until stopped or the cluster stops answering.

    ``txn_size`` > 0 makes it transactional: transactions of that many records,
    every ``abort_every``-th one aborted (its offsets stay as gaps on the topic; 0:
    none).
    """

    def __init__(
        self,
        name: str,
        client: Mapping[str, str],
        topic: str,
        rate: float,
        *,
        txn_size: int = 0,
        abort_every: int = 4,
        transactional_id: str | None = None,
    ) -> None:
        super().__init__(name=f"drill-producer-{name}", daemon=True)
        self.producer_id, self.client, self.topic, self.rate = name, client, topic, rate
        self.txn_size, self.abort_every = txn_size, abort_every
        self.transactional_id = transactional_id or f"drill-{name}"
        self.acked: dict[RecordId, float] = {}
        self.aborted = 0
        self.error: str | None = None
        self._halt = threading.Event()
        self._lock = threading.Lock()

    def stop(self) -> None:
        self._halt.set()

    def acked_snapshot(self) -> dict[RecordId, float]:
        with self._lock:
            return dict(self.acked)

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is None:
            decoded = decode(msg.value())
            if decoded is not None:
                with self._lock:
                    self.acked[decoded[0]] = time.time()

    def run(self) -> None:
        conf: dict[str, Any] = {
            **self.client,
            "linger.ms": 5,
            # a retried produce request that had been written must not write the record
            # again: the drill counts records by identity, and a duplicate on A reads as
            # a group processing a record twice (a CI run: 92 duplicates on A, so a
            # failover FAIL with every translation exact)
            "enable.idempotence": True,
            # a dead cluster: give up on a record within seconds, not the default 5 min
            "message.timeout.ms": 5000,
            **_SILENT,
        }
        if self.txn_size:
            conf["transactional.id"] = self.transactional_id
            conf["transaction.timeout.ms"] = 10_000
        producer = new_producer(conf)
        try:
            if self.txn_size:
                producer.init_transactions(30)
                self._transactional(producer)
            else:
                self._plain(producer)
        except KafkaException as exc:
            self.error = str(exc)
        finally:
            producer.flush(6)

    def _pace(self, seq: int, started: float) -> None:
        ahead = started + seq / self.rate - time.monotonic()
        if ahead > 0:
            self._halt.wait(ahead)

    def _plain(self, producer: Any) -> None:
        started, seq = time.monotonic(), 0
        while not self._halt.is_set():
            producer.produce(
                self.topic, encode(self.producer_id, seq), on_delivery=self._on_delivery
            )
            producer.poll(0)
            seq += 1
            self._pace(seq, started)

    def _transactional(self, producer: Any) -> None:
        started, seq, txn = time.monotonic(), 0, 0
        while not self._halt.is_set():
            producer.begin_transaction()
            batch: list[RecordId] = []
            for _ in range(self.txn_size):
                producer.produce(self.topic, encode(self.producer_id, seq))
                batch.append((self.producer_id, seq))
                seq += 1
                self._pace(seq, started)
            txn += 1
            if self.abort_every and txn % self.abort_every == 0:
                producer.abort_transaction(10)
                self.aborted += len(batch)
                continue
            producer.commit_transaction(10)
            now = time.time()
            with self._lock:
                self.acked.update(dict.fromkeys(batch, now))


@dataclass
class Processed:
    """One record a group processed: where, and when."""

    record: RecordId
    cluster: str
    partition: int
    offset: int
    at: float


@dataclass
class GroupLog:
    """Everything one group processed, across clusters, in order."""

    group: str
    speed: str
    processed: list[Processed] = field(default_factory=list)
    positions: list[tuple[float, str, int]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, p: Processed) -> None:
        with self.lock:
            self.processed.append(p)

    def snapshot(self) -> list[Processed]:
        with self.lock:
            return list(self.processed)

    def drop(self, invisible: Callable[[Processed], bool]) -> int:
        """Forget deliveries Apache Kafka would never have made; how many."""
        with self.lock:
            kept = [p for p in self.processed if not invisible(p)]
            dropped = len(self.processed) - len(kept)
            self.processed[:] = kept
        return dropped


class GroupConsumer(threading.Thread):
    """One member of ``group`` on one cluster, processing at its group's speed.

    ``delay`` seconds per record (0: as fast as it can); ``stop_after`` seconds after
    its first record makes it stop for good (the group "stopped half-way"). Counted
    from the first record, not the start: a member that leaves before its group's
    join completes leaves the embedded broker's group unable to complete a join again.
    It commits what it processed every ``commit_every`` seconds and when it stops,
    never before processing (at-least-once).
    """

    def __init__(
        self,
        log: GroupLog,
        cluster: str,
        client: Mapping[str, str],
        topic: str,
        *,
        delay: float = 0.0,
        stop_after: float | None = None,
        commit_every: float = 0.5,
    ) -> None:
        super().__init__(name=f"drill-{log.group}-{cluster}", daemon=True)
        self.log, self.cluster, self.client, self.topic = log, cluster, client, topic
        self.delay, self.stop_after, self.commit_every = delay, stop_after, commit_every
        self.error: str | None = None
        self.first_at: float | None = None
        self._halt = threading.Event()
        self._last_commit = True

    def stop(self, *, commit: bool = True) -> None:
        """Stop after the record in hand; ``commit=False``: without committing what was
        processed since the last commit (the application crashed)."""
        self._last_commit = commit
        self._halt.set()

    def run(self) -> None:
        consumer = new_consumer(
            {
                **self.client,
                "group.id": self.log.group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 500,
                **_SILENT,
            }
        )
        last_commit = time.monotonic()
        processing_since: float | None = None
        dirty = False
        # next offset per partition after what was *processed*: a plain commit() would
        # commit the position, past records fetched but not processed yet
        done: dict[int, int] = {}
        try:
            consumer.subscribe([self.topic])
            while not self._halt.is_set():
                if (
                    self.stop_after is not None
                    and processing_since is not None
                    and time.monotonic() - processing_since > self.stop_after
                ):
                    break
                for m in consumer.consume(100, 0.2):
                    err = m.error()
                    if err is not None:
                        if err.code() != KafkaError._PARTITION_EOF:
                            self.error = str(err)
                        continue
                    decoded = decode(m.value())
                    if decoded is None:
                        continue
                    if self.delay:
                        self._halt.wait(self.delay)
                    now = time.time()
                    self.first_at = self.first_at or now
                    processing_since = processing_since or time.monotonic()
                    where = (m.partition() or 0, m.offset() or 0)  # set on fetched records
                    self.log.add(Processed(decoded[0], self.cluster, *where, now))
                    done[where[0]] = where[1] + 1
                    dirty = True
                    if self._halt.is_set():
                        break
                if dirty and time.monotonic() - last_commit >= self.commit_every:
                    self._commit(consumer, done)
                    dirty, last_commit = False, time.monotonic()
            if dirty and self._last_commit:
                self._commit(consumer, done)
        except KafkaException as exc:
            self.error = str(exc)
        finally:
            # a crashed application does not leave its group politely
            if self._last_commit:
                try:
                    consumer.close()
                except (KafkaException, RuntimeError) as exc:
                    self.error = self.error or f"close: {exc}"

    def _commit(self, consumer: Any, done: dict[int, int]) -> None:
        offsets = [TopicPartition(self.topic, p, o) for p, o in sorted(done.items())]
        try:
            consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            # a dead cluster or a rebalance: the next commit (or the move) covers it
            if error_code(exc) != "_NO_OFFSET":
                self.error = f"commit: {exc}"


class TargetWatcher(threading.Thread):
    """Reads a mirrored topic on B (read_committed) as records arrive: which records B
    holds and, per record, the replication latency (readable on B minus produced)."""

    def __init__(
        self,
        client: Mapping[str, str],
        topic: str,
        partitions: int,
        group: str = "mm-drill-watcher",
    ) -> None:
        super().__init__(name=f"drill-watch-{topic}", daemon=True)
        self.client, self.topic, self.partitions, self.group = client, topic, partitions, group
        self.seen: dict[RecordId, tuple[int, int]] = {}  # -> (partition, offset on B)
        self.latency: list[tuple[float, float]] = []  # (arrival time, ms)
        self._halt = threading.Event()
        self._lock = threading.Lock()

    def stop(self) -> None:
        self._halt.set()

    def snapshot(self) -> dict[RecordId, tuple[int, int]]:
        with self._lock:
            return dict(self.seen)

    def forget(self, invisible: Callable[[tuple[int, int]], bool]) -> int:
        """Forget records whose copy on B is not committed there; how many."""
        with self._lock:
            gone = [r for r, where in self.seen.items() if invisible(where)]
            for r in gone:
                del self.seen[r]
        return len(gone)

    def run(self) -> None:
        consumer = new_consumer(
            {
                **self.client,
                # assigned, never committed: no group is created, but librdkafka wants one
                "group.id": self.group,
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "fetch.wait.max.ms": 50,
                **_SILENT,
            }
        )
        try:
            consumer.assign([TopicPartition(self.topic, p, 0) for p in range(self.partitions)])
            while not self._halt.is_set():
                for m in consumer.consume(500, 0.2):
                    if m.error() is not None:
                        continue
                    decoded = decode(m.value())
                    if decoded is None:
                        continue
                    now = time.time()
                    with self._lock:
                        where = (m.partition() or 0, m.offset() or 0)  # set on fetched records
                        # a later copy wins: an earlier one was in a transaction the
                        # embedded broker served before aborting it (see Drill._kafka_view)
                        first = self.seen.get(decoded[0]) is None
                        self.seen[decoded[0]] = where
                        if first:
                            self.latency.append((now, (now - decoded[1]) * 1000.0))
        finally:
            consumer.close()


def wait_until(check: Callable[[], bool], timeout: float, step: float = 0.25) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(step)
    return check()


def end_dead_sessions(
    client: Mapping[str, str], groups: list[str], topic: str, timeout: float
) -> dict[str, str | None]:
    """Join each group and leave it politely, so it is Empty; per group None, or why not.

    The drill's consumers on A died with it and never left their groups. Apache Kafka
    ends such members' sessions after ``session.timeout.ms``; the embedded broker keeps
    the group STABLE for ever, and `mm failback` rightly refuses a group that is not
    idle. A member that joins, is assigned and leaves takes the dead ones out with it.
    Nothing is committed (auto-commit off). The groups join at the same time: a join
    can take a session timeout.
    """
    results: dict[str, str | None] = {}

    def one(group: str) -> None:
        consumer = new_consumer(
            {
                **client,
                "group.id": group,
                "enable.auto.commit": False,
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 500,
                **_SILENT,
            }
        )
        try:
            consumer.subscribe([topic])
            deadline = time.monotonic() + timeout
            while not consumer.assignment() and time.monotonic() < deadline:
                consumer.poll(0.2)
            results[group] = None if consumer.assignment() else f"not assigned in {timeout:.0f}s"
        except KafkaException as exc:
            results[group] = str(exc)
        finally:
            consumer.close()

    threads = [threading.Thread(target=one, args=(g,), daemon=True) for g in groups]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout + 30)
    return {g: results.get(g, "did not finish") for g in groups}


def restart_transactional(client: Mapping[str, str], transactional_id: str, timeout: float) -> None:
    """What a transactional application does when it starts again on A: initialise a
    producer with its transactional.id. That fences the producer that died with A and
    aborts the transaction it left open, which otherwise holds every read_committed
    reader of those partitions below it (Apache Kafka aborts it on its own after
    ``transaction.timeout.ms``; the embedded broker never does)."""
    producer = new_producer({**client, "transactional.id": transactional_id, **_SILENT})
    producer.init_transactions(timeout)
    producer.flush(timeout)
