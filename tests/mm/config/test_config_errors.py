"""Every invalid configuration is a ConfigError naming key, value and expectation."""

from __future__ import annotations

import sys

import pytest
from support.props import TWO_CLUSTERS

from mm.config import build_config
from mm.errors import ConfigError

pytestmark = pytest.mark.unit

BASE = TWO_CLUSTERS

# (extra properties, key named, value named, words of the expectation)
CASES = [
    pytest.param(
        {"clusters": ""}, "clusters", "", "one or more cluster aliases", id="empty-clusters"
    ),
    pytest.param({"clusters": " , "}, "clusters", " , ", "one or more", id="blank-clusters"),
    pytest.param({"clusters": "A, B.x"}, "clusters", "A, B.x", "'B.x' is not", id="bad-alias"),
    pytest.param(
        {"clusters": "A, B, C"}, "C.bootstrap.servers", None, "host:port", id="no-bootstrap"
    ),
    pytest.param(
        {"A.bootstrap.servers": "kafka1"},
        "A.bootstrap.servers",
        "kafka1",
        "host:port",
        id="no-port",
    ),
    pytest.param(
        {"A.bootstrap.servers": "k:70000"},
        "A.bootstrap.servers",
        "k:70000",
        "port 1-65535",
        id="bad-port",
    ),
    pytest.param(
        {"A.bootstrap.servers": " , "},
        "A.bootstrap.servers",
        " , ",
        "host:port",
        id="empty-bootstrap",
    ),
    pytest.param(
        {"A->C.enabled": "true"},
        "A->C.enabled",
        "C",
        "listed in clusters (A, B)",
        id="undefined-target",
    ),
    pytest.param(
        {"X->B.topics": ".*"}, "X->B.topics", "X", "listed in clusters", id="undefined-source"
    ),
    pytest.param(
        {"A->A.enabled": "true"}, "A->A.enabled", "A->A", "two different clusters", id="self-flow"
    ),
    pytest.param(
        {"A->B.emit.checkpoints.interval.seconds": "soon"},
        "A->B.emit.checkpoints.interval.seconds",
        "soon",
        "positive integer number of seconds",
        id="non-numeric-interval",
    ),
    pytest.param(
        {"emit.heartbeats.interval.seconds": "-1"},
        "emit.heartbeats.interval.seconds",
        "-1",
        "positive integer",
        id="negative-interval",
    ),
    pytest.param(
        {"sync.group.offsets.interval.seconds": "0"},
        "sync.group.offsets.interval.seconds",
        "0",
        "positive integer",
        id="zero-interval",
    ),
    pytest.param(
        {"refresh.topics.interval.seconds": "1.5"},
        "refresh.topics.interval.seconds",
        "1.5",
        "positive integer",
        id="fractional-interval",
    ),
    pytest.param(
        {"offset.lag.max": "-5"}, "offset.lag.max", "-5", "non-negative integer", id="lag"
    ),
    pytest.param({"A->B.enabled": "yes"}, "A->B.enabled", "yes", "true or false", id="bool"),
    pytest.param(
        {"A->B.topics": "orders, pay(ments"},
        "A->B.topics",
        "orders, pay(ments",
        "'pay(ments': missing )",
        id="bad-regex",
    ),
    pytest.param(
        {"groups.exclude": "[a-"},
        "groups.exclude",
        "[a-",
        "regular expressions",
        id="bad-group-regex",
    ),
    pytest.param(
        {"topics.blacklist": "*x"},
        "topics.blacklist",
        "*x",
        "nothing to repeat",
        id="bad-legacy-key",
    ),
    pytest.param(
        {"offset-syncs.topic.location": "middle"},
        "offset-syncs.topic.location",
        "middle",
        "'source' or 'target'",
        id="syncs-location",
    ),
    pytest.param(
        {"A->B.errors.tolerance": "some"},
        "A->B.errors.tolerance",
        "some",
        "'none' or 'all'",
        id="errors-tolerance",
    ),
    pytest.param(
        {"A->B.use.defaults.from": "both"},
        "A->B.use.defaults.from",
        "both",
        "'target' or 'source'",
        id="use-defaults-from",
    ),
    pytest.param(
        {"use.defaults.from": ""},
        "use.defaults.from",
        "",
        "'target' or 'source'",
        id="defaults-empty",
    ),
    pytest.param(
        {"replication.policy.class": "com.acme.MyPolicy"},
        "replication.policy.class",
        "com.acme.MyPolicy",
        "DefaultReplicationPolicy",
        id="policy",
    ),
    pytest.param(
        {"A->B.replication.policy.separator": ""},
        "A->B.replication.policy.separator",
        "",
        "non-empty separator",
        id="separator",
    ),
    pytest.param(
        {"replication.factor": "0"},
        "replication.factor",
        "0",
        "-1 (the broker's default.replication.factor)",
        id="rf-0",
    ),
    pytest.param(
        {"errors.deadletterqueue.topic.name": "bad topic"},
        "errors.deadletterqueue.topic.name",
        "bad topic",
        "Kafka topic name",
        id="dlq-name",
    ),
    pytest.param({"mm.state.dir": "  "}, "mm.state.dir", "  ", "directory path", id="state-dir"),
    pytest.param(
        {"A.ssl.truststore.location": "/etc/kafka/truststore.jks"},
        "A.ssl.truststore.location",
        "/etc/kafka/truststore.jks",
        "PEM CA file",
        id="jks-truststore",
    ),
    pytest.param(
        {"ssl.truststore.location": "/etc/ca", "ssl.truststore.type": "PKCS12"},
        "ssl.truststore.location",
        "/etc/ca",
        "PKCS12 truststore",
        id="inherited-truststore",
    ),
    pytest.param(
        {"B.consumer.ssl.keystore.location": "/etc/k.jks"},
        "B.consumer.ssl.keystore.location",
        "/etc/k.jks",
        "PEM or PKCS12 keystore",
        id="jks-keystore",
    ),
    pytest.param(
        {"A.ssl.endpoint.identification.algorithm": "dns"},
        "A.ssl.endpoint.identification.algorithm",
        "dns",
        "'https' or empty",
        id="endpoint-id",
    ),
]


@pytest.mark.parametrize(("extra", "key", "value", "expected"), CASES)
def test_bad_config_is_a_config_error(
    extra: dict[str, str], key: str, value: str | None, expected: str
) -> None:
    with pytest.raises(ConfigError) as info:
        build_config({**BASE, **extra})
    err = info.value
    assert err.key == key
    assert err.value == value
    assert expected in err.expected
    message = str(err)
    assert key in message
    assert (repr(value) if value is not None else "<missing>") in message
    assert expected in message
    # no pydantic traceback or wording leaks through
    assert err.__cause__ is None
    assert err.__context__ is None or err.__suppress_context__
    assert "validation error" not in message.lower()
    assert "pydantic" not in message.lower()


def test_missing_clusters_key() -> None:
    with pytest.raises(ConfigError) as info:
        build_config({"A.bootstrap.servers": "a:1"})
    assert info.value.key == "clusters"
    assert info.value.value is None
    assert "<missing>" in str(info.value)


@pytest.mark.parametrize(
    "jaas",
    [
        'org.apache.kafka.common.security.plain.PlainLoginModule username="u" password="hunter2";',
        'com.example.CustomLoginModule required token="hunter2";',
        'org.apache.kafka.common.security.plain.PlainLoginModule required password="hunter2"; x',
    ],
    ids=["no-flag", "unknown-module", "trailing-text"],
)
def test_bad_jaas_config_names_key_but_never_the_secret(jaas: str) -> None:
    with pytest.raises(ConfigError) as info:
        build_config({**BASE, "A.sasl.jaas.config": jaas})
    assert info.value.key == "A.sasl.jaas.config"
    assert info.value.value == "******"
    assert "hunter2" not in str(info.value)
    assert "hunter2" not in repr(info.value.args)


def test_policy_check_without_mm_client_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mm_client.policy", None)  # import fails
    build_config({**BASE, "replication.policy.class": "IdentityReplicationPolicy"})
    with pytest.raises(ConfigError) as info:
        build_config({**BASE, "replication.policy.class": "Custom"})
    assert info.value.key == "replication.policy.class"
    assert "org.apache.kafka.connect.mirror.DefaultReplicationPolicy" in info.value.expected


def test_short_and_long_policy_names_accepted() -> None:
    for name in (
        "org.apache.kafka.connect.mirror.DefaultReplicationPolicy",
        "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
        "DefaultReplicationPolicy",
        "IdentityReplicationPolicy",
    ):
        flow = build_config({**BASE, "replication.policy.class": name}).flow("A", "B")
        assert flow.replication_policy_class == name


def test_global_keys_are_validated_without_any_flow() -> None:
    props = {k: v for k, v in BASE.items() if "->" not in k}
    with pytest.raises(ConfigError) as info:
        build_config({**props, "emit.checkpoints.interval.seconds": "often"})
    assert info.value.key == "emit.checkpoints.interval.seconds"
