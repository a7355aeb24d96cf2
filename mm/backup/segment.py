"""Segment files: one partition's records over an offset range, as Parquet.

Columns (one row per record, in offset order):

==================  ===============================================  ========
column              type                                             null
==================  ===============================================  ========
``offset``          int64                                            no
``timestamp``       int64, ms since the epoch (-1: none)             no
``timestamp_type``  int8: 0 none, 1 create time, 2 log-append time   no
``key``             binary                                           yes
``value``           binary                                           yes (tombstone)
``headers``         list<struct<key: string, value: binary>>         no (may be empty);
                                                                     a header's value may
                                                                     be null
==================  ===============================================  ========

Headers keep Kafka's order and duplicate keys (a list, not a map).

The file's key-value metadata (:data:`META_PREFIX` ``+`` name) says what the
segment covers, so a catalog can be rebuilt from the footers alone: ``format``,
``topic``, ``partition``, ``start_offset`` and ``end_offset`` (the covered range,
both inclusive), ``record_count``, ``gaps`` (JSON ``[[a, b], ...]``: inclusive
ranges of ``[start, end]`` with no record), ``min_timestamp``/``max_timestamp``
(JSON, over records with a timestamp >= 0; ``null`` when none has one) and
``lost_before`` (JSON ``null`` or ``{"start", "end", "reason"}``: offsets before
``start`` never backed up, see :mod:`mm.backup.ranges`). Invariant:
``record_count + size of the gaps == end - start + 1``.

Files are written in row groups of :data:`ROWS_PER_GROUP` records, so a segment
of any size is written and read without holding it in memory. Compression is
zstd unless the caller says otherwise.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from mm.backup.errors import SegmentFormatError
from mm.backup.layout import SegmentKey
from mm.backup.ranges import LostRange, Range, compute_gaps, gap_size

TIMESTAMP_NONE = 0
TIMESTAMP_CREATE = 1
TIMESTAMP_LOG_APPEND = 2

FORMAT_VERSION = "1"
META_PREFIX = "mm.backup."
DEFAULT_COMPRESSION = "zstd"
ROWS_PER_GROUP = 10_000

_HEADER = pa.struct([pa.field("key", pa.string(), nullable=False), pa.field("value", pa.binary())])
SCHEMA = pa.schema(
    [
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("timestamp", pa.int64(), nullable=False),
        pa.field("timestamp_type", pa.int8(), nullable=False),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("headers", pa.list_(pa.field("item", _HEADER, nullable=False)), nullable=False),
    ]
)

Header = tuple[str, bytes | None]


@dataclass(frozen=True)
class BackupRecord:
    offset: int
    timestamp: int  # ms since the epoch; -1 when the record has none
    timestamp_type: int  # TIMESTAMP_NONE, TIMESTAMP_CREATE or TIMESTAMP_LOG_APPEND
    key: bytes | None
    value: bytes | None  # None: a tombstone
    headers: tuple[Header, ...] = ()


@dataclass(frozen=True)
class SegmentMeta:
    topic: str
    partition: int
    start: int  # first offset covered
    end: int  # last offset covered (inclusive)
    record_count: int
    gaps: tuple[Range, ...]
    min_timestamp: int | None
    max_timestamp: int | None
    lost_before: LostRange | None = None


@dataclass(frozen=True)
class StoredSegment:
    """A segment at its final key: what the catalog needs to list it."""

    key: SegmentKey
    meta: SegmentMeta
    size_bytes: int


def _metadata(meta: SegmentMeta) -> dict[str, str]:
    lost = meta.lost_before
    values: dict[str, Any] = {
        "format": FORMAT_VERSION,
        "topic": meta.topic,
        "partition": str(meta.partition),
        "start_offset": str(meta.start),
        "end_offset": str(meta.end),
        "record_count": str(meta.record_count),
        "gaps": json.dumps([list(g) for g in meta.gaps], separators=(",", ":")),
        "min_timestamp": json.dumps(meta.min_timestamp),
        "max_timestamp": json.dumps(meta.max_timestamp),
        "lost_before": json.dumps(
            None if lost is None else {"start": lost.start, "end": lost.end, "reason": lost.reason}
        ),
    }
    return {META_PREFIX + k: v for k, v in values.items()}


def _parse_metadata(raw: dict[bytes, bytes] | None, path: str) -> SegmentMeta:
    kv = {k.decode(): v.decode() for k, v in (raw or {}).items()}
    try:
        fmt = kv[META_PREFIX + "format"]
        if fmt != FORMAT_VERSION:
            raise ValueError(f"format {fmt!r}, expected {FORMAT_VERSION!r}")

        def get(name: str) -> str:
            return kv[META_PREFIX + name]

        lost = json.loads(get("lost_before"))
        meta = SegmentMeta(
            topic=get("topic"),
            partition=int(get("partition")),
            start=int(get("start_offset")),
            end=int(get("end_offset")),
            record_count=int(get("record_count")),
            gaps=tuple((int(a), int(b)) for a, b in json.loads(get("gaps"))),
            min_timestamp=json.loads(get("min_timestamp")),
            max_timestamp=json.loads(get("max_timestamp")),
            lost_before=None
            if lost is None
            else LostRange(int(lost["start"]), int(lost["end"]), str(lost["reason"])),
        )
    except KeyError as exc:
        raise SegmentFormatError(
            f"{path}: not a backup segment, metadata key {exc.args[0]!r} missing"
        ) from None
    except (ValueError, TypeError) as exc:
        raise SegmentFormatError(f"{path}: bad backup segment metadata ({exc})") from None
    if meta.record_count + gap_size(meta.gaps) != meta.end - meta.start + 1:
        raise SegmentFormatError(
            f"{path}: {meta.record_count} records and gaps {list(meta.gaps)} do not cover "
            f"{meta.start}-{meta.end}: expected records + gaps == end - start + 1"
        )
    return meta


def _check_record(r: BackupRecord) -> None:
    if r.timestamp_type not in (TIMESTAMP_NONE, TIMESTAMP_CREATE, TIMESTAMP_LOG_APPEND):
        raise ValueError(
            f"record at offset {r.offset}: timestamp_type {r.timestamp_type!r}, expected 0, 1 or 2"
        )


def _batch(records: list[BackupRecord]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "offset": [r.offset for r in records],
            "timestamp": [r.timestamp for r in records],
            "timestamp_type": [r.timestamp_type for r in records],
            "key": [r.key for r in records],
            "value": [r.value for r in records],
            "headers": [[{"key": k, "value": v} for k, v in r.headers] for r in records],
        },
        schema=SCHEMA,
    )


def _open_output(fs: pafs.FileSystem, path: str) -> Any:
    try:
        return fs.open_output_stream(path)
    except FileNotFoundError:
        # local filesystems need the directory; object stores have none to create
        fs.create_dir(posixpath.dirname(path), recursive=True)
        return fs.open_output_stream(path)


def write_segment(
    fs: pafs.FileSystem,
    path: str,
    records: Iterable[BackupRecord],
    *,
    topic: str,
    partition: int,
    start: int,
    end: int,
    lost_before: LostRange | None = None,
    compression: str = DEFAULT_COMPRESSION,
) -> SegmentMeta:
    """Writes ``records`` (strictly increasing offsets inside ``[start, end]``) to ``path``.

    ``[start, end]`` is the range the segment covers: offsets in it without a record
    become its gaps. Raises ValueError naming a bad record (the partial file is
    removed).
    """
    if lost_before is not None and lost_before.end != start - 1:
        raise ValueError(
            f"lost range {lost_before.start}-{lost_before.end} before a segment starting at "
            f"{start}: expected it to end at {start - 1}"
        )
    count = 0
    lo: int | None = None
    hi: int | None = None
    pending: list[BackupRecord] = []

    def offsets(writer: pq.ParquetWriter) -> Iterator[int]:
        nonlocal count, lo, hi
        for r in records:
            _check_record(r)
            yield r.offset  # compute_gaps checks order and range before we go on
            pending.append(r)
            count += 1
            if r.timestamp >= 0:
                lo = r.timestamp if lo is None else min(lo, r.timestamp)
                hi = r.timestamp if hi is None else max(hi, r.timestamp)
            if len(pending) >= ROWS_PER_GROUP:
                writer.write_batch(_batch(pending))
                pending.clear()

    try:
        with (
            _open_output(fs, path) as out,
            pq.ParquetWriter(out, SCHEMA, compression=compression) as writer,
        ):
            gaps = compute_gaps(offsets(writer), start, end)
            if pending:
                writer.write_batch(_batch(pending))
            meta = SegmentMeta(topic, partition, start, end, count, gaps, lo, hi, lost_before)
            writer.add_key_value_metadata(_metadata(meta))
    except BaseException:
        _delete_quietly(fs, path)
        raise
    return meta


def _delete_quietly(fs: pafs.FileSystem, path: str) -> None:
    try:
        fs.delete_file(path)
    except OSError:
        pass  # never created, or already gone: nothing to clean


def _open_input(fs: pafs.FileSystem, path: str) -> pq.ParquetFile:
    try:
        return pq.ParquetFile(fs.open_input_file(path))
    except FileNotFoundError:
        raise
    except (OSError, pa.ArrowInvalid) as exc:
        raise SegmentFormatError(f"{path}: not a readable Parquet file ({exc})") from None


def read_segment_meta(fs: pafs.FileSystem, path: str) -> SegmentMeta:
    """The segment's metadata, from its footer alone."""
    return _parse_metadata(_open_input(fs, path).metadata.metadata, path)


def iter_segment(fs: pafs.FileSystem, path: str) -> Iterator[BackupRecord]:
    """The segment's records in offset order, one row group at a time."""
    pf = _open_input(fs, path)
    if not pf.schema_arrow.remove_metadata().equals(SCHEMA):
        raise SegmentFormatError(
            f"{path}: schema {pf.schema_arrow.remove_metadata()} differs from the backup "
            f"segment schema {SCHEMA}"
        )
    for batch in pf.iter_batches():
        for row in batch.to_pylist():
            yield BackupRecord(
                offset=row["offset"],
                timestamp=row["timestamp"],
                timestamp_type=row["timestamp_type"],
                key=row["key"],
                value=row["value"],
                headers=tuple((h["key"], h["value"]) for h in row["headers"]),
            )


# (offset, timestamp or -1, key, value, headers as (key, value) tuples or None)
SegmentRow = tuple[int, int, bytes | None, bytes | None, list[Header] | None]


def iter_segment_rows(fs: pafs.FileSystem, path: str) -> Iterator[SegmentRow]:
    """The segment's records as plain tuples, column by column: what a reader that
    handles every record (a restore) needs, without a dict and an object per row."""
    pf = _open_input(fs, path)
    if not pf.schema_arrow.remove_metadata().equals(SCHEMA):
        raise SegmentFormatError(
            f"{path}: schema {pf.schema_arrow.remove_metadata()} differs from the backup "
            f"segment schema {SCHEMA}"
        )
    for batch in pf.iter_batches(columns=["offset", "timestamp", "key", "value", "headers"]):
        offsets, stamps, keys, values, headers = (c.to_pylist() for c in batch.columns)
        for i, hs in enumerate(headers):
            if hs:
                headers[i] = [(h["key"], h["value"]) for h in hs]
            else:
                headers[i] = None
        yield from zip(offsets, stamps, keys, values, headers, strict=True)


def read_segment(fs: pafs.FileSystem, path: str) -> tuple[SegmentMeta, list[BackupRecord]]:
    """Metadata and records; the records are checked against the metadata."""
    meta = read_segment_meta(fs, path)
    records = list(iter_segment(fs, path))
    try:
        gaps = compute_gaps((r.offset for r in records), meta.start, meta.end)
    except ValueError as exc:
        raise SegmentFormatError(f"{path}: {exc}") from None
    if len(records) != meta.record_count or gaps != meta.gaps:
        raise SegmentFormatError(
            f"{path}: holds {len(records)} records with gaps {list(gaps)}, its metadata says "
            f"{meta.record_count} with gaps {list(meta.gaps)}"
        )
    return meta, records


def store_segment(
    fs: pafs.FileSystem,
    key: SegmentKey,
    records: Iterable[BackupRecord],
    *,
    lost_before: LostRange | None = None,
    compression: str = DEFAULT_COMPRESSION,
) -> StoredSegment:
    """Writes the segment to a temporary key, then moves it to ``key``.

    A reader listing the level's directory never sees a partial segment: the move
    is a rename locally and a single copy on S3 (the object appears whole).
    """
    tmp = key.ref.temp_key(key.level)
    meta = write_segment(
        fs,
        tmp,
        records,
        topic=key.ref.topic,
        partition=key.ref.partition,
        start=key.start,
        end=key.end,
        lost_before=lost_before,
        compression=compression,
    )
    try:
        fs.move(tmp, key.key)
    except BaseException:
        _delete_quietly(fs, tmp)
        raise
    size = fs.get_file_info(key.key).size
    return StoredSegment(key, meta, 0 if size is None else size)
