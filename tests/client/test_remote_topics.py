"""Replication topology from topic names (MM2 MirrorClient semantics), no broker."""

from __future__ import annotations

import pytest
from mm_client import DefaultReplicationPolicy, IdentityReplicationPolicy
from mm_client.connection import prepare
from mm_client.remote import (
    all_sources,
    checkpoint_topics_in,
    count_hops,
    heartbeat_topics_in,
    remote_topics_in,
    replication_hops_in,
    upstream_clusters_in,
)

pytestmark = pytest.mark.unit

DEFAULT = DefaultReplicationPolicy()

# Cluster C receives from B, which receives from A; D -> C directly too.
TOPICS = {
    "heartbeats",
    "B.heartbeats",
    "B.A.heartbeats",
    "D.heartbeats",
    "B.checkpoints.internal",
    "D.checkpoints.internal",
    "mm2-offset-syncs.C.internal",
    "orders",
    "B.orders",
    "B.A.orders",
    "heartbeats-not",
    "A.heartbeatsX",
}


def test_heartbeat_and_checkpoint_topics() -> None:
    assert heartbeat_topics_in(TOPICS, DEFAULT) == {
        "heartbeats",
        "B.heartbeats",
        "B.A.heartbeats",
        "D.heartbeats",
    }
    assert checkpoint_topics_in(TOPICS, DEFAULT) == {
        "B.checkpoints.internal",
        "D.checkpoints.internal",
    }


def test_upstream_clusters_follow_the_whole_chain() -> None:
    assert upstream_clusters_in(TOPICS, DEFAULT) == {"A", "B", "D"}
    assert upstream_clusters_in({"heartbeats", "orders"}, DEFAULT) == set()
    assert all_sources("C.B.A.heartbeats", DEFAULT) == {"C", "B", "A"}


@pytest.mark.parametrize(("alias", "hops"), [("B", 1), ("D", 1), ("A", 2), ("C", -1), ("Z", -1)])
def test_replication_hops(alias: str, hops: int) -> None:
    assert replication_hops_in(TOPICS, alias, DEFAULT) == hops


def test_hops_take_the_shortest_path() -> None:
    topics = {"B.A.heartbeats", "A.heartbeats", "C.B.A.heartbeats"}
    assert replication_hops_in(topics, "A", DEFAULT) == 1
    assert count_hops("C.B.A.heartbeats", "A", DEFAULT) == 3
    assert count_hops("heartbeats", "A", DEFAULT) == -1
    # a cycle in names (A.B.A...) still terminates: the first A is 1 hop away
    assert count_hops("A.B.A.heartbeats", "A", DEFAULT) == 1
    assert count_hops("A.B.A.heartbeats", "Z", DEFAULT) == -1


def test_custom_separator() -> None:
    policy = DefaultReplicationPolicy("_")
    topics = {"heartbeats", "B_A_heartbeats", "B.orders"}
    assert heartbeat_topics_in(topics, policy) == {"heartbeats", "B_A_heartbeats"}
    assert upstream_clusters_in(topics, policy) == {"A", "B"}
    assert replication_hops_in(topics, "A", policy) == 2


def test_identity_policy_cycles_terminate() -> None:
    policy = IdentityReplicationPolicy("A")
    # identity: non-heartbeat topics all "come from" the configured source alias
    assert remote_topics_in({"orders", "__consumer_offsets", "x.internal"}, policy) == {"orders"}
    # heartbeats keep the default naming, so hops still work
    assert replication_hops_in({"B.A.heartbeats"}, "A", policy) == 2


def test_remote_topics() -> None:
    assert remote_topics_in(TOPICS, DEFAULT) == {
        "B.heartbeats",
        "B.A.heartbeats",
        "D.heartbeats",
        "B.orders",
        "B.A.orders",
        "A.heartbeatsX",
    }
    assert remote_topics_in(TOPICS, DEFAULT, "D") == {"D.heartbeats"}


def test_policy_keys_in_config_select_the_policy_and_leave_librdkafka_props() -> None:
    conf, policy = prepare(
        {
            "bootstrap.servers": "b:9092",
            "replication.policy.class": "org.apache.kafka.connect.mirror.DefaultReplicationPolicy",
            "replication.policy.separator": "_",
        }
    )
    assert conf == {"bootstrap.servers": "b:9092"}
    assert policy == DefaultReplicationPolicy("_")
    assert policy.checkpoints_topic("A") == "A_checkpoints_internal"
    explicit = IdentityReplicationPolicy()
    assert (
        prepare({"bootstrap.servers": "b", "replication.policy.separator": "_"}, explicit)[1]
        is explicit
    )
    with pytest.raises(ValueError, match="bootstrap"):
        prepare({"group.id": "x"})
