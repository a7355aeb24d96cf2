"""A continuous mirror's batch covers every partition of the flow: a record written to a
partition that had nothing new when the batch was planned is mirrored by that batch's
continuation (mm.source.sweep), within a sweep, not when the batch ends; and what only
a new plan can follow ends the batch early (mm.source.replan). On Apache Kafka."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from support.clusters import KafkaCluster
from support.groups import run_mm
from support.mirror import (
    create_topic,
    delete_topic,
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


LONG_S = 600.0  # a continuation no step below waits out
FOLLOWED_S = 90.0  # each step followed within this (a check every 1-10 s, a loaded host)


@pytest.mark.integration
def test_what_only_a_new_plan_follows_ends_a_long_batch(
    cluster_a: KafkaCluster, cluster_b: KafkaCluster, tmp_path: Path
) -> None:
    """Tasks that would continue for 10 minutes: a new topic, a position set back on
    an idle partition with `mm position`, and the target topic deleted (the
    refusals' way to mirror a topic again) are each followed within seconds, the
    planner or a task asking for the new plan; every record exactly once."""
    a, b = cluster_a.bootstrap_servers, cluster_b.bootstrap_servers
    prefix = f"replan-{uuid.uuid4().hex[:8]}"
    first, second = f"{prefix}-first", f"{prefix}-second"
    create_topic(a, first, 2)
    for p in range(2):
        produce_batch(a, first, p, 6, f"first-{p}")
    props = mirror_properties(
        tmp_path / "mm.properties",
        a,
        b,
        [f"{prefix}-.*"],
        state_dir=tmp_path / "state",
        extra={
            "mm.mirror.task.continue.seconds": str(LONG_S),
            "mm.mirror.trigger.seconds": "1",
            "A->B.refresh.topics.interval.seconds": "2",
        },
    )
    with running_job(props, tmp_path) as mirror:
        source = read_topic(a, first, 2)
        wait_for_records(b, f"A.{first}", 2, source, 180)
        # a new topic matching the flow's filter: the planner's watcher asks
        create_topic(a, second, 2)
        produce_batch(a, second, 1, 4, "second")
        wait_for_records(b, f"A.{second}", 2, read_topic(a, second, 2), FOLLOWED_S)
        # partition 0 of the first topic, idle, set back to offset 2: copied again from there
        moved = run_mm(props, "position", "--topic", first, "--set", "0=2")
        assert moved.returncode == 0, moved.describe()
        again = {0: source[0] + source[0][2:], 1: source[1]}
        wait_for_records(b, f"A.{first}", 2, again, FOLLOWED_S)
        # the target topic deleted: its task stops the partitions and asks
        delete_topic(b, f"A.{first}")
        wait_for_records(b, f"A.{first}", 2, source, FOLLOWED_S)
        output = mirror.output()
        assert mirror.proc.poll() is None, output[-4000:]
    asked = [line for line in mirror.final_output.splitlines() if "new plan requested" in line]
    assert any("new topics" in line and second in line for line in asked), asked
    assert any("positions moved below the plan" in line for line in asked), asked
