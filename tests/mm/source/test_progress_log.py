"""The mirror's batch logging: idle batches at DEBUG, a periodic INFO summary."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from support.props import TWO_CLUSTERS

from mm.config import build_config
from mm.source.job import FlowStats, ProgressLog, batch_handler

pytestmark = pytest.mark.unit

FLOW = build_config(TWO_CLUSTERS).flow("A", "B")


class Recorder:
    """A structlog-like logger that keeps (level, event, fields)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict[str, Any]]] = []

    def __getattr__(self, level: str) -> Any:
        return lambda event, **kw: self.events.append((level, event, kw))

    def named(self, event: str) -> list[tuple[str, dict[str, Any]]]:
        return [(level, kw) for level, e, kw in self.events if e == event]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def row(topic: str, partition: int, records: int, position: int, end: int) -> Any:
    return SimpleNamespace(
        topic=topic,
        partition=partition,
        records=records,
        bytes=records * 10,
        transactions=1 if records else 0,
        syncs=0,
        position=position,
        planned_end=end,
        lost=0,
        error=None,
        refused=False,
    )


class Batch:
    def __init__(self, rows: list[Any]) -> None:
        self.rows = rows

    def collect(self) -> list[Any]:
        return self.rows


def setup(interval: float = 60.0) -> tuple[Any, Recorder, Clock, FlowStats]:
    log, clock, stats = Recorder(), Clock(), FlowStats()
    progress = ProgressLog(FLOW, stats, log, interval=interval, clock=clock)
    return batch_handler(FLOW, stats, progress), log, clock, stats


def test_batches_with_records_are_info_idle_and_heartbeat_only_ones_debug() -> None:
    handle, log, _clock, _stats = setup()
    handle(Batch([row("orders", 0, 5, 5, 5), row("heartbeats", 0, 1, 9, 9)]), 1)
    handle(Batch([]), 2)  # nothing
    handle(Batch([row("orders", 0, 0, 5, 5)]), 3)  # a partition planned, no record
    handle(Batch([row("heartbeats", 0, 1, 10, 10)]), 4)  # only the heartbeat moved
    handle(Batch([row("A.heartbeats", 0, 2, 3, 3)]), 5)  # a copy of heartbeats too
    batches = log.named("micro-batch mirrored")
    assert [(level, kw["batch"], kw["records"]) for level, kw in batches] == [
        ("info", 1, 6),
        ("debug", 2, 0),
        ("debug", 3, 0),
        ("debug", 4, 1),
        ("debug", 5, 2),
    ]
    # the fields tests and operators read are unchanged
    assert batches[0][1] | {"seconds": 0} == {
        "batch": 1,
        "records": 6,
        "bytes": 60,
        "partitions": 2,
        "lag": {"orders:0": 0, "heartbeats:0": 0},
        "total_records": 6,
        "lost_total": 0,
        "seconds": 0,
    }
    assert log.named("mirror progress") == []  # not due yet


def test_a_summary_every_interval_sums_the_batches_since_the_last() -> None:
    handle, log, clock, stats = setup(interval=60.0)
    handle(Batch([row("orders", 0, 5, 5, 8), row("orders", 1, 0, 2, 2)]), 1)
    clock.now += 30
    handle(Batch([row("heartbeats", 0, 1, 1, 1)]), 2)
    clock.now += 30
    handle(Batch([row("orders", 0, 2, 7, 10)]), 3)  # 60 s: due
    summaries = log.named("mirror progress")
    assert summaries == [
        (
            "info",
            {
                "seconds": 60.0,
                "batches": 3,
                "idle_batches": 1,
                "records": 8,
                "bytes": 80,
                "heartbeat_records": 1,
                "partitions": 3,
                "partitions_behind": 1,
                "lag_records": 3,
                "total_records": 8,
                "lost_total": 0,
            },
        )
    ]
    assert stats.records == 8
    clock.now += 59
    handle(Batch([]), 4)
    assert len(log.named("mirror progress")) == 1  # the next one is 60 s later
    clock.now += 1
    handle(Batch([]), 5)
    assert log.named("mirror progress")[1][1] | {"seconds": 0} == {
        "seconds": 0,
        "batches": 2,
        "idle_batches": 2,
        "records": 0,
        "bytes": 0,
        "heartbeat_records": 0,
        "partitions": 3,
        "partitions_behind": 1,
        "lag_records": 3,
        "total_records": 8,
        "lost_total": 0,
    }


def test_tick_summarises_a_flow_that_runs_no_batches() -> None:
    log, clock, stats = Recorder(), Clock(), FlowStats()
    progress = ProgressLog(FLOW, stats, log, interval=10.0, clock=clock)
    progress.tick()
    clock.now += 9.9
    progress.tick()
    assert log.events == []
    clock.now += 0.1
    progress.tick()
    assert [(level, kw["batches"]) for level, kw in log.named("mirror progress")] == [("info", 0)]


def test_idle_mirror_logs_a_line_a_minute_not_a_line_a_batch() -> None:
    handle, log, clock, _stats = setup(interval=60.0)
    for batch in range(1200):  # 20 minutes of one-second batches moving heartbeats
        handle(Batch([row("heartbeats", 0, 1, batch + 1, batch + 1)]), batch)
        clock.now += 1
    info = [e for level, e, _kw in log.events if level == "info"]
    assert info == ["mirror progress"] * 19  # at 60 s, 120 s, ... 1140 s
    assert len(log.named("micro-batch mirrored")) == 1200  # at DEBUG


def test_a_refused_partition_ends_the_flow_instead_of_stopping_the_partition() -> None:
    handle, _log, _clock, stats = setup()
    stopped = SimpleNamespace(**{**vars(row("orders", 0, 0, 5, 9)), "error": "too large"})
    refused = SimpleNamespace(
        **{**vars(row("orders", 1, 0, 0, 9)), "error": "fetch (code=X)", "refused": True}
    )
    handle(Batch([stopped, refused]), 1)
    assert stats.errors == {("orders", 0): "too large"}
    assert stats.refused == "fetch (code=X)"
