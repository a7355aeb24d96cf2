"""kafka-python style settings (``bootstrap_servers=...``) as librdkafka properties.

Application teams with a kafka-python service hold their cluster settings as
``KafkaConsumer`` keyword arguments (``bootstrap_servers``, ``security_protocol``,
``sasl_plain_username``, ``ssl_cafile``...), often ``consumer.config`` itself.
The failover functions speak librdkafka (``bootstrap.servers``), so such a dict
is translated here, key by key, and the caller is told what was mapped:

* connection and security settings map to their librdkafka names;
* settings about how *their* consumer consumes (deserializers, poll sizes,
  auto-commit, timeouts...) do not concern a failover read and are left out,
  named in the note;
* a setting that cannot be expressed for librdkafka (``ssl_context``, an OAuth
  token provider, a socks proxy) is an error naming it, never dropped: losing a
  security setting would connect differently from the service.

Pure: no Kafka client is built here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = ["MappedConfig", "is_kafka_python_style", "map_kafka_python"]


def _servers(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return ",".join(value)
    raise ValueError(f"bootstrap_servers must be 'host:port' or a list of them, got {value!r}")


def _hostname_check(value: Any) -> str:
    # librdkafka verifies the broker's name unless the algorithm is "none"
    return "https" if value else "none"


def _as_str(value: Any) -> str:
    return str(value)


# kafka-python key -> (librdkafka key, value conversion)
_MAPPED: Final[dict[str, tuple[str, Callable[[Any], Any]]]] = {
    "bootstrap_servers": ("bootstrap.servers", _servers),
    "client_id": ("client.id", _as_str),
    "group_id": ("group.id", _as_str),
    "security_protocol": ("security.protocol", _as_str),
    "sasl_mechanism": ("sasl.mechanism", _as_str),
    "sasl_plain_username": ("sasl.username", _as_str),
    "sasl_plain_password": ("sasl.password", _as_str),
    "sasl_kerberos_service_name": ("sasl.kerberos.service.name", _as_str),
    "ssl_cafile": ("ssl.ca.location", _as_str),
    "ssl_certfile": ("ssl.certificate.location", _as_str),
    "ssl_keyfile": ("ssl.key.location", _as_str),
    "ssl_password": ("ssl.key.password", _as_str),
    "ssl_crlfile": ("ssl.crl.location", _as_str),
    "ssl_ciphers": ("ssl.cipher.suites", _as_str),
    "ssl_check_hostname": ("ssl.endpoint.identification.algorithm", _hostname_check),
    "client_rack": ("client.rack", _as_str),
}

# How the service consumes, not how to reach the cluster: a failover read uses its own.
_NOT_NEEDED: Final = frozenset(
    {
        "allow_auto_create_topics",
        "api_version",
        "api_version_auto_timeout_ms",
        "auto_commit_interval_ms",
        "auto_offset_reset",
        "bootstrap_timeout_ms",
        "check_crcs",
        "client_dns_lookup",
        "connections_max_idle_ms",
        "consumer_timeout_ms",
        "default_offset_commit_callback",
        "enable_auto_commit",
        "enable_incremental_fetch_sessions",
        "exclude_internal_topics",
        "fetch_max_bytes",
        "fetch_max_wait_ms",
        "fetch_min_bytes",
        "group_instance_id",
        "heartbeat_interval_ms",
        "isolation_level",
        "kafka_client",
        "key_deserializer",
        "max_in_flight_requests_per_connection",
        "max_partition_fetch_bytes",
        "max_poll_interval_ms",
        "max_poll_records",
        "metadata_max_age_ms",
        "metric_group_prefix",
        "metric_reporters",
        "metrics_enabled",
        "metrics_num_samples",
        "metrics_sample_window_ms",
        "partition_assignment_strategy",
        "receive_buffer_bytes",
        "receive_message_max_bytes",
        "reconnect_backoff_max_ms",
        "reconnect_backoff_ms",
        "request_timeout_ms",
        "retry_backoff_ms",
        "selector",
        "send_buffer_bytes",
        "session_timeout_ms",
        "socket_options",
        "value_deserializer",
    }
)

# Settings that change how the cluster is reached and have no librdkafka spelling here.
_UNMAPPABLE: Final = {
    "ssl_context": "give the files instead: ssl_cafile, ssl_certfile, ssl_keyfile",
    "sasl_oauth_token_provider": "use librdkafka's sasl.oauthbearer.* properties",
    "sasl_kerberos_name": "use librdkafka's sasl.kerberos.principal",
    "sasl_kerberos_domain_name": "use librdkafka's sasl.kerberos.* properties",
    "socks5_proxy": "librdkafka has no SOCKS proxy setting",
    "proxy_url": "librdkafka has no proxy setting",
}

_KNOWN: Final = frozenset(_MAPPED) | _NOT_NEEDED | frozenset(_UNMAPPABLE)


@dataclass(frozen=True)
class MappedConfig:
    """librdkafka ``properties`` made from a kafka-python style dict, and what was done."""

    properties: dict[str, Any]
    mapped: dict[str, str] = field(default_factory=dict)  # kafka-python key -> librdkafka key
    left_out: tuple[str, ...] = ()

    def note(self) -> str:
        """One line for the log: every key mapped and every key left out, by name."""
        parts = [", ".join(f"{k} -> {v}" for k, v in self.mapped.items())]
        if self.left_out:
            parts.append(
                "left out (how the service consumes, not needed to read offsets): "
                + ", ".join(self.left_out)
            )
        return "kafka-python settings mapped to librdkafka: " + "; ".join(parts)


def is_kafka_python_style(config: Mapping[str, Any]) -> bool:
    """True when ``config`` uses kafka-python's names (``bootstrap_servers``)."""
    return any(key in _KNOWN for key in config)


def map_kafka_python(config: Mapping[str, Any]) -> MappedConfig:
    """``config``'s kafka-python keys as librdkafka properties; librdkafka keys kept.

    Raises ``ValueError`` naming every key that cannot be mapped (unknown, or a
    security setting without a librdkafka spelling), and a key given both ways
    with different values.
    """
    out: dict[str, Any] = {}
    mapped: dict[str, str] = {}
    left_out: list[str] = []
    problems: list[str] = []
    for key, value in config.items():
        if key in _MAPPED:
            if value is None:
                left_out.append(key)  # kafka-python's "not set"
                continue
            name, convert = _MAPPED[key]
            out[name] = convert(value)
            mapped[key] = name
        elif key in _NOT_NEEDED:
            left_out.append(key)
        elif key in _UNMAPPABLE:
            if value is not None:
                problems.append(f"{key} ({_UNMAPPABLE[key]})")
        elif "." in key or key in ("error_cb", "logger", "stats_cb", "oauth_cb", "throttle_cb"):
            continue  # librdkafka's own property or callback: taken below as given
        else:
            problems.append(f"{key} (not a kafka-python KafkaConsumer setting)")
    if problems:
        raise ValueError(
            "config mixes in settings that cannot be used for librdkafka: " + "; ".join(problems)
        )
    for key, value in config.items():
        if key in _KNOWN:
            continue
        if key in out and out[key] != value:
            kp = next(k for k, v in mapped.items() if v == key)
            raise ValueError(
                f"config sets {key} twice with different values: {value!r} and {kp}={config[kp]!r}"
            )
        out[key] = value
    return MappedConfig(out, mapped, tuple(sorted(left_out)))
