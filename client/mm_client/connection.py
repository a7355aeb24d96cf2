"""Talking to one cluster from a librdkafka property dict: configs, deadlines, errors.

Every failover function takes ``config``, the librdkafka properties of one
cluster (``{"bootstrap.servers": "b1:9092", "security.protocol": ...}``). Like
MM2's ``RemoteClusterUtils``, which reads the replication policy from the same
properties, the MM2 keys ``replication.policy.class``,
``replication.policy.separator``,
``replication.policy.internal.topic.separator.enabled`` and
``source.cluster.alias`` may be included: they are taken out before the dict
reaches librdkafka (which would reject them) and select the policy, unless the
caller passes one explicitly.

Helpers here never join a consumer group and never commit: throwaway consumers
get a unique ``group.id`` only because librdkafka wants one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from mm_client.cluster_errors import ClusterUnavailableError
from mm_client.diagnosis import diagnose
from mm_client.kafka.clients import LIBRDKAFKA_LOGGER, new_admin, reader_conf, throwaway_group
from mm_client.kafka.errors import describe_exception, error_code
from mm_client.kafka_python_config import is_kafka_python_style, map_kafka_python
from mm_client.policy import DefaultReplicationPolicy, ReplicationPolicy, policy_from_class_name

__all__ = [
    "POLICY_KEYS",
    "Deadline",
    "ErrorTrail",
    "admin_client",
    "bootstrap_of",
    "list_topic_names",
    "prepare",
    "throwaway_consumer_conf",
]

logger = logging.getLogger("mm_client.config")

POLICY_KEYS: Final = (
    "replication.policy.class",
    "replication.policy.separator",
    "replication.policy.internal.topic.separator.enabled",
    "source.cluster.alias",
)

# librdkafka codes that mean "the cluster did not answer", not "the cluster said no"
UNREACHABLE_CODES: Final = frozenset(
    {"_TRANSPORT", "_TIMED_OUT", "_ALL_BROKERS_DOWN", "_RESOLVE", "_MSG_TIMED_OUT"}
)


def prepare(
    config: Mapping[str, Any], replication_policy: ReplicationPolicy | None = None
) -> tuple[dict[str, Any], ReplicationPolicy]:
    """Split ``config`` into librdkafka properties and the replication policy.

    An explicit ``replication_policy`` wins over policy keys in ``config``; with
    neither, MM2's default (``DefaultReplicationPolicy``, separator ``.``).
    kafka-python style keys are mapped first (:func:`map_kafka_python`). Raises
    ``ValueError`` when no bootstrap servers are configured, or a kafka-python key
    cannot be mapped.
    """
    if not isinstance(config, Mapping):
        raise TypeError(f"config must be a mapping of librdkafka properties, got {type(config)}")
    conf = dict(config)
    if is_kafka_python_style(conf):
        mapped = map_kafka_python(conf)
        conf = mapped.properties
        logger.info("%s", mapped.note())
    policy_props = {key: conf.pop(key) for key in POLICY_KEYS if key in conf}
    if not (conf.get("bootstrap.servers") or conf.get("metadata.broker.list")):
        given = ", ".join(sorted(map(str, conf))) or "nothing"
        raise ValueError(
            "config has no bootstrap.servers: expected librdkafka properties "
            "({'bootstrap.servers': 'host:9092', ...}) or kafka-python settings "
            f"({{'bootstrap_servers': 'host:9092', ...}}); got {given}"
        )
    if replication_policy is not None:
        return conf, replication_policy
    if not policy_props:
        return conf, DefaultReplicationPolicy()
    enabled = str(
        policy_props.get("replication.policy.internal.topic.separator.enabled", "true")
    ).strip()
    policy = policy_from_class_name(
        str(policy_props.get("replication.policy.class", "DefaultReplicationPolicy")),
        str(policy_props.get("replication.policy.separator", ".")),
        policy_props.get("source.cluster.alias"),
        internal_topic_separator_enabled=enabled.lower() != "false",
    )
    return conf, policy


def bootstrap_of(conf: Mapping[str, Any]) -> str:
    """The bootstrap servers as configured, for error messages."""
    return str(conf.get("bootstrap.servers") or conf.get("metadata.broker.list") or "?")


class Deadline:
    """A point in time ``timeout`` seconds from now (monotonic clock)."""

    __slots__ = ("end", "timeout")

    def __init__(self, timeout: float) -> None:
        if not timeout > 0:
            raise ValueError(f"timeout must be positive, got {timeout!r}")
        self.timeout = float(timeout)
        self.end = time.monotonic() + self.timeout

    def remaining(self, floor: float = 0.0) -> float:
        """Seconds left, never below ``floor`` (librdkafka treats 0 as "don't wait")."""
        return max(floor, self.end - time.monotonic())

    def expired(self) -> bool:
        return time.monotonic() >= self.end


class ErrorTrail:
    """Remembers why a client could not reach its cluster: an ``error_cb`` and a log sink.

    librdkafka says *why* it cannot connect (DNS, refused, TLS, SASL) in its log
    lines and ``error_cb`` only, not in the timeout it raises; this is what lets a
    timeout message name the cause (:func:`mm_client.diagnosis.diagnose`). Both
    are delivered when the client's queue is served, so :meth:`describe` serves it
    first. Every callback and log line still reaches the caller's own ``error_cb``
    and ``logger`` (by default :data:`LIBRDKAFKA_LOGGER`, quiet unless the
    application configures logging).
    """

    __slots__ = ("_chained", "_lines", "_logger", "last")

    _KEPT: Final = 20

    def __init__(
        self, chained: Callable[[KafkaError], None] | None = None, logger: Any = None
    ) -> None:
        self._chained = chained
        self._logger = logger if logger is not None else LIBRDKAFKA_LOGGER
        self._lines: list[str] = []
        self.last: KafkaError | None = None

    @classmethod
    def install(cls, conf: dict[str, Any]) -> ErrorTrail:
        """Replace ``conf``'s ``error_cb`` and ``logger`` by a trail that still calls them."""
        trail = cls(conf.pop("error_cb", None), conf.pop("logger", None))
        conf["error_cb"] = trail
        conf["logger"] = trail
        return trail

    def __call__(self, err: KafkaError) -> None:
        self.last = err
        self._remember(err.str())
        if self._chained is not None:
            self._chained(err)

    def log(self, level: int, msg: str, *args: Any) -> None:
        """What confluent-kafka calls on a ``logger`` for each librdkafka line."""
        self._remember(msg % args if args else msg)
        self._logger.log(level, msg, *args)

    def _remember(self, line: str) -> None:
        self._lines.append(line)
        del self._lines[: -self._KEPT]

    def describe(self, client: Any = None) -> str:
        """`` (<cause>)`` for an error message, or ``""`` when nothing was reported.

        ``client`` (still open): its queue is served first, so the lines it has
        not delivered yet count.
        """
        if client is not None:
            client.poll(0)
        cause = diagnose(self._lines)
        if cause is not None:
            return f" ({cause})"
        return f" (last client error: {self.last.str()})" if self.last is not None else ""


def throwaway_consumer_conf(conf: Mapping[str, Any], purpose: str) -> dict[str, Any]:
    """Consumer properties for an assign()-only consumer that never commits.

    The caller's ``group.id`` (that of their application, typically) is replaced
    by a unique one: such a consumer must never touch a real group. The caller's
    ``isolation.level`` is kept (librdkafka's default is ``read_committed``).
    """
    out = reader_conf(
        conf,
        group=throwaway_group(f"__mm-client-{purpose}", 12),
        isolation=None,
        drop=("group.instance.id", "on_commit"),
    )
    out.setdefault("client.id", f"mm-client-{purpose}")
    return out


def admin_client(conf: Mapping[str, Any]) -> AdminClient:
    """An AdminClient from client properties (consumer-only keys dropped)."""
    out = {
        k: v
        for k, v in conf.items()
        if k not in ("group.id", "group.instance.id", "on_commit", "enable.auto.commit")
    }
    return new_admin(out)


def list_topic_names(config: Mapping[str, Any], timeout: float) -> set[str]:
    """Names of all topics on the cluster (as MM2's ``listTopics``: internal ones excluded).

    Raises :class:`ClusterUnavailableError` if the cluster does not answer within
    ``timeout`` seconds.
    """
    deadline = Deadline(timeout)
    bootstrap = bootstrap_of(config)
    conf = dict(config)
    trail = ErrorTrail.install(conf)
    admin = admin_client(conf)
    try:
        metadata = admin.list_topics(timeout=deadline.remaining(0.001))
    except KafkaException as exc:
        raise ClusterUnavailableError(
            f"cluster {bootstrap} did not return topic metadata within {timeout:g}s: "
            f"{describe_exception(exc)}{trail.describe(admin)}",
            bootstrap_servers=bootstrap,
            code=error_code(exc),
        ) from exc
    # Kafka's own internal topics (__consumer_offsets, __transaction_state) are not listed
    return {name for name in metadata.topics if not name.startswith("__")}
