"""The pure catalog: contiguity with lost ranges, lookup, copy states, the compaction
swap, retention, and the JSON form."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from mm.backup.catalog import (
    DELETED,
    DELETING,
    FINISHED,
    STARTED,
    PartitionCatalog,
    SegmentEntry,
    catalog_from_dict,
    catalog_to_dict,
)
from mm.backup.errors import CatalogError
from mm.backup.ranges import LostRange

pytestmark = pytest.mark.unit

EMPTY = PartitionCatalog("east", "orders", 0)


def seg(start, end, level=0, *, records=None, ts=None, lost=None, state=FINISHED):
    n = end - start + 1 if records is None else records
    lo, hi = (start * 10, end * 10) if ts is None else ts
    lost_before = None if lost is None else LostRange(lost[0], lost[1], "retention")
    key = f"east/orders/partition=0/level={level}/{start:020d}-{end:020d}.parquet"
    return SegmentEntry(level, start, end, key, n, 100 * n, lo, hi, state, lost_before)


def cat(*entries):
    return PartitionCatalog("east", "orders", 0, tuple(entries))


def test_copies_append_contiguously():
    c = EMPTY
    for s, e in [(0, 9), (10, 19), (20, 20)]:
        started = c.begin_copy(seg(s, e))
        assert started.visible() == c.visible()  # a started copy is not visible
        assert started.in_state(STARTED) == (seg(s, e, state=STARTED),)
        c = started.finish_copy(seg(s, e))
    assert [(e.start, e.end) for e in c.visible()] == [(0, 9), (10, 19), (20, 20)]
    assert c.next_offset == 21 and c.record_count == 21 and c.lost() == ()


def test_finish_without_begin_and_abort():
    c = EMPTY.finish_copy(seg(0, 9))
    assert c.visible() == (seg(0, 9),)
    started = c.begin_copy(seg(10, 19))
    assert started.abort_copy(seg(10, 19).key) == c
    with pytest.raises(CatalogError, match=r"cannot abort .* COPY_SEGMENT_FINISHED"):
        c.abort_copy(seg(0, 9).key)
    with pytest.raises(CatalogError, match="cannot finish copying"):
        c.finish_copy(seg(0, 9))  # already finished


@pytest.mark.parametrize(
    ("entry", "match"),
    [
        (seg(5, 12), "overlaps .* expected it to start at 10"),
        (seg(0, 8), "overlaps"),
        (seg(12, 19), r"expected lost range \(10, 11\)"),
        (seg(12, 19, lost=(9, 11)), r"with lost range \(9, 11\): expected lost range \(10, 11\)"),
        (seg(10, 19, lost=(9, 9)), "expected lost range None"),
    ],
)
def test_gaps_between_segments_must_be_recorded_as_lost(entry, match):
    c = cat(seg(0, 9))
    with pytest.raises(CatalogError, match=match):
        c.begin_copy(entry)
    with pytest.raises(CatalogError, match=match):
        c.finish_copy(entry)


def test_lost_ranges_are_counted_and_reported():
    c = cat(seg(100, 109, lost=(0, 99)), seg(115, 119, lost=(110, 114)), seg(120, 121))
    assert [(r.start, r.end) for r in c.lost()] == [(0, 99), (110, 114)]
    assert c.lost_count == 105
    assert c.segment_for(112) is None and c.segment_for(50) is None


def test_lookup_bisects_the_visible_set():
    c = cat(seg(0, 9), seg(10, 10), seg(11, 30), seg(40, 45, lost=(31, 39)))
    c = c.begin_copy(seg(46, 50))
    for offset, start in [(0, 0), (9, 0), (10, 10), (11, 11), (30, 11), (40, 40), (45, 40)]:
        found = c.segment_for(offset)
        assert found is not None and found.start == start
    for offset in [-1, 31, 39, 46, 50, 1000]:
        assert c.segment_for(offset) is None


def test_entries_are_in_one_order_whatever_the_input():
    a, b = seg(0, 9), seg(10, 19)
    assert cat(b, a) == cat(a, b)
    with pytest.raises(CatalogError, match="listed twice"):
        cat(a, replace(a, state=DELETING))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"start": 5, "end": 4}, "start <= end"),
        ({"record_count": 11}, "11 records"),
        ({"min_timestamp": None}, "both or neither"),
        ({"min_timestamp": 1000}, "min_timestamp <= max_timestamp"),
        ({"lost_before": LostRange(0, 3, "x")}, "end at start - 1"),
    ],
)
def test_bad_entries(kwargs, match):
    with pytest.raises(CatalogError, match=match):
        replace(seg(0, 9), **kwargs)


def test_compaction_swaps_a_run_in_one_change():
    c = cat(seg(0, 9), seg(10, 19), seg(20, 29), seg(30, 39))
    merged = seg(10, 29, level=1)
    after = c.compact([seg(20, 29).key, seg(10, 19).key], merged)
    assert [(e.start, e.end, e.level) for e in after.visible()] == [
        (0, 9, 0),
        (10, 29, 1),
        (30, 39, 0),
    ]
    assert [e.key for e in after.in_state(DELETING)] == [seg(10, 19).key, seg(20, 29).key]
    for o in range(40):
        assert c.segment_for(o).covers(o) and after.segment_for(o).covers(o)
    # then a level-2 over level-0 and level-1 neighbours is refused
    with pytest.raises(CatalogError, match="levels"):
        after.compact([seg(0, 9).key, merged.key], seg(0, 29, level=2))


@pytest.mark.parametrize(
    ("keys", "merged", "match"),
    [
        ([(0, 9), (20, 29)], seg(0, 29, level=1), "not a contiguous run"),
        ([(0, 9), (10, 19)], seg(0, 19, level=2), "merged level 2, expected 1"),
        ([(0, 9), (10, 19)], seg(0, 18, level=1), r"range \(0, 18\), expected \(0, 19\)"),
        ([(0, 9), (10, 19)], seg(0, 19, level=1, records=19), "records 19, expected 20"),
        ([(20, 29), (35, 39)], seg(20, 39, level=1, records=15), "lost ranges inside"),
        ([], seg(0, 9, level=1), "expected visible segments"),
        ([(0, 9), (0, 9)], seg(0, 9, level=1), "expected visible segments"),
    ],
)
def test_bad_compactions(keys, merged, match):
    c = cat(seg(0, 9), seg(10, 19), seg(20, 29), seg(35, 39, lost=(30, 34)))
    keys = [seg(*k).key for k in keys]
    with pytest.raises(CatalogError, match=match):
        c.compact(keys, merged)


def test_compaction_keeps_the_lost_range_before_the_run():
    c = cat(seg(5, 9, lost=(0, 4)), seg(10, 19))
    with pytest.raises(CatalogError, match="lost range before"):
        c.compact([seg(5, 9).key, seg(10, 19).key], seg(5, 19, level=1))
    after = c.compact([seg(5, 9).key, seg(10, 19).key], seg(5, 19, level=1, lost=(0, 4)))
    assert after.lost_count == 5


def test_retention_expires_a_leading_run_and_keeps_the_newest():
    c = cat(
        seg(0, 9, ts=(0, 90)),
        seg(10, 19, records=0, ts=(None, None)),
        seg(20, 29, ts=(200, 290)),
        seg(30, 39, ts=(100, 390)),  # out-of-order timestamps: max decides
        seg(40, 49, ts=(400, 490)),
    )
    after = c.expire(before_ms=300)
    assert [e.start for e in after.in_state(DELETING)] == [0, 10, 20]
    assert [e.start for e in after.visible()] == [30, 40]
    assert c.expire(before_ms=10**12).visible() == (c.visible()[-1],)
    done = after.finish_delete(e.key for e in after.in_state(DELETING))
    assert [e.start for e in done.in_state(DELETED)] == [0, 10, 20]
    assert done.forget_deleted() == done.settled() == cat(*after.visible())
    with pytest.raises(CatalogError, match="cannot finish deleting"):
        done.finish_delete([seg(30, 39).key])


def test_retention_drops_lost_ranges_with_their_segment():
    c = cat(seg(100, 109, lost=(0, 99)), seg(110, 119))
    assert c.expire(before_ms=2_000).lost() == ()


def test_json_round_trip():
    c = cat(seg(100, 109, lost=(0, 99)), seg(110, 119)).begin_copy(seg(120, 129))
    c = c.compact([seg(100, 109).key], seg(100, 109, level=1, lost=(0, 99)))
    doc = json.loads(json.dumps(catalog_to_dict(c)))
    assert catalog_from_dict(doc) == c


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda d: d.pop("segments"), "KeyError"),
        (lambda d: d.update(format=2), "format 2"),
        (lambda d: d["segments"][0].update(state="GONE"), "GONE"),
        (lambda d: d["segments"][1].update(start=5), "overlaps"),
    ],
)
def test_bad_documents(change, match):
    doc = catalog_to_dict(cat(seg(0, 9), seg(10, 19)))
    change(doc)
    with pytest.raises(CatalogError, match=match):
        catalog_from_dict(doc)


def test_a_compaction_is_registered_started_then_swapped():
    c = cat(seg(0, 9), seg(10, 19), seg(20, 29))
    keys = [seg(0, 9).key, seg(10, 19).key]
    started = c.begin_compact(keys, seg(0, 19, level=1))
    assert started.visible() == c.visible()  # registered, not visible
    assert started.in_state(STARTED) == (seg(0, 19, level=1, state=STARTED),)
    # a backup still appends after the visible segments
    assert started.begin_copy(seg(30, 39)).in_state(STARTED)[-1].start == 30
    after = started.compact(keys, seg(0, 19, level=1))
    assert after == c.compact(keys, seg(0, 19, level=1))
    assert after.in_state(STARTED) == ()
    assert started.abort_copy(seg(0, 19, level=1).key) == c  # a crashed compaction undone
    with pytest.raises(CatalogError, match="already listed"):
        started.begin_compact(keys, seg(0, 19, level=1))
    with pytest.raises(CatalogError, match=r"records 19, expected 20"):
        c.begin_compact(keys, seg(0, 19, level=1, records=19))
    # a key listed in another state is never taken over
    gone = cat(seg(0, 9), seg(10, 19), seg(0, 19, level=1, state=DELETED))
    with pytest.raises(CatalogError, match="already listed as DELETE_SEGMENT_FINISHED"):
        gone.compact(keys, seg(0, 19, level=1))
