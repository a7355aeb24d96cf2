"""Faults injected under load, with the jobs as real `mm` subprocesses on real brokers:

1. the target broker frozen (SIGSTOP) for 20 s while mirror, checkpoint and heartbeat
   jobs run and a producer writes: every job recovers by itself, the pause shows in
   `mm status --json` and in `mm status --serve`'s metrics;
2. the source broker (Apache Kafka) killed and restarted on its port mid-stream: the
   mirror resumes by itself;
3. the checkpoint job killed (SIGKILL) and restarted 10 times while groups commit and
   the mirror runs: checkpoints exact, never backwards, never ahead of the mirror.

The target is judged as Apache Kafka's read_committed consumers would see it (the
raw log under the read_committed rule: Tansu serves aborted transactions, see
:mod:`mm.kafka.rawlog`): each source record exactly once, in order. Each test
prints what it measured (records, recovery times); ``-s`` shows it.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.apache_kafka import KRaftBroker
from support.clusters import KafkaCluster, KafkaFactory, use_embedded_profile
from support.eos import BackgroundProducer, log_events, mirrored_batches, record_value
from support.faults import (
    CheckpointWatch,
    GroupCommitter,
    Job,
    Judged,
    committed_offsets,
    judge_checkpoints,
)
from support.mirror import create_topic, mirror_properties, mm_env

from mm.embedded import EmbeddedCluster, procs
from mm.kafka.rawlog import committed_view, read_log

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
        job = Job(self.log_dir, name, command, self.config, *args)
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
    kafka_factory: KafkaFactory,
    unique_group: Callable[..., str],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Callable[[], EmbeddedCluster]]:
    """A fresh embedded (memory) broker of the test's own, to freeze without touching
    the session's clusters (other tests may run on them meanwhile)."""
    created: list[EmbeddedCluster] = []

    def make() -> EmbeddedCluster:
        reason = kafka_factory.durable_unavailable_reason()
        if reason:
            pytest.skip(reason.replace("durable (restartable)", "frozen"))
        use_embedded_profile(monkeypatch)
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
    """The target's committed view equals the source's, each partition in order, and the
    source holds every record its producer had acknowledged; returns a line of counts."""
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
    assert held == produced, f"{topic}: {produced} records acknowledged, the source holds {held}"
    return f"produced {produced}, the target holds {mirrored}: 0 duplicates, 0 lost"


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


def wait_settled(
    a: str, b: str, topic: str, watch: CheckpointWatch, committer: GroupCommitter, why: Any
) -> float:
    """Once the load stopped: wait for the target to catch up, then for exact checkpoints
    of the groups' final offsets; returns the seconds the catching up took."""
    caught_up = wait_caught_up(a, b, topic, 180, why)
    wait_for(
        lambda: final_checkpoints_exact(a, b, topic, watch, committer),
        120,
        "exact checkpoints of the groups' final offsets",
        why,
    )
    return caught_up


def _groups(unique_group: Callable[..., str]) -> dict[str, int]:
    # lag 0: at the log end, ahead of the mirror most of the time; 150: a group behind
    return {unique_group("live"): 0, unique_group("slow"): 150}


# --- 1. the target frozen for 20 s --------------------------------------------------------


@pytest.mark.timeout(900)
def test_target_broker_frozen_20s(
    cluster_a: KafkaCluster,
    own_cluster: Callable[[], EmbeddedCluster],
    unique_topic: Callable[..., str],
    unique_group: Callable[..., str],
    tmp_path: Path,
    jobs_factory: Callable[[Path], Jobs],
) -> None:
    started = time.monotonic()
    a = cluster_a.bootstrap_servers
    target = own_cluster()
    b = target.bootstrap_servers
    assert target.pid is not None
    topic = unique_topic("frozen")
    create_topic(a, topic, PARTITIONS)
    groups = _groups(unique_group)
    status_port = procs.free_port()
    cfg = mirror_properties(
        tmp_path / "mm.properties",
        a,
        b,
        [topic, "heartbeats"],
        state_dir=tmp_path / "state",
        extra={**JOB_SETTINGS, "A->B.groups": ", ".join(groups)},
    )
    jobs = jobs_factory(cfg)
    producer = BackgroundProducer(a, topic, PARTITIONS, rate_per_partition=150, seed=1).start()
    committer = GroupCommitter(a, topic, PARTITIONS, groups).start()
    watch = CheckpointWatch(b, CHECKPOINTS_TOPIC, groups, f"A.{topic}", PARTITIONS)
    try:
        heartbeat = jobs.start("heartbeat", "heartbeat")
        mirror = jobs.start("mirror", "mirror")
        checkpoint = jobs.start("checkpoint", "checkpoint")
        serve = jobs.start(
            "status-serve", "status", "--serve", str(status_port), "--bind", "127.0.0.1",
            "--interval", "1", "--timeout", "3",
        )  # fmt: skip
        running = (heartbeat, mirror, checkpoint, serve)

        def why() -> str:
            return jobs.outputs()

        # --- healthy first: heartbeat latency under the threshold, checkpoints flowing
        wait_for(lambda: _healthy(*_status(cfg)[:2]), STARTUP, "a healthy flow", why)

        def both_checkpointed() -> bool:
            watch.poll()
            return len(watch.newest) == len(groups) * PARTITIONS

        wait_for(both_checkpointed, STARTUP, "checkpoints of both groups", why)
        batches_before = len(mirrored_batches(mirror.stderr_path))

        # --- freeze the target for 20 s; status and metrics while it is frozen
        frozen_at = time.monotonic()
        _signal(target.pid, signal.SIGSTOP)
        try:
            down: list[float] = []
            alerts: list[float] = []

            def scrape() -> None:
                while time.monotonic() - frozen_at < 19:
                    try:
                        samples = _scrape(status_port)
                    except OSError:
                        time.sleep(0.5)
                        continue
                    down.extend(_metric(samples, "mm_status_up", flow="A->B"))
                    alerts.extend(_metric(samples, "mm_status_alerts", flow="A->B"))
                    time.sleep(1.0)

            # the endpoint is scraped all through the freeze, also while `mm status`
            # runs (a loaded host's took 17.6 s of the 20 and left no time to scrape)
            scraper = threading.Thread(target=scrape, daemon=True)
            scraper.start()
            time.sleep(3)
            code, doc, status_seconds = _status(cfg, "--timeout", "3")
            kinds = sorted({x["kind"] for x in doc["alerts"]})
            scraper.join(30)
            time.sleep(max(0.0, 20 - (time.monotonic() - frozen_at)))
        finally:
            _signal(target.pid, signal.SIGCONT)
        resumed = time.monotonic()
        resumed_ms = time.time_ns() // 1_000_000
        print(
            f"during the freeze: mm status exit {code} in {status_seconds:.1f}s, alerts {kinds}; "
            f"scraped mm_status_up {sorted(set(down))}, mm_status_alerts {sorted(set(alerts))}"
        )
        assert code == 1 and ("unavailable" in kinds or "replication_latency" in kinds), doc
        assert 0.0 in down or any(v > 0 for v in alerts), (down, alerts, serve.output())

        # --- every job recovers by itself
        mirror_back = wait_for(
            lambda: len(mirrored_batches(mirror.stderr_path)) > batches_before,
            180,
            "the mirror mirrored again",
            why,
        )

        def new_checkpoint() -> bool:
            watch.poll()
            return any(s.timestamp_ms >= resumed_ms for s in watch.seen)

        checkpoint_back = wait_for(new_checkpoint, 180, "a checkpoint written after", why)
        healthy_back = wait_for(
            lambda: _healthy(*_status(cfg)[:2]), 180, "mm status healthy again", why
        )
        print(
            f"after SIGCONT: mirror mirrored again after {mirror_back:.1f}s, checkpoint written "
            f"after {checkpoint_back:.1f}s, mm status healthy (no alert) after "
            f"{time.monotonic() - resumed:.1f}s (last check took {healthy_back:.1f}s)"
        )
        time.sleep(5)  # more records after the recovery
    finally:
        producer.stop()
        committer.stop()
    try:
        caught_up = wait_settled(a, b, topic, watch, committer, why)
        for job in running:
            assert job.running(), f"{job.name} exited by itself:\n{job.output()}"
        restarts = len(log_events(mirror.stderr_path, "mirror query failed; restarting"))
        failed_rounds = len(
            log_events(checkpoint.stderr_path, "checkpoint round failed; retried next round")
        )
        for job in running:
            assert job.terminate() == 0, job.output()
    finally:
        watch.close()
    tally = assert_exactly_once(a, b, topic, producer)
    judged = judge_all(a, b, topic, watch)
    print(tally.line())
    print(
        f"caught up {caught_up:.1f}s after the producer stopped; mirror query restarts "
        f"{restarts}, failed checkpoint rounds {failed_rounds}; {judged.line()}; "
        f"test took {time.monotonic() - started:.0f}s"
    )


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


# --- 2. the source broker killed and restarted --------------------------------------------


@pytest.mark.timeout(900)
def test_source_broker_restarted(
    own_kafka: Callable[..., KRaftBroker],
    cluster_b: KafkaCluster,
    unique_topic: Callable[..., str],
    tmp_path: Path,
    jobs_factory: Callable[[Path], Jobs],
) -> None:
    """The source, an Apache Kafka broker of the test's own, is killed (SIGKILL) while
    the mirror copies and started again on its port and log directory. The producer
    stops just before the kill and a second one writes to a second topic after the
    restart; the mirror is still copying when the broker dies (it runs behind the
    producer), so the restart lands mid-stream. Both producers mix plain records and
    transactions. The target's committed view must equal the source's, record for
    record, and the source must hold every acknowledged record (a killed process loses
    nothing the operating system holds)."""
    started = time.monotonic()
    source = own_kafka()
    a, b = source.bootstrap, cluster_b.bootstrap_servers
    before, after = unique_topic("before"), unique_topic("after")
    for t in (before, after):
        create_topic(a, t, PARTITIONS)
    cfg = mirror_properties(
        tmp_path / "mm.properties",
        a,
        b,
        [before, after],
        state_dir=tmp_path / "state",
        extra={"mm.mirror.trigger.seconds": "0.5"},
    )
    jobs = jobs_factory(cfg)
    first = BackgroundProducer(a, before, PARTITIONS, rate_per_partition=300, seed=2).start()
    second: BackgroundProducer | None = None
    try:
        mirror = jobs.start("mirror", "mirror")

        def why() -> str:
            return f"{jobs.outputs()}\n{source.describe()}"

        wait_for(lambda: len(mirrored_batches(mirror.stderr_path)) >= 2, STARTUP, "batches", why)
        first.stop()
        behind = {p: len(o) for p, o in committed_offsets(b, f"A.{before}", PARTITIONS).items()}
        source.kill()  # SIGKILL: a crash, not a clean stop
        killed = time.monotonic()
        batches_at_kill = len(mirrored_batches(mirror.stderr_path))
        time.sleep(2)
        source.restart()  # same ports, same log directories
        restarted = time.monotonic()
        second = BackgroundProducer(a, after, PARTITIONS, rate_per_partition=150, seed=3).start()
        mirror_back = wait_for(
            lambda: len(mirrored_batches(mirror.stderr_path)) > batches_at_kill,
            180,
            "the mirror mirrored again",
            why,
        )
        print(
            f"source broker killed with {first.total} records on it, the target holding "
            f"{sum(behind.values())} of them; down {restarted - killed:.1f}s; the mirror "
            f"mirrored again {mirror_back:.1f}s after the restart"
        )
        time.sleep(5)
    finally:
        first.stop()
        if second is not None:
            second.stop()
    caught_up = max(wait_caught_up(a, b, t, 180, why) for t in (before, after))
    assert mirror.running(), mirror.output()
    restarts = len(log_events(mirror.stderr_path, "mirror query failed; restarting"))
    assert mirror.terminate() == 0, mirror.output()
    for t, producer in ((before, first), (after, second)):
        assert producer is not None
        print(f"{t}: {assert_mirror_exact(a, b, t, producer.total)}")
    print(
        f"caught up {caught_up:.1f}s after the producer stopped; mirror query restarts "
        f"{restarts}; test took {time.monotonic() - started:.0f}s"
    )


# --- 3. the checkpoint job killed 10 times --------------------------------------------------

KILLS = 10


@pytest.mark.timeout(1200)
def test_checkpoint_job_killed_10_times(
    cluster_a: KafkaCluster,
    cluster_b: KafkaCluster,
    unique_topic: Callable[..., str],
    unique_group: Callable[..., str],
    tmp_path: Path,
    jobs_factory: Callable[[Path], Jobs],
) -> None:
    started = time.monotonic()
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    print(f"seed {seed}")
    a, b = cluster_a.bootstrap_servers, cluster_b.bootstrap_servers
    topic = unique_topic("ckkill")
    create_topic(a, topic, PARTITIONS)
    groups = _groups(unique_group)
    cfg = mirror_properties(
        tmp_path / "mm.properties",
        a,
        b,
        [topic],
        state_dir=tmp_path / "state",
        extra={**JOB_SETTINGS, "A->B.groups": ", ".join(groups)},
    )
    jobs = jobs_factory(cfg)
    producer = BackgroundProducer(a, topic, PARTITIONS, rate_per_partition=100, seed=seed).start()
    committer = GroupCommitter(a, topic, PARTITIONS, groups).start()
    watch = CheckpointWatch(b, CHECKPOINTS_TOPIC, groups, f"A.{topic}", PARTITIONS)
    first_checkpoint: list[float] = []
    try:
        mirror = jobs.start("mirror", "mirror")

        def why() -> str:
            return jobs.outputs()

        for i in range(KILLS):
            job = jobs.start(f"checkpoint-{i}", "checkpoint")

            def wrote(job: Job = job) -> bool:
                watch.poll()
                assert job.running(), job.output()
                return any(s.timestamp_ms >= job.started_ms for s in watch.seen)

            first_checkpoint.append(wait_for(wrote, STARTUP, f"checkpoint job {i} wrote", why))
            # judged at once: a checkpoint ahead of its group shows before the mirror moves on
            now = judge_checkpoints(
                a, topic, b, f"A.{topic}", PARTITIONS, [s.checkpoint for s in watch.seen]
            )
            assert not now.ahead, "\n".join(now.ahead)
            assert not watch.ahead and not watch.backwards, (watch.ahead, watch.backwards)
            time.sleep(rng.uniform(0.0, 2.0))
            left = job.kill()
            assert not left, f"kill {i} left processes running: {left}"
            print(
                f"kill {i}: first checkpoint {first_checkpoint[-1]:.1f}s after the start; "
                f"{now.exact} exact, {len(now.behind)} behind so far"
            )
        final = jobs.start("checkpoint-final", "checkpoint")
        time.sleep(3)
    finally:
        producer.stop()
        committer.stop()
    try:
        caught_up = wait_settled(a, b, topic, watch, committer, why)
        for job in (mirror, final):
            assert job.terminate() == 0, job.output()
    finally:
        watch.close()
    tally = assert_exactly_once(a, b, topic, producer)
    judged = judge_all(a, b, topic, watch)
    print(tally.line())
    print(
        f"{KILLS} kills; first checkpoint after each start: "
        f"{', '.join(f'{t:.1f}' for t in first_checkpoint)} s; group commits "
        f"{committer.commits}; caught up {caught_up:.1f}s after the producer stopped; "
        f"{judged.line()}; test took {time.monotonic() - started:.0f}s"
    )
