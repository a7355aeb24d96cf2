"""The shard map recorded on the target and the fencing round (mm.source.shard_store),
on a real broker: the ids of the previous generation (or the per-partition ids of
before shards) are fenced before a new map is recorded, and a second driver's claim
fences the first one's map writer."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from mm_client.kafka.admin import ensure_topic
from support.clusters import KafkaCluster

from mm.errors import MirrorError
from mm.source.shard_map import ShardMap
from mm.source.shard_store import (
    SHARDS_TOPIC_CONFIG,
    ShardMapStore,
    fence,
    fence_live,
    settle,
    shards_topic,
)


@pytest.fixture
def flow(cluster_b: KafkaCluster) -> tuple[str, str, str]:
    """A source alias, the records' topic and the transactional-id prefix, all unique."""
    source = f"S{uuid.uuid4().hex[:8]}"
    ensure_topic(AdminClient({"bootstrap.servers": cluster_b.bootstrap_servers}),
                 shards_topic(source), "cluster B", 1, config=SHARDS_TOPIC_CONFIG)  # fmt: skip
    topic = f"{source}.orders"
    admin = AdminClient({"bootstrap.servers": cluster_b.bootstrap_servers})
    ensure_topic(admin, topic, "cluster B", 1, config={}, partitions=3)
    return source, topic, f"mm.{source}.B"


def _store(cluster: KafkaCluster, source: str, prefix: str) -> ShardMapStore:
    conf = {"bootstrap.servers": cluster.bootstrap_servers}
    return ShardMapStore(flow=f"{source}->B", source=source, prefix=prefix,
                         producer_conf=conf, consumer_conf=conf, timeout=30)  # fmt: skip


def _open_transaction(
    cluster: KafkaCluster, transactional_id: str, topic: str, part: int
) -> Producer:
    """A producer of ``transactional_id`` with a record in an open transaction (a zombie)."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers,
                         "transactional.id": transactional_id})  # fmt: skip
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"zombie", partition=part)
    producer.flush(30)
    return producer


def _committed_values(cluster: KafkaCluster, topic: str) -> list[bytes | None]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                         "group.id": f"check-{uuid.uuid4().hex}", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})  # fmt: skip
    values: list[bytes | None] = []
    try:
        for part in range(3):
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, part), timeout=30)
            if high == 0:
                continue
            consumer.assign([TopicPartition(topic, part, 0)])
            for _ in range(20):
                values += [m.value() for m in consumer.consume(100, 0.5) if m.error() is None]
                position = consumer.position([TopicPartition(topic, part)])[0].offset
                if position >= high:
                    break
    finally:
        consumer.close()
    return values


def _fencer(cluster: KafkaCluster, fenced: list[str] | None = None) -> Callable[..., None]:
    """The mirror's fence round: the ids a coordinator holds, each fenced."""

    def fence_round(ids: Iterable[str]) -> None:
        live, unknown = fence_live(ids, {"bootstrap.servers": cluster.bootstrap_servers}, 30)
        assert unknown is None, unknown  # Apache Kafka lists its transactional ids
        if fenced is not None:
            fenced.extend(live)

    return fence_round


def test_the_first_map_fences_the_per_partition_producers_and_is_read_back(
    cluster_b: KafkaCluster, flow: tuple[str, str, str]
) -> None:
    source, topic, prefix = flow
    legacy = _open_transaction(cluster_b, f"{prefix}.{topic}.1", topic, 1)
    store = _store(cluster_b, source, prefix)
    assert store.read() is None
    fenced: list[str] = []
    step = settle(store, [(topic, p) for p in range(3)], 2, _fencer(cluster_b, fenced))
    assert step.new_generation and step.map.generation == 1
    assert f"{prefix}.{topic}.1" in step.fence
    # the ids of partitions 0 and 2 were never initialised: nothing to fence there
    assert set(step.fence) == {f"{prefix}.{topic}.{p}" for p in range(3)}
    assert fenced == [f"{prefix}.{topic}.1"]
    # the per-partition producer of before shards can no longer commit
    with pytest.raises(KafkaException):
        legacy.commit_transaction(30)
    assert _committed_values(cluster_b, topic) == []
    recorded = _store(cluster_b, source, prefix).read()
    assert recorded is not None and recorded.map == step.map
    assert store.is_newest(step.map)
    # the same partitions again: no new generation, nothing fenced, nothing written
    again = settle(store, [(topic, p) for p in range(3)], 2, _fencer(cluster_b))
    assert not again.new_generation and not again.changed and again.map == step.map
    store.close()


def test_a_new_shard_count_fences_a_zombie_of_the_previous_generation(
    cluster_b: KafkaCluster, flow: tuple[str, str, str]
) -> None:
    source, topic, prefix = flow
    store = _store(cluster_b, source, prefix)
    first = settle(store, [(topic, p) for p in range(3)], 2, _fencer(cluster_b)).map
    zombie = _open_transaction(cluster_b, first.transactional_id(prefix, 0), topic, 0)
    live = Producer({"bootstrap.servers": cluster_b.bootstrap_servers,
                     "transactional.id": first.transactional_id(prefix, 1)})  # fmt: skip
    live.init_transactions(30)

    second = settle(store, [(topic, p) for p in range(3)], 3, _fencer(cluster_b))
    assert second.new_generation and second.map.generation == 2
    assert set(second.fence) == set(first.transactional_ids(prefix))
    with pytest.raises(KafkaException):
        zombie.commit_transaction(30)
    # an idle producer of the old generation is fenced too: it cannot even begin
    with pytest.raises(KafkaException):
        live.begin_transaction()
        live.produce(topic, b"late", partition=1)
        live.commit_transaction(30)
    assert _committed_values(cluster_b, topic) == []
    assert not store.is_newest(first) and store.is_newest(second.map)
    store.close()


def test_a_second_driver_claiming_the_map_stops_the_first_from_recording(
    cluster_b: KafkaCluster, flow: tuple[str, str, str]
) -> None:
    source, topic, prefix = flow
    first, second = _store(cluster_b, source, prefix), _store(cluster_b, source, prefix)
    first.claim()
    second.claim()
    with pytest.raises(MirrorError, match=r"record the shard map of .* on the target: .*fenced"):
        first.record(ShardMap(1, 1, {(topic, 0): 0}))
    second.record(ShardMap(1, 2, {(topic, 0): 0, (topic, 1): 1}))
    newest = _store(cluster_b, source, prefix).read()
    assert newest is not None and newest.map.shards == 2
    first.close()
    second.close()


def test_a_map_record_that_cannot_be_read_names_where_it_is(
    cluster_b: KafkaCluster, flow: tuple[str, str, str]
) -> None:
    source, _topic, prefix = flow
    producer = Producer({"bootstrap.servers": cluster_b.bootstrap_servers})
    producer.produce(shards_topic(source), b"{not json", f"{source}->B".encode(), partition=0)
    producer.flush(30)
    with pytest.raises(MirrorError) as err:
        _store(cluster_b, source, prefix).read()
    assert f"{shards_topic(source)} offset 0" in str(err.value)
    assert "format 1" in str(err.value)


def test_auto_keeps_the_recorded_count_and_a_new_flow_gets_the_formulas(
    cluster_b: KafkaCluster, flow: tuple[str, str, str]
) -> None:
    source, topic, prefix = flow
    parts = [(topic, p) for p in range(3)]
    store = _store(cluster_b, source, prefix)
    # no map yet: two shards per core, at most one per partition
    first = settle(store, parts, 0, _fencer(cluster_b), cores=1)
    assert (first.map.generation, first.map.shards, first.new_generation) == (1, 2, True)
    # auto never starts a generation by itself, whatever the cores now
    again = settle(store, parts, 0, _fencer(cluster_b), cores=8)
    assert again.map == first.map and not again.changed
    # a count set explicitly does
    third = settle(store, parts, 3, _fencer(cluster_b), cores=8)
    assert (third.map.generation, third.map.shards) == (2, 3)
    assert third.fence == tuple(first.map.transactional_ids(prefix))
    store.close()


class _OrderProducer:
    """Records what the fence asks of each producer, in order."""

    def __init__(self, calls: list[tuple[str, str]], conf: dict[str, object]) -> None:
        self.calls, self.id = calls, str(conf["transactional.id"])

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> None:
        self.calls.append((self.id, f"metadata {topic}"))

    def init_transactions(self, timeout: float) -> None:
        self.calls.append((self.id, "init"))

    def flush(self, timeout: float) -> int:
        return 0


def test_each_fenced_producer_asks_for_metadata_before_it_initialises() -> None:
    # librdkafka's first coordinator lookup, asked before any connection is up, waits
    # out a 0.5 s retry timer (a quarter of fresh ids on an idle broker)
    calls: list[tuple[str, str]] = []
    fence(
        ["a", "b"],
        {"bootstrap.servers": "unused:9092"},
        make=lambda conf: _OrderProducer(calls, conf),
        metadata_topic="mm-mirror-shards.A.internal",
    )
    for tid in ("a", "b"):
        assert [c for i, c in calls if i == tid] == ["metadata mm-mirror-shards.A.internal", "init"]
