"""`mm backup`'s settings: the properties file's top-level ``backup.*`` keys, typed.

Only `mm backup` needs them, so they are parsed when it runs
(:func:`backup_settings`), not when every job loads the file: a mirror-only
deployment has no ``backup.cluster`` and must not fail for it. A bad or
missing value raises :class:`~mm.errors.ConfigError` naming the key, the value
and what is expected (the CLI exits 2).

=============================  =====================================================
key                            meaning (default)
=============================  =====================================================
``backup.cluster``             alias (from ``clusters``) of the cluster backed up;
                               required
``backup.path``                where: a local directory (relative to the working
                               directory) or ``s3://bucket/prefix``; required
``backup.topics``              comma-separated regexes, full match (``.*``)
``backup.topics.exclude``      regexes never backed up, beat ``backup.topics``
                               (MM2's ``topics.exclude`` default, plus
                               ``heartbeats``: :data:`DEFAULT_TOPICS_EXCLUDE`)
``backup.groups``              consumer groups whose offsets each run saves (``.*``)
``backup.groups.exclude``      groups never saved (MM2's ``groups.exclude`` default)
``backup.region``              the layout's region directory (the cluster alias)
``backup.segment.records``     records per segment at most (1000000)
``backup.segment.bytes``       key + value + header bytes per segment at most
                               (268435456); a segment's records are held in memory
                               while it is written, so this bounds a task's memory
``backup.segment.ms``          record time a segment spans at most: a record whose
                               timestamp is this much past the segment's oldest
                               starts a new one (none, or -1: no limit)
``backup.compression``         Parquet codec: none, snappy, gzip, brotli, lz4, zstd
                               (zstd)
``backup.committed.filter``    how aborted transactions are kept out (``auto``):
                               ``broker`` trusts the consumer's read_committed,
                               ``raw`` also checks every range with the raw log
                               reader (PLAINTEXT listeners only), ``auto`` is
                               ``broker`` on Apache Kafka (its read_committed is
                               exact), ``raw`` where the broker profile says it is
                               not (the embedded broker); see :mod:`mm.backup.task`
``backup.interval.ms``         continuous `mm backup`: wait between the end of a
                               pass and the start of the next (10000)
=============================  =====================================================

Compaction and retention (:mod:`mm.backup.compaction`):

================================  ==================================================
key                               meaning (default)
================================  ==================================================
``backup.compact.min.segments``   fewest segments `mm backup compact` merges into
                                  one (4; at least 2)
``backup.compact.max.records``    records of a merged segment at most (10000000)
``backup.compact.max.bytes``      file bytes of a merged segment at most
                                  (1073741824)
``backup.compact.min.age.ms``     only segments whose newest record is at least
                                  this old are merged (0: any age)
``backup.retention.ms``           segments whose newest record is older than this
                                  are deleted (none, or -1: kept forever)
================================  ==================================================

The topic exclusions leave out Kafka's and MM2's internal topics (``__*``,
``*.internal``, ``*-internal``, ``*.replica``) and heartbeats (``heartbeats``,
``A.heartbeats``): they describe the cluster's replication, which a restore
recreates, not application data. A remote topic a mirror wrote into this cluster
(``A.orders``) is backed up like any other unless excluded.

**A cluster alias named** ``backup``: MM2 files often say ``clusters = primary,
backup``, and ``backup.<client property>`` is then that cluster's setting. The
keys above (:data:`BACKUP_KEYS`) are never Kafka client properties, so they are
always read as backup settings; any other ``backup.*`` key belongs to the
cluster ``backup`` when there is one, and is warned about as unknown otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlparse

from mm.backup.errors import LayoutError
from mm.backup.layout import check_region
from mm.errors import ConfigError

if TYPE_CHECKING:
    from mm.config.model import MirrorConfig
    from mm.kafka.profile import BrokerProfile

PREFIX = "backup."

DEFAULT_TOPICS_EXCLUDE = (r".*[\-\.]internal", r".*\.replica", "__.*", r"(.*\.)?heartbeats")
DEFAULT_GROUPS_EXCLUDE = ("console-consumer-.*", "connect-.*", "__.*")
DEFAULT_SEGMENT_RECORDS = 1_000_000
DEFAULT_SEGMENT_BYTES = 256 << 20
DEFAULT_COMPRESSION = "zstd"
DEFAULT_INTERVAL_MS = 10_000
DEFAULT_COMPACT_MIN_SEGMENTS = 4
DEFAULT_COMPACT_MAX_RECORDS = 10_000_000
DEFAULT_COMPACT_MAX_BYTES = 1 << 30
# pyarrow.parquet's codecs (ParquetWriter's compression argument)
COMPRESSIONS = ("none", "snappy", "gzip", "brotli", "lz4", "zstd")
FILTERS = ("auto", "raw", "broker")

# keys without the "backup." prefix
BACKUP_KEYS = (
    "cluster",
    "path",
    "topics",
    "topics.exclude",
    "groups",
    "groups.exclude",
    "region",
    "segment.records",
    "segment.bytes",
    "segment.ms",
    "compression",
    "committed.filter",
    "interval.ms",
    "compact.min.segments",
    "compact.max.records",
    "compact.max.bytes",
    "compact.min.age.ms",
    "retention.ms",
)

CommittedFilter = Literal["raw", "broker"]


def is_backup_key(key: str) -> bool:
    """True for a top-level key that is always a backup setting (see the docstring)."""
    return key.startswith(PREFIX) and key.removeprefix(PREFIX) in BACKUP_KEYS


@dataclass(frozen=True)
class BackupSettings:
    cluster: str
    path: str  # as resolved: an absolute local path or s3://bucket/prefix[?options]
    topics: tuple[str, ...] = (".*",)
    topics_exclude: tuple[str, ...] = DEFAULT_TOPICS_EXCLUDE
    groups: tuple[str, ...] = (".*",)
    groups_exclude: tuple[str, ...] = DEFAULT_GROUPS_EXCLUDE
    region: str = ""
    segment_records: int = DEFAULT_SEGMENT_RECORDS
    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    segment_ms: int | None = None  # None: no limit on the record time a segment spans
    compression: str = DEFAULT_COMPRESSION
    committed_filter: str = "auto"  # one of FILTERS
    interval_ms: int = DEFAULT_INTERVAL_MS
    compact_min_segments: int = DEFAULT_COMPACT_MIN_SEGMENTS
    compact_max_records: int = DEFAULT_COMPACT_MAX_RECORDS
    compact_max_bytes: int = DEFAULT_COMPACT_MAX_BYTES
    compact_min_age_ms: int = 0
    retention_ms: int | None = None  # None: kept forever

    def topic_selected(self, topic: str) -> bool:
        return _full(self.topics, topic) and not _full(self.topics_exclude, topic)

    def group_selected(self, group: str) -> bool:
        return _full(self.groups, group) and not _full(self.groups_exclude, group)

    def to_dict(self) -> dict[str, Any]:
        """Plain values, to ship to Spark tasks (rebuilt with :meth:`from_dict`)."""
        return {
            "cluster": self.cluster,
            "path": self.path,
            "topics": list(self.topics),
            "topics_exclude": list(self.topics_exclude),
            "groups": list(self.groups),
            "groups_exclude": list(self.groups_exclude),
            "region": self.region,
            "segment_records": self.segment_records,
            "segment_bytes": self.segment_bytes,
            "segment_ms": self.segment_ms,
            "compression": self.compression,
            "committed_filter": self.committed_filter,
            "interval_ms": self.interval_ms,
            "compact_min_segments": self.compact_min_segments,
            "compact_max_records": self.compact_max_records,
            "compact_max_bytes": self.compact_max_bytes,
            "compact_min_age_ms": self.compact_min_age_ms,
            "retention_ms": self.retention_ms,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BackupSettings:
        return cls(
            cluster=d["cluster"],
            path=d["path"],
            topics=tuple(d["topics"]),
            topics_exclude=tuple(d["topics_exclude"]),
            groups=tuple(d["groups"]),
            groups_exclude=tuple(d["groups_exclude"]),
            region=d["region"],
            segment_records=int(d["segment_records"]),
            segment_bytes=int(d["segment_bytes"]),
            segment_ms=None if d.get("segment_ms") is None else int(d["segment_ms"]),
            compression=d["compression"],
            committed_filter=d["committed_filter"],
            interval_ms=int(d["interval_ms"]),
            compact_min_segments=int(d["compact_min_segments"]),
            compact_max_records=int(d["compact_max_records"]),
            compact_max_bytes=int(d["compact_max_bytes"]),
            compact_min_age_ms=int(d["compact_min_age_ms"]),
            retention_ms=None if d["retention_ms"] is None else int(d["retention_ms"]),
        )

    def resolved_filter(self, security_protocol: str, profile: BrokerProfile) -> CommittedFilter:
        """``raw`` or ``broker`` for a cluster speaking ``security_protocol`` on a
        broker of ``profile``: ``auto`` trusts the broker's read_committed where the
        profile says it is exact (Apache Kafka, any protocol), else reads raw.

        ``raw`` on a TLS or SASL listener is a ConfigError: the raw log reader
        speaks plain TCP only.
        """
        plaintext = security_protocol.strip().upper() == "PLAINTEXT"
        mode = self.committed_filter
        if mode == "auto":
            mode = "broker" if profile.read_committed_exact else "raw"
        if mode == "raw" and not plaintext:
            why = (
                ""
                if self.committed_filter == "raw"
                else f" (auto chose it: the broker profile {profile.name} serves aborted "
                "records to read_committed consumers)"
            )
            raise ConfigError(
                "backup.committed.filter",
                self.committed_filter,
                f"broker, or a PLAINTEXT cluster: cluster {self.cluster} uses "
                f"{security_protocol} and the raw log reader speaks PLAINTEXT only{why}",
            )
        return "raw" if mode == "raw" else "broker"


def _full(patterns: tuple[str, ...], name: str) -> bool:
    return any(re.fullmatch(p, name) for p in patterns)


# --- parsing ------------------------------------------------------------------------------


def _text(raw: str) -> str:
    if not raw.strip():
        raise ValueError(raw)
    return raw.strip()


class _Expected(ValueError):
    """A bad value with a more precise expectation than the key's usual one."""

    def __init__(self, expected: str) -> None:
        super().__init__(expected)
        self.expected = expected


_REGEXES = "a comma-separated list of regular expressions"


def _regexes(raw: str) -> tuple[str, ...]:
    # MM2's list syntax: comma-separated, items trimmed, empty items dropped
    patterns = tuple(p.strip() for p in raw.split(",") if p.strip())
    for p in patterns:
        try:
            re.compile(p)
        except re.error as exc:
            raise _Expected(f"{_REGEXES} ({p!r}: {exc})") from None
    return patterns


def _positive_int(raw: str) -> int:
    value = int(raw.strip())
    if value <= 0:
        raise ValueError(raw)
    return value


def _at_least(low: int) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        value = int(raw.strip())
        if value < low:
            raise ValueError(raw)
        return value

    return parse


def _retention(raw: str) -> int | None:
    # -1 is Kafka's retention.ms for "forever" (here also: no segment time limit)
    value = int(raw.strip())
    if value == -1:
        return None
    if value <= 0:
        raise ValueError(raw)
    return value


def _choice(*choices: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        text = raw.strip().lower()
        if text not in choices:
            raise ValueError(raw)
        return text

    return parse


def resolve_path(raw: str, cwd: Path) -> str:
    """``s3://bucket/prefix`` as given; a local path made absolute (``file://`` too).

    Raises ValueError for an empty path, another scheme, or an S3 URI without a
    bucket.
    """
    text = raw.strip()
    if not text:
        raise ValueError(raw)
    url = urlparse(text)
    if url.scheme == "s3":
        if not url.netloc:
            raise ValueError(raw)
        return text
    if url.scheme == "file":
        text = url.path
    elif url.scheme and len(url.scheme) > 1:  # "C:" is a drive, not a scheme
        raise ValueError(raw)
    path = Path(text).expanduser()
    return str(path if path.is_absolute() else (cwd / path).resolve())


def _parsers(cwd: Path) -> dict[str, tuple[Callable[[str], Any], str]]:
    return {
        "cluster": (_text, "a cluster alias listed in clusters"),
        "path": (
            lambda raw: resolve_path(raw, cwd),
            "a local directory or s3://bucket/prefix",
        ),
        "topics": (_regexes, _REGEXES),
        "topics.exclude": (_regexes, _REGEXES),
        "groups": (_regexes, _REGEXES),
        "groups.exclude": (_regexes, _REGEXES),
        "region": (
            _text,
            "a region name: letters, digits, '.', '_', '-', starting with a letter or digit",
        ),
        "segment.records": (_positive_int, "a positive whole number of records"),
        "segment.bytes": (_positive_int, "a positive whole number of bytes"),
        "segment.ms": (
            _retention,
            "a positive whole number of milliseconds, or -1 for no limit",
        ),
        "compression": (_choice(*COMPRESSIONS), "one of " + ", ".join(COMPRESSIONS)),
        "committed.filter": (_choice(*FILTERS), "one of " + ", ".join(FILTERS)),
        "interval.ms": (_positive_int, "a positive whole number of milliseconds"),
        "compact.min.segments": (_at_least(2), "a whole number of segments, at least 2"),
        "compact.max.records": (_positive_int, "a positive whole number of records"),
        "compact.max.bytes": (_positive_int, "a positive whole number of bytes"),
        "compact.min.age.ms": (_at_least(0), "a whole number of milliseconds, 0 or more"),
        "retention.ms": (
            _retention,
            "a positive whole number of milliseconds, or -1 to keep segments forever",
        ),
    }


def parse_backup_settings(
    raw: Mapping[str, str], clusters: Mapping[str, Any], *, cwd: Path | None = None
) -> BackupSettings:
    """Settings from ``raw`` (the file's backup keys *without* the ``backup.`` prefix;
    unknown ones are the loader's to warn about and are ignored here).

    ``clusters``: the file's cluster aliases (any mapping keyed by alias).
    """
    parsers = _parsers(cwd or Path.cwd())
    values: dict[str, Any] = {}
    for key, (parse, expected) in parsers.items():
        if key not in raw:
            continue
        try:
            values[key] = parse(str(raw[key]))
        except _Expected as exc:
            raise ConfigError(PREFIX + key, raw[key], exc.expected) from None
        except ValueError:
            raise ConfigError(PREFIX + key, raw[key], expected) from None
    for key in ("cluster", "path"):
        if key not in values:
            raise ConfigError(PREFIX + key, None, parsers[key][1])
    if values["cluster"] not in clusters:
        names = ", ".join(clusters)
        raise ConfigError(
            "backup.cluster", raw["cluster"], f"a cluster alias listed in clusters ({names})"
        )
    region = values.get("region", values["cluster"])
    try:
        check_region(region)
    except LayoutError:
        key = "backup.region" if "region" in values else "backup.cluster"
        raise ConfigError(key, region, parsers["region"][1]) from None
    import pyarrow as pa

    codec = values.get("compression", DEFAULT_COMPRESSION)
    if codec != "none" and not pa.Codec.is_available(codec):
        raise ConfigError(
            "backup.compression", raw.get("compression", codec), "a codec this pyarrow build has"
        )
    return BackupSettings(
        cluster=values["cluster"],
        path=values["path"],
        topics=values.get("topics", (".*",)),
        topics_exclude=values.get("topics.exclude", DEFAULT_TOPICS_EXCLUDE),
        groups=values.get("groups", (".*",)),
        groups_exclude=values.get("groups.exclude", DEFAULT_GROUPS_EXCLUDE),
        region=region,
        segment_records=values.get("segment.records", DEFAULT_SEGMENT_RECORDS),
        segment_bytes=values.get("segment.bytes", DEFAULT_SEGMENT_BYTES),
        segment_ms=values.get("segment.ms"),
        compression=codec,
        committed_filter=values.get("committed.filter", "auto"),
        interval_ms=values.get("interval.ms", DEFAULT_INTERVAL_MS),
        compact_min_segments=values.get("compact.min.segments", DEFAULT_COMPACT_MIN_SEGMENTS),
        compact_max_records=values.get("compact.max.records", DEFAULT_COMPACT_MAX_RECORDS),
        compact_max_bytes=values.get("compact.max.bytes", DEFAULT_COMPACT_MAX_BYTES),
        compact_min_age_ms=values.get("compact.min.age.ms", 0),
        retention_ms=values.get("retention.ms"),
    )


def backup_settings(cfg: MirrorConfig, *, cwd: Path | None = None) -> BackupSettings:
    """The backup settings of a loaded configuration (raises ConfigError)."""
    return parse_backup_settings(cfg.backup, cfg.clusters, cwd=cwd)
