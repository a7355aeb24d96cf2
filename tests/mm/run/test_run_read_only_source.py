"""Read-only source mode end to end: `mm run` (mirror, checkpoints; heartbeats off)
with ``offset-syncs.topic.location = target`` writes nothing to A.

A's topics, their partitions' ends and its consumer groups' offsets are read
before and after a run that mirrored records and translated a group: they must be
equal (the producer stops before the first read). B receives everything. A is a
cluster of the test's own: the other test worker writes to the shared one meanwhile.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient
from support.apache_kafka import KRaftBroker
from support.clusters import KafkaCluster
from support.eos import MirrorProcess, kill_groups, log_events, process_tree, wait_all_gone
from support.groups import commit_admin, group_offsets
from support.mirror import create_topic, mirror_properties, produce_batch, read_partition

PARTITIONS = 2


def _snapshot(bootstrap: str) -> dict[str, object]:
    """A's topics with each partition's (low, high) watermark, and every group's offsets."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = admin.list_topics(timeout=30).topics
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "mm-test-snapshot"})
    try:
        ends = {
            (t, p): consumer.get_watermark_offsets(TopicPartition(t, p), timeout=30)
            for t, md in topics.items()
            for p in md.partitions
        }
    finally:
        consumer.close()
    groups = sorted(g.group_id for g in admin.list_consumer_groups().result(30).valid)
    return {
        "topics": sorted(topics),
        "ends": ends,
        "groups": {g: group_offsets(bootstrap, g) for g in groups if g != "mm-test-snapshot"},
    }


@pytest.mark.integration
@pytest.mark.timeout(600)
def test_read_only_source_mode_writes_nothing_to_a(
    own_kafka: Callable[..., KRaftBroker],
    cluster_b: KafkaCluster,
    unique_topic: Callable[..., str],
    unique_group: Callable[..., str],
    tmp_path: Path,
) -> None:
    topic = unique_topic("ro")
    group = unique_group("app")
    a, b = own_kafka().bootstrap, cluster_b.bootstrap_servers
    create_topic(a, topic, PARTITIONS)
    for p in range(PARTITIONS):
        produce_batch(a, topic, p, 500, "ro")
    commit_admin(a, group, topic, {0: 200, 1: 500})
    config = mirror_properties(
        tmp_path / "mm.properties",
        a,
        b,
        [topic],
        state_dir=tmp_path / "state",
        extra={
            "A->B.offset-syncs.topic.location": "target",
            "A->B.emit.heartbeats.enabled": "false",
            "A->B.groups": group,
            "emit.checkpoints.interval.seconds": "1",
            "mm.mirror.trigger.seconds": "0.5",
        },
    )
    before = _snapshot(a)
    run = MirrorProcess(config, tmp_path / "run", command="run")
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and run.running():
            mirrored = sum(len(read_partition(b, f"A.{topic}", p)) for p in range(PARTITIONS))
            rounds = log_events(run.stderr_path, "checkpoint round")
            if mirrored == 1000 and any(e.get("emitted") for e in rounds):
                break
            time.sleep(1)
        else:
            raise AssertionError(f"not mirrored and checkpointed in time:\n{run.output()[-6000:]}")
        tree = process_tree(run.proc.pid)
        run.proc.send_signal(signal.SIGTERM)
        assert run.proc.wait(120) == 0, run.output()[-6000:]
        kill_groups(wait_all_gone(tree, 30))
    finally:
        if run.running():
            kill_groups(process_tree(run.proc.pid))
    after = _snapshot(a)
    assert after["topics"] == before["topics"], "a topic was created on A"
    assert after["ends"] == before["ends"], "something was written to A"
    assert after["groups"] == before["groups"], "a group's offsets changed on A"
    jobs = [e["job"] for e in log_events(run.stderr_path, "job started")]
    assert sorted(jobs) == ["checkpoint", "mirror"], jobs  # heartbeats off: no job
    b_topics = AdminClient({"bootstrap.servers": b}).list_topics(timeout=30).topics
    assert "mm2-offset-syncs.A.internal" in b_topics and "A.checkpoints.internal" in b_topics
