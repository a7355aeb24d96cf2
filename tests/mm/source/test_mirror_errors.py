"""Records too large for the target: the partition stops with a clear error, or, with
errors.tolerance=all and a dead-letter topic, they go there with Connect's headers."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.support.groups import run_mm
from tests.support.mirror import (
    create_topic,
    mirror_properties,
    read_partition,
    run_mirror_once,
    running_job,
)

pytestmark = pytest.mark.integration

LIMIT = 2000


def _produce(bootstrap: str, topic: str) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        value = b"x" * (5000 if i == 4 else 100)
        p.produce(topic, value, f"k{i}".encode(), 0)
    p.flush(30)


@pytest.mark.parametrize("tolerate", [False, True], ids=["stop", "dead-letter"])
def test_record_too_large_for_target(
    tmp_path: Path, cluster_a: Any, cluster_b: Any, unique_topic: Any, tolerate: bool
) -> None:
    topic = unique_topic("big")
    dlq = unique_topic("dlq")
    create_topic(cluster_a.bootstrap_servers, topic, 1)
    # the target topic exists with a small limit: the mirror must respect it
    create_topic(cluster_b.bootstrap_servers, f"A.{topic}", 1, {"max.message.bytes": str(LIMIT)})
    _produce(cluster_a.bootstrap_servers, topic)
    # the target's configs are the operator's: with the sync on, the source's default
    # would replace the target's own limit (MM2 deletes such overrides too), as Apache
    # Kafka shows (the embedded broker labels every setting a default)
    extra = {"sync.topic.configs.enabled": "false"}
    dead_letter = {"errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq}

    def config(extra: dict[str, str]) -> Path:
        return mirror_properties(
            tmp_path / "mm.properties",
            cluster_a.bootstrap_servers,
            cluster_b.bootstrap_servers,
            [topic],
            state_dir=tmp_path / "state",
            extra=extra,
        )

    run = run_mirror_once(config(extra | dead_letter if tolerate else extra))
    target = read_partition(cluster_b.bootstrap_servers, f"A.{topic}", 0)
    if not tolerate:
        assert run.returncode == 1, run.describe()
        assert f"{topic}[0]@4 is 5" in run.stdout, run.describe()
        assert f"at most {LIMIT}" in run.stdout
        assert "set errors.tolerance=all and errors.deadletterqueue.topic.name" in run.stdout
        # everything before the record is mirrored, nothing from it on
        assert [r.key for r in target] == [f"k{i}".encode() for i in range(4)]
        # the way out, as printed: both settings, then the mirror again
        run = run_mirror_once(config(extra | dead_letter))
        target = read_partition(cluster_b.bootstrap_servers, f"A.{topic}", 0)
    assert run.returncode == 0, run.describe()
    assert [r.key for r in target] == [f"k{i}".encode() for i in range(10) if i != 4]
    dead = read_partition(cluster_b.bootstrap_servers, dlq, 0)
    assert len(dead) == 1
    assert dead[0].key == b"k4" and dead[0].value == b"x" * 5000
    headers = dict(dead[0].headers or ())
    assert headers["__connect.errors.topic"] == topic.encode()
    assert headers["__connect.errors.partition"] == b"0"
    assert headers["__connect.errors.offset"] == b"4"
    assert b"max.message.bytes" in (headers["__connect.errors.exception.message"] or b"")


@pytest.mark.parametrize(
    "command", [("mirror",), ("run", "--jobs", "mirror")], ids=["mirror", "run"]
)
def test_a_record_too_large_skipped_with_mm_position_while_the_mirror_runs(
    tmp_path: Path, cluster_a: Any, cluster_b: Any, unique_topic: Any, command: tuple[str, ...]
) -> None:
    """The third way out the refusal prints, followed while `mm mirror` (or `mm run`)
    runs: the printed `mm position` command moves the position one past the record,
    and the running mirror goes on from there: every other record, later ones too,
    exactly once; the record the operator chose to skip is the only one missing, and
    the job, stopped, reports no stopped partition (exit 0)."""
    topic = unique_topic("big-live")
    create_topic(cluster_a.bootstrap_servers, topic, 1)
    create_topic(cluster_b.bootstrap_servers, f"A.{topic}", 1, {"max.message.bytes": str(LIMIT)})
    _produce(cluster_a.bootstrap_servers, topic)
    cfg = mirror_properties(
        tmp_path / "mm.properties",
        cluster_a.bootstrap_servers,
        cluster_b.bootstrap_servers,
        [topic],
        state_dir=tmp_path / "state",
        extra={"sync.topic.configs.enabled": "false", "mm.mirror.trigger.seconds": "0.5"},
    )
    printed = re.compile(r"`mm position -c <config> (--flow \S+ --topic \S+ --set \S+)`")

    def keys() -> list[bytes | None]:
        return [r.key for r in read_partition(cluster_b.bootstrap_servers, f"A.{topic}", 0)]

    with running_job(cfg, tmp_path, command) as job:
        deadline = time.monotonic() + 180
        while not (found := printed.search(job.output())) and time.monotonic() < deadline:
            assert job.proc.poll() is None, job.output()[-6000:]
            time.sleep(1)
        assert found, job.output()[-6000:]
        assert f"{topic}[0]@4 is 5" in job.output()
        assert keys() == [f"k{i}".encode() for i in range(4)]
        skip = run_mm(cfg, "position", *found.group(1).split())
        assert skip.returncode == 0, skip.describe()
        late = Producer({"bootstrap.servers": cluster_a.bootstrap_servers})
        for i in range(10, 15):
            late.produce(topic, b"y" * 100, f"k{i}".encode(), 0)
        assert late.flush(30) == 0
        wanted = [f"k{i}".encode() for i in (*range(4), *range(5, 10), *range(10, 15))]
        deadline = time.monotonic() + 120
        while keys() != wanted and time.monotonic() < deadline:
            assert job.proc.poll() is None, job.output()[-6000:]
            time.sleep(1)
        assert keys() == wanted, job.output()[-6000:]

        # the stop reported at exit is the last finished micro-batch's: wait for the
        # batch that copied past the skipped record to finish (it copies up to 5 s)
        def caught_up() -> bool:
            batches = [
                json.loads(line)
                for line in job.output().splitlines()
                if line.startswith("{") and '"event": "micro-batch mirrored"' in line
            ]
            # (the lag also lists the heartbeats topic once a test created it on A)
            return bool(batches) and batches[-1]["lag"].get(f"{topic}:0") == 0

        deadline = time.monotonic() + 60
        while not caught_up():
            assert time.monotonic() < deadline, job.output()[-6000:]
            time.sleep(1)
