"""When a continuous mirror's running batch ends for a new plan (mm.source.replan;
pure logic with fake I/O; the mirror's own tests run it on Apache Kafka)."""

from __future__ import annotations

import json
import threading
import time

from mm.source.replan import (
    PlanWatch,
    ReplanWatcher,
    TaskPace,
    replan_key,
    replan_value,
    topics_changed,
)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_task_plan_is_current_until_the_map_topic_end_moves_past_its_mark() -> None:
    clock, ends = Clock(), [7]
    reads: list[float] = []

    def end_offset() -> int:
        reads.append(clock.now)
        return ends[0]

    watch = PlanWatch(7, end_offset, interval=0.5, clock=clock)
    assert watch.current() and watch.current()  # the second within the interval: not read
    assert reads == [100.0]
    ends[0] = 9  # a replan request (or a new map) was written
    clock.now += 0.2
    assert watch.current()  # not read again yet
    clock.now += 0.3
    assert not watch.current() and not watch.current()
    assert reads == [100.0, 100.5]  # stale stays stale without reading
    assert PlanWatch(-1, end_offset).current() and reads == [100.0, 100.5]


def test_a_watch_whose_end_cannot_be_read_lets_the_batch_run_its_time() -> None:
    def broken() -> int:
        raise RuntimeError("target unreachable")

    watch = PlanWatch(3, broken)
    assert watch.current() and watch.current() and watch.mark == -1


def test_a_stopped_partition_asks_for_a_new_plan_once_and_not_before_the_minimum() -> None:
    clock, asked = Clock(), []
    watch = PlanWatch(-1, lambda: 0)
    pace = TaskPace(watch, asked.append, started=clock.now, min_seconds=5.0, clock=clock)
    assert pace.keep_going()
    pace.stopped("a[1] stopped: topic deleted")
    pace.stopped("a[2] stopped: later")
    clock.now += 4.9
    assert pace.keep_going() and asked == []
    clock.now += 0.1
    assert not pace.keep_going() and not pace.keep_going()
    assert asked == ["a[1] stopped: topic deleted"]  # once, the first reason


def test_a_task_ends_when_another_side_asked_for_a_new_plan() -> None:
    ends = [4]
    pace = TaskPace(PlanWatch(4, lambda: ends[0], interval=0.0), lambda _w: None, started=0.0)
    assert pace.keep_going()
    ends[0] = 5
    assert not pace.keep_going()


def test_a_request_that_fails_still_ends_this_task() -> None:
    def refused(_why: str) -> None:
        raise RuntimeError("TOPIC_AUTHORIZATION_FAILED")

    pace = TaskPace(PlanWatch(-1, lambda: 0), refused, started=0.0, min_seconds=0.0)
    pace.stopped("a[0] stopped")
    assert not pace.keep_going()


def test_what_changed_in_the_topics_is_said_in_words() -> None:
    planned = {"a": (2, "A.a"), "b": (1, "A.b"), "gone": (1, "A.gone")}
    assert topics_changed(planned, dict(planned)) is None
    now = {"a": (4, "A.a"), "b": (1, "A.b"), "new": (3, "A.new")}
    assert topics_changed(planned, now) == (
        "new topics new; topics no longer mirrored gone; topics changed a (2 -> 4 partitions)"
    )


def test_the_request_record_is_keyed_apart_from_the_map() -> None:
    assert replan_key("A->B") == b"A->B@replan" != b"A->B"
    assert json.loads(replan_value("new topics x", "planner", 5)) == {
        "why": "new topics x",
        "by": "planner",
        "time_ms": 5,
    }


def test_the_planner_watcher_asks_once_per_batch_and_only_while_one_runs() -> None:
    reasons: list[str | None] = ["topics changed", "topics changed again", None]
    asked: list[str] = []
    checked = threading.Event()

    def check() -> str | None:
        checked.set()
        return reasons[0]

    watcher = ReplanWatcher(check, asked.append, interval=0.01)
    watcher.start()
    try:
        time.sleep(0.1)
        assert not checked.is_set()  # no batch running: nothing checked
        watcher.armed(1)
        _until(lambda: asked == ["topics changed"])
        reasons[0] = "topics changed again"
        time.sleep(0.1)
        assert asked == ["topics changed"]  # once for batch 1
        watcher.disarmed()
        watcher.armed(2)
        _until(lambda: asked == ["topics changed", "topics changed again"])
    finally:
        watcher.close()
        watcher.join(5)
    assert not watcher.is_alive()


def test_a_failing_check_is_tried_again() -> None:
    calls: list[int] = []
    asked: list[str] = []

    def check() -> str | None:
        calls.append(1)
        if len(calls) < 3:
            raise RuntimeError("source unreachable")
        return "topics changed"

    watcher = ReplanWatcher(check, asked.append, interval=0.01)
    watcher.start()
    try:
        watcher.armed(1)
        _until(lambda: asked == ["topics changed"])
        assert len(calls) == 3
    finally:
        watcher.close()
        watcher.join(5)


def _until(cond: object, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.005)
