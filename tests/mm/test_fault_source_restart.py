"""Fault 2 of the reliability suite: the source broker (durable storage) killed and
restarted mid-stream; the mirror resumes by itself, exactly once."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from support.clusters import KafkaCluster
from support.eos import BackgroundProducer, log_events, mirrored_batches
from support.fault_suite import (
    PARTITIONS,
    STARTUP,
    Jobs,
    assert_mirror_exact,
    wait_caught_up,
    wait_for,
)
from support.faults import (
    committed_offsets,
)
from support.mirror import create_topic, mirror_properties

from mm.embedded import EmbeddedCluster

pytestmark = pytest.mark.integration


# --- 2. the source broker killed and restarted --------------------------------------------


@pytest.mark.timeout(900)
def test_source_broker_restarted(
    durable_cluster: Callable[[], EmbeddedCluster],
    cluster_b: KafkaCluster,
    unique_topic: Callable[..., str],
    tmp_path: Path,
    jobs_factory: Callable[[Path], Jobs],
) -> None:
    """The producer stops just before the kill and a second one writes to a second topic
    after the restart; the mirror is still copying when the broker dies (it runs behind
    the producer), so the restart lands mid-stream.

    Tansu 0.6 on S3, killed, is not a faithful Apache Kafka here: in one run it lost 11
    of 5,192 acknowledged records from the middle of a partition; in two runs with
    transactional producers, no fetch read past a partition's last stable offset after
    the restart (the mirror and this test's reader both stalled). So the producers are
    plain (idempotent, no transactions: other tests cover transactional sources), and
    the mirror is judged against what the source holds after the restart: the target's
    committed view must equal it, record for record; records the broker itself lost
    are counted and printed, not blamed on the mirror."""
    started = time.monotonic()
    source = durable_cluster()
    a, b = source.bootstrap_servers, cluster_b.bootstrap_servers
    before, after = unique_topic("before"), unique_topic("after")
    for t in (before, after):
        create_topic(a, t, PARTITIONS)
    cfg = mirror_properties(
        tmp_path / "mm.properties",
        a,
        b,
        [before, after],
        state_dir=tmp_path / "state",
        extra={
            "mm.mirror.trigger.seconds": "0.5",
            # Tansu on S3 answers a Fetch whose max wait (the mirror's 10 ms) runs out
            # while it reads its storage with no records at all, even with data there
            # (measured: 0 records in 20 s); Apache Kafka returns available data at once
            "A.consumer.fetch.max.wait.ms": "500",
        },
    )
    jobs = jobs_factory(cfg)
    first = BackgroundProducer(
        a, before, PARTITIONS, rate_per_partition=300, seed=2, transactional_share=0.0
    ).start()
    second: BackgroundProducer | None = None
    try:
        mirror = jobs.start("mirror", "mirror")

        def why() -> str:
            return jobs.outputs()

        wait_for(lambda: len(mirrored_batches(mirror.stderr_path)) >= 2, STARTUP, "batches", why)
        first.stop()
        behind = {p: len(o) for p, o in committed_offsets(b, f"A.{before}", PARTITIONS).items()}
        process = source.process
        assert process is not None
        process.kill()  # SIGKILL: a crash, not a clean stop
        process.wait(30)
        killed = time.monotonic()
        batches_at_kill = len(mirrored_batches(mirror.stderr_path))
        time.sleep(2)
        source.start()  # same port, same S3 storage
        restarted = time.monotonic()
        assert source.bootstrap_servers == a
        second = BackgroundProducer(
            a, after, PARTITIONS, rate_per_partition=150, seed=3, transactional_share=0.0
        ).start()
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
