"""What the target cluster says before translated offsets are applied (reads only).

A :class:`TargetView` holds the three facts :mod:`mm_client.guards` judges by:
which topics the cluster has (and the partition counts of the ones asked for),
what the group has already committed there, and the consumer's reset policy.
It is read through the caller's own client (a confluent-kafka ``Consumer``, a
kafka-python ``KafkaConsumer``, or an ``AdminClient``), so it sees the cluster
with the same credentials and group the service uses. Nothing here writes, and
no topic is created: kafka-python's metadata for one topic could auto-create
it, so its view asks for the list of all topics first.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient

from mm_client.connection import Deadline
from mm_client.kafka.errors import wrap
from mm_client.topic_partition import TopicPartition

__all__ = ["TargetView", "admin_view", "target_view"]


@dataclass(frozen=True)
class TargetView:
    """``topics`` on ``cluster``; ``partition_counts`` of the asked topics it has;
    ``group``'s ``committed`` offsets (asked partitions, only those with one)."""

    cluster: str
    group: str | None
    topics: frozenset[str]
    partition_counts: dict[str, int]
    committed: dict[TopicPartition, int]
    reset: str | None


def _counts(
    metadata_topics: Mapping[str, Any], wanted: Mapping[TopicPartition, int]
) -> dict[str, int]:
    asked = {tp.topic for tp in wanted}
    return {t: len(metadata_topics[t].partitions) for t in asked if t in metadata_topics}


def target_view(
    consumer: Any, kind: str, wanted: Mapping[TopicPartition, int], timeout: float
) -> TargetView:
    """The view through an application's consumer (``kind`` as :func:`consumer_kind`)."""
    if kind == "confluent":
        return _confluent_view(consumer, wanted, timeout)
    return _kafka_python_view(consumer, wanted)


def _confluent_view(
    consumer: Any, wanted: Mapping[TopicPartition, int], timeout: float
) -> TargetView:
    deadline = Deadline(timeout)
    try:
        metadata = consumer.list_topics(timeout=deadline.remaining(0.001))
    except KafkaException as exc:
        raise wrap(exc, "read the target's topics before applying offsets") from exc
    counts = _counts(metadata.topics, wanted)
    asked = [KafkaTopicPartition(t, p) for t, p in wanted if t in counts]
    committed: dict[TopicPartition, int] = {}
    if asked:
        try:
            answer = consumer.committed(asked, timeout=deadline.remaining(0.001))
        except KafkaException as exc:
            raise wrap(exc, "read the group's committed offsets before applying offsets") from exc
        committed = {
            TopicPartition(k.topic, k.partition): k.offset for k in answer if k.offset >= 0
        }
    return TargetView(
        cluster=f"the consumer's cluster ({metadata.orig_broker_name})",
        group=None,
        topics=frozenset(metadata.topics),
        partition_counts=counts,
        committed=committed,
        # a confluent Consumer does not expose its configuration
        reset=None,
    )


def _kafka_python_view(consumer: Any, wanted: Mapping[TopicPartition, int]) -> TargetView:
    kafka = importlib.import_module("kafka")
    config = getattr(consumer, "config", {})
    topics = frozenset(consumer.topics())  # all topics: never creates one
    counts = {}
    for topic in sorted({tp.topic for tp in wanted} & topics):
        counts[topic] = len(consumer.partitions_for_topic(topic) or ())
    committed: dict[TopicPartition, int] = {}
    if config.get("group_id") is not None:
        for tp in wanted:
            if tp.topic in counts:
                found = consumer.committed(kafka.TopicPartition(tp.topic, tp.partition))
                if found is not None and found >= 0:
                    committed[tp] = found
    servers = config.get("bootstrap_servers", "?")
    return TargetView(
        cluster=servers if isinstance(servers, str) else ",".join(servers),
        group=config.get("group_id"),
        topics=topics,
        partition_counts=counts,
        committed=committed,
        reset=config.get("auto_offset_reset"),
    )


def admin_view(
    admin: AdminClient,
    bootstrap: str,
    group: str,
    wanted: Mapping[TopicPartition, int],
    deadline: Deadline,
) -> TargetView:
    """The view through an AdminClient, for ``group`` (raises KafkaException as the
    caller's other admin calls do; TimeoutError if the cluster does not answer)."""
    metadata = admin.list_topics(timeout=deadline.remaining(0.001))
    counts = _counts(metadata.topics, wanted)
    asked = [KafkaTopicPartition(t, p) for t, p in wanted if t in counts]
    committed: dict[TopicPartition, int] = {}
    if asked:
        future = admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, asked)],
            request_timeout=deadline.remaining(0.001),
        )[group]
        answer = future.result(timeout=deadline.remaining(0.001) + 1.0)
        committed = {
            TopicPartition(k.topic, k.partition): k.offset
            for k in answer.topic_partitions or ()
            if k.offset >= 0
        }
    return TargetView(
        cluster=bootstrap,
        group=group,
        topics=frozenset(metadata.topics),
        partition_counts=counts,
        committed=committed,
        reset=None,
    )
