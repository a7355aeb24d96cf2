"""A continuous mirror's batch covers every partition of the flow: a record written to a
partition that had nothing new when the batch was planned is mirrored by that batch's
continuation (mm.source.sweep), within a sweep, not when the batch ends (on Apache
Kafka)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from support.clusters import KafkaCluster
from support.mirror import (
    create_topic,
    mirror_properties,
    produce_batch,
    read_topic,
    running_job,
    wait_for_records,
)

PARTITIONS = 4
CONTINUE_S = 60.0  # one batch's tasks run this long: far longer than a sweep
WITHIN_S = 15.0  # a woken partition's record on the target, at most (a loaded host)


@pytest.mark.integration
def test_a_partition_idle_when_the_batch_was_planned_is_mirrored_mid_batch(
    cluster_a: KafkaCluster, cluster_b: KafkaCluster, tmp_path: Path
) -> None:
    a, b = cluster_a.bootstrap_servers, cluster_b.bootstrap_servers
    topic = f"wakes-{uuid.uuid4().hex[:8]}"
    create_topic(a, topic, PARTITIONS)
    produce_batch(a, topic, 0, 5, "planned")  # the only partition with records at start
    props = mirror_properties(
        tmp_path / "mm.properties",
        a,
        b,
        [topic],
        state_dir=tmp_path / "state",
        extra={
            "mm.mirror.shards": "2",  # the idle partitions in both shards
            "mm.mirror.task.continue.seconds": str(CONTINUE_S),
            "mm.mirror.trigger.seconds": "1",
        },
    )
    with running_job(props, tmp_path) as mirror:
        wait_for_records(b, f"A.{topic}", PARTITIONS, read_topic(a, topic, PARTITIONS), 180)
        # the first batch is now in its continuation, planned with partition 0 alone
        for p in range(1, PARTITIONS):
            produce_batch(a, topic, p, 3, f"woken-{p}")
        expected = read_topic(a, topic, PARTITIONS)
        woken = time.monotonic()
        wait_for_records(b, f"A.{topic}", PARTITIONS, expected, WITHIN_S)
        took = time.monotonic() - woken
        output = mirror.output()
        # mirrored by the first batch's tasks: no batch has ended yet (they run CONTINUE_S)
        assert "micro-batch mirrored" not in output, (took, output[-4000:])
        assert mirror.proc.poll() is None, output[-4000:]
