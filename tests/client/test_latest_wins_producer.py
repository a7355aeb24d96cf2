"""The producer conf of latest-wins publishers (ends, checkpoints, heartbeats, status,
failover points): acknowledged by all replicas, never reordered, no idempotent id."""

from __future__ import annotations

from collections.abc import Callable

from confluent_kafka import TopicPartition
from confluent_kafka.admin import NewTopic
from mm_client.kafka import (
    closing_consumer,
    latest_wins_producer_conf,
    new_admin,
    new_producer,
    reader_conf,
)
from support.clusters import KafkaCluster


def test_the_conf_keeps_the_users_settings_and_sets_ordering_without_idempotence() -> None:
    user = {
        "bootstrap.servers": "b:9092",
        "security.protocol": "SASL_SSL",
        "enable.idempotence": True,
        "transactional.id": "someone-elses",
        "max.in.flight.requests.per.connection": 5,
        "acks": "1",
    }
    conf = latest_wins_producer_conf(user)
    assert conf == {
        "bootstrap.servers": "b:9092",
        "security.protocol": "SASL_SSL",
        "enable.idempotence": False,
        "max.in.flight.requests.per.connection": 1,
        "acks": "all",
    }
    assert user["transactional.id"] == "someone-elses"  # the caller's mapping is untouched


def test_records_arrive_once_each_in_the_order_produced(
    cluster_a: KafkaCluster, unique_topic: Callable[..., str], unique_group: Callable[..., str]
) -> None:
    topic = unique_topic("latest-wins")
    bootstrap = cluster_a.bootstrap_servers
    admin = new_admin({"bootstrap.servers": bootstrap})  # kept: its futures need it alive
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = new_producer(latest_wins_producer_conf({"bootstrap.servers": bootstrap}))
    failed: list[str] = []
    for i in range(500):
        producer.produce(
            topic,
            str(i).encode(),
            b"flow",
            on_delivery=lambda err, _m: failed.append(str(err)) if err else None,
        )
    assert producer.flush(30) == 0
    assert failed == []
    values: list[int] = []
    conf = reader_conf({"bootstrap.servers": bootstrap}, group=unique_group("reader"))
    with closing_consumer(conf) as consumer:
        consumer.assign([TopicPartition(topic, 0, 0)])
        while len(values) < 500:
            msgs = consumer.consume(500, 10)
            assert msgs, f"only {len(values)} of 500 records readable"
            values += [int(m.value()) for m in msgs if m.error() is None]
    assert values == list(range(500))
