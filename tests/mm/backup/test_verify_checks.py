"""`mm backup verify`'s checks on hand-made catalogs and segment scans (pure)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from mm.backup.catalog import DELETED, DELETING, PartitionCatalog, SegmentEntry
from mm.backup.catalog_diff import diff_catalogs
from mm.backup.ranges import LostRange
from mm.backup.rebuild import Rebuilt
from mm.backup.segment import SegmentMeta
from mm.backup.verify_checks import (
    PartitionFacts,
    RowTally,
    SegmentScan,
    check_segment,
    judge_partition,
)

pytestmark = pytest.mark.unit

PREFIX = "/b"


def key(start: int, end: int, level: int = 0) -> str:
    return f"east/t/partition=0/level={level}/{start:020d}-{end:020d}.parquet"


def entry(start: int, end: int, *, level: int = 0, gaps=(), lost=None) -> SegmentEntry:
    n = end - start + 1 - sum(b - a + 1 for a, b in gaps)
    return SegmentEntry(
        level, start, end, key(start, end, level), n, 100, start, end, lost_before=lost
    )


def good_scan(e: SegmentEntry, gaps=()) -> SegmentScan:
    """What reading a file that agrees with ``e`` shows (timestamps = offsets)."""
    meta = SegmentMeta(
        "t", 0, e.start, e.end, e.record_count, tuple(gaps), e.start, e.end, e.lost_before
    )
    tally = RowTally(e.start, e.end)
    holes = {o for a, b in gaps for o in range(a, b + 1)}
    for o in range(e.start, e.end + 1):
        if o not in holes:
            tally.add(o, o)
    return SegmentScan.of_tally(f"{PREFIX}/{e.key}", e.size_bytes, meta, tally)


def catalog(*entries: SegmentEntry) -> PartitionCatalog:
    return PartitionCatalog("east", "t", 0, entries)


def facts(cat: PartitionCatalog, scans=None, rebuilt=None, **kw) -> PartitionFacts:
    scans = {e.key: good_scan(e) for e in cat.visible()} if scans is None else scans
    rebuilt = Rebuilt(cat.settled(), ()) if rebuilt is None else rebuilt
    return PartitionFacts("t", 0, 3, cat, None, scans, rebuilt, None, **kw)


def test_row_tally_gaps_order_and_timestamps():
    t = RowTally(10, 20)
    for o, ts in [(10, 5), (12, -1), (13, 9), (17, 7)]:
        t.add(o, ts)
    assert t.rows == 4 and t.offsets_error is None
    assert t.gaps == ((11, 11), (14, 16), (18, 20))
    assert (t.min_timestamp, t.max_timestamp) == (5, 9)  # -1: no timestamp
    t.add(17, 1)
    assert t.offsets_error is not None and "offset 17, out of order" in t.offsets_error
    t.add(30, 1)  # counted, but the first error stands
    assert t.rows == 6 and "row 5" in t.offsets_error
    out = RowTally(0, 4)
    out.add(5, 0)
    assert out.offsets_error is not None and "outside" in out.offsets_error


def test_a_consistent_partition():
    cat = catalog(
        entry(0, 9),
        entry(10, 19, gaps=[(12, 13)]),
        entry(25, 29, lost=LostRange(20, 24, "retention")),
    )
    scans = {e.key: good_scan(e, [(12, 13)] if e.start == 10 else ()) for e in cat.visible()}
    v = judge_partition(facts(cat, scans))
    assert v.ok and v.warnings == () and v.problems == ()
    assert (v.segments, v.records, v.bytes_checked) == (3, 10 + 8 + 5, 300)
    assert (v.first_offset, v.last_offset) == (0, 29)


def test_missing_file():
    e = entry(0, 9)
    cat = catalog(e)
    v = judge_partition(
        facts(cat, {e.key: SegmentScan(f"{PREFIX}/{e.key}", None)}, Rebuilt(catalog(), ()))
    )
    assert v.problems == (
        f"segment {e.key}: file missing at {PREFIX}/{e.key} (the catalog lists it as visible)",
    )


def test_corrupt_file():
    e = entry(0, 9)
    scan = SegmentScan(f"{PREFIX}/{e.key}", 100, error="not a readable Parquet file (magic bytes)")
    (problem,) = judge_partition(facts(catalog(e), {e.key: scan})).problems
    assert "not readable in full: not a readable Parquet file" in problem


def test_wrong_count_in_the_catalog():
    e = entry(0, 9)
    cat = catalog(replace(e, record_count=9))
    problems = judge_partition(facts(cat, {e.key: good_scan(e)}, Rebuilt(catalog(e), ()))).problems
    assert f"segment {e.key}: the catalog says record_count 9, the footer says 10" in problems
    # the rebuilt index (from the footer) differs too
    assert any(
        "rebuilt from the files differs" in p and "record_count 9 -> 10" in p for p in problems
    )


def test_rows_not_matching_the_footer():
    e = entry(0, 9)
    scan = good_scan(e)
    short = replace(scan, rows=9, gaps=((4, 4),))  # a row missing: an undeclared gap
    problems = check_segment(e, short)
    assert problems == [
        f"segment {e.key}: holds 9 rows, its footer says 10 records",
        f"segment {e.key}: the offsets without a row are [4-4], the footer's gaps are [] "
        "(expected them to be the same)",
    ]
    disordered = replace(scan, offsets_error="row 3 has offset 1, out of order")
    assert check_segment(e, disordered) == [f"segment {e.key}: row 3 has offset 1, out of order"]
    times = replace(scan, max_timestamp=99)
    assert check_segment(e, times) == [
        f"segment {e.key}: the rows' timestamps span (0, 99), the footer says (0, 9)"
    ]


def test_footer_disagrees_with_key_and_entry():
    e = entry(0, 9)
    scan = good_scan(e)
    assert scan.meta is not None
    moved = replace(
        scan, meta=replace(scan.meta, start=1, record_count=9, gaps=()), rows=9, gaps=()
    )
    assert check_segment(e, moved) == [
        f"segment {e.key}: the catalog says start 0, the footer says 1",
        f"segment {e.key}: the catalog says record_count 10, the footer says 9",
    ]
    bigger = replace(scan, size_bytes=101)
    assert check_segment(e, bigger) == [
        f"segment {e.key}: the catalog says size_bytes 100, the file says 101"
    ]
    other = replace(scan, meta=replace(scan.meta, topic="u"))
    (problem,) = check_segment(e, other)
    assert "key names topic, partition, level, start, end = ('t', 0, 0, 0, 9)" in problem
    assert "say ('u', 0, 0, 0, 9)" in problem


def test_catalog_that_does_not_load_and_lost_catalog():
    f = PartitionFacts(
        "t", 0, 4, None, "segment x overlaps y", rebuilt=Rebuilt(catalog(entry(0, 9)), ())
    )
    (problem,) = judge_partition(f).problems
    assert problem.startswith("catalog version 4 does not load: segment x overlaps y")
    lost = PartitionFacts("t", 0, 0, catalog(), rebuilt=Rebuilt(catalog(entry(0, 9)), ()))
    (problem,) = judge_partition(lost).problems
    assert problem.startswith("no catalog, but 1 segment files")


def test_stray_files_tmp_files_and_in_flight():
    a, b = entry(0, 9), entry(10, 19)
    cat = catalog(a).begin_copy(b)
    stray = entry(20, 29)
    shadowed_stray = key(0, 4)
    rebuilt = Rebuilt(catalog(a, b, stray), (shadowed_stray,))
    v = judge_partition(facts(cat, rebuilt=rebuilt, temp_files=("/b/x/_tmp/1.parquet",)))
    assert v.ok, v.problems
    assert v.in_flight == (b.key,)
    assert v.warnings == (
        "leftover temporary file of an interrupted write: /b/x/_tmp/1.parquet (safe to delete "
        "when no backup, compaction or rebuild-index runs)",
        f"stray segment file not in the catalog: {shadowed_stray} (a higher level covers it)",
        f"stray segment file not in the catalog: {stray.key} (rebuild-index would list it)",
    )


def test_compaction_leftovers_and_deleted_files():
    a, b, c = entry(0, 9), entry(10, 19), entry(20, 29)
    merged = entry(0, 19, level=1)
    cat = catalog(a, b, c).compact([a.key, b.key], merged)
    rebuilt = Rebuilt(catalog(merged, c), (a.key, b.key))
    assert judge_partition(facts(cat, rebuilt=rebuilt)).warnings == ()
    done = cat.finish_delete([a.key, b.key])
    assert {e.state for e in done.entries} >= {DELETED}
    warned = judge_partition(facts(done, rebuilt=rebuilt)).warnings
    assert warned == tuple(
        f"file of a segment the catalog says is deleted is still there: {k}" for k in (a.key, b.key)
    )
    # a visible segment shadowed by a level-1 file the catalog does not know
    v = judge_partition(facts(catalog(a, b, c), rebuilt=rebuilt))
    assert v.problems == tuple(
        f"segment {k}: the catalog lists it as visible, but a higher-level file not in the "
        "catalog covers it (rebuild-index would drop it)"
        for k in (a.key, b.key)
    )
    assert DELETING in {e.state for e in cat.entries}


def test_rebuild_failure_is_a_problem():
    cat = catalog(entry(0, 9))
    f = replace(facts(cat), rebuilt=None, rebuild_error="x partly overlaps y")
    assert judge_partition(f).problems == (
        "the index cannot be rebuilt from the files: x partly overlaps y",
    )


def test_catalog_diff():
    a, b = entry(0, 9), entry(10, 19)
    before = catalog(a, b)
    after = catalog(replace(a, size_bytes=7), entry(10, 14), entry(15, 19))
    d = diff_catalogs(before, after)
    assert d.added == (key(10, 14), key(15, 19)) and d.removed == (b.key,)
    (change,) = d.changed
    assert change.describe() == f"{a.key}: size_bytes 100 -> 7"
    assert diff_catalogs(before, before).empty
