"""Rebuilding a catalog from the segment files equals the committed catalog; the
highest level wins where a compaction left both levels; inconsistencies are named."""

from __future__ import annotations

import pyarrow.fs as pafs
import pytest

from mm.backup.catalog import DELETING
from mm.backup.catalog_store import FsCatalogStore
from mm.backup.errors import CatalogError, LayoutError, SegmentFormatError
from mm.backup.layout import PartitionRef
from mm.backup.ranges import LostRange
from mm.backup.rebuild import rebuild_catalog, segment_entry
from mm.backup.segment import TIMESTAMP_CREATE, BackupRecord, read_segment, store_segment

pytestmark = pytest.mark.unit

FS = pafs.LocalFileSystem()


def records(start, end, step=1):
    return [
        BackupRecord(o, 1000 + o, TIMESTAMP_CREATE, None, b"v") for o in range(start, end + 1, step)
    ]


def backup(ref, ranges, level=0):
    """Stores segments and returns their catalog entries."""
    out = []
    for start, end, lost in ranges:
        lost_before = None if lost is None else LostRange(lost[0], lost[1], "retention")
        stored = store_segment(
            FS, ref.segment(level, start, end), records(start, end, 2), lost_before=lost_before
        )
        out.append(segment_entry(stored))
    return out


@pytest.fixture
def ref(tmp_path):
    return PartitionRef(str(tmp_path), "east", "orders.v1", 0)


def test_rebuild_equals_the_committed_catalog(ref):
    store = FsCatalogStore(FS)
    version, cat = store.load(ref)
    for e in backup(ref, [(50, 59, (0, 49)), (60, 69, None), (75, 80, (70, 74))]):
        cat = cat.finish_copy(e)
        version = store.commit(ref, version, cat)
    # an unfinished write is ignored
    FS.open_output_stream(ref.temp_key(0)).close()
    rebuilt = rebuild_catalog(FS, ref)
    assert rebuilt.catalog == store.load(ref)[1] == cat
    assert rebuilt.shadowed == ()
    assert rebuilt.catalog.lost_count == 55


def test_compaction_leftovers_highest_level_wins(ref):
    store = FsCatalogStore(FS)
    l0 = backup(ref, [(0, 9, None), (10, 19, None), (20, 29, None), (30, 39, None)])
    cat = store.load(ref)[1]
    for e in l0:
        cat = cat.finish_copy(e)
    store.commit(ref, 0, cat)
    # level 1 over 10-29, committed as one swap; the level-0 files are still there
    merged = store_segment(
        FS,
        ref.segment(1, 10, 29),
        [r for s in (10, 20) for r in read_segment(FS, ref.segment(0, s, s + 9).key)[1]],
    )
    cat = cat.compact([l0[1].key, l0[2].key], segment_entry(merged))
    store.commit(ref, 1, cat)
    rebuilt = rebuild_catalog(FS, ref)
    assert rebuilt.catalog == cat.settled()
    assert rebuilt.shadowed == (l0[1].key, l0[2].key)
    # the swap's files deleted: the committed catalog, deleted entries forgotten
    for e in cat.in_state(DELETING):
        FS.delete_file(f"{ref.prefix}/{e.key}")
    cat = cat.finish_delete(e.key for e in cat.in_state(DELETING)).forget_deleted()
    store.commit(ref, 2, cat)
    assert rebuild_catalog(FS, ref).catalog == store.load(ref)[1]
    # and a level-2 file written before its swap is committed is preferred too
    store_segment(FS, ref.segment(2, 0, 39), records(0, 39, 2))
    rebuilt = rebuild_catalog(FS, ref)
    assert [(e.level, e.start, e.end) for e in rebuilt.catalog.visible()] == [(2, 0, 39)]
    assert len(rebuilt.shadowed) == 3


def test_empty_partition(ref):
    assert rebuild_catalog(FS, ref).catalog == FsCatalogStore(FS).load(ref)[1]


def test_a_hole_is_refused(ref):
    backup(ref, [(0, 9, None), (20, 29, None)])
    with pytest.raises(CatalogError, match=r"expected lost range \(10, 19\)"):
        rebuild_catalog(FS, ref)


def test_partial_overlap_is_refused(ref):
    backup(ref, [(0, 9, None), (10, 19, None)])
    backup(ref, [(5, 14, None)], level=1)
    with pytest.raises(
        CatalogError, match=r"partly overlaps the higher-level segment\(s\) \[\(5, 14\)\]"
    ):
        rebuild_catalog(FS, ref)


def test_stray_and_mismatched_files(ref, tmp_path):
    backup(ref, [(0, 9, None)])
    stray = tmp_path / "east/orders.v1/partition=0/level=0/notes.txt"
    stray.write_text("x")
    with pytest.raises(LayoutError, match=r"notes\.txt"):
        rebuild_catalog(FS, ref)
    stray.unlink()
    (tmp_path / "east/orders.v1/partition=0/level=0/.hidden").write_text("x")
    assert len(rebuild_catalog(FS, ref).catalog.visible()) == 1
    # a file renamed to the wrong range
    good = ref.segment(0, 0, 9).key
    FS.move(good, ref.segment(0, 0, 8).key)
    with pytest.raises(SegmentFormatError, match=r"expected \('orders.v1', 0, 0, 8\)"):
        rebuild_catalog(FS, ref)
