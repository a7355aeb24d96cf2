"""Replication policies: MM2's naming, internal-topic detection and cycle detection."""

from __future__ import annotations

import pytest
from mm_client.policy import (
    DefaultReplicationPolicy,
    IdentityReplicationPolicy,
    ReplicationPolicy,
    policy_from_class_name,
    would_cycle,
)

pytestmark = pytest.mark.unit

DEFAULT = DefaultReplicationPolicy()
UNDERSCORE = DefaultReplicationPolicy("__")
DASH_LEGACY = DefaultReplicationPolicy("-", internal_topic_separator_enabled=False)
IDENTITY = IdentityReplicationPolicy()
IDENTITY_A = IdentityReplicationPolicy("A")

# ---------------------------------------------------------------------------
# remote-topic naming: (policy, topic, source alias, upstream topic, original topic)
# ---------------------------------------------------------------------------

NAMING: list[tuple[str, ReplicationPolicy, str, str | None, str | None, str]] = [
    ("default-local", DEFAULT, "orders", None, None, "orders"),
    ("default-remote", DEFAULT, "A.orders", "A", "orders", "orders"),
    ("default-two-hops", DEFAULT, "B.A.orders", "B", "A.orders", "orders"),
    ("default-three-hops", DEFAULT, "C.B.A.orders", "C", "B.A.orders", "orders"),
    ("default-heartbeats", DEFAULT, "heartbeats", None, None, "heartbeats"),
    ("default-remote-heartbeats", DEFAULT, "A.heartbeats", "A", "heartbeats", "heartbeats"),
    # Java String.split drops trailing empty pieces: "A." and "A.." are not remote
    ("default-trailing-sep", DEFAULT, "A.", None, None, "A."),
    ("default-trailing-seps", DEFAULT, "A..", None, None, "A.."),
    ("default-only-seps", DEFAULT, "...", None, None, "..."),
    # a leading separator yields an empty source alias, as in MM2
    ("default-leading-sep", DEFAULT, ".orders", "", "orders", "orders"),
    ("default-double-sep", DEFAULT, "A..orders", "A", ".orders", "orders"),
    ("default-inner-trailing", DEFAULT, "A.b.", "A", "b.", "b."),
    ("default-empty", DEFAULT, "", None, None, ""),
    ("default-dash-is-not-sep", DEFAULT, "us-west-orders", None, None, "us-west-orders"),
    ("custom-sep-remote", UNDERSCORE, "A__orders", "A", "orders", "orders"),
    ("custom-sep-dots-are-plain", UNDERSCORE, "A.orders", None, None, "A.orders"),
    ("custom-sep-two-hops", UNDERSCORE, "B__A__my.topic", "B", "A__my.topic", "my.topic"),
    # "___" splits as "__" + "_": non-overlapping, left to right, like Java's regex split
    ("custom-sep-overlap", UNDERSCORE, "A___b", "A", "_b", "_b"),
    ("custom-sep-trailing", UNDERSCORE, "A__", None, None, "A__"),
    ("identity-local-no-alias", IDENTITY, "orders", None, "orders", "orders"),
    ("identity-dotted-no-alias", IDENTITY, "A.orders", None, "A.orders", "A.orders"),
    ("identity-with-alias", IDENTITY_A, "orders", "A", "orders", "orders"),
    ("identity-heartbeats", IDENTITY_A, "heartbeats", None, None, "heartbeats"),
    ("identity-remote-heartbeats", IDENTITY_A, "B.heartbeats", "B", "heartbeats", "heartbeats"),
    ("identity-2hop-heartbeats", IDENTITY, "C.B.heartbeats", "C", "B.heartbeats", "heartbeats"),
    # suffix match, as in MM2: anything ending in "heartbeats" follows the default rules
    ("identity-heartbeats-suffix", IDENTITY_A, "myheartbeats", None, None, "myheartbeats"),
]


@pytest.mark.parametrize(
    ("name", "policy", "topic", "source", "upstream", "original"),
    NAMING,
    ids=[n[0] for n in NAMING],
)
def test_topic_source_upstream_and_original(
    name: str,
    policy: ReplicationPolicy,
    topic: str,
    source: str | None,
    upstream: str | None,
    original: str,
) -> None:
    assert policy.topic_source(topic) == source
    assert policy.upstream_topic(topic) == upstream
    assert policy.original_topic(topic) == original


FORMAT: list[tuple[ReplicationPolicy, str, str, str]] = [
    (DEFAULT, "A", "orders", "A.orders"),
    (DEFAULT, "B", "A.orders", "B.A.orders"),
    (DEFAULT, "A", "heartbeats", "A.heartbeats"),
    (UNDERSCORE, "A", "orders", "A__orders"),
    (IDENTITY, "A", "orders", "orders"),
    (IDENTITY, "A", "B.orders", "B.orders"),
    (IDENTITY_A, "A", "heartbeats", "A.heartbeats"),
    (IDENTITY, "B", "A.heartbeats", "B.A.heartbeats"),
    (IdentityReplicationPolicy(separator="_"), "A", "heartbeats", "A_heartbeats"),
]


@pytest.mark.parametrize(("policy", "source", "topic", "expected"), FORMAT)
def test_format_remote_topic(
    policy: ReplicationPolicy, source: str, topic: str, expected: str
) -> None:
    assert policy.format_remote_topic(source, topic) == expected


@pytest.mark.parametrize(
    ("policy", "source", "topic"),
    [
        (DEFAULT, "A", "orders"),
        (DEFAULT, "us-west", "B.orders"),
        (UNDERSCORE, "A", "my.topic"),
        (IDENTITY, "A", "heartbeats"),
        (IDENTITY_A, "B", "A.heartbeats"),
    ],
)
def test_format_then_parse_round_trips(policy: ReplicationPolicy, source: str, topic: str) -> None:
    remote = policy.format_remote_topic(source, topic)
    assert policy.topic_source(remote) == source
    assert policy.upstream_topic(remote) == topic


# ---------------------------------------------------------------------------
# internal topic names
# ---------------------------------------------------------------------------

INTERNAL_NAMES: list[tuple[str, ReplicationPolicy, str, str, str]] = [
    ("default", DEFAULT, "heartbeats", "mm2-offset-syncs.B.internal", "A.checkpoints.internal"),
    (
        "underscore",
        UNDERSCORE,
        "heartbeats",
        "mm2-offset-syncs__B__internal",
        "A__checkpoints__internal",
    ),
    # replication.policy.internal.topic.separator.enabled=false keeps "." for internal topics
    (
        "legacy-dot",
        DASH_LEGACY,
        "heartbeats",
        "mm2-offset-syncs.B.internal",
        "A.checkpoints.internal",
    ),
    ("identity", IDENTITY_A, "heartbeats", "mm2-offset-syncs.B.internal", "A.checkpoints.internal"),
]


@pytest.mark.parametrize(
    ("name", "policy", "heartbeats", "offset_syncs_b", "checkpoints_a"),
    INTERNAL_NAMES,
    ids=[n[0] for n in INTERNAL_NAMES],
)
def test_internal_topic_names(
    name: str, policy: ReplicationPolicy, heartbeats: str, offset_syncs_b: str, checkpoints_a: str
) -> None:
    assert policy.heartbeats_topic() == heartbeats
    assert policy.offset_syncs_topic("B") == offset_syncs_b
    assert policy.checkpoints_topic("A") == checkpoints_a
    assert policy.is_checkpoints_topic(checkpoints_a)
    assert policy.is_mm2_internal_topic(offset_syncs_b)
    assert policy.is_mm2_internal_topic(checkpoints_a)
    assert policy.is_internal_topic(offset_syncs_b)
    assert policy.is_internal_topic(checkpoints_a)
    assert policy.is_heartbeats_topic(heartbeats)


# (topic, heartbeats?, checkpoints?, mm2 internal?, internal?) under the default policy
CLASSIFY_DEFAULT: list[tuple[str, bool, bool, bool, bool]] = [
    ("orders", False, False, False, False),
    ("A.orders", False, False, False, False),
    ("heartbeats", True, False, False, False),
    ("A.heartbeats", True, False, False, False),
    ("B.A.heartbeats", True, False, False, False),
    ("myheartbeats", False, False, False, False),
    ("heartbeats.backup", False, False, False, False),
    ("A.checkpoints.internal", False, True, True, True),
    ("B.A.checkpoints.internal", False, True, True, True),
    ("mm2-offset-syncs.B.internal", False, False, True, True),
    ("mm2-offsets.A.internal", False, False, True, True),
    ("mm2-configs.A.internal", False, False, True, True),
    ("mm2-status.A.internal", False, False, True, True),
    # ends in .internal but not MM2's: still internal (Connect-style), not MM2 internal
    ("connect-offsets.internal", False, False, False, True),
    ("app-internal", False, False, False, True),
    ("my-app-changelog-internal", False, False, False, True),
    ("__consumer_offsets", False, False, False, True),
    ("__transaction_state", False, False, False, True),
    (".hidden", False, False, False, True),
    ("_single_underscore", False, False, False, False),
    ("mm2-offset-syncs.B", False, False, False, False),
    ("internal", False, False, False, False),
    ("orders.internalized", False, False, False, False),
]


@pytest.mark.parametrize(
    ("topic", "heartbeats", "checkpoints", "mm2_internal", "internal"), CLASSIFY_DEFAULT
)
def test_classify_topics_default_policy(
    topic: str, heartbeats: bool, checkpoints: bool, mm2_internal: bool, internal: bool
) -> None:
    assert DEFAULT.is_heartbeats_topic(topic) is heartbeats
    assert DEFAULT.is_checkpoints_topic(topic) is checkpoints
    assert DEFAULT.is_mm2_internal_topic(topic) is mm2_internal
    assert DEFAULT.is_internal_topic(topic) is internal


CLASSIFY_OTHER: list[tuple[str, ReplicationPolicy, str, bool, bool, bool, bool]] = [
    # custom separator: internal suffixes follow it
    ("us-A__checkpoints", UNDERSCORE, "A__checkpoints__internal", False, True, True, True),
    ("us-dot-ckpt-not-mm2", UNDERSCORE, "A.checkpoints.internal", False, False, False, True),
    ("us-syncs", UNDERSCORE, "mm2-offset-syncs__B__internal", False, False, True, True),
    ("us-heartbeats", UNDERSCORE, "A__heartbeats", True, False, False, False),
    ("us-dot-heartbeats", UNDERSCORE, "A.heartbeats", False, False, False, False),
    ("legacy-ckpt", DASH_LEGACY, "A.checkpoints.internal", False, True, True, True),
    ("legacy-heartbeats", DASH_LEGACY, "A-heartbeats", True, False, False, False),
    # identity: heartbeats keep the prefix, data topics are never "remote-looking"
    ("id-heartbeats", IDENTITY_A, "heartbeats", True, False, False, False),
    ("id-remote-heartbeats", IDENTITY_A, "B.heartbeats", True, False, False, False),
    ("id-orders", IDENTITY_A, "orders", False, False, False, False),
    ("id-ckpt", IDENTITY_A, "B.checkpoints.internal", False, True, True, True),
    ("id-consumer-offsets", IDENTITY_A, "__consumer_offsets", False, False, False, True),
]


@pytest.mark.parametrize(
    ("name", "policy", "topic", "heartbeats", "checkpoints", "mm2_internal", "internal"),
    CLASSIFY_OTHER,
    ids=[c[0] for c in CLASSIFY_OTHER],
)
def test_classify_topics_other_policies(
    name: str,
    policy: ReplicationPolicy,
    topic: str,
    heartbeats: bool,
    checkpoints: bool,
    mm2_internal: bool,
    internal: bool,
) -> None:
    assert policy.is_heartbeats_topic(topic) is heartbeats
    assert policy.is_checkpoints_topic(topic) is checkpoints
    assert policy.is_mm2_internal_topic(topic) is mm2_internal
    assert policy.is_internal_topic(topic) is internal


# ---------------------------------------------------------------------------
# cycle detection
# ---------------------------------------------------------------------------

CYCLES: list[tuple[str, ReplicationPolicy, str, str, bool]] = [
    # flow A -> B under the default policy (target alias "B")
    ("local-topic", DEFAULT, "orders", "B", False),
    ("came-from-target", DEFAULT, "B.orders", "B", True),
    ("came-from-elsewhere", DEFAULT, "C.orders", "B", False),
    ("target-deeper-in-chain", DEFAULT, "C.B.orders", "B", True),
    ("target-deepest", DEFAULT, "D.C.B.orders", "B", True),
    ("chain-without-target", DEFAULT, "D.C.orders", "B", False),
    ("heartbeats-from-target", DEFAULT, "B.heartbeats", "B", True),
    ("local-heartbeats", DEFAULT, "heartbeats", "B", False),
    ("alias-is-prefix-only", DEFAULT, "Bx.orders", "B", False),
    ("custom-sep", UNDERSCORE, "C__B__orders", "B", True),
    ("custom-sep-dot-is-plain", UNDERSCORE, "B.orders", "B", False),
    # identity cannot see origins in names: no cycle unless its configured alias is the target
    ("identity-no-alias", IDENTITY, "B.orders", "B", False),
    ("identity-alias-is-source", IDENTITY_A, "orders", "B", False),
    ("identity-alias-is-target", IdentityReplicationPolicy("B"), "orders", "B", True),
    ("identity-heartbeats-from-target", IDENTITY_A, "B.heartbeats", "B", True),
    ("identity-heartbeats-2hop", IDENTITY, "C.B.heartbeats", "B", True),
    ("identity-local-heartbeats", IDENTITY_A, "heartbeats", "B", False),
]


@pytest.mark.parametrize(
    ("name", "policy", "topic", "target", "expected"), CYCLES, ids=[c[0] for c in CYCLES]
)
def test_would_cycle(
    name: str, policy: ReplicationPolicy, topic: str, target: str, expected: bool
) -> None:
    assert would_cycle(policy, topic, target) is expected


def test_active_active_round_trip_is_a_cycle() -> None:
    # A -> B makes "A.orders" on B; replicating it back B -> A must be refused.
    on_b = DEFAULT.format_remote_topic("A", "orders")
    assert not would_cycle(DEFAULT, "orders", "B")
    assert would_cycle(DEFAULT, on_b, "A")


def test_deep_chain_does_not_recurse() -> None:
    topic = ".".join([f"c{i}" for i in range(2000)] + ["orders"])
    assert DEFAULT.original_topic(topic) == "orders"
    assert would_cycle(DEFAULT, topic, "c1999")
    assert not would_cycle(DEFAULT, topic, "nowhere")


# ---------------------------------------------------------------------------
# construction from replication.policy.class
# ---------------------------------------------------------------------------

FROM_NAME: list[tuple[str, str, str | None, ReplicationPolicy]] = [
    ("org.apache.kafka.connect.mirror.DefaultReplicationPolicy", ".", None, DEFAULT),
    ("DefaultReplicationPolicy", ".", None, DEFAULT),
    ("  org.apache.kafka.connect.mirror.DefaultReplicationPolicy ", "__", None, UNDERSCORE),
    # a Default policy ignores the source alias
    ("DefaultReplicationPolicy", ".", "A", DEFAULT),
    ("org.apache.kafka.connect.mirror.IdentityReplicationPolicy", ".", None, IDENTITY),
    ("IdentityReplicationPolicy", ".", "A", IDENTITY_A),
    ("IdentityReplicationPolicy", "_", "A", IdentityReplicationPolicy("A", "_")),
]


@pytest.mark.parametrize(("class_name", "separator", "alias", "expected"), FROM_NAME)
def test_policy_from_class_name(
    class_name: str, separator: str, alias: str | None, expected: ReplicationPolicy
) -> None:
    policy = policy_from_class_name(class_name, separator, alias)
    assert type(policy) is type(expected)
    assert policy == expected


def test_policy_from_class_name_passes_internal_separator_flag() -> None:
    policy = policy_from_class_name(
        "DefaultReplicationPolicy", "-", internal_topic_separator_enabled=False
    )
    assert policy.checkpoints_topic("A") == "A.checkpoints.internal"
    assert policy.format_remote_topic("A", "t") == "A-t"


@pytest.mark.parametrize(
    "class_name",
    [
        "",
        "Default",
        "defaultreplicationpolicy",
        "org.apache.kafka.connect.mirror.LegacyReplicationPolicy",
        "com.example.DefaultReplicationPolicy",
        "org.apache.kafka.connect.mirror.",
    ],
)
def test_policy_from_unknown_class_name_lists_accepted_names(class_name: str) -> None:
    with pytest.raises(ValueError, match=r"unsupported replication\.policy\.class") as info:
        policy_from_class_name(class_name, ".")
    message = str(info.value)
    for accepted in (
        "org.apache.kafka.connect.mirror.DefaultReplicationPolicy",
        "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
        "DefaultReplicationPolicy",
        "IdentityReplicationPolicy",
    ):
        assert accepted in message


def test_empty_separator_is_rejected() -> None:
    with pytest.raises(ValueError, match="separator"):
        DefaultReplicationPolicy("")
    with pytest.raises(ValueError, match="separator"):
        IdentityReplicationPolicy("A", "")


def test_policy_equality_and_repr() -> None:
    assert DefaultReplicationPolicy() == DefaultReplicationPolicy(".")
    assert DefaultReplicationPolicy() != DefaultReplicationPolicy("_")
    assert DefaultReplicationPolicy() != IdentityReplicationPolicy()
    assert IdentityReplicationPolicy("A") != IdentityReplicationPolicy("B")
    assert hash(IdentityReplicationPolicy("A")) == hash(IdentityReplicationPolicy("A"))
    assert repr(IDENTITY_A) == "IdentityReplicationPolicy(source_cluster_alias='A', separator='.')"
    assert repr(UNDERSCORE) == "DefaultReplicationPolicy(separator='__')"
    assert repr(DASH_LEGACY) == (
        "DefaultReplicationPolicy(separator='-', internal_topic_separator_enabled=False)"
    )
    assert DASH_LEGACY != DefaultReplicationPolicy("-")


def test_policies_are_read_only() -> None:
    policy = IdentityReplicationPolicy("A")
    with pytest.raises(AttributeError):
        policy.separator = "_"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        policy.source_cluster_alias = "B"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        policy.extra = 1  # type: ignore[attr-defined]


def test_replication_policy_is_abstract() -> None:
    with pytest.raises(TypeError):
        ReplicationPolicy()  # type: ignore[abstract]
