"""The pure decisions behind the failover helpers' refusals, and the cause named for
an unreachable cluster from librdkafka's own lines (captured from Apache Kafka 4.3.1)."""

from __future__ import annotations

import pytest
from mm_client import (
    DefaultReplicationPolicy,
    NoCheckpointsError,
    RewindRefusedError,
    TopicNotOnTargetError,
    TopicPartition,
    TranslatedOffsets,
)
from mm_client.diagnosis import diagnose
from mm_client.guards import (
    misnamed_topics,
    refuse_rewinds,
    require_offsets,
    reset_outcome,
    rewinds,
    without_checkpoint,
)

pytestmark = pytest.mark.unit

T = "A.orders"


def translated(offsets: dict[TopicPartition, int], others: tuple[str, ...]) -> TranslatedOffsets:
    return TranslatedOffsets(
        offsets,
        group="order-service",
        source_alias="A",
        bootstrap_servers="b:9092",
        checkpoints_topic="A.checkpoints.internal",
        other_groups=others,
    )


def test_empty_offsets_are_refused_naming_the_groups_that_have_checkpoints() -> None:
    with pytest.raises(NoCheckpointsError) as refused:
        require_offsets(translated({}, ("orders-service", "billing", "order-service")))
    text = str(refused.value)
    assert (
        "group 'order-service' has no checkpoint from A in A.checkpoints.internal on b:9092" in text
    )
    assert "Groups that have checkpoints there: billing, orders-service." in text
    assert refused.value.other_groups == ("billing", "orders-service")
    with pytest.raises(NoCheckpointsError, match="is the checkpoint job running"):
        require_offsets(translated({}, ()))
    with pytest.raises(NoCheckpointsError, match="the mapping is empty"):
        require_offsets({})
    require_offsets(translated({TopicPartition(T, 0): 1}, ()))  # not empty: nothing raised


def test_partitions_without_an_offset_and_what_they_do() -> None:
    offsets = {TopicPartition(T, 1): 5}
    counts = {T: 3, "other": 4}
    assert without_checkpoint(offsets, counts) == [TopicPartition(T, 0), TopicPartition(T, 2)]
    assert without_checkpoint({TopicPartition(T, p): 0 for p in range(3)}, counts) == []
    assert "skipped" in reset_outcome("latest") and "skips" in reset_outcome(None)
    assert "start of the target's log" in reset_outcome("earliest")
    assert "raises" in reset_outcome("none")


def test_backward_moves_are_found_and_refused_with_their_sizes() -> None:
    offsets = {TopicPartition(T, 0): 10, TopicPartition(T, 1): 1201, TopicPartition(T, 2): 7}
    committed = {TopicPartition(T, 0): 10, TopicPartition(T, 1): 2130, TopicPartition(T, 2): 3}
    moves = rewinds(offsets, committed)
    assert moves == {TopicPartition(T, 1): (2130, 1201)}
    with pytest.raises(RewindRefusedError, match=r"A.orders\[1\] 2130 -> 1201 \(929 offsets"):
        refuse_rewinds("orders-service", moves, "b:9092")
    refuse_rewinds("orders-service", {}, "b:9092")  # forward or equal: nothing raised


def test_a_source_topic_name_is_refused_with_the_mirrors_copy() -> None:
    policy = DefaultReplicationPolicy()
    on_b = {"A.orders", "A.payments", "C.orders"}
    with pytest.raises(TopicNotOnTargetError) as by_alias:
        misnamed_topics({"orders"}, on_b, policy, "A", "b:9092")
    assert by_alias.value.suggestions == {"orders": ["A.orders"]}
    assert "'orders' (the mirror's copy there is 'A.orders')" in str(by_alias.value)
    with pytest.raises(TopicNotOnTargetError) as any_alias:
        misnamed_topics({"orders", "gone"}, on_b, policy, None, "b:9092")
    assert any_alias.value.suggestions == {"gone": [], "orders": ["A.orders", "C.orders"]}
    misnamed_topics({"A.orders"}, on_b, policy, "A", "b:9092")  # present: nothing raised


# What librdkafka logged against a one-node Apache Kafka 4.3.1 with TLS and SASL listeners
LINES = {
    "refused": "127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused "
    "(after 0ms in state CONNECT)",
    "dns": "no-such-host.invalid:9092/bootstrap: Failed to resolve 'no-such-host.invalid:9092': "
    "Name or service not known (after 1ms in state CONNECT)",
    "tls": "ssl://127.0.0.1:57649/bootstrap: SSL handshake failed: error:0A000086:SSL routines::"
    "certificate verify failed: broker certificate could not be verified, verify that "
    "ssl.ca.location is correctly configured or root CA certificates are installed (install "
    "ca-certificates package) (after 96ms in state SSL_HANDSHAKE)",
    "sasl": "sasl_ssl://127.0.0.1:35975/bootstrap: SASL authentication error: Authentication "
    "failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512 "
    "(after 340ms in state AUTH_REQ)",
    "mismatch": "127.0.0.1:57649/bootstrap: Disconnected: connection closed by peer: receive 0 "
    "after POLLIN (after 53ms in state APIVERSION_QUERY)",
}


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("refused", "nothing accepts connections at 127.0.0.1:1"),
        ("dns", "DNS: the host of no-such-host.invalid:9092 does not resolve"),
        ("tls", "TLS: the handshake failed (error:0A000086:SSL routines::certificate verify"),
        ("sasl", "SASL: the broker refused the credentials (Authentication failed during"),
        ("mismatch", "the broker closed the connection on the first request: security.protocol"),
    ],
)
def test_the_cause_is_named_from_librdkafkas_lines(kind: str, expected: str) -> None:
    found = diagnose(["1/1 brokers are down", LINES[kind], "1/1 brokers are down"])
    assert found is not None and found.startswith(expected), found
    assert "(after" not in found


def test_dns_wins_over_a_later_refusal_and_nothing_is_invented() -> None:
    assert diagnose([LINES["dns"], LINES["refused"]]).startswith("DNS")  # type: ignore[union-attr]
    assert diagnose(["1/1 brokers are down"]) is None
    assert diagnose([]) is None
