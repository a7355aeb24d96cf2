"""Planning `mm backup compact` (pure): runs are contiguous, whole segments, within the
limits, never across a lost range or another level; crashed copies, retention and
pending deletes come first."""

from __future__ import annotations

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from mm.backup.catalog import DELETING, STARTED, PartitionCatalog, SegmentEntry
from mm.backup.compaction_plan import (
    CompactionLimits,
    MergeRun,
    joined_gaps,
    plan_compaction,
    plan_partition_work,
)
from mm.backup.ranges import LostRange

pytestmark = pytest.mark.unit


def seg(start, end, level=0, *, records=None, size=None, ts=None, lost=None, state=None):
    n = end - start + 1 if records is None else records
    lo, hi = (start, end) if ts is None else ts
    lost_before = None if lost is None else LostRange(lost[0], lost[1], "retention")
    key = f"east/t/partition=0/level={level}/{start:020d}-{end:020d}.parquet"
    kw = {} if state is None else {"state": state}
    return SegmentEntry(
        level,
        start,
        end,
        key,
        n,
        10 * n if size is None else size,
        lo,
        hi,
        **kw,
        lost_before=lost_before,
    )


def chain(*sizes, level=0):
    """Adjacent segments of the given lengths from offset 0."""
    out, at = [], 0
    for n in sizes:
        out.append(seg(at, at + n - 1, level))
        at += n
    return out


def spans(runs):
    return [(r.start, r.end, len(r.segments)) for r in runs]


LIMITS = CompactionLimits(min_segments=2, max_records=100, max_bytes=10_000)


def test_consecutive_small_segments_merge_greedily():
    runs = plan_compaction(chain(10, 10, 10, 10, 10), 0, LIMITS, 0)
    assert spans(runs) == [(0, 49, 5)]
    limited = CompactionLimits(min_segments=2, max_records=25, max_bytes=10_000)
    assert spans(plan_compaction(chain(10, 10, 10, 10, 10), 0, limited, 0)) == [
        (0, 19, 2),
        (20, 39, 2),
    ]  # the last segment waits for a partner


def test_bytes_limit_and_a_segment_too_big_for_any_run():
    segs = [seg(0, 9, size=40), seg(10, 19, size=500), seg(20, 29, size=40), seg(30, 39, size=40)]
    limits = CompactionLimits(min_segments=2, max_records=1000, max_bytes=100)
    assert spans(plan_compaction(segs, 0, limits, 0)) == [(20, 39, 2)]


def test_min_segments_leaves_short_runs_alone():
    limits = CompactionLimits(min_segments=4, max_records=1000, max_bytes=10**6)
    assert plan_compaction(chain(5, 5, 5), 0, limits, 0) == ()
    assert spans(plan_compaction(chain(5, 5, 5, 5), 0, limits, 0)) == [(0, 19, 4)]


def test_other_levels_and_lost_ranges_cut_runs():
    segs = [
        seg(0, 9),
        seg(10, 19),
        seg(20, 39, level=1),
        seg(40, 49),
        seg(50, 59),
        seg(70, 79, lost=(60, 69)),  # may start a run, never sit inside one
        seg(80, 89),
    ]
    runs = plan_compaction(segs, 0, LIMITS, 0)
    assert spans(runs) == [(0, 19, 2), (40, 59, 2), (70, 89, 2)]
    assert runs[2].lost_before == LostRange(60, 69, "retention")
    assert runs[2].merged_entry("k").lost_before == LostRange(60, 69, "retention")
    assert plan_compaction(segs, 1, LIMITS, 0) == ()  # one level-1 segment alone


def test_min_age_keeps_recent_segments_out():
    segs = [seg(0, 9, ts=(0, 100)), seg(10, 19, ts=(100, 200)), seg(20, 29, ts=(200, 900))]
    aged = CompactionLimits(min_segments=2, max_records=100, max_bytes=10_000, min_age_ms=500)
    assert spans(plan_compaction(segs, 0, aged, now_ms=700)) == [(0, 19, 2)]
    assert plan_compaction(segs, 0, aged, now_ms=650) == ()  # 200 is not 500 ms old
    assert spans(plan_compaction(segs, 0, aged, now_ms=1400)) == [(0, 29, 3)]
    # no timestamps: nothing says the segment is recent
    untimed = [seg(0, 9, records=0, ts=(None, None)), seg(10, 19, ts=(0, 100))]
    assert spans(plan_compaction(untimed, 0, aged, now_ms=700)) == [(0, 19, 2)]


def test_merged_entry_sums_the_run():
    run = MergeRun((seg(5, 9, ts=(50, 90), lost=(0, 4)), seg(10, 19, records=3, ts=(20, 300))))
    e = run.merged_entry("east/t/partition=0/level=1/x.parquet")
    assert (e.level, e.start, e.end, e.record_count, e.state) == (1, 5, 19, 8, STARTED)
    assert (e.min_timestamp, e.max_timestamp, e.size_bytes) == (20, 300, 0)
    assert run.size_bytes == 80 and run.keys == (seg(5, 9).key, seg(10, 19).key)


def test_limits_and_level_are_checked():
    with pytest.raises(ValueError, match="min_segments >= 2"):
        CompactionLimits(min_segments=1)
    with pytest.raises(ValueError, match="min_age_ms >= 0"):
        CompactionLimits(min_age_ms=-1)
    with pytest.raises(ValueError, match="expected 0 <= level < 99"):
        plan_compaction([], 99, LIMITS, 0)


def test_joined_gaps():
    assert joined_gaps([[(2, 3), (9, 9)], [(10, 11)], [], [(20, 20)]]) == (
        (2, 3),
        (9, 11),
        (20, 20),
    )
    assert joined_gaps([]) == ()


@st.composite
def visible_segments(draw):
    out, at = [], draw(st.integers(0, 5))
    for _ in range(draw(st.integers(0, 14))):
        lost = None
        if out and draw(st.booleans()) and draw(st.booleans()):
            hole = draw(st.integers(1, 4))
            lost, at = (at, at + hole - 1), at + hole
        n = draw(st.integers(1, 30))
        out.append(
            seg(
                at,
                at + n - 1,
                draw(st.sampled_from([0, 0, 0, 1])),
                records=draw(st.integers(0, n)),
                size=draw(st.integers(0, 60)),
                ts=(0, draw(st.integers(0, 1000))),
                lost=lost,
            )
        )
        at += n
    return out


@given(
    visible_segments(),
    st.integers(2, 5),
    st.integers(1, 80),
    st.integers(1, 200),
    st.integers(0, 800),
)
def test_runs_are_contiguous_whole_and_within_the_limits(segs, min_n, max_r, max_b, age):
    limits = CompactionLimits(min_n, max_r, max_b, age)
    now = 1000
    runs = plan_compaction(segs, 0, limits, now)
    catalog = PartitionCatalog("east", "t", 0, tuple(segs))  # the input is a valid catalog
    position = {e.key: i for i, e in enumerate(segs)}
    used: set[str] = set()
    for run in runs:
        at = [position[k] for k in run.keys]
        assert at == list(range(at[0], at[0] + len(at))), "whole, consecutive segments"
        assert len(run.segments) >= min_n
        assert run.record_count <= max_r and run.size_bytes <= max_b
        assert {e.level for e in run.segments} == {0}
        assert all(e.lost_before is None for e in run.segments[1:])
        assert all(age == 0 or e.max_timestamp <= now - age for e in run.segments)
        assert not used & set(run.keys), "runs never overlap"
        used |= set(run.keys)
        # the catalog accepts the swap the plan asks for
        merged = run.merged_entry(
            f"east/t/partition=0/level=1/{run.start:020d}-{run.end:020d}.parquet"
        )
        after = catalog.begin_compact(run.keys, merged).compact(run.keys, merged)
        for o in range(run.start, run.end + 1):  # no lost range inside: all covered
            assert after.segment_for(o).key == merged.key
        catalog = after
    assert [r.start for r in runs] == sorted(r.start for r in runs)
    before = PartitionCatalog("east", "t", 0, tuple(segs))
    for o in range(segs[-1].end + 2 if segs else 0):
        if not any(r.start <= o <= r.end for r in runs):
            assert catalog.segment_for(o) == before.segment_for(o)
    event(f"runs: {min(len(runs), 2)}")  # --hypothesis-show-statistics: runs are drawn


def test_partition_work_orders_crash_recovery_retention_and_deletes():
    c = PartitionCatalog(
        "east",
        "t",
        0,
        (
            seg(0, 9, ts=(0, 90)),
            seg(10, 19, ts=(100, 190)),
            seg(20, 29, ts=(200, 290)),
            seg(30, 39, ts=(300, 390)),
            seg(40, 49, ts=(400, 490)),
            seg(50, 59, ts=(500, 590)),
        ),
    )
    merged = MergeRun(tuple(c.visible()[1:3])).merged_entry(seg(10, 29, level=1).key)
    c = c.begin_compact([seg(10, 19).key, seg(20, 29).key], merged)  # a crashed compaction
    c = c.begin_copy(seg(60, 69))  # a backup's copy in flight: not ours to abort
    work = plan_partition_work(c, 0, LIMITS, now_ms=1000, retention_ms=700)
    assert work.crashed == (merged.key,)
    assert [e.start for e in work.expiring] == [0, 10, 20]  # newest record before 300
    assert work.deleting == tuple(seg(s, s + 9).key for s in (0, 10, 20))
    assert spans(work.runs) == [(30, 59, 3)]
    assert work.has_work
    # a catalog with leftovers of a swap: only the deletes to finish
    swapped = PartitionCatalog("east", "t", 0, (seg(0, 9), seg(10, 19), seg(20, 29)))
    keys = [seg(0, 9).key, seg(10, 19).key]
    swapped = swapped.compact(keys, seg(0, 19, level=1))
    work = plan_partition_work(swapped, 0, LIMITS, now_ms=0, retention_ms=None)
    assert (work.crashed, work.expiring, work.runs) == ((), (), ())
    assert work.deleting == tuple(keys)
    assert not plan_partition_work(
        PartitionCatalog("east", "t", 0, (seg(0, 9),)), 0, LIMITS, 0, None
    ).has_work
    assert all(e.state is not DELETING for e in swapped.visible())
