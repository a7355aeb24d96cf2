"""The restore's segment reads (no Kafka): in offset order from a position, across
segments, and through a compaction that swaps and deletes the files being read."""

from __future__ import annotations

from pathlib import Path

import pyarrow.fs as pafs
import pytest

from mm.backup.catalog_store import FsCatalogStore
from mm.backup.compaction import CompactContext, CompactTask, compact_partition
from mm.backup.layout import PartitionRef
from mm.backup.rebuild import segment_entry
from mm.backup.segment import TIMESTAMP_CREATE, BackupRecord, store_segment
from mm.backup.settings import BackupSettings
from mm.backup.storage import Storage
from mm.restore.task import _records_from

pytestmark = pytest.mark.unit

FS = pafs.LocalFileSystem()


def _record(o: int) -> BackupRecord:
    headers = (("h", b"1"), ("h", None)) if o % 2 else ()
    return BackupRecord(o, 1_000 + o, TIMESTAMP_CREATE, f"k{o}".encode(), None, headers)


def _row(r: BackupRecord) -> tuple[object, ...]:
    return (r.offset, r.timestamp, r.key, r.value, list(r.headers) or None)


def _backed_up(tmp_path: Path) -> tuple[Storage, PartitionRef]:
    st = Storage(FS, str(tmp_path), FsCatalogStore(FS))
    ref = PartitionRef(str(tmp_path), "east", "orders", 0)
    version, catalog = st.catalogs.load(ref)
    for start in range(0, 40, 10):
        # every third offset is a gap (a marker, an aborted record)
        records = [_record(o) for o in range(start, start + 10) if o % 3]
        stored = store_segment(FS, ref.segment(0, start, start + 9), records)
        catalog = catalog.finish_copy(segment_entry(stored))
        version = st.catalogs.commit(ref, version, catalog)
    return st, ref


def test_records_from_a_position_in_order_across_segments(tmp_path: Path) -> None:
    st, ref = _backed_up(tmp_path)
    assert [r[0] for r in _records_from(st, ref, 0)] == [o for o in range(40) if o % 3]
    assert [r[0] for r in _records_from(st, ref, 17)] == [o for o in range(17, 40) if o % 3]
    assert list(_records_from(st, ref, 40)) == []


def test_a_compaction_in_the_middle_of_a_read_loses_and_repeats_nothing(tmp_path: Path) -> None:
    st, ref = _backed_up(tmp_path)
    reading = _records_from(st, ref, 0)
    got = [next(reading) for _ in range(4)]  # inside the first segment
    settings = BackupSettings(
        cluster="A", path=str(tmp_path), region="east", compact_min_segments=2
    )
    ctx = CompactContext(settings.to_dict(), 0, 10_000_000).to_dict()
    out = compact_partition(ctx, CompactTask("orders", 0), storage=st)
    assert out.error is None and out.merges, out
    assert not list(Path(ref.level_dir(0)).glob("*.parquet"))  # the files being read are gone
    got += list(reading)
    assert [r[0] for r in got] == [o for o in range(40) if o % 3]
    assert got == [_row(_record(o)) for o in range(40) if o % 3]
