"""Helpers of the fault suite (tests/mm/test_fault*.py): jobs as `mm` subprocesses,
waits, and the judges of the target and the checkpoints."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from mm.embedded import EmbeddedCluster
from mm.kafka.rawlog import committed_view, read_log
from support.clusters import KafkaFactory
from support.eos import BackgroundProducer, record_value
from support.faults import (
    CheckpointWatch,
    GroupCommitter,
    Job,
    Judged,
    committed_offsets,
    judge_checkpoints,
)
from support.mirror import mm_env

pytestmark = pytest.mark.integration

PARTITIONS = 2
CHECKPOINTS_TOPIC = "A.checkpoints.internal"
LATENCY_ALERT_MS = 5000
STARTUP = 240.0  # Spark sessions on a busy 2-core machine
JOB_SETTINGS = {
    "mm.mirror.trigger.seconds": "0.5",
    "emit.heartbeats.interval.seconds": "1",
    "A->B.emit.checkpoints.interval.seconds": "1",
    "A->B.refresh.groups.interval.seconds": "1",
    "mm.alert.replication.latency.ms": str(LATENCY_ALERT_MS),
}


# --- helpers ------------------------------------------------------------------------------


class Jobs:
    """The `mm` jobs of one test; every process is killed at the end."""

    def __init__(self, config: Path) -> None:
        self.config = config
        self.log_dir = config.parent / "jobs"
        self.all: list[Job] = []

    def start(self, name: str, command: str, *args: str) -> Job:
        job = Job(
            self.log_dir, name, command, "-c", str(self.config), *args, cwd=self.config.parent
        )
        self.all.append(job)
        return job

    def outputs(self) -> str:
        return "\n".join(j.output() for j in self.all)

    def close(self) -> None:
        for job in self.all:
            job.close()


@pytest.fixture
def jobs_factory() -> Iterator[Callable[[Path], Jobs]]:
    made: list[Jobs] = []

    def make(config: Path) -> Jobs:
        made.append(Jobs(config))
        return made[-1]

    yield make
    for jobs in made:
        jobs.close()


@pytest.fixture
def own_cluster(
    kafka_factory: KafkaFactory, unique_group: Callable[..., str]
) -> Iterator[Callable[[], EmbeddedCluster]]:
    """A fresh embedded (memory) broker of the test's own, to freeze without touching
    the session's clusters (other tests may run on them meanwhile)."""
    created: list[EmbeddedCluster] = []

    def make() -> EmbeddedCluster:
        reason = kafka_factory.durable_unavailable_reason()
        if reason:
            pytest.skip(reason.replace("durable (restartable)", "frozen"))
        created.append(kafka_factory.embedded.add(unique_group("F")))
        return created[-1]

    yield make
    for cluster in created:
        if cluster.pid is not None:
            _signal(cluster.pid, signal.SIGCONT)  # a failed test may leave it frozen
        kafka_factory.remove(cluster.name)


def _signal(pid: int, sig: int) -> None:
    try:
        import os

        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _status(config: Path, *args: str) -> tuple[int, dict[str, Any], float]:
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "mm", "status", "-c", str(config), "--json", *args],
        cwd=config.parent,
        env=mm_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    try:
        doc = json.loads(proc.stdout)
    except ValueError:
        raise AssertionError(
            f"mm status: exit {proc.returncode}, not JSON:\n{proc.stdout}\n{proc.stderr[-4000:]}"
        ) from None
    return proc.returncode, doc, time.monotonic() - started


def _flow(doc: dict[str, Any]) -> dict[str, Any]:
    flows = [f for f in doc["flows"] if f["flow"] == "A->B"]
    assert flows, doc
    return dict(flows[0])


def _healthy(code: int, doc: dict[str, Any]) -> bool:
    if code != 0 or doc["alerts"]:
        return False
    f = _flow(doc)
    return f.get("latency_method") == "heartbeat" and f.get("latency_ms", 1e12) <= LATENCY_ALERT_MS


def _scrape(port: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((dict(s.labels), float(s.value)))
    return out


def _metric(
    samples: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str
) -> Any:
    return [
        v for got, v in samples.get(name, []) if all(got.get(k) == x for k, x in labels.items())
    ]


@dataclass
class Tally:
    produced: int
    source: int
    target: int
    duplicates: int
    lost: int
    aborted_on_target: int

    def line(self) -> str:
        return (
            f"produced {self.produced}, on the source {self.source}, on the target (committed "
            f"view) {self.target}: {self.duplicates} duplicates, {self.lost} lost by the "
            f"mirror; {self.aborted_on_target} records of aborted transactions left on the "
            "target (not visible to read_committed)"
        )


def assert_exactly_once(
    source: str,
    target: str,
    topic: str,
    producer: BackgroundProducer,
) -> Tally:
    """Per partition: the source holds what was produced, and the target's committed view
    is the source's, in order, each record once."""
    problems = []
    produced = source_total = target_total = dups = lost = aborted = 0
    for p in range(PARTITIONS):
        values = [record_value(p, i) for i in range(producer.produced[p])]
        want = [(b"k-" + v, v) for v in values]
        src = [(r.key, r.value) for r in committed_view(read_log(source, topic, p)).records]
        assert src == want, f"source {topic}[{p}] is not what was produced"
        view = committed_view(read_log(target, f"A.{topic}", p))
        got = [(r.key, r.value) for r in view.records]
        produced += len(want)
        source_total += len(src)
        target_total += len(got)
        aborted += view.aborted_records
        dups += len(got) - len(set(got))
        lost += len(set(src) - set(got))
        if got != src:
            first = next(
                (i for i, (x, y) in enumerate(zip(src, got, strict=False)) if x != y),
                min(len(src), len(got)),
            )
            problems.append(
                f"partition {p}: source {len(src)}, target {len(got)}, first difference at "
                f"index {first}"
            )
    tally = Tally(produced, source_total, target_total, dups, lost, aborted)
    assert not problems, f"{tally.line()}\n" + "\n".join(problems)
    return tally


def assert_mirror_exact(source: str, target: str, topic: str, produced: int) -> str:
    """The target's committed view equals the source's (whatever the source kept), each
    partition in order; returns a line with the counts, the broker's own losses too."""
    held = mirrored = 0
    for p in range(PARTITIONS):
        src = [(r.key, r.value) for r in committed_view(read_log(source, topic, p)).records]
        got = [(r.key, r.value) for r in committed_view(read_log(target, f"A.{topic}", p)).records]
        dups, lost = len(got) - len(set(got)), len(set(src) - set(got))
        assert got == src, (
            f"A.{topic}[{p}]: source {len(src)}, target {len(got)} records: {dups} duplicates, "
            f"{lost} lost by the mirror"
        )
        held += len(src)
        mirrored += len(got)
    return (
        f"produced {produced}, the source broker kept {held} ({produced - held} lost by the "
        f"broker), the target holds {mirrored}: 0 duplicates, 0 lost by the mirror"
    )


def wait_caught_up(source: str, target: str, topic: str, timeout: float, why: Any) -> float:
    """Wait until the target's committed view holds as many records as the source's."""
    started = time.monotonic()
    while True:
        want = {p: len(o) for p, o in committed_offsets(source, topic, PARTITIONS).items()}
        got = {p: len(o) for p, o in committed_offsets(target, f"A.{topic}", PARTITIONS).items()}
        if all(got[p] >= want[p] for p in want):
            return time.monotonic() - started
        if time.monotonic() - started > timeout:
            raise AssertionError(f"target not caught up in {timeout:.0f}s: {got}/{want}\n{why()}")
        time.sleep(1.0)


def wait_for(check: Callable[[], bool], timeout: float, what: str, why: Any) -> float:
    """Seconds until ``check()`` held; fails naming ``what`` at the deadline."""
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"{what}: not within {timeout:.0f}s\n{why()}")
        time.sleep(0.3)
    return time.monotonic() - started


def all_groups_checkpointed(watch: CheckpointWatch, committer: GroupCommitter) -> bool:
    """The watch saw the committed offsets of every group (all of it mirrored)."""
    watch.poll()
    return all(
        (c := watch.newest.get((g, p))) is not None and c.upstream_offset == o
        for g, offsets in committer.committed.items()
        for p, o in offsets.items()
    )


def final_checkpoints_exact(
    a: str, b: str, topic: str, watch: CheckpointWatch, committer: GroupCommitter
) -> bool:
    """Every group's final offsets checkpointed, exactly (a checkpoint emitted before the
    mirror's last syncs were read is conservative; the next round corrects it)."""
    if not all_groups_checkpointed(watch, committer):
        return False
    newest = judge_checkpoints(a, topic, b, f"A.{topic}", PARTITIONS, watch.newest.values())
    return newest.exact == newest.checked


def _groups(unique_group: Callable[..., str]) -> dict[str, int]:
    # lag 0: at the log end, ahead of the mirror most of the time; 150: a group behind
    return {unique_group("live"): 0, unique_group("slow"): 150}


@dataclass
class Judgement:
    every: Judged
    newest: Judged
    watch: CheckpointWatch

    def line(self) -> str:
        return (
            f"{self.every.checked} checkpoints seen: {self.every.exact} exact, "
            f"{len(self.every.behind)} behind (conservative), {len(self.every.ahead)} ahead of "
            f"their group, {len(self.watch.ahead)} ahead of the mirror, "
            f"{len(self.watch.backwards)} backwards; newest per group and partition: "
            f"{self.newest.exact} of {self.newest.checked} exact"
        )


def judge_all(a: str, b: str, topic: str, watch: CheckpointWatch) -> Judgement:
    """Every checkpoint seen: never ahead of its group, of the mirror, never backwards;
    the newest of each group and partition (all mirrored by now): exact."""
    every = judge_checkpoints(
        a, topic, b, f"A.{topic}", PARTITIONS, [s.checkpoint for s in watch.seen]
    )
    newest = judge_checkpoints(a, topic, b, f"A.{topic}", PARTITIONS, watch.newest.values())
    j = Judgement(every, newest, watch)
    print(j.line())
    if every.behind:
        print("behind (conservative):\n  " + "\n  ".join(every.behind))
    assert not every.ahead, "\n".join(every.ahead)
    assert not watch.ahead, "\n".join(watch.ahead)
    assert not watch.backwards, "\n".join(watch.backwards)
    assert not newest.behind and not newest.ahead, "\n".join(newest.behind + newest.ahead)
    return j
