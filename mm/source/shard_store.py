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

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from mm.errors import MirrorError
from mm.source.shard_map import ShardMap, Transition, parse_shard_map, transition

SHARDS_TOPIC = "mm-mirror-shards.{source}.internal"
SHARDS_TOPIC_CONFIG = {"cleanup.policy": "compact"}
#: ids fenced at once: init_transactions waits on the broker, not on this process
FENCE_THREADS = 16


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
    ) -> None:
        self.flow, self.topic, self.prefix = flow, shards_topic(source), prefix
        self._producer_conf = dict(producer_conf)
        self._consumer_conf = dict(consumer_conf)
        self.timeout = timeout
        self._writer: Any = None

    def claim(self) -> None:
        """Take the map writer's id (fencing another driver's writer, see module doc)."""
        self.close()
        conf = {
            **self._producer_conf,
            "transactional.id": map_writer_id(self.prefix),
            "enable.idempotence": True,
            "acks": "all",
        }
        writer = Producer(conf)
        try:
            writer.init_transactions(self.timeout)
        except KafkaException as exc:
            raise MirrorError(
                f"could not take the shard map writer {map_writer_id(self.prefix)} on"
                f" {self.topic}: {exc.args[0] if exc.args else exc}"
            ) from None
        self._writer = writer

    def read(self) -> RecordedMap | None:
        """The newest committed map of the flow; None when none was ever recorded."""
        consumer = Consumer(
            {
                **self._consumer_conf,
                "group.id": f"mm-shard-map-reader.{self.flow}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
            }
        )
        try:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(self.topic, 0), timeout=self.timeout
            )
            newest: RecordedMap | None = None
            if high <= low:
                return None
            consumer.assign([TopicPartition(self.topic, 0, low)])
            position = low
            deadline = time.monotonic() + self.timeout
            while position < high:
                if time.monotonic() > deadline:
                    raise MirrorError(
                        f"reading the shard map from {self.topic}: at offset {position} of"
                        f" {high} after {self.timeout:g}s"
                    )
                msgs = consumer.consume(500, 1.0)
                if not msgs:
                    # a transaction marker ends the readable part below the high mark
                    position = consumer.position([TopicPartition(self.topic, 0)])[0].offset
                    if position < 0 or position >= high:
                        break
                    continue
                for msg in msgs:
                    offset, value = msg.offset(), msg.value()
                    if msg.error() is not None or offset is None:
                        raise MirrorError(f"reading {self.topic}: {msg.error()}")
                    position = offset + 1
                    if msg.key() == self.flow.encode() and value is not None:
                        where = f"{self.topic} offset {offset}"
                        newest = RecordedMap(parse_shard_map(value.decode(), where), offset)
            return newest
        except KafkaException as exc:
            raise MirrorError(f"reading the shard map from {self.topic}: {exc}") from None
        finally:
            consumer.close()

    def record(self, shard_map: ShardMap) -> None:
        """Write ``shard_map`` in a transaction of the claimed writer."""
        if self._writer is None:
            raise RuntimeError("record() before claim()")
        writer = self._writer
        try:
            writer.begin_transaction()
            writer.produce(self.topic, shard_map.to_json().encode(), self.flow.encode(),
                           partition=0)  # fmt: skip
            writer.commit_transaction(self.timeout)
        except KafkaException as exc:
            # fenced: another driver claimed the writer since; its round decides
            raise MirrorError(
                f"the shard map of {self.flow} was not recorded on {self.topic}: {exc}"
            ) from None

    def is_newest(self, shard_map: ShardMap) -> bool:
        """Whether ``shard_map`` is still the newest recorded."""
        newest = self.read()
        return newest is not None and newest.map == shard_map

    def close(self) -> None:
        if self._writer is not None:
            self._writer.flush(0)
            self._writer = None


def fence(
    ids: Iterable[str],
    producer_conf: Mapping[str, Any],
    timeout: float = 60.0,
    threads: int = FENCE_THREADS,
    make: Callable[[dict[str, Any]], Any] = Producer,
) -> None:
    """``init_transactions`` on every id of ``ids``, ``threads`` at a time: each
    aborts what that id left open and fences its producers (confluent-kafka has no
    Admin fenceProducers). Raises MirrorError naming every id not fenced."""

    def one(transactional_id: str) -> str | None:
        producer = make({**producer_conf, "transactional.id": transactional_id})
        try:
            producer.init_transactions(timeout)
            return None
        except KafkaException as exc:
            return f"{transactional_id}: {exc.args[0] if exc.args else exc}"
        finally:
            producer.flush(0)

    todo = list(ids)
    if not todo:
        return
    with ThreadPoolExecutor(max_workers=max(1, min(threads, len(todo)))) as pool:
        failed = [f for f in pool.map(one, todo) if f is not None]
    if failed:
        raise MirrorError(
            f"{len(failed)} of {len(todo)} transactional ids of the previous shard map"
            f" could not be fenced, so no shard of the new map may write yet: "
            + "; ".join(failed[:5])
            + (" ..." if len(failed) > 5 else "")
        )


def settle(
    store: ShardMapStore,
    partitions: Iterable[tuple[str, int]],
    shards: int,
    fence_ids: Callable[[Iterable[str]], None],
) -> Transition:
    """The driver's round before a batch (module doc); the map every shard of the
    batch writes with, recorded before it returns."""
    store.claim()
    stored = store.read()
    step = transition(stored.map if stored else None, partitions, shards, store.prefix)
    if step.new_generation:
        fence_ids(step.fence)
    if step.changed:
        store.record(step.map)
    return step
