"""What the configuration keys mean: secrets, inherited client keys, ignored MM2 keys."""

from __future__ import annotations

from pydantic import SecretStr

__all__ = [
    "IGNORED_KEYS",
    "MASK",
    "inherited_client_key",
    "is_secret_key",
    "mask_if_secret",
    "reveal",
]

MASK = "******"

# Suffixes of Kafka client properties that hold credentials or private keys
# (Kafka's PASSWORD-typed settings, plus schema-registry style user info).
_SECRET_SUFFIXES = (
    "password",
    "sasl.jaas.config",
    "ssl.keystore.key",
    "ssl.keystore.certificate.chain",
    "basic.auth.user.info",
)
_SECRET_WORDS = ("secret", "private.key", "credentials")


def is_secret_key(key: str) -> bool:
    """True when a property named ``key`` (any prefix) holds a credential."""
    k = key.lower()
    return k.endswith(_SECRET_SUFFIXES) or any(word in k for word in _SECRET_WORDS)


def mask_if_secret(key: str, value: object) -> object:
    """The value to show in messages: MASK for secrets, the value otherwise."""
    if isinstance(value, SecretStr) or (value is not None and is_secret_key(key)):
        return MASK
    return value


def reveal(value: str | SecretStr) -> str:
    return value.get_secret_value() if isinstance(value, SecretStr) else value


def inherited_client_key(key: str) -> bool:
    """Top-level client settings every cluster inherits unless it sets its own.

    MM2 copies top-level ``security.protocol``, ``ssl.*`` and ``sasl.*`` into each
    cluster's client properties, so files often set them once for all clusters.
    """
    return key == "security.protocol" or key.startswith(("ssl.", "sasl."))


# MM2 / Kafka Connect keys we accept and do not use: key -> why.
# They are kept in MirrorConfig.other / FlowConfig.other and logged at info.
IGNORED_KEYS: dict[str, str] = {
    "tasks.max": "Spark decides parallelism (one task per topic-partition range)",
    "sync.topic.acls.enabled": "topic ACLs are not synchronised yet (docs/security.md)",
    "sync.topic.acls.interval.seconds": "topic ACLs are not synchronised yet (docs/security.md)",
    "emit.offset-syncs.enabled": "offset syncs are always written",
    "topic.filter.class": "only the regex filters (topics, topics.exclude) are supported",
    "group.filter.class": "only the regex filters (groups, groups.exclude) are supported",
    "config.property.filter.class": (
        "the default filter is built in: config.properties.exclude and use.defaults.from"
    ),
    "consumer.poll.timeout.ms": "Spark micro-batches set the polling cadence",
    "admin.timeout.ms": "clients use librdkafka timeouts",
    "dedicated.mode.enable.internal.rest": "there is no Connect REST server",
    "key.converter": "records are copied as bytes",
    "value.converter": "records are copied as bytes",
    "header.converter": "records are copied as bytes",
    "offset.flush.timeout.ms": "Spark checkpoints replace Connect offset flushes",
    "add.source.alias.to.metrics": "metrics always carry the flow",
    "use.incremental.alter.configs": "topic configs are altered incrementally",
}

# Prefixes of Connect worker settings that MM2 reads and we have no use for.
IGNORED_PREFIXES = ("offset.storage.", "config.storage.", "status.storage.", "config.providers")
