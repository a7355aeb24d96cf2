"""The ``mm.*`` settings (ours, not MM2's): one typed definition each.

Every setting is parsed once, when the file is loaded (:func:`parse_settings`): a
bad value fails the load with a :class:`~mm.errors.ConfigError` naming the key,
the value and what is expected (exit code 2), whichever command loads it; an
unknown ``mm.*`` key is kept but warned about, with the closest known key.
`mm config defaults` lists them (:data:`SETTINGS`).
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mm.errors import ConfigError


@dataclass(frozen=True)
class Setting:
    key: str  # without the "mm." prefix
    default: Any  # None: unset (the feature is off)
    parse: Callable[[str], Any]  # raises ValueError for a bad value
    expected: str
    description: str


def _positive_int(raw: str) -> int:
    value = int(raw.strip())
    if value <= 0:
        raise ValueError(raw)
    return value


def _shards(raw: str) -> int:
    """``auto`` (0) or a positive whole number."""
    if raw.strip().lower() == "auto":
        return 0
    return _positive_int(raw)


def _positive_float(raw: str) -> float:
    value = float(raw.strip())
    if not value > 0:
        raise ValueError(raw)
    return value


def _non_negative_int(raw: str) -> int:
    value = int(raw.strip())
    if value < 0:
        raise ValueError(raw)
    return value


def _non_negative_float(raw: str) -> float:
    value = float(raw.strip())
    if not value >= 0 or value == float("inf"):
        raise ValueError(raw)
    return value


def _retention_ms(raw: str) -> int:
    value = int(raw.strip())
    if value < -1 or value == 0:
        raise ValueError(raw)
    return value


def _port(raw: str) -> int | None:
    if not raw.strip():
        return None  # set but empty: no server, as when unset
    value = int(raw.strip())
    if not 0 <= value <= 65535:
        raise ValueError(raw)
    return value


def _bool(raw: str) -> bool:
    value = raw.strip().lower()  # as Kafka's ConfigDef reads a BOOLEAN
    if value not in ("true", "false"):
        raise ValueError(raw)
    return value == "true"


def _text(raw: str) -> str:
    if not raw.strip():
        raise ValueError(raw)
    return raw.strip()


def _class_archive(raw: str) -> str:
    value = raw.strip()
    if value.lower() in ("auto", "off"):
        return value.lower()
    if not os.path.isabs(value):
        raise ValueError(raw)
    return value


def _profile(raw: str) -> str:
    from mm.kafka.profile import broker_profile

    return broker_profile(raw).name


_SETTINGS = (
    Setting(
        "broker.profile",
        "kafka",
        _profile,
        "kafka or embedded",
        "what every cluster's broker is, unless <alias>.mm.broker.profile says otherwise: "
        "kafka (Apache Kafka, MSK, Confluent, Strimzi) or embedded (the broker `mm embedded` "
        "starts without Apache Kafka's jars); see mm.kafka.profile",
    ),
    Setting(
        "config.strict",
        False,
        _bool,
        "true or false",
        "unknown config keys are an error (exit 2) instead of a warning",
    ),
    Setting(
        "mirror.trigger.seconds",
        1.0,
        _positive_float,
        "a positive number of seconds",
        "micro-batch trigger interval of the continuous mirror",
    ),
    Setting(
        "mirror.max.records.per.partition.per.batch",
        1_000_000,
        _positive_int,
        "a positive whole number of records",
        "offsets of one partition planned per micro-batch",
    ),
    Setting(
        "mirror.max.records.per.transaction",
        200_000,
        _positive_int,
        "a positive whole number of records",
        "records per target transaction (a transaction also closes after 96 sync points)",
    ),
    Setting(
        "mirror.max.bytes.per.transaction",
        64 << 20,
        _positive_int,
        "a positive whole number of bytes",
        "record bytes (keys and values) per target transaction: what a commit may still "
        "have to deliver when it starts",
    ),
    Setting(
        "mirror.max.seconds.per.transaction",
        10.0,
        _positive_float,
        "a positive number of seconds",
        "a target transaction closes this long after it began (at most a quarter of the "
        "target producer's transaction.timeout.ms), however slowly records arrive",
    ),
    Setting(
        "mirror.shards",
        0,
        _shards,
        "auto or a positive whole number of shards",
        "target partitions are written through this many transactional ids, the shards "
        "with work run in at most one Spark task per core (auto: the recorded map's count; "
        "for a new flow two per core, at most one per partition); a new count fences the "
        "previous ids first",
    ),
    Setting(
        "mirror.task.continue.seconds",
        5.0,
        _non_negative_float,
        "a number of seconds, 0 or more",
        "a continuous mirror's task keeps copying new records this long after it "
        "started, unless a new plan is wanted sooner (0: it stops at its planned ends)",
    ),
    Setting(
        "mirror.pool.max.clients",
        300,
        _non_negative_int,
        "a whole number of clients, 0 or more",
        "Kafka clients a Python worker keeps between tasks (0: none kept)",
    ),
    Setting(
        "mirror.position.refresh.interval.seconds",
        86_400.0,
        _positive_float,
        "a positive number of seconds",
        "idle partitions' mirror positions are committed again this often",
    ),
    Setting(
        "mirror.log.summary.seconds",
        60.0,
        _positive_float,
        "a positive number of seconds",
        "the mirror logs a progress summary this often (per batch only at DEBUG, "
        "or when a batch mirrored records other than heartbeats)",
    ),
    Setting(
        "mirror.retry.timeout.seconds",
        300.0,
        _positive_float,
        "a positive number of seconds",
        "a failed mirror query is restarted until it has failed this long",
    ),
    Setting(
        "offset.syncs.retention.ms",
        7 * 24 * 3600 * 1000,
        _retention_ms,
        "a positive number of ms, or -1 (forever)",
        "retention.ms of the offset-syncs topic the mirror creates",
    ),
    Setting(
        "checkpoint.max.syncs.per.batch",
        200_000,
        _positive_int,
        "a positive whole number of offset syncs",
        "offset syncs the checkpoint job reads per micro-batch",
    ),
    Setting(
        "failback.divergence.scan.records",
        100_000,
        _positive_int,
        "a positive whole number of offsets",
        "`mm failback` compares A's records below the failover point with B's copies, "
        "scanning back this many offsets per partition at most until they agree",
    ),
    Setting(
        "spark.class.archive",
        "auto",
        _class_archive,
        "auto, off or an absolute directory path",
        "Spark's driver JVM starts from a class-data-sharing archive kept in this directory "
        "(auto: $XDG_CACHE_HOME/mm/spark-classes or ~/.cache/mm/spark-classes), built in "
        "the background by the first start without one; off: never (see mm.spark_classes)",
    ),
    Setting(
        "metrics.port",
        None,
        _port,
        "a TCP port (0-65535)",
        "serve the mirror's Prometheus metrics on this port (unset: not served)",
    ),
    Setting(
        "metrics.bind.address",
        "0.0.0.0",
        _text,
        "an address to bind to",
        "address the metrics server listens on",
    ),
    Setting(
        "alert.replication.latency.ms",
        30_000,
        _non_negative_int,
        "a non-negative integer number of milliseconds",
        "`mm status` alerts above this replication latency",
    ),
    Setting(
        "alert.record.lag",
        100_000,
        _non_negative_int,
        "a non-negative integer number of records",
        "`mm status` alerts above this record lag on a partition",
    ),
    Setting(
        "alert.checkpoint.age.seconds",
        300,
        _non_negative_int,
        "a non-negative integer number of seconds",
        "`mm status` alerts when a group's newest checkpoint is older",
    ),
    Setting(
        "status.checkpoints.scan.records",
        100_000,
        _positive_int,
        "a positive number of records",
        "checkpoint records `mm status` reads at most",
    ),
)

SETTINGS: dict[str, Setting] = {s.key: s for s in _SETTINGS}


def parse_settings(
    raw: Mapping[str, str], warn: Callable[..., None] | None = None
) -> dict[str, Any]:
    """Every known setting's value (its default where unset). ``raw``: the file's
    ``mm.*`` keys without the prefix (``mm.state.dir`` excluded)."""
    out = {key: s.default for key, s in SETTINGS.items()}
    for key, value in raw.items():
        setting = SETTINGS.get(key)
        if setting is None:
            if warn is not None:
                close = difflib.get_close_matches(key, list(SETTINGS), n=1, cutoff=0.6)
                warn(
                    "unknown mm.* setting ignored",
                    key=f"mm.{key}",
                    did_you_mean=f"mm.{close[0]}" if close else None,
                )
            continue
        try:
            out[key] = setting.parse(str(value))
        except ValueError:
            raise ConfigError(f"mm.{key}", value, setting.expected) from None
    return out
