"""What the configuration keys mean: secrets, inherited client keys, ignored MM2 keys."""

from __future__ import annotations

from pydantic import SecretStr

__all__ = [
    "IGNORED_KEYS",
    "IGNORED_PREFIXES",
    "IGNORED_PREFIX_REASONS",
    "MASK",
    "ignored_reason",
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

_CONNECT_WORKER = "Kafka Connect worker setting (there are no Connect workers)"
_CLIENT_PREFIX = (
    "client settings of MM2's Connect workers and connectors; set ours per cluster "
    "as <alias>.consumer.*, <alias>.producer.*, <alias>.admin.*"
)
IGNORED_KEYS.update(
    {
        "name": "MM2 names each connector itself",
        "connector.class": "MM2 names each connector itself",
        "source.cluster.alias": "the flow X->Y names the clusters",
        "target.cluster.alias": "the flow X->Y names the clusters",
        "exactly.once.source.support": "the mirror is always exactly once",
        "exactly.once.support": "the mirror is always exactly once",
        "transaction.boundary": "the mirror sizes its own transactions (mm.mirror.*)",
        "transaction.boundary.interval.ms": "the mirror sizes its own transactions (mm.mirror.*)",
        "offset.flush.interval.ms": "Spark checkpoints replace Connect offset flushes",
        "task.shutdown.graceful.timeout.ms": "there are no Connect tasks",
        "metric.reporters": "metrics are served with mm.metrics.port (Prometheus)",
        **dict.fromkeys(
            (
                "auto.include.jmx.reporter",
                "metrics.num.samples",
                "metrics.sample.window.ms",
                "metrics.recording.level",
            ),
            "metrics are served with mm.metrics.port (Prometheus)",
        ),
        "forwarding.admin.class": "topics are created by our own admin client",
        "topic.creation.enable": "remote topics are always created",
        "transforms": "records are copied as bytes, without transformations",
        "predicates": "records are copied as bytes, without transformations",
        "errors.retry.timeout": "only errors.tolerance and errors.deadletterqueue.topic.name",
        "errors.retry.delay.max.ms": "only errors.tolerance and errors.deadletterqueue.topic.name",
        "errors.log.enable": "only errors.tolerance and errors.deadletterqueue.topic.name",
        "errors.log.include.messages": (
            "only errors.tolerance and errors.deadletterqueue.topic.name"
        ),
        "errors.deadletterqueue.topic.replication.factor": "the dead letter topic uses "
        "replication.factor",
        "errors.deadletterqueue.context.headers.enable": "dead letter records carry no "
        "context headers",
        **dict.fromkeys(
            (
                "listeners",
                "admin.listeners",
                "plugin.path",
                "plugin.discovery",
                "config.action.reload",
                "scheduled.rebalance.max.delay.ms",
                "connect.protocol",
                "worker.sync.timeout.ms",
                "worker.unsync.backoff.ms",
                "connector.client.config.override.policy",
            ),
            _CONNECT_WORKER,
        ),
    }
)

# Prefixes of MM2 / Kafka Connect settings we accept and do not use: prefix -> why.
IGNORED_PREFIX_REASONS: dict[str, str] = {
    **dict.fromkeys(
        ("offset.storage.", "config.storage.", "status.storage.", "config.providers"),
        "Kafka Connect setting",
    ),
    **dict.fromkeys(("rest.", "inter.worker."), _CONNECT_WORKER),
    **dict.fromkeys(
        ("transforms.", "predicates.", "key.converter.", "value.converter.", "header.converter."),
        "records are copied as bytes, without transformations",
    ),
    **dict.fromkeys(
        (
            "consumer.",
            "producer.",
            "admin.",
            "source.cluster.",
            "target.cluster.",
            "source.consumer.",
            "source.producer.",
            "source.admin.",
            "target.consumer.",
            "target.producer.",
            "target.admin.",
        ),
        _CLIENT_PREFIX,
    ),
}
IGNORED_PREFIXES = tuple(IGNORED_PREFIX_REASONS)


def ignored_reason(key: str) -> str | None:
    """Why an MM2 / Kafka Connect key we do not use is accepted; None for other keys."""
    if key in IGNORED_KEYS:
        return IGNORED_KEYS[key]
    for prefix, reason in IGNORED_PREFIX_REASONS.items():
        if key.startswith(prefix):
            return reason
    return None
