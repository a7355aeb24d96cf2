"""Cutting a read into segments (pure): rotation by records, bytes and record time, gaps at the
tail, lost ranges carried by the segment after them."""

from __future__ import annotations

import pytest

from mm.backup.ranges import LostRange
from mm.backup.segment import TIMESTAMP_CREATE, BackupRecord
from mm.backup.segmenter import SegmentCut, Segmenter, record_bytes

pytestmark = pytest.mark.unit


def rec(offset, value=b"v", headers=()):
    return BackupRecord(offset, 1000 + offset, TIMESTAMP_CREATE, b"k", value, headers)


def segmenter(start=0, max_records=1000, max_bytes=1 << 30):
    cuts: list[SegmentCut] = []
    return Segmenter(start, cuts.append, max_records=max_records, max_bytes=max_bytes), cuts


def spans(cuts):
    return [(c.start, c.end, [r.offset for r in c.records], c.lost_before) for c in cuts]


def test_rotation_by_records_ends_at_the_last_record():
    seg, cuts = segmenter(start=10, max_records=2)
    for o in (10, 12, 13, 16):
        seg.record(rec(o))
    seg.gap_to(18)  # e.g. a commit marker and an aborted record
    seg.close(18)
    assert spans(cuts) == [(10, 12, [10, 12], None), (13, 16, [13, 16], None), (17, 17, [], None)]


def test_rotation_by_bytes():
    seg, cuts = segmenter(max_bytes=10)
    big = rec(0, value=b"x" * 9)  # 1 + 9 bytes
    assert record_bytes(big) == 10
    seg.record(big)
    seg.record(rec(1, headers=(("h", b"12"),)))  # 1 + 1 + 1 + 2
    seg.record(rec(2, value=b"y" * 6))  # 10 in all
    seg.close(3)
    assert spans(cuts) == [(0, 0, [0], None), (1, 2, [1, 2], None)]


def test_rotation_by_record_time_ends_before_the_record_past_the_span():
    cuts: list[SegmentCut] = []
    seg = Segmenter(0, cuts.append, max_records=1000, max_bytes=1 << 30, max_age_ms=10)

    def at(offset: int, ts: int) -> BackupRecord:
        return BackupRecord(offset, ts, TIMESTAMP_CREATE, b"k", b"v")

    seg.record(at(0, 1000))
    seg.record(at(1, 995))  # out of order: the oldest is now 995
    seg.record(at(2, -1))  # no timestamp: never cuts
    seg.record(at(4, 1004))  # 9 past the oldest
    seg.record(at(6, 1005))  # 10 past: a new segment from 6, the gap at 5 stays behind
    seg.record(at(7, 1014))
    seg.close(8)
    assert spans(cuts) == [(0, 5, [0, 1, 2, 4], None), (6, 7, [6, 7], None)]
    with pytest.raises(ValueError, match="positive"):
        Segmenter(0, cuts.append, max_records=0, max_bytes=1)


def test_a_lost_range_cuts_and_is_carried_by_the_next_segment():
    seg, cuts = segmenter()
    seg.record(rec(0))
    seg.gap_to(2)
    seg.lost(2, 6)
    seg.record(rec(8))
    seg.close(9)
    assert spans(cuts) == [(0, 1, [0], None), (7, 8, [8], LostRange(2, 6, "retention"))]


def test_loss_at_the_start_and_contiguous_losses_merge():
    seg, cuts = segmenter(start=5)
    seg.lost(5, 9)
    seg.lost(10, 11)
    seg.record(rec(12))
    seg.close(13)
    assert spans(cuts) == [(12, 12, [12], LostRange(5, 11, "retention"))]


def test_a_loss_with_nothing_after_it_stays_unrecorded():
    seg, cuts = segmenter(start=5)
    seg.lost(5, 9)
    seg.close(10)
    assert cuts == [] and seg.unrecorded_lost == LostRange(5, 9, "retention")


def test_close_covers_gaps_only():
    seg, cuts = segmenter(start=3)
    seg.close(5)
    assert spans(cuts) == [(3, 4, [], None)]
    seg.close(5)  # nothing new: nothing cut
    assert len(cuts) == 1


@pytest.mark.parametrize(
    ("action", "match"),
    [
        (lambda s: s.record(rec(3)), "expected offsets from 4 on"),
        (lambda s: s.lost(6, 7), "expected it to start at 4"),
        (lambda s: s.close(2), "already read"),
    ],
)
def test_out_of_order_is_refused(action, match):
    seg, _ = segmenter()
    seg.record(rec(3))
    with pytest.raises(ValueError, match=match):
        action(seg)
