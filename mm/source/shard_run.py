"""Mirrors a shard's ranges with one transactional producer, one transaction at a time.

A *shard* (:mod:`mm.source.shard_map`) is a stable set of target partitions written
through one ``transactional.id``, as a Kafka Connect exactly-once source task
(KIP-618) writes all its partitions through one. :class:`ShardRun` copies the
ranges of one shard's partitions:

1. **Fence.** A new producer's ``init_transactions`` fences every older producer of
   the shard's id and aborts what it left open. It then asks ``still_newest``
   whether the shard map it was given is still the newest recorded: a newer
   generation has fenced (or will fence) this id, so the run stops
   (:class:`ShardMapChangedError`) rather than write under a map nobody follows.
   A pooled producer is reused without fencing while it stays valid; one that
   turns out fenced (or whose partitions' positions moved under it) is dropped and
   the run starts over with a new one.
2. **Read the truth.** The committed position of every partition of the shard (the
   flow's state group on the target) is read in one request *after* fencing, and
   each range is prepared from it (:func:`mm.source.task.prepare_range`).
3. **Copy.** One consumer reads all the shard's ranges; each record goes to its
   target partition through the shard's producer. A transaction closes after
   ``max_records_per_txn`` records or ``max_bytes_per_txn`` bytes of the shard,
   ``max_seconds_per_txn`` after it began (well inside ``transaction.timeout.ms``:
   records trickling in from a distant source never keep it open until the
   coordinator aborts it), after ``max_sync_points_per_txn`` sync points of one
   partition, or when every range is done. Its commit carries
   every partition's next source offset (with that partition's syncs in the
   offset's metadata, :mod:`mm.source.state`) in the same transaction as the
   records, so records and positions move together or not at all.

Why the offset syncs stay exact: only this producer writes a partition of the
shard, so inside one transaction a partition's records land contiguously, and the
first record's offset (its delivery report) places all of them
(:mod:`mm.source.runs`), partition by partition.

A partition that cannot go on stops alone (its result carries the error; the
others go on): a record too large for the target is the partition's end for this
batch, after the records before it commit; a position found past the source log
end aborts the open transaction (which held other partitions' records too), and
the others copy again from their committed positions.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition
from mm_client.kafka import cause_code, is_refusal, kafka_cause
from mm_client.kafka.pool import ClientPool
from mm_client.records import OffsetSync

from mm.errors import KafkaOperationError, MirrorError
from mm.kafka.errors import wrap
from mm.kafka.txn import Transaction
from mm.source.clients import DEFAULT_CLIENTS, MirrorClients
from mm.source.position import Probes
from mm.source.runs import RunTracker
from mm.source.spec import FlowRuntime, RangeSpec
from mm.source.state import encode_state
from mm.source.task import (
    _TARGET_SYNCS_LOCK,
    FENCED_CODES,
    PartitionStoppedError,
    RangeResult,
    RecordTooLargeError,
    _check_loss,
    _consumer_conf,
    _dead_letter,
    _Delivery,
    _floors,
    _group_metadata,
    _known_state,
    _past_end,
    _produce_waiting,
    _quick,
    _raise_floor,
    _SourceReader,
    _SourceSyncWriter,
    prepare_range,
    read_states,
    start_sync_producer,
    sync_headers,
    transactional_producer_conf,
)

Key = tuple[str, int]
_CONSUME_BATCH = 5000
#: ranges prepared at once (each may probe both clusters: a new partition, a recovery)
PREPARE_THREADS = 8


class ShardMapChangedError(MirrorError):
    """The shard map this run was planned with is no longer the newest recorded."""


def shard_producer_conf(rt: FlowRuntime, transactional_id: str) -> dict[str, Any]:
    """The shard's transactional producer: the target's settings (the user's win where
    they set them) with the id and a bulk copy's batching."""
    return transactional_producer_conf(_quick(rt.target_producer), transactional_id)


class _ShardWriter:
    """A pooled shard producer and, per target partition, what it committed last."""

    __slots__ = ("producer", "states")

    def __init__(self, producer: Any) -> None:
        self.producer = producer
        # (next source offset, metadata) as committed by this producer; None = unknown
        self.states: dict[Key, tuple[int, str | None] | None] = {}

    @staticmethod
    def shard_factory(clients: MirrorClients) -> Callable[[dict[str, Any]], _ShardWriter]:
        return lambda conf: _ShardWriter(clients.producer(conf))

    def close(self) -> None:
        close = getattr(self.producer, "close", None)
        if close is not None:
            with warnings.catch_warnings():
                # a producer is dropped because it failed (often: fenced); that
                # aborting its transaction fails too is expected, not news
                warnings.simplefilter("ignore", RuntimeWarning)
                close()


class _Cursor:
    """One range of the shard being copied: where it stands, and what the open
    transaction holds of it."""

    __slots__ = (
        "bytes",
        "committed",
        "delivery",
        "done",
        "end",
        "expected",
        "fast_max",
        "first_event",
        "idle_since",
        "in_txn",
        "key",
        "last_in_range",
        "last_off",
        "n",
        "points",
        "result",
        "run_len",
        "run_start",
        "saved",
        "spec",
        "stop_error",
        "syncs",
        "tracker",
    )

    def __init__(
        self,
        spec: RangeSpec,
        result: RangeResult,
        syncs: _SourceSyncWriter | None,
        start: int,
        committed: int,
    ) -> None:
        self.spec, self.result, self.syncs = spec, result, syncs
        self.key = (spec.topic, spec.partition)
        # next source offset not yet accounted for: past the last mirrored record, or
        # past a gap the fetch proved (EOF, or a record at/after the range end)
        self.expected = start
        # the position committed for the partition; -1: none, so whatever the range
        # ends at is committed (even a stop at its first record)
        self.committed = committed
        self.end = spec.end
        self.last_in_range = spec.end - 1
        self.fast_max = spec.max_record_bytes or 1 << 62
        self.first_event = True
        self.done = False
        self.stop_error: str | None = None
        self.idle_since = time.monotonic()
        self.begin()

    def begin(self) -> None:
        """A new transaction: nothing of this range in it yet."""
        self.tracker = RunTracker()
        self.delivery = _Delivery()
        self.n = self.bytes = 0
        self.in_txn = False
        self.run_start = self.last_off = -2
        self.run_len = 0
        self.points = 0
        r = self.result
        # what an abort of the transaction puts back (losses are reported once)
        self.saved = (
            self.expected,
            self.first_event,
            r.lost,
            r.lost_from,
            r.lost_to,
            r.dead_lettered,
        )

    def rewind(self) -> None:
        """The open transaction was aborted: back to where it began."""
        r = self.result
        (self.expected, self.first_event, r.lost, r.lost_from, r.lost_to, r.dead_lettered) = (
            self.saved
        )
        self.done = False
        self.stop_error = None
        self.begin()

    def new_run(self, off: int) -> None:
        if self.run_len:
            self.tracker.add_contiguous(self.run_start, self.run_len)
        self.run_start = off
        self.run_len = 0
        self.points += 2

    def close_run(self) -> None:
        if self.run_len:
            self.tracker.add_contiguous(self.run_start, self.run_len)
            self.run_len = 0
            self.run_start = self.last_off = -2


class _PastEnd(Exception):
    """A fetch found a range's position past its source log end (see _Copy._event)."""

    def __init__(self, cursor: _Cursor, message: str) -> None:
        super().__init__(message)
        self.cursor = cursor


class ShardRun:
    """Mirror ``specs`` (ranges of distinct target partitions of one shard) through
    the producer of ``transactional_id`` (module doc)."""

    def __init__(
        self,
        rt: FlowRuntime,
        transactional_id: str,
        specs: Sequence[RangeSpec],
        *,
        pool: ClientPool,
        clients: MirrorClients = DEFAULT_CLIENTS,
        log: Callable[..., None] | None = None,
        stop_log: Callable[..., None] | None = None,
        routine_log: Callable[..., None] | None = None,
        still_newest: Callable[[], bool] | None = None,
    ) -> None:
        keys = [(s.target_topic, s.partition) for s in specs]
        if len(set(keys)) != len(keys):
            raise ValueError(f"a shard's ranges must be of distinct target partitions: {keys}")
        self.rt, self.transactional_id, self.specs = rt, transactional_id, list(specs)
        self.pool, self.clients, self.log, self.still_newest = pool, clients, log, still_newest
        # a partition's stop is an error to the operator (it stays until fixed)
        self.stop_log = stop_log or log
        # what a healthy mirror does every day (an idle position refreshed)
        self.routine_log = routine_log or log
        self.results = {
            (s.topic, s.partition): RangeResult(
                s.topic, s.partition, s.target_topic, s.start, s.end
            )
            for s in specs
        }
        self._source_key = {(s.target_topic, s.partition): (s.topic, s.partition) for s in specs}
        # seconds per step of the run (fence, prepare, copy, syncs): the task logs them
        self.timings: dict[str, float] = {}
        self._lap_at = time.monotonic()
        # the ranges that stopped (their results' ``error``), by (topic, partition)
        self.stops: dict[Key, PartitionStoppedError] = {}
        # (target topic, partition) -> (committed position, metadata) its range began from
        self._found: dict[Key, tuple[int, str | None]] = {}

    def run(self) -> dict[Key, RangeResult]:
        """Mirror every range; a range that stopped has its result's ``error`` set.
        Raises on what stops the whole shard (Spark retries the task)."""
        conf = shard_producer_conf(self.rt, self.transactional_id)
        factory = _ShardWriter.shard_factory(self.clients)
        reused = False
        try:
            with self.pool.lease("txn-producer", conf, factory) as lease:
                reused = not lease.fresh
                self._run(lease.client, lease.fresh)
                return self.results
        except (KafkaOperationError, KafkaException, SystemError) as exc:
            # (SystemError: a fatal error raised while librdkafka served a callback)
            if not reused or cause_code(exc) not in FENCED_CODES:
                raise
            self._note(
                "cached shard producer's state is out of date (another writer, or a "
                "position moved); initialising a new one",
                error=str(kafka_cause(exc)),
            )
        with self.pool.lease("txn-producer", conf, factory) as lease:
            self._run(lease.client, True)
            return self.results

    def range_log(self, spec: RangeSpec) -> Callable[..., None] | None:
        """``log`` with the range's source partition in every event (as the task's
        per-range events always carried)."""
        log = self.log
        if log is None:
            return None

        def event(text: str, **kw: Any) -> None:
            kw.setdefault("topic", spec.topic)
            kw.setdefault("partition", spec.partition)
            log(text, **kw)

        return event

    def _note(self, event: str, **kw: Any) -> None:
        if self.log is not None:
            self.log(event, transactional_id=self.transactional_id, **kw)

    def _lap(self, step: str) -> None:
        now = time.monotonic()
        self.timings[step] = round(self.timings.get(step, 0.0) + now - self._lap_at, 3)
        self._lap_at = now

    def _run(self, writer: _ShardWriter, fresh: bool) -> None:
        rt = self.rt
        self._lap_at = time.monotonic()
        start_sync_producer(rt, self.clients)
        if fresh:
            try:
                Transaction(writer.producer).init(self.specs[0].target_topic, 60)
            except KafkaException as exc:
                raise wrap(
                    exc,
                    f"init transactions of shard {self.transactional_id} on cluster {rt.target}",
                ) from exc
            self._lap("fence")
            if self.still_newest is not None and not self.still_newest():
                raise ShardMapChangedError(
                    f"shard {self.transactional_id} of flow {rt.source}->{rt.target} was "
                    "planned with a shard map that is no longer the newest recorded; the "
                    "next batch plans with the new one"
                )
            self._lap("map_check")
        syncs: list[_SourceSyncWriter] = []
        try:
            cursors = self._prepare(writer, syncs)
            self._lap("prepare")
            while cursors:
                cursors = self._copy(writer, cursors)
            self._lap("copy")
        finally:
            floors = _floors(self.pool)
            for s in self.specs:
                result = self.results[(s.topic, s.partition)]
                _raise_floor(
                    floors, (rt.transactional_id_prefix, s.target_topic, s.partition), result
                )
            # also when the run failed: what it committed gets its syncs
            for w in syncs:
                w.flush()
            self._lap("syncs")
        for tkey, (committed, metadata) in self._found.items():
            r = self.results[self._source_key[tkey]]
            if r.error is None:
                writer.states[tkey] = _known_state(committed, metadata, r)

    def _prepare(self, writer: _ShardWriter, syncs: list[_SourceSyncWriter]) -> list[_Cursor]:
        """Every range prepared from its committed state (read after the fence), several
        at once (their probes wait on the network); the positions they record committed
        in one transaction before anything is copied. The cursors of the ranges with
        records to copy, in the ranges' order."""
        rt = self.rt
        states = read_states(rt, self.specs, clients=self.clients, pool=self.pool)
        self._found.clear()
        positions: list[TopicPartition] = []
        lock = threading.Lock()

        def commit(spec: RangeSpec, position: int, metadata: str) -> None:
            with lock:
                positions.append(
                    TopicPartition(spec.target_topic, spec.partition, position, metadata=metadata)
                )

        def one(spec: RangeSpec) -> _Cursor | None:
            tkey = (spec.target_topic, spec.partition)
            result = self.results[(spec.topic, spec.partition)]
            w = None
            if not rt.offset_syncs_on_target:
                key = (rt.transactional_id_prefix, spec.target_topic, spec.partition)
                w = _SourceSyncWriter(rt, spec, key, self.clients)
                with lock:
                    syncs.append(w)
            cached = writer.states.pop(tkey, None)  # unknown until this range ends well
            try:
                start, committed, metadata = prepare_range(
                    rt, spec, commit, states[tkey], cached, result, w, self.clients,
                    self.pool, self.range_log(spec), probes,
                )  # fmt: skip
            except PartitionStoppedError as exc:
                self._stopped(result, exc)
                return None
            self._found[tkey] = (committed, metadata)
            if start >= spec.end:
                return None
            floor = start if committed >= 0 or start != spec.start else -1
            return _Cursor(spec, result, w, start, floor)

        workers = max(1, min(PREPARE_THREADS, len(self.specs)))
        probes = Probes(rt, self.clients)
        try:
            # the partitions without a position (new ones, mostly) probe both logs
            new = [s for s in self.specs if states[(s.target_topic, s.partition)][0] < 0]
            probes.prefetch("target", [TopicPartition(s.target_topic, s.partition) for s in new])
            probes.prefetch("source", [TopicPartition(s.topic, s.partition) for s in new])
            with ThreadPoolExecutor(workers, thread_name_prefix="mm-prepare") as pool:
                prepared = list(pool.map(one, self.specs))
        finally:
            probes.close()
        if positions:
            try:
                Transaction(writer.producer).commit_positions(
                    positions, _group_metadata(rt, self.clients, self.pool), 60
                )
            except KafkaException as exc:
                where = ", ".join(f"{tp.topic}[{tp.partition}]" for tp in positions[:3])
                raise wrap(exc, f"commit positions of {where} on cluster {rt.target}") from exc
        if self.routine_log is not None:
            for spec in self.specs:
                result = self.results[(spec.topic, spec.partition)]
                if result.refreshed:
                    self.routine_log(
                        "mirror position refreshed", topic=spec.topic, partition=spec.partition,
                        target_topic=spec.target_topic, position=result.position,
                    )  # fmt: skip
        return [c for c in prepared if c is not None]

    def _stopped(self, result: RangeResult, stop: PartitionStoppedError) -> None:
        result.error = str(stop)
        self.stops[(result.topic, result.partition)] = stop
        if self.stop_log is not None:
            self.stop_log(
                "partition stopped",
                topic=result.topic,
                partition=result.partition,
                error=result.error,
            )

    def _copy(self, writer: _ShardWriter, cursors: list[_Cursor]) -> list[_Cursor]:
        """Copy ``cursors`` to their ends; the cursors to copy again (from their
        committed positions) when one partition's stop aborted a transaction."""
        with self.pool.lease(
            "source-consumer",
            _consumer_conf(self.rt),
            _SourceReader.factory(self.clients),
            reset=_SourceReader.reset,
        ) as lease:
            copy = _Copy(self, writer.producer, lease.client, cursors)
            try:
                copy.run()
            except _PastEnd as exc:
                Transaction(writer.producer).abort(30)
                self._stopped(exc.cursor.result, PartitionStoppedError(str(exc), exc.cursor.result))
                again = []
                for c in cursors:
                    if c is exc.cursor:
                        continue
                    if not _finished(c):
                        c.rewind()
                        again.append(c)
                    elif c.stop_error is not None:
                        self._stopped(c.result, RecordTooLargeError(c.stop_error, c.result))
                return again
        for c in cursors:
            if c.stop_error is not None:
                self._stopped(c.result, RecordTooLargeError(c.stop_error, c.result))
        return []


def _finished(c: _Cursor) -> bool:
    """Done with nothing left in the open transaction (its end is committed)."""
    return c.done and not c.in_txn and c.expected <= c.committed


class _Copy:
    """One pass of the copy loop over a shard's cursors (ShardRun._copy)."""

    def __init__(
        self, run: ShardRun, producer: Any, reader: _SourceReader, cursors: list[_Cursor]
    ) -> None:
        self.run_, self.rt, self.producer, self.reader = run, run.rt, producer, reader
        self.consumer = reader.consumer
        self.cursors = {c.key: c for c in cursors}
        self.txn = Transaction(producer)
        self.in_txn = False
        # what the open transaction holds, and when it began (monotonic)
        self.records = 0
        self.bytes = 0
        self.began = 0.0
        self.group_metadata = _group_metadata(self.rt, run.clients, run.pool)

    def run(self) -> None:
        consumer = self.consumer
        for topic in sorted({c.spec.topic for c in self.cursors.values()} - self.reader.topics):
            # metadata first: a fetch assigned before the leader is known waits ~0.5 s
            consumer.list_topics(topic, timeout=30)
            self.reader.topics.add(topic)
        consumer.assign([TopicPartition(t, p, c.expected) for (t, p), c in self.cursors.items()])
        open_ = [c for c in self.cursors.values() if not c.done]
        paused: list[TopicPartition] = []
        try:
            while open_:
                msgs = consumer.consume(_CONSUME_BATCH, 0.02)
                if not msgs:
                    self._check_idle(open_)
                else:
                    self._take(msgs)
                if self.in_txn and time.monotonic() - self.began >= self.rt.max_seconds_per_txn:
                    self.commit()  # records trickle in: the coordinator must not abort it
                still = [c for c in open_ if not c.done]
                if len(still) != len(open_):
                    # stop fetching what is done (an assigned partition is fetched on)
                    ended = [TopicPartition(*c.key) for c in open_ if c.done]
                    consumer.pause(ended)
                    paused += ended
                open_ = still
            self.commit()
        finally:
            if paused:
                # a pause outlives the assignment: the pooled consumer's next user
                # would never be served these partitions
                consumer.resume(paused)
        consumer.unassign()

    def _check_idle(self, open_: list[_Cursor]) -> None:
        now = time.monotonic()
        for c in open_:
            if now - c.idle_since > self.rt.fetch_timeout_s:
                raise KafkaOperationError(
                    f"no data from {c.spec.topic}[{c.spec.partition}] at offset {c.expected} "
                    f"for {self.rt.fetch_timeout_s:.0f}s although the planner saw data up to "
                    f"{c.end}",
                    code="_TIMED_OUT",
                    retriable=True,
                )

    def _take(self, msgs: list[Message]) -> None:
        """Hand each record to its cursor (the fast path inline: it runs per record)."""
        cursors = self.cursors
        produce = self.producer.produce
        max_records = self.rt.max_records_per_txn
        max_bytes = self.rt.max_bytes_per_txn
        max_points = self.rt.max_sync_points_per_txn
        now = time.monotonic()
        c: _Cursor | None = None
        ckey: Key | None = None
        for m in msgs:
            key = (m.topic(), m.partition())
            if key != ckey:
                ckey, c = key, cursors.get(key)  # type: ignore[assignment,arg-type]
            if c is None or c.done:
                continue  # fetched before its range ended
            c.idle_since = now
            off: int = m.offset()  # type: ignore[assignment]
            if c.n and m.error() is None and c.expected <= off < c.end:
                value = m.value()
                k = m.key()
                size = (len(value) if value else 0) + (len(k) if k else 0)
                if size <= c.fast_max:
                    try:
                        produce(
                            c.spec.target_topic,
                            value,
                            k,
                            c.spec.partition,
                            timestamp=m.timestamp()[1],
                            headers=m.headers(),
                        )
                    except BufferError:
                        _produce_waiting(
                            self.producer,
                            c.spec.target_topic,
                            value,
                            k,
                            c.spec.partition,
                            timestamp=m.timestamp()[1],
                            headers=m.headers(),
                        )
                    except KafkaException as exc:
                        raise wrap(
                            exc,
                            f"produce to {c.spec.target_topic}[{c.spec.partition}] "
                            f"on cluster {self.rt.target}",
                        ) from exc
                    if off != c.last_off + 1:
                        c.new_run(off)
                    c.run_len += 1
                    c.last_off = off
                    c.n += 1
                    c.bytes += size
                    c.expected = off + 1
                    self.records += 1
                    self.bytes += size
                    if off == c.last_in_range:
                        c.done = True
                    if (
                        self.records >= max_records
                        or self.bytes >= max_bytes
                        or c.points >= max_points
                    ):
                        self.commit()
                    continue
            self._general(c, m, off)
            if self.records >= max_records or self.bytes >= max_bytes or c.points >= max_points:
                self.commit()
        self.producer.poll(0)

    def _general(self, c: _Cursor, m: Message, off: int) -> None:
        """Everything but a plain record continuing the range's open transaction:
        events, a transaction's first record of the range, its end, oversize."""
        err = m.error()
        spec = c.spec
        if err is not None and err.code() != KafkaError._PARTITION_EOF:
            # an error event may carry no offset (a refused fetch, say); the group is
            # named: Apache Kafka checks DESCRIBE on it
            raise wrap(
                KafkaException(err),
                f"fetch {spec.topic}[{spec.partition}] on cluster "
                f"{self.rt.source} (reader group {self.rt.state_group})",
            )
        if off < c.expected:
            # the consumer reset to the log start: the position is past the log end
            # (the topic recreated or truncated since the planner looked)
            raise _PastEnd(
                c, _past_end(self.rt, spec, self.consumer, c.expected, self.run_.range_log(spec))
            )
        if c.first_event:
            c.first_event = False
            if off > c.expected:
                _check_loss(
                    self.consumer,
                    spec.topic,
                    spec.partition,
                    c.expected,
                    min(off, c.end),
                    c.result,
                    self.run_.log,
                )
                c.expected = min(off, c.end)
        if err is not None:  # end of what is readable now
            c.expected = max(c.expected, min(off, c.end))
            c.done = True
            return
        if off >= c.end:
            c.expected = c.end
            c.done = True
            return
        self._record(c, m, off)

    def _record(self, c: _Cursor, m: Message, off: int) -> None:
        spec, rt = c.spec, self.rt
        value, k = m.value(), m.key()
        size = (len(value) if value else 0) + (len(k) if k else 0)
        if spec.max_record_bytes and size > spec.max_record_bytes:
            reason = (
                f"record {spec.topic}[{spec.partition}]@{off} is {size} bytes; target topic "
                f"{spec.target_topic} accepts at most {spec.max_record_bytes} (max.message.bytes)"
            )
            if rt.errors_tolerance != "all" or not rt.dead_letter_topic:
                c.stop_error = (
                    f"{reason}. Nothing from this offset on is mirrored for this partition "
                    "(set errors.tolerance=all and errors.deadletterqueue.topic.name to divert "
                    "such records; or skip this record, leaving it out of the target: "
                    f"`mm position -c <config> --flow {rt.source}->{rt.target} --topic "
                    f"{spec.topic} --set {spec.partition}={off + 1}`, while the mirror runs "
                    "or not)"
                )
                c.done = True
                return
            self._begin(c)
            _dead_letter(self.producer, rt.dead_letter_topic, m, reason)
            c.result.dead_lettered += 1
            if self.run_.log is not None:
                self.run_.log(
                    "record sent to the dead-letter topic",
                    topic=spec.topic,
                    partition=spec.partition,
                    offset=off,
                    size=size,
                    dead_letter_topic=rt.dead_letter_topic,
                )
            c.expected = off + 1
            c.done = off == c.last_in_range
            return
        self._begin(c)
        # the range's first record in this transaction: its delivery report gives the
        # target offset its syncs start from
        _produce_waiting(
            self.producer,
            spec.target_topic,
            value,
            k,
            spec.partition,
            on_delivery=c.delivery.on_first,
            timestamp=m.timestamp()[1],
            headers=m.headers(),
        )
        c.new_run(off)
        c.run_len = 1
        c.last_off = off
        c.n += 1
        c.bytes += size
        c.expected = off + 1
        self.records += 1
        self.bytes += size
        c.done = off == c.last_in_range

    def _begin(self, c: _Cursor) -> None:
        if not self.in_txn:
            self.txn.begin()
            self.in_txn = True
            self.began = time.monotonic()
        c.in_txn = True

    def commit(self) -> None:
        """Commit the open transaction with every moved position; start the next."""
        cursors = list(self.cursors.values())
        moved = [c for c in cursors if c.in_txn or c.expected > c.committed]
        if not moved:
            return
        for c in cursors:
            c.close_run()
        txn, rt = self.txn, self.rt
        if self.in_txn:
            self._delivered(cursors)
        else:
            txn.begin()  # positions alone (gaps, losses, a stop at the first record)
        positions, written = [], []
        for c in moved:
            metadata = ""
            if c.in_txn:
                pairs = c.tracker.syncs(c.delivery.first)
                batch_id = uuid.uuid4().hex[:12]
                metadata = encode_state(batch_id, pairs)
                written.append((c, pairs, batch_id))
            positions.append(
                TopicPartition(c.spec.target_topic, c.spec.partition, c.expected, metadata=metadata)
            )
        lock = _TARGET_SYNCS_LOCK if rt.offset_syncs_on_target else contextlib.nullcontext()
        try:
            with lock:
                if rt.offset_syncs_on_target:
                    for c, pairs, batch_id in written:
                        for i, (u, d) in enumerate(pairs):
                            s = OffsetSync(c.spec.topic, c.spec.partition, u, d)
                            self.producer.produce(
                                rt.offset_syncs_topic,
                                s.value_bytes(),
                                s.key_bytes(),
                                0,
                                headers=sync_headers(batch_id, i == 0),
                            )
                # "only the last committed transaction's syncs may be unwritten" (and
                # the positions of gaps carry none): the previous ones acknowledged first
                txn.commit(
                    positions,
                    self.group_metadata,
                    offsets_timeout=60,
                    commit_timeout=120,
                    before_commit=self._flush_syncs,
                )
        except KafkaException as exc:
            raise wrap(
                exc,
                f"commit transaction of shard {self.run_.transactional_id} on cluster {rt.target}",
            ) from exc
        self.in_txn = False
        self.records = self.bytes = 0
        self._committed(moved, written)

    def _delivered(self, cursors: list[_Cursor]) -> None:
        txn = self.txn
        remaining = txn.delivered(120)
        failed = next((c for c in cursors if c.delivery.error is not None), None)
        error = txn.cause(None if failed is None else failed.delivery.error)
        lost_first = [c for c in cursors if c.tracker.count and c.delivery.first < 0]
        if remaining or error is not None or lost_first:
            txn.abort(30)
            code = error.name() if error else "_TIMED_OUT"
            # named by a partition it was writing (the first that failed, if known)
            where = failed or next((c for c in cursors if c.in_txn), cursors[0])
            raise KafkaOperationError(
                f"produce to {where.spec.target_topic}[{where.spec.partition}] on cluster "
                f"{self.rt.target} failed: "
                f"{error.str() if error else f'{remaining} records unacknowledged'} "
                f"(shard {self.run_.transactional_id})",
                code=code,
                retriable=not is_refusal(code),
            )

    def _flush_syncs(self) -> None:
        for c in self.cursors.values():
            if c.syncs is not None:
                c.syncs.flush()

    def _committed(
        self, moved: list[_Cursor], written: list[tuple[_Cursor, list[tuple[int, int]], str]]
    ) -> None:
        for c in moved:
            r = c.result
            r.position = c.committed = c.expected
            r.metadata = ""
        for c, pairs, batch_id in written:
            r = c.result
            r.metadata = encode_state(batch_id, pairs)
            r.records += c.tracker.count
            r.bytes += c.bytes
            r.transactions += 1
            r.syncs += len(pairs)
            if c.syncs is not None:
                c.syncs.write(pairs, batch_id)
        for c in self.cursors.values():
            c.begin()
