"""Fault 1 of the reliability suite: the target broker frozen (SIGSTOP) for 20 s under
load (tests/support/fault_suite.py: how jobs run and are judged)."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from support.clusters import KafkaCluster
from support.eos import BackgroundProducer, log_events, mirrored_batches
from support.fault_suite import (
    CHECKPOINTS_TOPIC,
    JOB_SETTINGS,
    PARTITIONS,
    STARTUP,
    Jobs,
    _groups,
    _healthy,
    _metric,
    _scrape,
    _signal,
    _status,
    assert_exactly_once,
    final_checkpoints_exact,
    judge_all,
    wait_caught_up,
    wait_for,
)
from support.faults import (
    CheckpointWatch,
    GroupCommitter,
)
from support.mirror import create_topic, mirror_properties

from mm.embedded import EmbeddedCluster, procs

pytestmark = pytest.mark.integration


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
            time.sleep(3)
            code, doc, status_seconds = _status(cfg, "--timeout", "3")
            kinds = sorted({x["kind"] for x in doc["alerts"]})
            down: list[float] = []
            alerts: list[float] = []
            while time.monotonic() - frozen_at < 19:
                try:
                    samples = _scrape(status_port)
                except OSError:
                    time.sleep(0.5)
                    continue
                down += _metric(samples, "mm_status_up", flow="A->B")
                alerts += _metric(samples, "mm_status_alerts", flow="A->B")
                time.sleep(1.0)
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
        caught_up = wait_caught_up(a, b, topic, 180, why)
        wait_for(
            lambda: final_checkpoints_exact(a, b, topic, watch, committer),
            120,
            "exact checkpoints of the groups' final offsets",
            why,
        )
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
