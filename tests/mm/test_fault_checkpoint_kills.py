"""Fault 3 of the reliability suite: the checkpoint job killed (SIGKILL) and restarted
10 times under load: checkpoints exact, never backwards, never ahead of the mirror."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from support.clusters import KafkaCluster
from support.eos import BackgroundProducer
from support.fault_suite import (
    CHECKPOINTS_TOPIC,
    JOB_SETTINGS,
    PARTITIONS,
    STARTUP,
    Jobs,
    _groups,
    assert_exactly_once,
    final_checkpoints_exact,
    judge_all,
    wait_caught_up,
    wait_for,
)
from support.faults import (
    CheckpointWatch,
    GroupCommitter,
    Job,
    judge_checkpoints,
)
from support.mirror import create_topic, mirror_properties

pytestmark = pytest.mark.integration


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
    producer = BackgroundProducer(a, topic, PARTITIONS, rate_per_partition=150, seed=seed).start()
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
            time.sleep(rng.uniform(0.0, 3.0))
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
        caught_up = wait_caught_up(a, b, topic, 180, why)
        wait_for(
            lambda: final_checkpoints_exact(a, b, topic, watch, committer),
            120,
            "exact checkpoints of the groups' final offsets",
            why,
        )
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
