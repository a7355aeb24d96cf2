"""Topic ACL sync's mapping (mm.source.acls): MM2's rules, without a broker."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from mm.config import FlowConfig, build_config
from mm.source.acls import replicated_acl, target_acl_bindings

pytestmark = pytest.mark.unit

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LITERAL = ResourcePatternType.LITERAL


def _topic(
    name: str,
    op: AclOperation,
    perm: AclPermissionType = ALLOW,
    *,
    principal: str = "User:app",
    host: str = "*",
    pattern: ResourcePatternType = LITERAL,
    restype: ResourceType = ResourceType.TOPIC,
) -> AclBinding:
    return AclBinding(restype, name, pattern, principal, host, op, perm)


def _flow(**extra: str) -> FlowConfig:
    props = {
        "clusters": "A, B",
        "A.bootstrap.servers": "a:9092",
        "B.bootstrap.servers": "b:9092",
        "A->B.enabled": "true",
        **extra,
    }
    return build_config(props).flow("A", "B")


def test_read_and_describe_are_copied_to_the_remote_topic() -> None:
    got = target_acl_bindings(
        _flow(),
        [
            _topic("orders", AclOperation.READ, principal="User:reader", host="10.0.0.1"),
            _topic("orders", AclOperation.DESCRIBE),
            _topic("orders", AclOperation.DESCRIBE_CONFIGS),
        ],
    )
    assert got == [
        _topic("A.orders", AclOperation.READ, principal="User:reader", host="10.0.0.1"),
        _topic("A.orders", AclOperation.DESCRIBE),
        _topic("A.orders", AclOperation.DESCRIBE_CONFIGS),
    ]


def test_allow_write_is_never_copied_but_deny_write_is() -> None:
    got = target_acl_bindings(
        _flow(),
        [
            _topic("orders", AclOperation.WRITE),
            _topic("orders", AclOperation.WRITE, DENY, principal="User:intruder"),
        ],
    )
    assert got == [_topic("A.orders", AclOperation.WRITE, DENY, principal="User:intruder")]


def test_allow_all_becomes_read_and_deny_all_stays() -> None:
    got = target_acl_bindings(
        _flow(),
        [
            _topic("orders", AclOperation.ALL, principal="User:owner"),
            _topic("orders", AclOperation.ALL, DENY, principal="User:banned"),
        ],
    )
    assert got == [
        _topic("A.orders", AclOperation.READ, principal="User:owner"),
        _topic("A.orders", AclOperation.ALL, DENY, principal="User:banned"),
    ]


def test_one_target_binding_when_two_source_bindings_map_to_it() -> None:
    got = target_acl_bindings(
        _flow(),
        [_topic("orders", AclOperation.ALL), _topic("orders", AclOperation.READ)],
    )
    assert got == [_topic("A.orders", AclOperation.READ)]


@pytest.mark.parametrize(
    "binding",
    [
        _topic("orders", AclOperation.READ, pattern=ResourcePatternType.PREFIXED),
        _topic("orders", AclOperation.READ, restype=ResourceType.GROUP),
        # Kafka's wildcard is no topic name ("A.*" would grant nothing)
        _topic("*", AclOperation.READ),
    ],
)
def test_only_literal_topic_bindings(binding: AclBinding) -> None:
    assert not replicated_acl(binding)
    assert target_acl_bindings(_flow(), [binding]) == []


def test_only_topics_the_flow_mirrors() -> None:
    flow = _flow(**{"A->B.topics": "orders.*", "A->B.topics.exclude": "orders-secret"})
    got = target_acl_bindings(
        flow,
        [
            _topic(name, AclOperation.READ)
            for name in (
                "orders",  # mirrored
                "orders-secret",  # excluded
                "payments",  # not included
                "B.orders",  # a remote topic of B: would cycle back
                "heartbeats",  # mirrored like MM2, whatever the filter
                "mm2-offset-syncs.B.internal",  # internal
            )
        ],
    )
    assert [b.name for b in got] == ["A.orders", "A.heartbeats"]


def test_identity_policy_keeps_names() -> None:
    flow = _flow(**{"replication.policy.class": "IdentityReplicationPolicy"})
    got = target_acl_bindings(flow, [_topic("orders", AclOperation.ALL)])
    assert got == [_topic("orders", AclOperation.READ)]
