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
from support.mirror import topic_planner

pytestmark = pytest.mark.integration

ROUNDS, PER_ROUND = 4, 25


def test_many_new_target_topics_are_created_and_described(
    own_kafka: Callable[..., KRaftBroker], unique_topic: Callable[..., str]
) -> None:
    broker = own_kafka()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    prefix = unique_topic("new")
    # one cluster is both ends here
    planner = topic_planner(broker.bootstrap, broker.bootstrap, {"A->B.topics": f"{prefix}-.*"})
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
