"""Idle partitions' positions are committed again before Apache Kafka expires them
(a member-less group's offsets go after offsets.retention.minutes)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.datasource import InputPartition

from mm.kafka.profile import EMBEDDED
from mm.source.keepalive import REFRESH_PREFIX, RefreshClock
from mm.source.plan import MirrorPlan
from mm.source.reader import OPTION_PLAN, MirrorStreamReader
from mm.source.shard_map import ShardMap
from mm.source.shards import MirrorTask
from mm.source.spec import RangeSpec
from mm.source.state import encode_state
from mm.source.topics import MirroredTopic
from tests.support.fake_kafka import (
    TARGET,
    TARGET_TOPIC,
    TOPIC,
    FakeCluster,
    Rec,
    build_source,
    fake_clients,
    runtime,
)
from tests.support.shard_runs import mirror_one

pytestmark = pytest.mark.unit


def test_clock_counts_unseen_partitions_from_now_and_persists(tmp_path: Path) -> None:
    path = str(tmp_path / "sub" / "refreshed.json")
    clock = RefreshClock.load(100.0, path)
    assert clock.due(["t:0", "t:1"], now=1000.0) == []  # first seen: not due yet
    assert clock.due(["t:0", "t:1"], now=1099.0) == []
    clock.planned(["t:1"], now=1050.0)
    assert clock.due(["t:0", "t:1"], now=1100.0) == ["t:0"]
    clock.save()
    again = RefreshClock.load(100.0, path)
    assert again.planned_at == {"t:0": 1000.0, "t:1": 1050.0}
    assert again.due(["t:0", "t:1"], now=1150.0) == ["t:0", "t:1"]


def test_clock_survives_a_torn_file(tmp_path: Path) -> None:
    path = tmp_path / "refreshed.json"
    path.write_text('{"t:0": 12')
    clock = RefreshClock.load(10.0, str(path))
    assert clock.planned_at == {}
    assert clock.due(["t:0"], now=5.0) == []


def test_a_refresh_range_commits_the_same_position_and_metadata() -> None:
    source = build_source([Rec(b"k", b"v", (), 0)] * 4, 0, [5000])
    target = FakeCluster("B")
    rt = runtime()
    meta = encode_state("abc", [(0, 0), (3, 3)])
    target.offsets[rt.state_group] = {(TARGET_TOPIC, 0): (4, meta)}
    spec = RangeSpec(TOPIC, 0, TARGET_TOPIC, 4, 4, 0, {"refresh": True})
    warnings: list[tuple[str, dict[str, Any]]] = []
    routine: list[tuple[str, dict[str, Any]]] = []
    result = mirror_one(
        rt,
        spec,
        log=lambda e, **kw: warnings.append((e, kw)),
        routine_log=lambda e, **kw: routine.append((e, kw)),
        clients=fake_clients(source, target, TARGET),
    )
    assert result.position == 4 and result.records == 0 and result.refreshed
    assert target.commits == [(rt.state_group, TARGET_TOPIC, 0, 4, meta)]
    assert target.log(TARGET_TOPIC, 0).committed() == []
    # a daily keepalive of every idle partition: not a warning to whoever is on call
    assert warnings == []
    assert routine == [
        (
            "mirror position refreshed",
            {"topic": TOPIC, "partition": 0, "target_topic": TARGET_TOPIC, "position": 4},
        )
    ]


def test_an_empty_range_without_refresh_commits_nothing() -> None:
    source = build_source([Rec(b"k", b"v", (), 0)] * 4, 0, [5000])
    target = FakeCluster("B")
    rt = runtime()
    target.offsets[rt.state_group] = {(TARGET_TOPIC, 0): (4, "")}
    mirror_one(
        rt, RangeSpec(TOPIC, 0, TARGET_TOPIC, 4, 4, 0), clients=fake_clients(source, target, TARGET)
    )
    assert target.commits == []


def _ranges(tasks: Sequence[InputPartition]) -> list[RangeSpec]:
    """The ranges of a batch's one shard (a batch this small is one Spark task)."""
    assert len(tasks) == 1 and isinstance(tasks[0], MirrorTask)
    assert len(tasks[0].shards) == 1
    return list(tasks[0].shards[0].ranges)


def _reader(tmp_path: Path, ends: dict[str, int], interval: float) -> MirrorStreamReader:
    plan = MirrorPlan(
        runtime=runtime(),
        planner={},
        refresh_topics_interval_seconds=3600.0,
        position_refresh_seconds=interval,
        position_refresh_file=str(tmp_path / "refreshed.json"),
    )
    reader = MirrorStreamReader({OPTION_PLAN: plan.encode()})
    reader._topics = {TOPIC: MirroredTopic(TOPIC, TARGET_TOPIC, 2, 0)}
    reader._current_ends = lambda: dict(ends)  # type: ignore[method-assign]
    # the state group's positions never behind the plan here (mm.source.moved has its own)
    reader._committed_positions = lambda _parts: {  # type: ignore[method-assign]
        (TARGET_TOPIC, p): 1 << 62 for p in range(2)
    }
    # one shard over both partitions (the map's store is mm.source.shard_store's tests)
    one_shard = ShardMap(1, 1, {(TARGET_TOPIC, p): 0 for p in range(2)})
    reader._settled_map = lambda keys: one_shard  # type: ignore[method-assign]
    return reader


def test_positions_behind_the_plan_are_looked_at_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A position reset backwards or deleted under an idle partition: the planner asks
    for a refresh of it (its task mirrors from the committed position); a partition
    with new data needs none (its range's task reads the position anyway)."""
    clock = [100.0]
    monkeypatch.setattr("mm.source.reader.time.monotonic", lambda: clock[0])
    ends = {f"{TOPIC}:0": 50, f"{TOPIC}:1": 80}
    reader = _reader(tmp_path, ends, interval=3600.0)
    positions = {(TARGET_TOPIC, 1): 10}  # partition 0's deleted, partition 1's reset to 10
    reader._committed_positions = lambda _parts: dict(positions)  # type: ignore[method-assign]
    start = {f"{TOPIC}:0": 50, f"{TOPIC}:1": 70}
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    assert end[f"{REFRESH_PREFIX}{TOPIC}:0"] == 1 and f"{REFRESH_PREFIX}{TOPIC}:1" not in end
    specs = _ranges(reader.partitions(start, end))
    assert [(s.partition, s.start, s.end, s.extra) for s in specs] == [
        (0, 50, 50, {"refresh": True}),
        (1, 70, 80, {}),
    ]
    # read again only after the interval (a continuous run), then still behind
    start = end
    assert reader.latestOffset(start, reader.getDefaultReadLimit()) == start
    clock[0] += 10.0
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    assert end[f"{REFRESH_PREFIX}{TOPIC}:0"] == 2 and end[f"{REFRESH_PREFIX}{TOPIC}:1"] == 1


def test_positions_are_checked_once_per_run_with_once_and_never_on_the_embedded_broker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [100.0]
    monkeypatch.setattr("mm.source.reader.time.monotonic", lambda: clock[0])
    ends = {f"{TOPIC}:0": 50, f"{TOPIC}:1": 80}
    reader = _reader(tmp_path, ends, interval=3600.0)
    reader._committed_positions = lambda _parts: {}  # type: ignore[method-assign]
    reader._target_offsets = dict(ends)  # --once (Trigger.AvailableNow)
    start = {f"{TOPIC}:0": 50, f"{TOPIC}:1": 80}
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    assert end[f"{REFRESH_PREFIX}{TOPIC}:0"] == end[f"{REFRESH_PREFIX}{TOPIC}:1"] == 1
    clock[0] += 3600.0  # a partition still behind (stopped at a record) ends the run all the same
    assert reader.latestOffset(end, reader.getDefaultReadLimit()) == end

    embedded = _reader(tmp_path, ends, interval=3600.0)
    embedded.runtime = runtime(target_profile=EMBEDDED)
    embedded._committed_positions = lambda _parts: {}  # type: ignore[method-assign]
    assert embedded.latestOffset(start, embedded.getDefaultReadLimit()) == start


def test_planner_refreshes_idle_partitions_once_per_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [10_000.0]
    monkeypatch.setattr("mm.source.reader.time.time", lambda: now[0])
    ends = {f"{TOPIC}:0": 50, f"{TOPIC}:1": 80}
    reader = _reader(tmp_path, ends, interval=60.0)
    start = {f"{TOPIC}:0": 50, f"{TOPIC}:1": 70}
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    assert not [k for k in end if k.startswith(REFRESH_PREFIX)]  # first sight: from now
    specs = _ranges(reader.partitions(start, end))
    assert [(s.partition, s.start, s.end, s.extra) for s in specs] == [(1, 70, 80, {})]

    now[0] += 61  # partition 1 was planned at 10,000 too, so both are idle long enough
    start = end
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    assert end[f"{REFRESH_PREFIX}{TOPIC}:0"] == end[f"{REFRESH_PREFIX}{TOPIC}:1"] == 1
    assert end[f"{TOPIC}:0"] == 50
    specs = _ranges(reader.partitions(start, end))
    assert [(s.partition, s.start, s.end, s.extra) for s in specs] == [
        (0, 50, 50, {"refresh": True}),
        (1, 80, 80, {"refresh": True}),
    ]
    # done for this interval: the same offsets again, so Spark runs no batch; also
    # for another planning process that reads the times from the file
    assert reader.latestOffset(end, reader.getDefaultReadLimit()) == end
    other = _reader(tmp_path, ends, interval=60.0)
    assert other.latestOffset(end, other.getDefaultReadLimit()) == end
    assert other.partitions(end, end) == []
    saved = json.loads((tmp_path / "refreshed.json").read_text())
    assert saved == {f"{TOPIC}:0": now[0], f"{TOPIC}:1": now[0]}


def test_a_continuous_batch_gives_every_idle_partition_an_empty_range(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A continuous mirror's batch ranges cover every partition, so its continuation
    (mm.source.sweep) watches the idle ones too; --once plans only what is new, and
    with nothing new anywhere neither runs a batch."""
    monkeypatch.setattr("mm.source.reader.time.time", lambda: 10_000.0)
    ends = {f"{TOPIC}:0": 50, f"{TOPIC}:1": 80}
    start = {f"{TOPIC}:0": 50, f"{TOPIC}:1": 70}
    once = _reader(tmp_path / "once", ends, interval=3600.0)
    end = once.latestOffset(start, once.getDefaultReadLimit())
    assert [(s.partition, s.start, s.end) for s in _ranges(once.partitions(start, end))] == [
        (1, 70, 80)
    ]
    continuous = _reader(tmp_path / "continuous", ends, interval=3600.0)
    continuous.runtime = runtime(task_continue_seconds=5.0)

    class MapTopic:  # the shard map's topic on the target (mm.source.replan)
        def end_offset(self) -> int:
            return 12

    continuous._shard_store = MapTopic()
    end = continuous.latestOffset(start, continuous.getDefaultReadLimit())
    tasks = continuous.partitions(start, end)
    specs = _ranges(tasks)
    assert [(s.partition, s.start, s.end, s.extra) for s in specs] == [
        (1, 70, 80, {}),
        (0, 50, 50, {}),  # empty, and not a refresh: the sweep continues it
    ]
    # its tasks end their continuation when the topic's end moves past 12
    assert [t.plan_mark for t in tasks] == [12]
    continuous._watcher.close()  # its checks need a planner this test does not have
    assert [
        t.plan_mark
        for t in once.partitions(start, once.latestOffset(start, once.getDefaultReadLimit()))
    ] == [-1]
    assert continuous.partitions(end, end) == []
