"""The continuation sweeps of a continuous mirror's task (pure loop, fake I/O)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mm.errors import KafkaOperationError
from mm.source.spec import RangeSpec
from mm.source.sweep import continuations, keep_mirroring, merge, moved_positions
from mm.source.task import RangeResult


class FakeSource:
    """Source ends that grow on a schedule; a mirror that copies whole ranges."""

    def __init__(self, ends_by_sweep: list[dict[tuple[str, int], int]]) -> None:
        self.ends_by_sweep = ends_by_sweep
        self.now = 0.0
        self.reads = 0
        self.mirrored: list[RangeSpec] = []
        self.fail_on: tuple[str, int] | None = None
        self.stop_on: tuple[str, int] | None = None

    def clock(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s

    def read_ends(self, keys: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        ends = self.ends_by_sweep[min(self.reads, len(self.ends_by_sweep) - 1)]
        self.reads += 1
        self.now += 0.01
        return {k: ends[k] for k in keys}

    def mirror(self, specs: list[RangeSpec]) -> list[RangeResult]:
        self.now += 0.1
        out = []
        for s in specs:
            self.mirrored.append(s)
            if (s.topic, s.partition) == self.fail_on:
                raise KafkaOperationError("broker gone", code="_TRANSPORT")
            r = RangeResult(s.topic, s.partition, s.target_topic, s.start, s.end)
            r.resumed_from = s.start
            if (s.topic, s.partition) == self.stop_on:
                r.position = s.start
                r.error = "record too large"
            else:
                r.position = s.end
                r.records = s.end - s.start
                r.transactions = 1
            out.append(r)
        return out


def _planned(topic: str, p: int, start: int, end: int, **extra: object) -> RangeSpec:
    return RangeSpec(topic, p, f"B.{topic}", start, end, 0, dict(extra))


def _done(spec: RangeSpec, records: int | None = None) -> RangeResult:
    r = RangeResult(spec.topic, spec.partition, spec.target_topic, spec.start, spec.end)
    r.resumed_from = spec.start
    r.position = spec.end
    r.records = spec.end - spec.start if records is None else records
    r.transactions = 1
    return r


def test_new_records_are_mirrored_until_the_deadline_and_merged_per_partition() -> None:
    a0, a1 = _planned("a", 0, 0, 10), _planned("a", 1, 5, 5)
    results = {("a", 0): _done(a0), ("a", 1): _done(a1)}
    src = FakeSource(
        [
            {("a", 0): 10, ("a", 1): 5},  # nothing new yet
            {("a", 0): 14, ("a", 1): 5},
            {("a", 0): 14, ("a", 1): 9},
            {("a", 0): 20, ("a", 1): 12},
        ]
    )
    sweeps = keep_mirroring([a0, a1], results, 1.0, src.read_ends, src.mirror, src.clock, src.sleep)
    assert sweeps == 3
    assert [(s.partition, s.start, s.end) for s in src.mirrored] == [
        (0, 10, 14),
        (1, 5, 9),
        (0, 14, 20),
        (1, 9, 12),
    ]
    r0, r1 = results[("a", 0)], results[("a", 1)]
    assert (r0.planned_start, r0.planned_end, r0.position, r0.records, r0.transactions) == (
        0,
        20,
        20,
        20,
        3,
    )
    assert (r1.planned_start, r1.planned_end, r1.position, r1.records) == (5, 12, 12, 7)
    # continuation ranges are plain ranges (never a position refresh)
    assert all(not s.extra for s in src.mirrored)


def test_no_sweep_starts_once_the_deadline_is_near() -> None:
    a0 = _planned("a", 0, 0, 10)
    results = {("a", 0): _done(a0)}
    src = FakeSource([{("a", 0): 50}])
    src.now = 0.96
    assert keep_mirroring([a0], results, 1.0, src.read_ends, src.mirror, src.clock, src.sleep) == 0
    assert src.mirrored == [] and results[("a", 0)].position == 10


def test_a_stopped_partition_is_not_continued_and_keeps_its_error() -> None:
    a0, a1 = _planned("a", 0, 0, 10), _planned("a", 1, 0, 10)
    stopped = _done(a1)
    stopped.position, stopped.error = 3, "record too large at 3"
    results = {("a", 0): _done(a0), ("a", 1): stopped}
    src = FakeSource([{("a", 0): 12, ("a", 1): 15}])
    keep_mirroring([a0, a1], results, 0.3, src.read_ends, src.mirror, src.clock, src.sleep)
    assert {s.partition for s in src.mirrored} == {0}
    assert results[("a", 1)].error == "record too large at 3" and results[("a", 1)].position == 3


def test_a_partition_that_stops_during_a_sweep_is_dropped_from_the_next() -> None:
    a0 = _planned("a", 0, 0, 10)
    results = {("a", 0): _done(a0)}
    src = FakeSource([{("a", 0): 12}, {("a", 0): 20}])
    src.stop_on = ("a", 0)
    keep_mirroring([a0], results, 1.0, src.read_ends, src.mirror, src.clock, src.sleep)
    assert len(src.mirrored) == 1
    assert results[("a", 0)].error == "record too large" and results[("a", 0)].position == 10


def test_a_failure_fails_the_task_with_the_position_so_far_committed() -> None:
    a0 = _planned("a", 0, 0, 10)
    results = {("a", 0): _done(a0)}
    src = FakeSource([{("a", 0): 12}])
    src.fail_on = ("a", 0)
    with pytest.raises(KafkaOperationError, match="broker gone"):
        keep_mirroring([a0], results, 1.0, src.read_ends, src.mirror, src.clock, src.sleep)


def test_ends_that_cannot_be_read_end_the_sweeps_not_the_task() -> None:
    """A source topic deleted under the mirror: its ends cannot be read. The sweeps
    only run ahead of the next micro-batch, so they stop; what the planned ranges
    committed stays the task's result, and the next plan decides about the topic."""
    a0 = _planned("a", 0, 0, 10)
    results = {("a", 0): _done(a0)}
    src = FakeSource([{("a", 0): 12}])

    def unreadable(keys: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        src.reads += 1
        raise KafkaOperationError("list offsets of a[0]: unknown topic", code="UNKNOWN")

    swept = keep_mirroring([a0], results, 1.0, unreadable, src.mirror, src.clock, src.sleep)
    assert (swept, src.reads, src.mirrored) == (0, 1, [])
    assert results[("a", 0)].position == 10 and results[("a", 0)].error is None


def test_position_refreshes_and_unknown_positions_are_not_continued() -> None:
    refresh = _planned("a", 0, 7, 7, refresh=True)
    unknown = _planned("a", 1, 0, 10)
    r_unknown = RangeResult("a", 1, "B.a", 0, 10)  # position -1: nothing known
    results = {("a", 0): _done(refresh, 0), ("a", 1): r_unknown}
    src = FakeSource([{("a", 0): 30, ("a", 1): 30}])
    keep_mirroring(
        [refresh, unknown], results, 0.5, src.read_ends, src.mirror, src.clock, src.sleep
    )
    assert src.mirrored == []


def test_merge_keeps_the_first_loss_start_and_the_last_loss_end() -> None:
    first = _done(_planned("a", 0, 0, 10))
    first.lost, first.lost_from, first.lost_to = 2, 0, 2
    later = _done(_planned("a", 0, 10, 20))
    later.lost, later.lost_from, later.lost_to, later.dead_lettered = 3, 10, 13, 1
    m = merge(first, later)
    assert (m.lost, m.lost_from, m.lost_to, m.dead_lettered) == (5, 0, 13, 1)
    assert (m.planned_start, m.resumed_from, m.position) == (0, 0, 20)


def test_continuations_skip_partitions_without_new_records() -> None:
    a0 = _planned("a", 0, 0, 10)
    assert continuations({("a", 0): a0}, {("a", 0): _done(a0)}, {("a", 0): 10}) == []
    assert continuations({("a", 0): a0}, {("a", 0): _done(a0)}, {}) == []
    (c,) = continuations({("a", 0): a0}, {("a", 0): _done(a0)}, {("a", 0): 11})
    assert dataclasses.astuple(c)[:5] == ("a", 0, "B.a", 10, 11)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 5), min_size=1, max_size=30),
    st.integers(1, 10),
    st.floats(0.05, 3.0),
)
def test_every_offset_is_mirrored_once_and_in_order(
    growth: list[int], planned: int, continue_s: float
) -> None:
    # ends grow by ``growth`` per read; whatever the timing, the ranges mirrored
    # tile [0, final position) with no gap and no overlap, and the merged result
    # counts exactly them
    ends, e = [], planned
    for g in growth:
        e += g
        ends.append({("a", 0): e})
    a0 = _planned("a", 0, 0, planned)
    results = {("a", 0): _done(a0)}
    src = FakeSource(ends)
    keep_mirroring([a0], results, continue_s, src.read_ends, src.mirror, src.clock, src.sleep)
    r = results[("a", 0)]
    covered = planned
    for s in src.mirrored:
        assert s.start == covered and s.end > s.start
        covered = s.end
    assert r.position == covered == r.records
    assert r.position <= e


def test_an_idle_task_reads_the_ends_less_and_less_often_and_fast_again_after_records() -> None:
    a0 = _planned("a", 0, 0, 10)
    results = {("a", 0): _done(a0)}
    ends = [{("a", 0): 10}] * 6 + [{("a", 0): 11}] + [{("a", 0): 11}] * 50
    src = FakeSource(ends)
    waits: list[float] = []

    def sleep(s: float) -> None:
        waits.append(round(s, 3))
        src.now += s

    keep_mirroring([a0], results, 3.0, src.read_ends, src.mirror, src.clock, sleep)
    assert waits[:6] == [0.05, 0.1, 0.2, 0.4, 0.4, 0.4]
    assert waits[6] == 0.05  # the sweep after one that mirrored
    assert results[("a", 0)].position == 11
    # the last wait never runs past the deadline
    assert src.now <= 3.0 + 0.01


def test_a_batch_never_goes_past_its_planned_start_plus_the_per_batch_bound() -> None:
    # mm.mirror.max.records.per.partition.per.batch = 100: planned [0, 100) already
    # used it all; a partition planned [50, 80) may continue to 150 only
    full, part = _planned("a", 0, 0, 100), _planned("a", 1, 50, 80)
    results = {("a", 0): _done(full), ("a", 1): _done(part)}
    src = FakeSource([{("a", 0): 500, ("a", 1): 120}, {("a", 0): 900, ("a", 1): 900}])
    keep_mirroring(
        [full, part],
        results,
        2.0,
        src.read_ends,
        src.mirror,
        src.clock,
        src.sleep,
        max_per_partition=100,
    )
    assert [(s.partition, s.start, s.end) for s in src.mirrored] == [(1, 80, 120), (1, 120, 150)]
    assert results[("a", 0)].position == 100 and results[("a", 1)].position == 150


def test_sweeps_end_when_the_batch_should_end_and_stopped_partitions_are_told() -> None:
    """``keep_going`` (mm.source.replan: a new plan is wanted) ends the sweeps before
    the deadline; ``stopped`` hears of every partition that stopped (planned or
    during a sweep) and of ends that could not be read, for the next plan."""
    a0, a1, a2 = _planned("a", 0, 0, 10), _planned("a", 1, 0, 10), _planned("a", 2, 0, 5)
    planned_stop = _done(a1)
    planned_stop.position, planned_stop.error = 3, "record too large at 3"
    results = {("a", 0): _done(a0), ("a", 1): planned_stop, ("a", 2): _done(a2)}
    src = FakeSource([{("a", 0): 12 + 2 * i, ("a", 1): 15, ("a", 2): 5 + i} for i in range(200)])
    src.stop_on = ("a", 2)
    told: list[str] = []
    calls = []

    def keep_going() -> bool:
        calls.append(src.now)
        return len(calls) <= 3  # a new plan is wanted from the fourth check on

    swept = keep_mirroring(
        [a0, a1, a2], results, 100.0, src.read_ends, src.mirror, src.clock, src.sleep,
        keep_going=keep_going, stopped=told.append,
    )  # fmt: skip
    assert swept == 3 and len(calls) == 4 and src.now < 1.0
    assert told == ["a[1] stopped: record too large at 3", "a[2] stopped: record too large"]

    unread: list[str] = []

    def unreadable(keys: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        raise KafkaOperationError("list offsets of a[0]: unknown topic", code="UNKNOWN")

    results = {("a", 0): _done(a0)}
    keep_mirroring([a0], results, 1.0, unreadable, src.mirror, src.clock, src.sleep,
                   stopped=unread.append)  # fmt: skip
    assert len(unread) == 1 and unread[0].startswith("source ends not read: ")


def test_a_position_moved_under_the_task_is_told_every_interval() -> None:
    """`mm position` while the task continues: ``moved`` (the committed positions
    against the task's own) is asked every ``moved_every`` s, and what it finds is
    told to ``stopped`` (the batch then ends for a new plan)."""
    a0 = _planned("a", 0, 0, 10)
    results = {("a", 0): _done(a0)}
    src = FakeSource([{("a", 0): 10}])
    asked: list[float] = []
    told: list[str] = []

    def moved(results: object) -> str | None:
        asked.append(src.now)
        return "positions moved under the mirror: a[0]" if len(asked) >= 2 else None

    keep_mirroring([a0], results, 3.0, src.read_ends, src.mirror, src.clock, src.sleep,
                   stopped=told.append, moved=moved, moved_every=1.0)  # fmt: skip
    assert len(asked) == 2 and asked[1] - asked[0] >= 1.0
    assert told == ["positions moved under the mirror: a[0]"]


def test_moved_positions_are_those_not_where_the_task_left_them() -> None:
    def at(position: int, planned_start: int = 0, error: str | None = None) -> RangeResult:
        r = RangeResult("a", 0, "B.a", planned_start, position)
        r.position, r.error = position, error
        return r

    results = {
        ("a", 0): at(10),  # set back
        ("a", 1): at(10),  # where it was left
        ("a", 2): at(10),  # deleted
        ("a", 3): at(0),  # never had one: the task moved nothing
        ("a", 4): at(3, error="record too large"),  # stopped: the plan decides
        ("a", 5): at(-1),  # unknown
    }
    committed = {("a", 0): 4, ("a", 1): 10, ("a", 2): -1, ("a", 4): 9}
    assert moved_positions(results, committed) == [("a", 0), ("a", 2)]
