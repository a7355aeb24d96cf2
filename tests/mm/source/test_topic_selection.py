"""Which topics a flow mirrors (MM2's rules) and target names two flows would share (unit).

MM2's MirrorSourceConnector.shouldReplicateTopic: a topic is replicated when
(the topic filter selects it, or it is a heartbeats topic) and it is not internal
and not a cycle; isCycle walks topicSource/upstreamTopic and is true when a hop
names the target cluster.
"""

from __future__ import annotations

import pytest
from mm_client.policy import DefaultReplicationPolicy, IdentityReplicationPolicy

from mm.source.topics import select_topics, target_collisions

pytestmark = pytest.mark.unit

DEFAULT = DefaultReplicationPolicy()
IDENTITY = IdentityReplicationPolicy()

TOPICS_ON_B = [
    "orders",  # B's own
    "A.orders",  # came from A: never back to A
    "C.A.orders",  # came from A through C: never back to A either
    "C.orders",  # came from C: may go to A as B.C.orders
    "heartbeats",  # B's own heartbeats
    "A.heartbeats",  # A's heartbeats: never back to A
    "C.heartbeats",  # C's heartbeats: across one more hop, as MM2 does
    "__consumer_offsets",
    "mm2-offset-syncs.A.internal",
    "A.checkpoints.internal",
    "connect-offsets-internal",
    ".hidden",
]


def test_flow_b_to_a_never_sends_a_topic_back_to_a_but_heartbeats_travel_on() -> None:
    got = select_topics(TOPICS_ON_B, topic_filter=lambda _t: True, policy=DEFAULT, target_alias="A")
    assert got == ["C.heartbeats", "C.orders", "heartbeats", "orders"]
    assert [DEFAULT.format_remote_topic("B", t) for t in got] == [
        "B.C.heartbeats",
        "B.C.orders",
        "B.heartbeats",
        "B.orders",
    ]


def test_heartbeats_are_mirrored_whatever_the_topic_filter_says() -> None:
    got = select_topics(
        TOPICS_ON_B, topic_filter=lambda _t: False, policy=DEFAULT, target_alias="A"
    )
    assert got == ["C.heartbeats", "heartbeats"]


def test_an_internal_topic_is_never_mirrored_even_when_it_looks_like_heartbeats() -> None:
    # the identity policy takes any name ending in "heartbeats" for one; MM2 still
    # excludes internal names first
    got = select_topics(
        ["__heartbeats", "orders-heartbeats", "x.internal"],
        topic_filter=lambda _t: True,
        policy=IDENTITY,
        target_alias="A",
    )
    assert got == ["orders-heartbeats"]


def test_the_identity_policy_cannot_see_cycles() -> None:
    # as in MM2: with identity names a topic's origin is unknown (flows A->B and B->A
    # with it are refused by the configuration check instead)
    got = select_topics(["orders"], topic_filter=lambda _t: True, policy=IDENTITY, target_alias="A")
    assert got == ["orders"]


def test_two_flows_writing_one_target_topic_are_both_refused_and_named() -> None:
    claims = {
        "A->C": ("C", {"orders": "orders", "payments": "payments"}),
        "B->C": ("C", {"orders": "orders", "refunds": "refunds"}),
        "B->D": ("D", {"orders": "orders"}),  # another cluster: no collision
    }
    got = target_collisions(claims)
    assert sorted(got) == ["A->C", "B->C"]
    assert list(got["A->C"]) == ["orders"] and list(got["B->C"]) == ["orders"]
    msg = got["A->C"]["orders"]
    assert msg == got["B->C"]["orders"]
    assert msg.startswith(
        "target topic orders on C would receive topic orders of A (flow A->C) and "
        "topic orders of B (flow B->C)"
    )
    assert "topics.exclude" in msg and "DefaultReplicationPolicy" in msg


def test_default_policy_names_never_collide() -> None:
    claims = {
        f: ("C", {"orders": DEFAULT.format_remote_topic(f[0], "orders")}) for f in ("A->C", "B->C")
    }
    assert target_collisions(claims) == {}
