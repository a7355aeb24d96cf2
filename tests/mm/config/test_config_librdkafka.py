"""Java client properties -> librdkafka and kafka-python settings."""

from __future__ import annotations

from typing import Any

import pytest
from structlog.testing import capture_logs

from mm.config import ClusterConfig, build_config
from mm.config.librdkafka import Role, role_properties, to_librdkafka
from mm.errors import ConfigError

pytestmark = pytest.mark.unit

SCRAM = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="mirror" password="p@ss \\"quoted\\" w=rd";'
)


def cluster(**client: str) -> ClusterConfig:
    return ClusterConfig(alias="A", bootstrap_servers="a1:9092, a2:9092", client=client)


# (Java properties, role, librdkafka settings expected in the result)
TABLE: list[tuple[dict[str, str], Role, dict[str, str]]] = [
    ({}, "admin", {"bootstrap.servers": "a1:9092,a2:9092"}),
    ({"client.id": "mm"}, "consumer", {"client.id": "mm"}),
    ({"security.protocol": "SASL_SSL"}, "admin", {"security.protocol": "SASL_SSL"}),
    ({"sasl.mechanism": "SCRAM-SHA-256"}, "admin", {"sasl.mechanism": "SCRAM-SHA-256"}),
    (
        {"sasl.jaas.config": SCRAM},
        "producer",
        {"sasl.username": "mirror", "sasl.password": 'p@ss "quoted" w=rd'},
    ),
    (
        {
            "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
            "required username=bare password=word;"
        },
        "admin",
        {"sasl.username": "bare", "sasl.password": "word"},
    ),
    (
        {
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
            "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer."
            'OAuthBearerLoginModule required clientId="mm" clientSecret="s" scope="kafka";',
        },
        "consumer",
        {
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.client.id": "mm",
            "sasl.oauthbearer.client.secret": "s",
            "sasl.oauthbearer.scope": "kafka",
            "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
        },
    ),
    (
        {
            "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer."
            'OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="alice";'
        },
        "admin",
        {
            "enable.sasl.oauthbearer.unsecure.jwt": "true",
            "sasl.oauthbearer.config": "principal=alice",
        },
    ),
    (
        {
            "sasl.kerberos.service.name": "kafka",
            "sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required "
            'useKeyTab=true keyTab="/etc/mm.keytab" principal="mm@EXAMPLE.COM";',
        },
        "admin",
        {
            "sasl.kerberos.service.name": "kafka",
            "sasl.kerberos.keytab": "/etc/mm.keytab",
            "sasl.kerberos.principal": "mm@EXAMPLE.COM",
        },
    ),
    ({"ssl.truststore.location": "/ca.pem"}, "admin", {"ssl.ca.location": "/ca.pem"}),
    (
        {"ssl.truststore.location": "/ca", "ssl.truststore.type": "pem"},
        "admin",
        {"ssl.ca.location": "/ca"},
    ),
    ({"ssl.truststore.certificates": "-----BEGIN..."}, "admin", {"ssl.ca.pem": "-----BEGIN..."}),
    (
        {"ssl.keystore.location": "/client.pem", "ssl.key.password": "kp"},
        "admin",
        {
            "ssl.certificate.location": "/client.pem",
            "ssl.key.location": "/client.pem",
            "ssl.key.password": "kp",
        },
    ),
    (
        {"ssl.keystore.location": "/client.p12", "ssl.keystore.password": "ksp"},
        "admin",
        {"ssl.keystore.location": "/client.p12", "ssl.keystore.password": "ksp"},
    ),
    (
        {"ssl.keystore.key": "KEY", "ssl.keystore.certificate.chain": "CHAIN"},
        "admin",
        {"ssl.key.pem": "KEY", "ssl.certificate.pem": "CHAIN"},
    ),
    (
        {"ssl.endpoint.identification.algorithm": "HTTPS"},
        "admin",
        {"ssl.endpoint.identification.algorithm": "https"},
    ),
    (
        {"ssl.endpoint.identification.algorithm": ""},
        "admin",
        {"ssl.endpoint.identification.algorithm": "none"},
    ),
    ({"fetch.max.wait.ms": "200"}, "consumer", {"fetch.wait.max.ms": "200"}),
    ({"max.request.size": "2097152"}, "producer", {"message.max.bytes": "2097152"}),
    ({"buffer.memory": "33554432"}, "producer", {"queue.buffering.max.kbytes": "32768"}),
    ({"receive.buffer.bytes": "65536"}, "admin", {"socket.receive.buffer.bytes": "65536"}),
    ({"acks": "all", "linger.ms": "5"}, "producer", {"acks": "all", "linger.ms": "5"}),
    ({"isolation.level": "read_committed"}, "consumer", {"isolation.level": "read_committed"}),
    (
        {"librdkafka.statistics.interval.ms": "1000", "librdkafka.client.id": "raw"},
        "admin",
        {"statistics.interval.ms": "1000", "client.id": "raw"},
    ),
]


@pytest.mark.parametrize(("java", "role", "expected"), TABLE)
def test_conversion_table(java: dict[str, str], role: Role, expected: dict[str, str]) -> None:
    conf = cluster(**java).librdkafka(role)
    assert conf == {"bootstrap.servers": "a1:9092,a2:9092", **expected}


def test_role_prefixed_overrides_apply_to_their_role_only() -> None:
    c = cluster(
        **{
            "client.id": "common",
            "consumer.client.id": "reader",
            "consumer.fetch.max.bytes": "1048576",
            "producer.linger.ms": "50",
            "admin.request.timeout.ms": "5000",
        }
    )
    consumer, producer, admin = (c.librdkafka(r) for r in ("consumer", "producer", "admin"))
    assert consumer["client.id"] == "reader"
    assert consumer["fetch.max.bytes"] == "1048576"
    assert "linger.ms" not in consumer
    assert producer["client.id"] == "common"
    assert producer["linger.ms"] == "50"
    assert "fetch.max.bytes" not in producer
    assert admin["client.id"] == "common"
    assert "fetch.max.bytes" not in admin and "linger.ms" not in admin
    # request.timeout.ms is a producer setting in librdkafka
    assert "request.timeout.ms" not in admin


def test_settings_for_another_role_are_left_out() -> None:
    c = cluster(**{"acks": "all", "group.id": "g", "max.request.size": "1"})
    assert "acks" not in c.librdkafka("consumer")
    assert "group.id" not in c.librdkafka("producer")
    assert "message.max.bytes" not in c.librdkafka("admin")


def test_role_properties_merge() -> None:
    merged = role_properties({"a": "1", "consumer.a": "2", "producer.b": "3"}, "consumer")
    assert merged == {"a": "2"}


def test_java_only_keys_dropped_silently_unknown_keys_reported() -> None:
    props = {
        "bootstrap.servers": "a:1",
        "key.deserializer": "org.apache.kafka.common.serialization.ByteArrayDeserializer",
        "max.poll.records": "500",
        "ssl.truststore.type": "PEM",
        "offset.storage.replication.factor": "3",
        "made.up.setting": "1",
    }
    conf, dropped = to_librdkafka(props, "consumer")
    assert conf == {"bootstrap.servers": "a:1"}
    assert dropped == ["made.up.setting"]


def test_loader_warns_once_about_unmapped_client_keys() -> None:
    props = {
        "clusters": "A",
        "A.bootstrap.servers": "a:1",
        "A.made.up.setting": "1",
        "A.max.poll.records": "10",
    }
    with capture_logs() as logs:
        build_config(props)
    warnings = [e for e in logs if e.get("cluster") == "A"]
    assert len(warnings) == 1
    assert warnings[0]["keys"] == ["made.up.setting"]


def test_truststore_type_guessed_from_file_name() -> None:
    assert cluster(**{"ssl.truststore.location": "/x.crt"}).librdkafka()["ssl.ca.location"]
    for path in ("/x.jks", "/x.p12", "/x.truststore"):
        with pytest.raises(ConfigError) as info:
            cluster(**{"ssl.truststore.location": path}).librdkafka()
        assert info.value.key == "A.ssl.truststore.location"


def test_error_keys_name_role_prefix() -> None:
    c = cluster(**{"consumer.ssl.truststore.location": "/t.jks"})
    c.librdkafka("producer")  # not the consumer's truststore
    with pytest.raises(ConfigError) as info:
        c.librdkafka("consumer")
    assert info.value.key == "A.consumer.ssl.truststore.location"


def test_kafka_python_kwargs() -> None:
    c = cluster(
        **{
            "security.protocol": "sasl_ssl",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": SCRAM,
            "ssl.truststore.location": "/ca.pem",
            "ssl.keystore.location": "/me.pem",
            "ssl.key.password": "kp",
            "ssl.endpoint.identification.algorithm": "",
            "client.id": "mm",
            "consumer.fetch.max.bytes": "1",
        }
    )
    assert c.kafka_python("consumer") == {
        "bootstrap_servers": ["a1:9092", "a2:9092"],
        "client_id": "mm",
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "mirror",
        "sasl_plain_password": 'p@ss "quoted" w=rd',
        "ssl_cafile": "/ca.pem",
        "ssl_certfile": "/me.pem",
        "ssl_keyfile": "/me.pem",
        "ssl_password": "kp",
        "ssl_check_hostname": False,
    }


def test_confluent_kafka_accepts_converted_settings() -> None:
    """Every name we emit is one librdkafka knows (constructing a client checks that)."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient

    c = ClusterConfig(
        alias="A",
        bootstrap_servers="127.0.0.1:1",
        client={
            "security.protocol": "SASL_PLAINTEXT",  # no TLS context: files need not exist
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
            'required username="u" password="p";',
            "client.id": "mm-test",
            "client.dns.lookup": "use_all_dns_ips",
            "reconnect.backoff.ms": "50",
            "retry.backoff.ms": "100",
            "metadata.max.age.ms": "30000",
            "send.buffer.bytes": "131072",
            "ssl.truststore.location": "/ca.pem",
            "ssl.keystore.location": "/client.pem",
            "ssl.key.password": "kp",
            "ssl.endpoint.identification.algorithm": "https",
            "consumer.group.id": "g",
            "consumer.fetch.max.wait.ms": "100",
            "consumer.fetch.max.bytes": "52428800",
            "consumer.max.partition.fetch.bytes": "1048576",
            "consumer.isolation.level": "read_committed",
            "consumer.enable.auto.commit": "false",
            "consumer.auto.offset.reset": "earliest",
            "producer.acks": "all",
            "producer.linger.ms": "5",
            "producer.batch.size": "65536",
            "producer.compression.type": "lz4",
            "producer.enable.idempotence": "true",
            "producer.max.request.size": "1048576",
            "producer.buffer.memory": "33554432",
            "producer.delivery.timeout.ms": "120000",
            "producer.max.in.flight.requests.per.connection": "5",
        },
    )
    clients: list[Any] = [
        confluent_kafka.Consumer(c.librdkafka("consumer")),
        confluent_kafka.Producer(c.librdkafka("producer")),
        AdminClient({**c.librdkafka("admin")}),
    ]
    clients[0].close()
    clients[1].flush(0)
