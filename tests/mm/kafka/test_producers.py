"""The connection settings kafka-python gets for DescribeProducers, and how the
producers holding a transaction open are named (pure)."""

from __future__ import annotations

import pytest

from mm.dr.transactions import describe_producers
from mm.kafka.producers import OpenProducer, kafka_python_config

pytestmark = pytest.mark.unit


def test_librdkafka_settings_become_kafka_pythons() -> None:
    conf = {
        "bootstrap.servers": "a:9093, b:9093",
        "security.protocol": "sasl_ssl",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "mm",
        "sasl.password": "secret",
        "ssl.ca.location": "/ca.pem",
        "ssl.endpoint.identification.algorithm": "none",
        "enable.idempotence": True,  # a tunable: left out
    }
    assert kafka_python_config(conf) == {
        "bootstrap_servers": ["a:9093", "b:9093"],
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": "mm",
        "sasl_plain_password": "secret",
        "ssl_cafile": "/ca.pem",
        "ssl_check_hostname": False,
    }
    with pytest.raises(ValueError, match=r"ssl\.ca\.pem has no kafka-python counterpart"):
        kafka_python_config({"bootstrap.servers": "a:1", "ssl.ca.pem": "-----BEGIN"})


def test_the_producers_holding_a_transaction_are_named_with_its_age() -> None:
    found = {
        ("t", 0): [OpenProducer(42, 3, 10, 1_000, "app-1", 5_000)],
        ("t", 1): [OpenProducer(7, 0, 4, -1, None, None)],
        ("u", 0): [],
    }
    assert describe_producers(found, 98_000, "asked so") == (
        "t[0]: producer 42 (epoch 3, transactional.id 'app-1'), its transaction open since "
        "offset 10 for 93 s; t[1]: producer 7 (epoch 0, transactional.id none listed), its "
        "transaction open since offset 4 (asked so)"
    )
    assert describe_producers({}, 0, "asked so") == "no producer listed (asked so)"
