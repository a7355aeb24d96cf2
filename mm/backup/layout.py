"""Where backup files live: segment keys, temporary keys, catalog directories.

A segment of one partition is stored at::

    <prefix>/<region>/<topic>/partition=<p>/level=<l>/<start>-<end>.parquet

* ``start`` and ``end`` are Kafka offsets written as 20 zero-padded decimal digits
  (int64's largest value has 19), so the names of a directory sort by offset;
* both are **inclusive**: ``start`` is the first offset the segment covers and
  ``end`` the last. A segment covers every offset in ``[start, end]``, whether or
  not a record is stored for it (markers, aborted or compacted records are gaps,
  listed in the file's metadata, see :mod:`mm.backup.segment`);
* ``partition=`` and ``level=`` are Hive-style directory names: Spark's Parquet
  reader turns them into ``partition`` and ``level`` columns;
* ``level`` is the compaction level: 0 for what the backup copied, ``n+1`` for a
  segment that replaced a run of level-``n`` segments.

A segment is written to ``.../level=<l>/_tmp/<uuid>.parquet`` and moved to its
key once complete, so a key that exists names a whole file. Names starting with
``_`` are skipped by Spark's and Hadoop's listings, and by
:func:`parse_segment_key`'s callers that list (:mod:`mm.backup.rebuild`).

``prefix`` is a ``pyarrow.fs`` path: ``bucket/some/dir`` on S3, an absolute
directory locally. ``region`` names the backed-up cluster; ``topic`` is a Kafka
topic name (``[a-zA-Z0-9._-]``, at most 249 characters, not ``.`` or ``..``).
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

from mm.backup.errors import LayoutError

OFFSET_DIGITS = 20
SEGMENT_SUFFIX = ".parquet"
TMP_DIR = "_tmp"
CATALOG_DIR = "_catalog"
MAX_LEVEL = 99  # far more than any compaction scheme needs; bounds typos
MAX_OFFSET = 2**63 - 1

_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")
# a region is a directory next to _catalog: it may not start with "_" or "."
_REGION = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9._-]{0,248}")
_PARTITION_DIR = re.compile(r"partition=(0|[1-9][0-9]{0,9})")
_LEVEL_DIR = re.compile(r"level=(0|[1-9][0-9]?)")
_SEGMENT_FILE = re.compile(r"([0-9]{20})-([0-9]{20})\.parquet")

SEGMENT_FORM = (
    "<prefix>/<region>/<topic>/partition=<p>/level=<l>/<20-digit start>-<20-digit end>.parquet"
)


def check_topic(topic: str) -> str:
    if not _TOPIC.fullmatch(topic) or topic in (".", ".."):
        raise LayoutError(
            f"invalid topic name {topic!r}: expected 1-249 characters of [a-zA-Z0-9._-], "
            "not '.' or '..'"
        )
    return topic


def check_region(region: str) -> str:
    if not _REGION.fullmatch(region):
        raise LayoutError(
            f"invalid region {region!r}: expected [a-zA-Z0-9._-], starting with a letter or digit"
        )
    return region


def _check_prefix(prefix: str) -> str:
    p = prefix.rstrip("/")
    if not p:
        raise LayoutError(f"invalid prefix {prefix!r}: expected a non-empty pyarrow.fs path")
    return p


@dataclass(frozen=True)
class PartitionRef:
    """One backed-up partition: where its segments and its catalog live."""

    prefix: str
    region: str
    topic: str
    partition: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "prefix", _check_prefix(self.prefix))
        check_region(self.region)
        check_topic(self.topic)
        if not 0 <= self.partition < 2**31:
            raise LayoutError(
                f"invalid partition {self.partition!r}: expected 0 <= partition < 2^31"
            )

    def __str__(self) -> str:
        return f"{self.region}/{self.topic}[{self.partition}]"

    @property
    def relative_dir(self) -> str:
        """The partition's directory relative to the prefix."""
        return f"{self.region}/{self.topic}/partition={self.partition}"

    @property
    def directory(self) -> str:
        return f"{self.prefix}/{self.relative_dir}"

    def level_dir(self, level: int) -> str:
        return f"{self.directory}/level={_check_level(level)}"

    def segment(self, level: int, start: int, end: int) -> SegmentKey:
        return SegmentKey(self, level, start, end)

    def temp_key(self, level: int, token: str | None = None) -> str:
        """A fresh key to write a segment to before moving it to its final key."""
        token = uuid.uuid4().hex if token is None else token
        return f"{self.level_dir(level)}/{TMP_DIR}/{token}{SEGMENT_SUFFIX}"

    @property
    def catalog_dir(self) -> str:
        """Directory of the partition's catalog versions (see :mod:`mm.backup.catalog_store`)."""
        return f"{self.prefix}/{CATALOG_DIR}/{self.region}/{self.topic}/{self.partition}"


def topic_dirs(prefix: str, region: str, topic: str) -> tuple[str, str]:
    """The directories (prefixes on S3) holding a topic's backup in a region: its
    segments and its catalogs. Moved together to the same relative places under
    another prefix, they are a whole backup of the topic there."""
    p = _check_prefix(prefix)
    rel = f"{check_region(region)}/{check_topic(topic)}"
    return f"{p}/{rel}", f"{p}/{CATALOG_DIR}/{rel}"


def _check_level(level: int) -> int:
    if not 0 <= level <= MAX_LEVEL:
        raise LayoutError(f"invalid level {level!r}: expected 0 <= level <= {MAX_LEVEL}")
    return level


@dataclass(frozen=True)
class SegmentKey:
    """A segment's place: its partition, level and inclusive offset range."""

    ref: PartitionRef
    level: int
    start: int  # first offset covered
    end: int  # last offset covered (inclusive)

    def __post_init__(self) -> None:
        _check_level(self.level)
        if not 0 <= self.start <= self.end <= MAX_OFFSET:
            raise LayoutError(
                f"invalid segment range {self.start}-{self.end}: expected "
                f"0 <= start <= end <= {MAX_OFFSET} (both inclusive)"
            )

    @property
    def file_name(self) -> str:
        return f"{self.start:0{OFFSET_DIGITS}d}-{self.end:0{OFFSET_DIGITS}d}{SEGMENT_SUFFIX}"

    @property
    def relative(self) -> str:
        """The key relative to the prefix (what the catalog records)."""
        return f"{self.ref.relative_dir}/level={self.level}/{self.file_name}"

    @property
    def key(self) -> str:
        return f"{self.ref.prefix}/{self.relative}"

    def __str__(self) -> str:
        return self.key


def parse_segment_key(key: str) -> SegmentKey:
    """The segment a key names; a :class:`LayoutError` names the key and the form."""
    parts = key.rsplit("/", 5)
    try:
        if len(parts) != 6:
            raise ValueError("too few path components")
        prefix, region, topic, part_dir, level_dir, name = parts
        part = _PARTITION_DIR.fullmatch(part_dir)
        level = _LEVEL_DIR.fullmatch(level_dir)
        offsets = _SEGMENT_FILE.fullmatch(name)
        if part is None:
            raise ValueError(f"{part_dir!r} is not partition=<p>")
        if level is None:
            raise ValueError(f"{level_dir!r} is not level=<l>")
        if offsets is None:
            raise ValueError(f"{name!r} is not <20-digit start>-<20-digit end>.parquet")
        ref = PartitionRef(prefix, region, topic, int(part.group(1)))
        return SegmentKey(ref, int(level.group(1)), int(offsets.group(1)), int(offsets.group(2)))
    except (ValueError, LayoutError) as exc:
        raise LayoutError(f"not a segment key {key!r} ({exc}): expected {SEGMENT_FORM}") from None


def is_temp_key(key: str) -> bool:
    """True for a key under a ``_tmp`` directory (an unfinished or abandoned write)."""
    return f"/{TMP_DIR}/" in key
