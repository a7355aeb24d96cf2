"""The one place that turns Java Kafka client properties into librdkafka settings.

MM2 files configure Java clients; our clients are confluent-kafka (librdkafka) and
kafka-python. A cluster's properties for one role are its common properties
overlaid with the role-prefixed ones (``A.consumer.fetch.max.bytes`` only for the
consumer), then converted key by key:

=============================================  =========================================
Java property                                  librdkafka
=============================================  =========================================
``bootstrap.servers`` ``client.id``            same name
``security.protocol`` ``sasl.mechanism``       same name
``sasl.jaas.config`` Plain/ScramLoginModule    ``sasl.username``, ``sasl.password``
``sasl.jaas.config`` OAuthBearerLoginModule    ``sasl.oauthbearer.*`` (OIDC when
                                               ``sasl.oauthbearer.token.endpoint.url``
                                               is set, else the unsecured test JWT)
``sasl.jaas.config`` Krb5LoginModule           ``sasl.kerberos.keytab``/``.principal``
``ssl.truststore.location`` (PEM)              ``ssl.ca.location``
``ssl.truststore.certificates``                ``ssl.ca.pem``
``ssl.keystore.location`` (PEM)                ``ssl.certificate.location`` and
                                               ``ssl.key.location`` (same file)
``ssl.keystore.location`` (PKCS12)             ``ssl.keystore.location``/``.password``
``ssl.keystore.key`` / ``.certificate.chain``  ``ssl.key.pem`` / ``ssl.certificate.pem``
``ssl.endpoint.identification.algorithm``      same name: ``https``; empty -> ``none``
``fetch.max.wait.ms``                          ``fetch.wait.max.ms`` (consumer)
``max.request.size``                           ``message.max.bytes`` (producer)
``buffer.memory``                              ``queue.buffering.max.kbytes`` (producer)
``send.buffer.bytes`` ``receive.buffer.bytes``  ``socket.send/receive.buffer.bytes``
``librdkafka.<name>``                          ``<name>`` verbatim (escape hatch)
=============================================  =========================================

Keys in ``SAME_NAME`` keep their name (for the roles listed); keys in
``JAVA_ONLY`` have no librdkafka meaning (serializers, JVM security providers,
``max.poll.records`` ...) and are dropped; any other key is dropped and reported
so the loader can warn. JKS truststores/keystores cannot be read by librdkafka
and are a ConfigError (convert them to PEM or PKCS12).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from pydantic import SecretStr

from mm.config.jaas import parse_jaas
from mm.config.keys import MASK, reveal
from mm.errors import ConfigError

__all__ = ["ROLES", "Role", "kafka_python_from_librdkafka", "role_properties", "to_librdkafka"]

Role = Literal["consumer", "producer", "admin"]
ROLES: tuple[Role, ...] = ("consumer", "producer", "admin")
_ALL = frozenset(ROLES)
_CONSUMER = frozenset({"consumer"})
_PRODUCER = frozenset({"producer"})

# Java name == librdkafka name, and the roles the setting means something to.
SAME_NAME: dict[str, frozenset[str]] = {
    **dict.fromkeys(
        [
            "bootstrap.servers",
            "client.id",
            "client.rack",
            "client.dns.lookup",
            "metadata.max.age.ms",
            "connections.max.idle.ms",
            "socket.connection.setup.timeout.ms",
            "reconnect.backoff.ms",
            "reconnect.backoff.max.ms",
            "retry.backoff.ms",
            "retry.backoff.max.ms",
            "security.protocol",
            "sasl.mechanism",
            "sasl.kerberos.service.name",
            "sasl.kerberos.min.time.before.relogin",
            "sasl.oauthbearer.token.endpoint.url",
            "ssl.key.password",
        ],
        _ALL,
    ),
    **dict.fromkeys(
        [
            "group.id",
            "group.instance.id",
            "group.protocol",
            "session.timeout.ms",
            "heartbeat.interval.ms",
            "max.poll.interval.ms",
            "enable.auto.commit",
            "auto.commit.interval.ms",
            "auto.offset.reset",
            "fetch.min.bytes",
            "fetch.max.bytes",
            "max.partition.fetch.bytes",
            "isolation.level",
            "check.crcs",
            "allow.auto.create.topics",
        ],
        _CONSUMER,
    ),
    **dict.fromkeys(
        [
            "acks",
            "linger.ms",
            "batch.size",
            "compression.type",
            "enable.idempotence",
            "retries",
            "delivery.timeout.ms",
            "request.timeout.ms",
            "max.in.flight.requests.per.connection",
            "transactional.id",
            "transaction.timeout.ms",
        ],
        _PRODUCER,
    ),
}

# Java name -> (librdkafka name, roles).
RENAMED: dict[str, tuple[str, frozenset[str]]] = {
    "fetch.max.wait.ms": ("fetch.wait.max.ms", _CONSUMER),
    "max.request.size": ("message.max.bytes", _PRODUCER),
    "send.buffer.bytes": ("socket.send.buffer.bytes", _ALL),
    "receive.buffer.bytes": ("socket.receive.buffer.bytes", _ALL),
}

# Meaningful only to the JVM client (or consumed by the security mapping below).
JAVA_ONLY = frozenset(
    {
        "key.serializer",
        "value.serializer",
        "key.deserializer",
        "value.deserializer",
        "interceptor.classes",
        "metric.reporters",
        "metrics.num.samples",
        "metrics.recording.level",
        "metrics.sample.window.ms",
        "auto.include.jmx.reporter",
        "partitioner.class",
        "partitioner.ignore.keys",
        "partitioner.adaptive.partitioning.enable",
        "partitioner.availability.timeout.ms",
        "partition.assignment.strategy",
        "max.block.ms",
        "max.poll.records",
        "default.api.timeout.ms",
        "exclude.internal.topics",
        "security.providers",
        "ssl.protocol",
        "ssl.enabled.protocols",
        "ssl.cipher.suites",
        "ssl.keymanager.algorithm",
        "ssl.trustmanager.algorithm",
        "ssl.secure.random.implementation",
        "ssl.provider",
        "ssl.engine.factory.class",
        "ssl.truststore.type",
        "ssl.truststore.password",
        "ssl.keystore.type",
        "sasl.login.class",
        "sasl.login.callback.handler.class",
        "sasl.client.callback.handler.class",
        "sasl.kerberos.kinit.cmd",
        "sasl.kerberos.ticket.renew.jitter",
        "sasl.kerberos.ticket.renew.window.factor",
    }
)
_JAVA_ONLY_PREFIXES = (
    "sasl.login.refresh.",
    "sasl.login.retry.",
    "sasl.login.connect.",
    "sasl.login.read.",
    "sasl.oauthbearer.jwks.",
    "sasl.oauthbearer.expected.",
    "sasl.oauthbearer.clock.",
    # Connect worker storage settings often set per cluster in MM2 files
    "offset.storage.",
    "config.storage.",
    "status.storage.",
)

_PEM_EXT = (".pem", ".crt", ".cer")
_JKS_EXT = (".jks", ".keystore", ".truststore")
_P12_EXT = (".p12", ".pfx")


def role_properties(
    client: Mapping[str, str | SecretStr], role: Role
) -> dict[str, str | SecretStr]:
    """Common client properties overlaid with ``<role>.``-prefixed ones (prefix removed)."""
    prefixes = tuple(f"{r}." for r in ROLES)
    merged: dict[str, str | SecretStr] = {
        k: v for k, v in client.items() if not k.startswith(prefixes)
    }
    own = f"{role}."
    merged.update({k[len(own) :]: v for k, v in client.items() if k.startswith(own)})
    return merged


def to_librdkafka(
    props: Mapping[str, str | SecretStr],
    role: Role,
    *,
    key_name: Callable[[str], str] = str,
) -> tuple[dict[str, str], list[str]]:
    """Convert one role's Java properties; returns (librdkafka conf, dropped unknown keys).

    ``key_name`` maps a property name to the key as the user wrote it, for errors.
    """
    conf: dict[str, str] = {}
    dropped: list[str] = []
    plain = {k: reveal(v) for k, v in props.items()}
    for key, value in plain.items():
        if key.startswith("librdkafka."):
            continue  # applied last, see below
        elif key in SAME_NAME:
            if role in SAME_NAME[key]:
                conf[key] = value
        elif key in RENAMED:
            name, roles = RENAMED[key]
            if role in roles:
                conf[name] = value
        elif key == "buffer.memory":
            if role == "producer" and value.isdigit():
                conf["queue.buffering.max.kbytes"] = str(max(1, int(value) // 1024))
        elif key == "ssl.endpoint.identification.algorithm":
            conf[key] = _endpoint_identification(value, key_name(key))
        elif key in _SECURITY_KEYS:
            continue  # handled below, they depend on each other
        elif key in JAVA_ONLY or key.startswith(_JAVA_ONLY_PREFIXES):
            continue
        else:
            dropped.append(key)
    conf.update(_sasl(plain, key_name))
    conf.update(_ssl(plain, key_name))
    # librdkafka.* wins over anything derived from Java names
    conf.update(
        {k.removeprefix("librdkafka."): v for k, v in plain.items() if k.startswith("librdkafka.")}
    )
    return conf, dropped


_SECURITY_KEYS = frozenset(
    {
        "sasl.jaas.config",
        "ssl.truststore.location",
        "ssl.truststore.certificates",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.keystore.key",
        "ssl.keystore.certificate.chain",
    }
)


def _endpoint_identification(value: str, shown_key: str) -> str:
    if value.lower() == "https":
        return "https"
    if value == "":
        return "none"
    raise ConfigError(shown_key, value, "'https' or empty (no host name verification)")


def _sasl(props: Mapping[str, str], key_name: Callable[[str], str]) -> dict[str, str]:
    text = props.get("sasl.jaas.config")
    if not text:
        return {}
    shown = key_name("sasl.jaas.config")
    try:
        entry = parse_jaas(text)
    except ValueError as exc:
        raise ConfigError(shown, MASK, f"a JAAS login module entry ({exc})") from None
    module = entry.login_module.rsplit(".", 1)[-1]
    opts = entry.options
    if module in ("PlainLoginModule", "ScramLoginModule"):
        out = {"sasl.username": opts.get("username", ""), "sasl.password": opts.get("password", "")}
        return {k: v for k, v in out.items() if v}
    if module == "OAuthBearerLoginModule":
        if props.get("sasl.oauthbearer.token.endpoint.url"):
            named = {
                "sasl.oauthbearer.client.id": opts.get("clientId"),
                "sasl.oauthbearer.client.secret": opts.get("clientSecret"),
                "sasl.oauthbearer.scope": opts.get("scope"),
            }
            return {"sasl.oauthbearer.method": "oidc", **{k: v for k, v in named.items() if v}}
        # unsecured JWTs are for development brokers only
        sub = opts.get("unsecuredLoginStringClaim_sub", "")
        return {
            "enable.sasl.oauthbearer.unsecure.jwt": "true",
            **({"sasl.oauthbearer.config": f"principal={sub}"} if sub else {}),
        }
    if module == "Krb5LoginModule":
        named = {
            "sasl.kerberos.keytab": opts.get("keyTab"),
            "sasl.kerberos.principal": opts.get("principal"),
        }
        return {k: v for k, v in named.items() if v}
    raise ConfigError(
        shown,
        MASK,
        "a PlainLoginModule, ScramLoginModule, OAuthBearerLoginModule or Krb5LoginModule entry",
    )


def _store_type(props: Mapping[str, str], which: str) -> str:
    """PEM, PKCS12 or JKS: the explicit ssl.<which>.type, else guessed from the file name."""
    explicit = props.get(f"ssl.{which}.type", "").upper()
    if explicit:
        return explicit
    location = props.get(f"ssl.{which}.location", "").lower()
    if location.endswith(_JKS_EXT):
        return "JKS"
    if location.endswith(_P12_EXT):
        return "PKCS12"
    return "PEM"  # Java would assume JKS; librdkafka reports unreadable files itself


def _ssl(props: Mapping[str, str], key_name: Callable[[str], str]) -> dict[str, str]:
    out: dict[str, str] = {}
    if props.get("ssl.truststore.certificates"):
        out["ssl.ca.pem"] = props["ssl.truststore.certificates"]
    trust = props.get("ssl.truststore.location")
    if trust:
        kind = _store_type(props, "truststore")
        if kind != "PEM":
            raise ConfigError(
                key_name("ssl.truststore.location"),
                trust,
                f"a PEM CA file (ssl.truststore.type=PEM); librdkafka cannot read a {kind} "
                "truststore, convert it with keytool/openssl",
            )
        out["ssl.ca.location"] = trust
    if props.get("ssl.keystore.key"):
        out["ssl.key.pem"] = props["ssl.keystore.key"]
    if props.get("ssl.keystore.certificate.chain"):
        out["ssl.certificate.pem"] = props["ssl.keystore.certificate.chain"]
    keystore = props.get("ssl.keystore.location")
    if keystore:
        kind = _store_type(props, "keystore")
        if kind == "PKCS12":
            out["ssl.keystore.location"] = keystore
            if props.get("ssl.keystore.password"):
                out["ssl.keystore.password"] = props["ssl.keystore.password"]
        elif kind == "PEM":
            # a Java PEM keystore holds key and certificate chain in one file
            out["ssl.certificate.location"] = keystore
            out["ssl.key.location"] = keystore
        else:
            raise ConfigError(
                key_name("ssl.keystore.location"),
                keystore,
                f"a PEM or PKCS12 keystore; librdkafka cannot read a {kind} keystore",
            )
    return out


# librdkafka name -> kafka-python keyword argument
_KAFKA_PYTHON: dict[str, str] = {
    "client.id": "client_id",
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "sasl.kerberos.service.name": "sasl_kerberos_service_name",
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
}


def kafka_python_from_librdkafka(conf: Mapping[str, str]) -> dict[str, Any]:
    """Connection and security kwargs for kafka-python, derived from the librdkafka conf."""
    kwargs: dict[str, Any] = {
        "bootstrap_servers": [s.strip() for s in conf["bootstrap.servers"].split(",") if s.strip()]
    }
    for name, kwarg in _KAFKA_PYTHON.items():
        if name in conf:
            kwargs[kwarg] = conf[name].upper() if name == "security.protocol" else conf[name]
    if "ssl.endpoint.identification.algorithm" in conf:
        kwargs["ssl_check_hostname"] = conf["ssl.endpoint.identification.algorithm"] == "https"
    return kwargs
