"""MirrorMaker 2's internal records, byte-for-byte: offset syncs, checkpoints, heartbeats.

Each record is a frozen dataclass that owns its encoding: ``key_bytes()`` and
``value_bytes()`` produce exactly what MM2 writes, and ``from_bytes(key, value)``
reads what MM2 (or this toolkit) wrote. ``docs/formats.md`` describes the layouts.

Invariants, for every record type here:

* a constructed record is always encodable: fields are type- and range-checked in
  ``__post_init__`` (``ValueError``/``TypeError``), so ``key_bytes()`` and
  ``value_bytes()`` never fail;
* ``from_bytes(r.key_bytes(), r.value_bytes()) == r``;
* ``from_bytes`` raises only :class:`~mm_client.errors.RecordDecodeError`, whose
  message starts with the record type name (null key/value, truncation, trailing
  bytes, negative or null string length, invalid UTF-8, or a decoded field that
  breaks the constructor's checks).

Versioned values (Checkpoint, Heartbeat) start with an INT16 version. MM2 reads
the version and then always the v0 layout. We accept version 0 exactly (no
trailing bytes) and, for forward compatibility, any higher version by reading its
leading v0 fields and ignoring what follows, on the assumption a future version
only appends fields. A negative version is rejected. Re-encoding always writes
version 0, so a record decoded from a newer version does not round-trip
byte-for-byte. Keys are never versioned and must be consumed exactly.

MM2 itself is more lenient in two places (its Java decoder ignores trailing bytes
and replaces invalid UTF-8); we reject both so corrupt records are counted, not
silently turned into wrong offsets.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Self

from mm_client.errors import RecordDecodeError
from mm_client.wire import (
    INT16,
    INT32,
    INT32_MAX,
    INT64,
    INT64_MAX,
    INT64_MIN,
    STRING_MAX_BYTES,
    Buffer,
    WireReader,
    encode_string,
)

__all__ = [
    "CHECKPOINT_VERSION",
    "HEARTBEAT_VERSION",
    "SYNC_WRITER_HEADER",
    "TXN_FIRST_HEADER",
    "Checkpoint",
    "Heartbeat",
    "OffsetSync",
    "sync_flags",
]

# Value schema version MM2 writes today for versioned records.
CHECKPOINT_VERSION: Final = 0
HEARTBEAT_VERSION: Final = 0

# Header (value b"1") on the offset sync of a mirror transaction's first record.
# Across a transaction boundary a source gap and the target's gap (its commit
# marker) can have equal widths, which the (upstream, downstream) pairs alone
# cannot tell from one run of records; the header tells. MM2 readers ignore it.
TXN_FIRST_HEADER: Final = "mm.txn.first"

# Header on every offset sync this mirror writes (since the header was introduced):
# the id of the mirror transaction whose record it names (ASCII). It says the sync
# follows the mirror's run rule (a sync for the first and last record of every run
# of consecutively mirrored records, see mm.source.runs), so the stretch between
# two such syncs translates exactly. A sync without it (MirrorMaker 2's, another
# writer's, an older mirror's) is read by MM2's conservative rule: exact at the
# sync, one past its downstream offset after it. MM2 readers ignore the header.
SYNC_WRITER_HEADER: Final = "mm.sync"


def sync_flags(
    headers: Sequence[tuple[str, bytes | str | None]] | None,
) -> tuple[bool, str | None]:
    """An offset sync record's (txn_first, writer) from its headers: whether it opens
    a mirror transaction, and the transaction id when mm wrote it (None otherwise,
    also for a value that is not a short ASCII id)."""
    first, writer = False, None
    for k, v in headers or ():
        if isinstance(v, str):
            v = v.encode()
        if k == TXN_FIRST_HEADER and v == b"1":
            first = True
        elif k == SYNC_WRITER_HEADER and v and len(v) <= 64 and v.isascii():
            writer = v.decode("ascii")
    return first, writer


# Two INT64 offsets in a row (OffsetSync value; the middle of a Checkpoint value).
_TWO_INT64: Final = struct.Struct(">qq")


def _check_str(record: str, name: str, value: object, *, allow_empty: bool = False) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{record}.{name} must be str, got {type(value).__name__}")
    if not value and not allow_empty:
        raise ValueError(f"{record}.{name} must not be empty")
    # ASCII is one byte per character, so the common case needs no trial encode.
    if value.isascii():
        size = len(value)
    else:
        try:
            size = len(value.encode("utf-8"))
        except UnicodeEncodeError as exc:
            raise ValueError(f"{record}.{name} is not encodable as UTF-8: {exc.reason}") from None
    if size > STRING_MAX_BYTES:
        raise ValueError(
            f"{record}.{name} is {size} UTF-8 bytes; a Kafka STRING holds at most "
            f"{STRING_MAX_BYTES}"
        )


def _check_int(record: str, name: str, value: object, low: int, high: int) -> None:
    # bool is an int subclass; True as a partition is a bug, not a value
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{record}.{name} must be int, got {type(value).__name__}")
    if not low <= value <= high:
        raise ValueError(f"{record}.{name} must be in [{low}, {high}], got {value}")


def _require(record: str, part: str, data: Buffer | None) -> Buffer:
    if data is None:
        raise RecordDecodeError(f"{record} {part} is null")
    return data


def _read_version(reader: WireReader, record: str) -> int:
    version = reader.read_int16("version")
    if version < 0:
        raise RecordDecodeError(f"{record} value: invalid negative version {version}")
    return version


def _finish_value(reader: WireReader, version: int) -> None:
    if version == 0:
        reader.expect_end()
    else:
        # newer versions may append fields after the v0 ones; we do not know them
        reader.skip_rest()


@dataclass(frozen=True, slots=True)
class OffsetSync:
    """Upstream offset ``upstream_offset`` of ``topic``/``partition`` on the source was
    mirrored to ``downstream_offset`` in the target topic.

    ``topic`` is the *source* topic name. Invariants: ``topic`` non-empty,
    ``0 <= partition <= INT32_MAX``, both offsets in ``[0, INT64_MAX]``.

    Key: topic STRING, partition INT32. Value: upstream INT64, downstream INT64
    (no version header).
    """

    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int

    def __post_init__(self) -> None:
        _check_str("OffsetSync", "topic", self.topic)
        _check_int("OffsetSync", "partition", self.partition, 0, INT32_MAX)
        _check_int("OffsetSync", "upstream_offset", self.upstream_offset, 0, INT64_MAX)
        _check_int("OffsetSync", "downstream_offset", self.downstream_offset, 0, INT64_MAX)

    def key_bytes(self) -> bytes:
        return encode_string(self.topic) + INT32.pack(self.partition)

    def value_bytes(self) -> bytes:
        return _TWO_INT64.pack(self.upstream_offset, self.downstream_offset)

    @classmethod
    def from_bytes(cls, key: Buffer | None, value: Buffer | None) -> Self:
        reader = WireReader(_require("OffsetSync", "key", key), "OffsetSync key")
        topic = reader.read_string("topic")
        partition = reader.read_int32("partition")
        reader.expect_end()

        reader = WireReader(_require("OffsetSync", "value", value), "OffsetSync value")
        upstream, downstream = reader.read_struct(_TWO_INT64, "upstream/downstream offsets")
        reader.expect_end()
        try:
            return cls(topic, partition, upstream, downstream)
        except ValueError as exc:
            raise RecordDecodeError(f"OffsetSync: {exc}") from exc


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Consumer group ``consumer_group`` committed ``upstream_offset`` on the source for
    the partition whose mirror is ``topic``/``partition`` on the target, and
    ``downstream_offset`` is that offset translated to the target.

    ``topic`` is the *target* topic name (e.g. ``A.orders``). ``metadata`` is the
    group's commit metadata (may be empty). Invariants: ``consumer_group`` and
    ``topic`` non-empty, ``0 <= partition <= INT32_MAX``, offsets in
    ``[0, INT64_MAX]``, every string at most 32767 UTF-8 bytes.

    Key: group STRING, topic STRING, partition INT32. Value: version INT16 (0),
    upstream INT64, downstream INT64, metadata STRING.
    """

    consumer_group: str
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str = ""

    def __post_init__(self) -> None:
        _check_str("Checkpoint", "consumer_group", self.consumer_group)
        _check_str("Checkpoint", "topic", self.topic)
        _check_int("Checkpoint", "partition", self.partition, 0, INT32_MAX)
        _check_int("Checkpoint", "upstream_offset", self.upstream_offset, 0, INT64_MAX)
        _check_int("Checkpoint", "downstream_offset", self.downstream_offset, 0, INT64_MAX)
        _check_str("Checkpoint", "metadata", self.metadata, allow_empty=True)

    def key_bytes(self) -> bytes:
        return (
            encode_string(self.consumer_group)
            + encode_string(self.topic)
            + INT32.pack(self.partition)
        )

    def value_bytes(self) -> bytes:
        return (
            INT16.pack(CHECKPOINT_VERSION)
            + _TWO_INT64.pack(self.upstream_offset, self.downstream_offset)
            + encode_string(self.metadata)
        )

    @classmethod
    def from_bytes(cls, key: Buffer | None, value: Buffer | None) -> Self:
        reader = WireReader(_require("Checkpoint", "key", key), "Checkpoint key")
        group = reader.read_string("consumer group")
        topic = reader.read_string("topic")
        partition = reader.read_int32("partition")
        reader.expect_end()

        reader = WireReader(_require("Checkpoint", "value", value), "Checkpoint value")
        version = _read_version(reader, "Checkpoint")
        upstream, downstream = reader.read_struct(_TWO_INT64, "upstream/downstream offsets")
        metadata = reader.read_string("metadata")
        _finish_value(reader, version)
        try:
            return cls(group, topic, partition, upstream, downstream, metadata)
        except ValueError as exc:
            raise RecordDecodeError(f"Checkpoint: {exc}") from exc


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """Cluster ``source_cluster_alias`` emitted a heartbeat towards
    ``target_cluster_alias`` at ``timestamp`` (ms since the Unix epoch).

    Invariants: both aliases non-empty; ``timestamp`` fits INT64 (it is not
    required to be positive: MM2 does not check it, and a clock is not ours to judge).

    Key: source alias STRING, target alias STRING. Value: version INT16 (0),
    timestamp INT64.
    """

    source_cluster_alias: str
    target_cluster_alias: str
    timestamp: int

    def __post_init__(self) -> None:
        _check_str("Heartbeat", "source_cluster_alias", self.source_cluster_alias)
        _check_str("Heartbeat", "target_cluster_alias", self.target_cluster_alias)
        _check_int("Heartbeat", "timestamp", self.timestamp, INT64_MIN, INT64_MAX)

    @classmethod
    def now(cls, source_cluster_alias: str, target_cluster_alias: str) -> Self:
        """A heartbeat stamped with the current wall-clock time in milliseconds."""
        return cls(source_cluster_alias, target_cluster_alias, time.time_ns() // 1_000_000)

    def key_bytes(self) -> bytes:
        return encode_string(self.source_cluster_alias) + encode_string(self.target_cluster_alias)

    def value_bytes(self) -> bytes:
        return INT16.pack(HEARTBEAT_VERSION) + INT64.pack(self.timestamp)

    @classmethod
    def from_bytes(cls, key: Buffer | None, value: Buffer | None) -> Self:
        reader = WireReader(_require("Heartbeat", "key", key), "Heartbeat key")
        source = reader.read_string("source cluster alias")
        target = reader.read_string("target cluster alias")
        reader.expect_end()

        reader = WireReader(_require("Heartbeat", "value", value), "Heartbeat value")
        version = _read_version(reader, "Heartbeat")
        timestamp = reader.read_int64("timestamp")
        _finish_value(reader, version)
        try:
            return cls(source, target, timestamp)
        except ValueError as exc:
            raise RecordDecodeError(f"Heartbeat: {exc}") from exc
