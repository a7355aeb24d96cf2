"""Target topics created on Apache Kafka 4.3.1 (KRaft): a new topic's metadata can reach
the broker after CreateTopics returned, and DescribeConfigs then answers
UNKNOWN_TOPIC_OR_PARTITION. The mirror's topic planner creates and describes at once
(the target's max.message.bytes bounds what it copies); it used to end a continuous
mirror there. Here it creates many targets in rounds on a real KRaft broker."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from support.apache_kafka import KRaftBroker

from mm.config import build_config
from mm.logs import get_logger
from mm.source.topics import TopicMirrorPlanner

pytestmark = pytest.mark.integration

ROUNDS, PER_ROUND = 4, 25


def test_many_new_target_topics_are_created_and_described(
    own_kafka: Callable[..., KRaftBroker], unique_topic: Callable[..., str]
) -> None:
    broker = own_kafka()
    conf = {"bootstrap.servers": broker.bootstrap}
    prefix = unique_topic("new")
    flow = build_config(
        {
            "clusters": "A, B",
            "A.bootstrap.servers": broker.bootstrap,  # one cluster is both ends here
            "B.bootstrap.servers": broker.bootstrap,
            "A->B.enabled": "true",
            "A->B.topics": f"{prefix}-.*",
        }
    ).flow("A", "B")
    planner = TopicMirrorPlanner(
        conf,
        conf,
        topic_filter=flow.topic_filter,
        config_filter=flow.config_property_filter,
        policy=flow.policy(),
        source_alias="A",
        target_alias="B",
        replication_factor=-1,
        sync_configs=False,
        sync_configs_interval=flow.sync_topic_configs_interval_seconds,
        use_defaults_from=flow.use_defaults_from,
        log=get_logger("test"),
    )
    admin = AdminClient(conf)
    for r in range(ROUNDS):
        names = [f"{prefix}-{r}-{i}" for i in range(PER_ROUND)]
        new = [
            NewTopic(n, 2, 1, config={"max.message.bytes": str(100_000 + i)})
            for i, n in enumerate(names)
        ]
        for fut in admin.create_topics(new).values():
            fut.result(30)
        listed = time.monotonic() + 30  # the source's own metadata is late the same way
        while not set(names) <= set(admin.list_topics(timeout=10).topics):
            assert time.monotonic() < listed, "the new source topics are not listed in 30 s"
            time.sleep(0.05)
        known = planner.refresh(timeout=30)
        assert planner.failed == {}
        for i, n in enumerate(names):
            mirrored = known[n]
            assert (mirrored.target_topic, mirrored.partitions) == (f"A.{n}", 2)
            assert mirrored.max_record_bytes == 100_000 + i  # copied, then described
