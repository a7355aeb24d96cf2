"""The shard map on the target cluster, and the fencing round (I/O for mm.source.shard_map).

The map of flow ``A->B`` is one record (key: the flow, value:
:meth:`ShardMap.to_json`) in the compacted topic ``mm-mirror-shards.A.internal`` on
B. It is only ever written inside a transaction of the flow's map writer, whose
transactional.id is ``<prefix>.shards``. That id is the lock between two drivers
of one flow: :meth:`ShardMapStore.claim` (``init_transactions``) fences the other
driver's writer and completes or aborts whatever map it was writing, so the map
read *after* the claim is the newest one and nobody else can record a map until
they claim in turn (which fences this writer, whose commit then fails).

:func:`settle` is the driver's round before a batch: claim, read, decide
(:func:`mm.source.shard_map.transition`), fence every id of the previous
generation when the generation changes, record the map. A shard's producer checks
after its own ``init_transactions`` that the map it was given is still the newest
recorded (:meth:`ShardMapStore.is_newest`): a newer one means another round has
fenced, or will fence, its id.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from mm_client.kafka.clients import new_consumer, new_producer

from mm.errors import MirrorError
from mm.kafka.errors import wrap
from mm.kafka.txn import Transaction
from mm.source.shard_map import (
    ShardMap,
    Transition,
    default_shard_count,
    parse_shard_map,
    transition,
)
from mm.source.spec import FlowRuntime

SHARDS_TOPIC = "mm-mirror-shards.{source}.internal"
SHARDS_TOPIC_CONFIG = {"cleanup.policy": "compact"}
#: ids fenced at once: init_transactions waits on the broker, not on this process
FENCE_THREADS = 16
#: seconds a recorded map may take to become visible to read_committed readers
VISIBLE_WAIT_SECONDS = 10.0


def shards_topic(source: str) -> str:
    return SHARDS_TOPIC.format(source=source)


def map_writer_id(prefix: str) -> str:
    return f"{prefix}.shards"


@dataclass(frozen=True)
class RecordedMap:
    """A map as recorded: ``offset`` is its record's offset in the shards topic."""

    map: ShardMap
    offset: int


class ShardMapStore:
    """Reads and records flow ``flow``'s shard map on the target."""

    def __init__(
        self,
        *,
        flow: str,
        source: str,
        prefix: str,
        producer_conf: Mapping[str, Any],
        consumer_conf: Mapping[str, Any],
        timeout: float = 60.0,
        reader_group: str | None = None,
        cluster: str = "the target",
    ) -> None:
        self.flow, self.topic, self.prefix = flow, shards_topic(source), prefix
        # the map is read with assign() only, but librdkafka still looks up the named
        # group's coordinator, which Apache Kafka authorizes (DESCRIBE on the group)
        self.reader_group = reader_group or f"mm-shard-map-reader.{flow}"
        # named in errors ("cluster B"): a refusal's line says where to grant the right
        self.cluster = cluster
        self._producer_conf = dict(producer_conf)
        self._consumer_conf = dict(consumer_conf)
        self.timeout = timeout
        self._writer: Any = None
        self._probe: Any = None  # a reader kept for end_offset()

    def claim(self) -> None:
        """Take the map writer's id (fencing another driver's writer, see module doc)."""
        self.close()
        conf = {
            **self._producer_conf,
            "transactional.id": map_writer_id(self.prefix),
            "enable.idempotence": True,
            "acks": "all",
        }
        # librdkafka's lines (a coordinator still loading: "GETPID ... retrying") go
        # to the structured log at debug, not raw to stderr
        writer = new_producer(conf)
        try:
            Transaction(writer).init(self.topic, self.timeout)
        except KafkaException as exc:
            raise wrap(
                exc,
                f"init transactions of the shard map writer {map_writer_id(self.prefix)} "
                f"(topic {self.topic}) on {self.cluster}",
            ) from None
        self._writer = writer

    def read(self) -> RecordedMap | None:
        """The newest committed map of the flow; None when none was ever recorded."""
        consumer = self._reader()
        try:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(self.topic, 0), timeout=self.timeout
            )
            newest: RecordedMap | None = None
            if high <= low:
                return None
            consumer.assign([TopicPartition(self.topic, 0, low)])
            deadline = time.monotonic() + self.timeout
            # to the end of what read_committed may read (the EOF event: records and a
            # transaction's marker can end below the high mark, and a consume() that
            # waits for more would wait out its whole timeout)
            at_end = False
            while not at_end:
                if time.monotonic() > deadline:
                    raise MirrorError(
                        f"reading the shard map from {self.topic} on {self.cluster}: not at"
                        f" its end (offset {high}) after {self.timeout:g}s"
                    )
                # consume() returns at its timeout unless it has all 500: a short one,
                # since the loop ends at the EOF event (a 0.5 s wait was half of a read)
                for msg in consumer.consume(500, 0.02):
                    err, offset, value = msg.error(), msg.offset(), msg.value()
                    if err is not None and err.code() == KafkaError._PARTITION_EOF:
                        at_end = True
                        continue
                    if err is not None or offset is None:
                        where = f"read the shard map from topic {self.topic} on {self.cluster}"
                        raise wrap(KafkaException(err), where)
                    if msg.key() == self.flow.encode() and value is not None:
                        where = f"{self.topic} offset {offset}"
                        newest = RecordedMap(parse_shard_map(value.decode(), where), offset)
            return newest
        except KafkaException as exc:
            raise wrap(
                exc, f"read the shard map from topic {self.topic} on {self.cluster}"
            ) from None
        finally:
            consumer.close()

    def record(self, shard_map: ShardMap) -> None:
        """Write ``shard_map`` in a transaction of the claimed writer."""
        if self._writer is None:
            raise RuntimeError("record() before claim()")
        writer = self._writer
        offsets: list[int] = []

        def delivered(err: Any, msg: Any) -> None:
            if err is None:
                offsets.append(msg.offset())

        try:
            writer.begin_transaction()
            writer.produce(self.topic, shard_map.to_json().encode(), self.flow.encode(),
                           partition=0, on_delivery=delivered)  # fmt: skip
            writer.commit_transaction(self.timeout)
        except KafkaException as exc:
            # fenced: another driver claimed the writer since; its round decides
            raise wrap(
                exc, f"record the shard map of {self.flow} in topic {self.topic} on {self.cluster}"
            ) from None
        if offsets:
            self._await_visible(offsets[0])

    def _await_visible(self, offset: int) -> None:
        """Return once read_committed readers see the record at ``offset``: a commit
        returns before its markers are written, and a shard that checked the map in
        between would take the previous one for the newest (and stop its batch).
        Bounded: past ``VISIBLE_WAIT_SECONDS`` (another flow's transaction open on the
        topic, say) the shards' check is what decides."""
        consumer = self._reader()
        deadline = time.monotonic() + VISIBLE_WAIT_SECONDS
        try:
            while time.monotonic() < deadline:
                _, stable = consumer.get_watermark_offsets(
                    TopicPartition(self.topic, 0), timeout=self.timeout
                )
                if stable > offset:
                    return
                time.sleep(0.01)
        except KafkaException as exc:
            raise wrap(
                exc, f"read the shard map's end in topic {self.topic} on {self.cluster}"
            ) from None
        finally:
            consumer.close()

    def _reader(self) -> Any:
        """A read_committed consumer of the map's topic (assign() only)."""
        return new_consumer(
            {
                **self._consumer_conf,
                "group.id": self.reader_group,
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
                "enable.partition.eof": True,
                # the end is known from the fetch after the last record: at the default
                # 500 ms that fetch waited for more (each read took about 1 s)
                "fetch.wait.max.ms": 10,
            }
        )

    def end_offset(self) -> int:
        """The end of the map's topic (read_committed): it moves with every map
        recorded and every replan request (mm.source.replan)."""
        if self._probe is None:
            self._probe = self._reader()
        try:
            _, high = self._probe.get_watermark_offsets(
                TopicPartition(self.topic, 0), timeout=self.timeout
            )
        except KafkaException as exc:
            raise wrap(exc, f"read the end of topic {self.topic} on {self.cluster}") from None
        return int(high)

    def request_replan(self, why: str, by: str) -> None:
        """Ask the flow's running batch to end for a new plan (mm.source.replan)."""
        from mm.source.replan import replan_key, replan_value

        producer = new_producer({**self._producer_conf, "acks": "all"})
        value = replan_value(why, by, int(time.time() * 1000))
        where = f"request a new plan of {self.flow} in topic {self.topic} on {self.cluster}"
        failed: list[Any] = []

        def delivered(err: Any, _msg: Any) -> None:
            if err is not None:
                failed.append(err)

        try:
            producer.produce(
                self.topic, value, replan_key(self.flow), partition=0, on_delivery=delivered
            )
            if producer.flush(self.timeout) > 0:
                raise MirrorError(f"{where}: not acknowledged within {self.timeout:g}s")
        except KafkaException as exc:
            raise wrap(exc, where) from None
        if failed:
            raise wrap(KafkaException(failed[0]), where)

    def is_newest(self, shard_map: ShardMap) -> bool:
        """Whether ``shard_map`` is still the newest recorded."""
        newest = self.read()
        return newest is not None and newest.map == shard_map

    def close(self) -> None:
        if self._writer is not None:
            self._writer.flush(0)
            self._writer = None
        if self._probe is not None:
            self._probe.close()
            self._probe = None


def store_for(rt: FlowRuntime, timeout: float = 60.0) -> ShardMapStore:
    """The store of ``rt``'s flow, with the flow's target client settings."""
    producer = {k: v for k, v in rt.target_producer.items() if k != "transactional.id"}
    return ShardMapStore(
        flow=f"{rt.source}->{rt.target}",
        source=rt.source,
        prefix=rt.transactional_id_prefix,
        producer_conf=producer,
        consumer_conf=rt.target_consumer,
        timeout=timeout,
        # a group the mirror's principal already holds (never joined nor committed to)
        reader_group=rt.state_group,
        cluster=f"cluster {rt.target}",
    )


def fence(
    ids: Iterable[str],
    producer_conf: Mapping[str, Any],
    timeout: float = 60.0,
    threads: int = FENCE_THREADS,
    make: Callable[[dict[str, Any]], Any] = new_producer,
    cluster: str = "the target",
    metadata_topic: str | None = None,
) -> None:
    """``init_transactions`` on every id of ``ids``, ``threads`` at a time: each
    aborts what that id left open and fences its producers (confluent-kafka has no
    Admin fenceProducers). Raises MirrorError naming every id not fenced.
    ``metadata_topic``: a topic of the cluster whose metadata each producer asks for
    first (:meth:`mm.kafka.txn.Transaction.init`)."""

    def one(transactional_id: str) -> tuple[str, KafkaException] | None:
        producer = make({**producer_conf, "transactional.id": transactional_id})
        try:
            if metadata_topic is None:
                producer.init_transactions(timeout)
            else:
                Transaction(producer).init(metadata_topic, timeout)
            return None
        except KafkaException as exc:
            return transactional_id, exc
        finally:
            producer.flush(0)

    todo = list(ids)
    if not todo:
        return
    with ThreadPoolExecutor(max_workers=max(1, min(threads, len(todo)))) as pool:
        failed = [f for f in pool.map(one, todo) if f is not None]
    if failed:
        first_id, first = failed[0]
        others = "; ".join(f"{i}: {e.args[0] if e.args else e}" for i, e in failed[1:5])
        # the first failure's code decides (a refusal ends the flow in one line)
        raise wrap(
            first,
            f"fence the previous shard map's transactional ids on {cluster} (no shard of the "
            f"new map may write before; {len(failed)} of {len(todo)} not fenced"
            + (f", also {others}" if others else "")
            + (" ..." if len(failed) > 5 else "")
            + f"): init transactions of {first_id}",
        ) from None


def fence_live(
    ids: Iterable[str],
    producer_conf: Mapping[str, Any],
    timeout: float = 60.0,
    cluster: str = "the target",
    metadata_topic: str | None = None,
) -> tuple[list[str], str | None]:
    """:func:`fence` on those of ``ids`` the cluster's coordinators hold: an id
    never initialised has no producer to fence (a new flow's per-partition ids:
    96 took 3 s at its first start). Returns (the ids fenced, None), or every id
    and why the cluster could not say which are live
    (:func:`mm.kafka.producers.live_transactional_ids`)."""
    from mm.kafka.producers import live_transactional_ids

    live, unknown = live_transactional_ids(producer_conf, ids)
    fence(live, producer_conf, timeout, cluster=cluster, metadata_topic=metadata_topic)
    return live, unknown


def settle(
    store: ShardMapStore,
    partitions: Iterable[tuple[str, int]],
    shards: int,
    fence_ids: Callable[[Iterable[str]], None],
    cores: int = 1,
) -> Transition:
    """The driver's round before a batch (module doc); the map every shard of the
    batch writes with, recorded before it returns.

    ``shards`` 0 is ``auto``: the recorded map's count, so a flow never changes
    generation by itself; for a flow without a map, :func:`default_shard_count` of
    ``cores`` and the partitions known."""
    store.claim()
    stored = store.read()
    wanted = set(partitions)
    if shards <= 0:
        if stored is not None:
            shards = stored.map.shards
        else:
            shards = default_shard_count(cores, len(wanted))
    step = transition(stored.map if stored else None, wanted, shards, store.prefix)
    if step.new_generation:
        fence_ids(step.fence)
    if step.changed:
        store.record(step.map)
    return step
