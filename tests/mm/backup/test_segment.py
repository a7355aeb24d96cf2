"""Segment files round-trip: headers (order, duplicates, null values), null keys,
tombstones, timestamps and their types, gaps; metadata from the footer alone."""

from __future__ import annotations

import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from mm.backup import segment as seg
from mm.backup.errors import SegmentFormatError
from mm.backup.layout import PartitionRef, is_temp_key
from mm.backup.ranges import LostRange, compute_gaps
from mm.backup.segment import (
    SCHEMA,
    TIMESTAMP_CREATE,
    TIMESTAMP_LOG_APPEND,
    TIMESTAMP_NONE,
    BackupRecord,
    iter_segment,
    read_segment,
    read_segment_meta,
    store_segment,
    write_segment,
)

pytestmark = pytest.mark.unit

FS = pafs.LocalFileSystem()

RECORDS = [
    BackupRecord(10, 1_700_000_000_000, TIMESTAMP_CREATE, b"k", b"v"),
    # null key, duplicate header keys in a given order, a header with a null value
    BackupRecord(
        11,
        1_700_000_000_500,
        TIMESTAMP_CREATE,
        None,
        b"v2",
        (("b", b"1"), ("a", None), ("b", b"2"), ("", b"")),
    ),
    # a tombstone (null value), offsets 12-13 are a gap (e.g. a commit marker)
    BackupRecord(14, 1_699_999_999_000, TIMESTAMP_LOG_APPEND, b"k", None),
    # no timestamp: excluded from min/max
    BackupRecord(15, -1, TIMESTAMP_NONE, b"", b""),
]


def write(tmp_path, records=RECORDS, start=10, end=17, **kw):
    path = f"{tmp_path}/dir/a.parquet"
    meta = write_segment(FS, path, records, topic="t.1", partition=3, start=start, end=end, **kw)
    return path, meta


def test_round_trip(tmp_path):
    path, meta = write(tmp_path)
    got_meta, records = read_segment(FS, path)
    assert records == RECORDS
    assert got_meta == meta
    assert meta.topic == "t.1" and meta.partition == 3
    assert (meta.start, meta.end, meta.record_count) == (10, 17, 4)
    assert meta.gaps == ((12, 13), (16, 17))
    assert (meta.min_timestamp, meta.max_timestamp) == (1_699_999_999_000, 1_700_000_000_500)
    assert meta.lost_before is None


def test_footer_metadata_and_schema(tmp_path):
    path, _ = write(tmp_path, compression="snappy")
    pf = pq.ParquetFile(path)
    kv = pf.metadata.metadata
    assert kv[b"mm.backup.gaps"] == b"[[12,13],[16,17]]"
    assert kv[b"mm.backup.start_offset"] == b"10"
    assert kv[b"mm.backup.end_offset"] == b"17"
    assert kv[b"mm.backup.record_count"] == b"4"
    assert pf.schema_arrow.remove_metadata().equals(SCHEMA)
    assert pf.metadata.row_group(0).column(0).compression == "SNAPPY"


def test_zstd_by_default(tmp_path):
    path, _ = write(tmp_path)
    assert pq.ParquetFile(path).metadata.row_group(0).column(4).compression == "ZSTD"


def test_lost_before_round_trips(tmp_path):
    path, _ = write(tmp_path, lost_before=LostRange(0, 9, "retention"))
    assert read_segment_meta(FS, path).lost_before == LostRange(0, 9, "retention")
    with pytest.raises(ValueError, match="expected it to end at 9"):
        write(tmp_path, lost_before=LostRange(0, 8, "retention"))


def test_empty_segment_covers_only_gaps(tmp_path):
    path, meta = write(tmp_path, records=[], start=5, end=6)
    assert meta.gaps == ((5, 6),) and meta.record_count == 0
    assert meta.min_timestamp is None
    assert read_segment(FS, path) == (meta, [])


def test_many_row_groups(tmp_path, monkeypatch):
    monkeypatch.setattr(seg, "ROWS_PER_GROUP", 3)
    records = [
        BackupRecord(o, o, TIMESTAMP_CREATE, None, bytes([o % 256])) for o in range(0, 20, 2)
    ]
    path, meta = write(tmp_path, records=records, start=0, end=19)
    assert pq.ParquetFile(path).metadata.num_row_groups == 4
    assert list(iter_segment(FS, path)) == records
    assert meta.gaps == tuple((o, o) for o in range(1, 20, 2))


@pytest.mark.parametrize(
    ("offsets", "match"),
    [
        ([10, 10], "out of order"),
        ([11, 10], "out of order"),
        ([9], "outside 10-17"),
        ([18], "outside"),
    ],
)
def test_bad_offsets_are_refused_and_nothing_left(tmp_path, offsets, match):
    records = [BackupRecord(o, 0, TIMESTAMP_CREATE, None, None) for o in offsets]
    with pytest.raises(ValueError, match=match):
        write(tmp_path, records=records)
    assert not (tmp_path / "dir" / "a.parquet").exists()


def test_bad_timestamp_type_is_refused(tmp_path):
    with pytest.raises(ValueError, match="timestamp_type 3, expected 0, 1 or 2"):
        write(tmp_path, records=[BackupRecord(10, 0, 3, None, None)])


def test_not_a_segment(tmp_path):
    pq.write_table(SCHEMA.empty_table(), f"{tmp_path}/plain.parquet")
    with pytest.raises(SegmentFormatError, match=r"metadata key 'mm\.backup\.format' missing"):
        read_segment_meta(FS, f"{tmp_path}/plain.parquet")
    (tmp_path / "junk.parquet").write_bytes(b"not parquet")
    with pytest.raises(SegmentFormatError, match="not a readable Parquet file"):
        read_segment_meta(FS, f"{tmp_path}/junk.parquet")


def test_metadata_that_does_not_add_up_is_refused(tmp_path):
    path, _ = write(tmp_path)
    table = pq.read_table(path)
    kv = dict(pq.ParquetFile(path).metadata.metadata)
    kv[b"mm.backup.record_count"] = b"5"
    with pq.ParquetWriter(path, SCHEMA) as writer:
        writer.write_table(table)
        writer.add_key_value_metadata(kv)
    with pytest.raises(SegmentFormatError, match="do not cover 10-17"):
        read_segment_meta(FS, path)


def test_store_segment_moves_from_a_temp_key(tmp_path):
    ref = PartitionRef(str(tmp_path), "east", "t.1", 3)
    stored = store_segment(FS, ref.segment(0, 10, 17), RECORDS)
    assert stored.size_bytes == (tmp_path / stored.key.relative).stat().st_size > 0
    assert read_segment(FS, stored.key.key) == (stored.meta, RECORDS)
    files = [i.path for i in FS.get_file_info(pafs.FileSelector(str(tmp_path), recursive=True))]
    assert not [f for f in files if is_temp_key(f) and f.endswith(".parquet")]


def test_compute_gaps():
    assert compute_gaps([], 0, 0) == ((0, 0),)
    assert compute_gaps([0, 1, 2], 0, 2) == ()
    assert compute_gaps([1, 5], 0, 6) == ((0, 0), (2, 4), (6, 6))
    with pytest.raises(ValueError, match="expected start <= end"):
        compute_gaps([], 3, 2)
