"""Offsets kept outside Kafka groups (a database, a Spark or Flink checkpoint),
translated to the target with the source stopped: `mm translate --offsets` and
``mm_client.translate_source_offsets`` against the exact answer computed from both
logs.

A's topic has every kind of offset gap (commit markers, an aborted transaction);
one ``mm mirror --once`` and one ``mm checkpoint --once`` (which publishes its
history on B), then more records on A that are never mirrored, then A stops. Every
offset of every partition is asked: inside runs, on gaps, at and past the mirror's
position.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from mm_client import translate_source_offsets
from mm_client.source_offsets import SourceOffsetTranslation
from support.apache_kafka import KRaftBroker
from support.cli import run_command
from support.clusters import KafkaCluster
from support.groups import run_mm
from support.mirror import (
    create_topic,
    listed_end,
    mirror_properties,
    produce_batch,
    produce_mixed,
    read_topic_committed,
    run_mirror_once,
)

pytestmark = pytest.mark.integration

PARTITIONS = 3
NOT_MIRRORED = 7  # records produced to partition 0 after the mirror ran


def _exact(on_a: list[int], on_b: list[int], upstream: int) -> int:
    """The first mirrored record at or after ``upstream``, or one past the last one."""
    for a, b in zip(on_a, on_b, strict=True):
        if a >= upstream:
            return b
    return on_b[-1] + 1


def test_offsets_outside_kafka_translate_exactly_with_the_source_stopped(
    own_kafka: Callable[..., KRaftBroker], cluster_b: KafkaCluster, tmp_path: Path
) -> None:
    a, b = own_kafka(), cluster_b.bootstrap_servers
    tag = uuid.uuid4().hex[:8]
    alias, topic = f"S{tag}", f"ledger-{tag}"  # the history on the shared B is per source
    create_topic(a.bootstrap, topic, PARTITIONS)
    produce_mixed(a.bootstrap, topic, PARTITIONS, tag)
    ends = {p: listed_end(a.bootstrap, topic, p) for p in range(PARTITIONS)}
    props = mirror_properties(
        tmp_path / "mm2.properties", a.bootstrap, b, [topic],
        state_dir=tmp_path / "state", source_alias=alias,
    )  # fmt: skip
    mirror = run_mirror_once(props)
    assert mirror.returncode == 0, mirror.describe()
    checkpoint = run_mm(props, "checkpoint", "--once")
    assert checkpoint.returncode == 0, checkpoint.describe()
    produce_batch(a.bootstrap, topic, 0, NOT_MIRRORED, tag)
    on_a = {
        p: [r.offset for r in recs if r.offset < ends[p]]
        for p, recs in read_topic_committed(a.bootstrap, topic, PARTITIONS).items()
    }
    on_b = {
        p: [r.offset for r in recs]
        for p, recs in read_topic_committed(b, f"{alias}.{topic}", PARTITIONS).items()
    }
    assert {p: len(v) for p, v in on_a.items()} == {p: len(v) for p, v in on_b.items()}
    gaps = {p: sorted(set(range(ends[p])) - set(on_a[p])) for p in on_a}
    assert all(len(g) >= 3 for g in gaps.values()), gaps  # commit and abort markers
    a.stop()

    asked = [
        (topic, p, u)
        for p in range(PARTITIONS)
        for u in range(ends[p] + (NOT_MIRRORED + 2 if p == 0 else 2))
    ]
    got = translate_source_offsets({"bootstrap.servers": b}, alias, asked, timeout=30)
    assert [(r.topic, r.partition, r.offset) for r in got] == asked

    def expected(topic_: str, p: int, u: int) -> SourceOffsetTranslation:
        return SourceOffsetTranslation(
            topic_, p, u, f"{alias}.{topic_}", _exact(on_a[p], on_b[p], min(u, ends[p])),
            True, max(0, u - ends[p]),
        )  # fmt: skip

    assert got == [expected(*x) for x in asked]
    past = [r for r in got if r.not_mirrored]
    assert max(r.not_mirrored for r in past if r.partition == 0) == NOT_MIRRORED + 1

    # the command, as an operator runs it, on partition 0 (gaps, runs, the end, past it)
    p0 = [x for x in asked if x[1] == 0]
    spec = ",".join(f"{t}:{p}:{u}" for t, p, u in p0)
    run = run_command(["translate", "-c", str(props), "--offsets", spec, "--json"], cwd=tmp_path)
    assert run.returncode == 0, run.output
    doc = json.loads(run.stdout)
    assert doc["offsets"] == [expected(*x).to_json() for x in p0]
    assert doc["cluster"] == "B" and doc["history_topic"] == f"mm-offset-history.{alias}.internal"
    assert 0 <= doc["history_age_seconds"] < 600
    assert f"{topic}/0: {NOT_MIRRORED + 1}" in run.stderr, run.stderr

    # text: one line per offset; one the history does not know, and bad input
    end0 = ends[0] + NOT_MIRRORED
    run = run_command(
        ["translate", "-c", str(props), "--offsets", f"{topic}:0:{gaps[0][0]},{topic}:0:{end0}"],
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.output
    first, last = run.stdout.splitlines()
    gap_answer = _exact(on_a[0], on_b[0], gaps[0][0])
    assert first == f"{topic}\t0\t{gaps[0][0]}\t{alias}.{topic}\t{gap_answer}\texact"
    assert last == (
        f"{topic}\t0\t{end0}\t{alias}.{topic}\t{on_b[0][-1] + 1}\texact\t"
        f"{NOT_MIRRORED} offset(s) past the mirror's position, not mirrored"
    )
    run = run_command(["translate", "-c", str(props), "--offsets", f"{topic}:9:0"], cwd=tmp_path)
    assert run.returncode == 1, run.output
    assert f"no offset history for {topic}/9" in run.stderr
    run = run_command(["translate", "-c", str(props), "--offsets", "ledger:0"], cwd=tmp_path)
    assert run.returncode == 2, run.output
    assert "expected TOPIC:PARTITION:OFFSET" in run.stderr
