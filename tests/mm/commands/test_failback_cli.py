"""`mm failback`, steps 1-3: failback quarantines exactly the divergent records and
leaves every group on A exact.

A->B mirrors a topic once; `mm failover` records the failover point on B. Then A
takes records the mirror never copies (the divergence), B takes records of its own
(``local``), and the groups on B commit: ``g1`` part-way through A's copies on
partition 0, at B's end of them on partition 1, and part-way through ``local``;
``g2`` is also in use on A. `mm failback` must quarantine exactly A's divergent
records, mirror exactly B's records to A (``B.<local>``), and commit g1 on A at
the source offsets its offsets on B correspond to; g2 is refused.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from support.clusters import KafkaCluster
from support.groups import commit_admin, group_offsets, run_mm
from support.mirror import (
    create_topic,
    mirror_properties,
    partition_count,
    read_topic,
    read_topic_committed,
    run_mirror_once,
)

pytestmark = pytest.mark.integration

PARTITIONS = 2
MIRRORED = 60  # per partition, before the failover
DIVERGENT = {0: 7, 1: 3}  # written to A after it
LOCAL_RECORDS = 20  # written on B after it
LOCAL_AT = 12  # where g1 stands on B's own topic


class _Member:
    """A consumer of ``group`` subscribed to ``topic``, polled while a command runs."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
        )
        self.consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while not self.consumer.assignment():
            assert time.monotonic() < deadline, f"{group} got no partition of {topic}"
            self.consumer.poll(0.2)

    def poll(self) -> None:
        self.consumer.poll(0.1)

    def close(self) -> None:
        self.consumer.close()


def _end(bootstrap: str, topic: str, partition: int) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "mm-test-ends"})
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(topic, partition), 30)[1])
    finally:
        consumer.close()


def _produce(bootstrap: str, topic: str, counts: dict[int, int], tag: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for p, n in counts.items():
        for i in range(n):
            producer.produce(topic, f"{tag}{p}-{i}".encode(), f"k{i}".encode(), partition=p)
    assert producer.flush(30) == 0


def test_failback_quarantines_the_divergence_and_leaves_every_group_on_a_exact(
    cluster_a: KafkaCluster, cluster_b: KafkaCluster, tmp_path: Path
) -> None:
    a, b = cluster_a.bootstrap_servers, cluster_b.bootstrap_servers
    suffix = uuid.uuid4().hex[:8]
    topic, local = f"fb-{suffix}", f"fbl-{suffix}"
    g1, g2 = f"fb-g1-{suffix}", f"fb-g2-{suffix}"
    create_topic(a, topic, PARTITIONS)
    _produce(a, topic, dict.fromkeys(range(PARTITIONS), MIRRORED), "a")
    props = mirror_properties(
        tmp_path / "mm2.properties", a, b, [topic], state_dir=tmp_path / "state"
    )
    run = run_mirror_once(props)
    assert run.returncode == 0, run.describe()
    on_b = read_topic_committed(b, f"A.{topic}", PARTITIONS)
    assert [len(on_b[p]) for p in range(PARTITIONS)] == [MIRRORED] * PARTITIONS

    if partition_count(b, "A.checkpoints.internal") is None:
        create_topic(b, "A.checkpoints.internal", 1, {"cleanup.policy": "compact"})
    res = run_mm(props, "failover", "--groups", f"fb-none-{suffix}", "--json")
    assert res.returncode == 1, res.describe()  # no group has checkpoints; the point is kept
    point = json.loads(res.stdout)["failover_point"]
    assert {(r["topic"], r["partition"]): r["mirrored_to"] for r in point["partitions"]} == {
        (topic, p): MIRRORED for p in range(PARTITIONS)
    }

    # after the failover: A takes records nobody mirrors, B takes its own
    _produce(a, topic, DIVERGENT, "late")
    create_topic(b, local, 1)
    _produce(b, local, {0: LOCAL_RECORDS}, "b")
    at_b = {0: on_b[0][MIRRORED // 3].offset, 1: _end(b, f"A.{topic}", 1)}
    commit_admin(b, g1, f"A.{topic}", at_b)
    commit_admin(b, g1, local, {0: LOCAL_AT})
    commit_admin(b, g2, f"A.{topic}", {0: 0})
    # on A: the source offset of the copy g1 reads next on B (plain records: its
    # index), and past the last copy the failover point, the first divergent record
    want = {0: MIRRORED // 3, 1: MIRRORED}

    # the reverse flow is not enabled: refused before anything is read or written
    res = run_mm(props, "failback", "--groups", "fb-.*")
    assert res.returncode == 2, res.describe()
    assert "B->A.enabled" in res.stderr, res.describe()

    back = mirror_properties(
        tmp_path / "failback.properties",
        a,
        b,
        [topic],
        state_dir=tmp_path / "state",
        extra={"B->A.enabled": "true", "B->A.topics": local},
    )
    dry = run_mm(back, "failback", "--flow", "A->B", "--groups", g1, "--dry-run", "--json")
    assert dry.returncode == 0, dry.describe()
    report = json.loads(dry.stdout)
    assert report["quarantine"] is None and report["ok"]
    assert {r["partition"]: r["records"] for r in report["partitions"]} == DIVERGENT
    assert [(x["topic"], x["unmirrored"]) for x in report["reverse"]["partitions"]] == [
        (local, LOCAL_RECORDS)
    ]
    [group] = report["groups"]
    assert (group["group"], group["status"]) == (g1, "dry-run")
    assert {
        (x["topic"], x["partition"]): (x["before"], x["after"]) for x in group["partitions"]
    } == {
        (topic, 0): (None, want[0]),
        (topic, 1): (None, want[1]),
        (f"B.{local}", 0): (None, None),  # known once step 2 has mirrored it
    }

    quarantine = tmp_path / "quarantine"
    member = _Member(a, g2, topic)
    try:
        real = run_mm(
            back,
            "failback",
            "--flow",
            "A->B",
            "--groups",
            f"{g1}|{g2}",
            "--quarantine-dir",
            str(quarantine),
            while_waiting=member.poll,
        )
    finally:
        member.close()
    # g2 is in use on A: refused (exit 1); everything else is done
    assert real.returncode == 1, real.describe()
    assert f"group {g2!r} is not idle on A" in real.stderr, real.describe()
    rows = [ln.split() for ln in real.stdout.splitlines() if ln.startswith(("fb-g1", "fb-g2"))]
    assert [r[6] for r in rows if r[0] == g2] == ["refused"], real.stdout
    assert sorted(r[6] for r in rows if r[0] == g1) == ["moved"] * 3, real.stdout

    # step 1: exactly A's records past the failover point
    source = read_topic(a, topic, PARTITIONS)
    for p in range(PARTITIONS):
        held = pq.read_table(quarantine / f"{topic}-{p}.parquet").to_pylist()
        assert [(r["offset"], r["value"]) for r in held] == [
            (r.offset, r.value) for r in source[p][MIRRORED:]
        ]
        assert len(held) == DIVERGENT[p]
    # step 2: B.<local> on A holds exactly B's records
    copies = read_topic(a, f"B.{local}", 1)[0]
    assert [r.value for r in copies] == [f"b0-{i}".encode() for i in range(LOCAL_RECORDS)]
    # step 3: g1 on A exactly where it stood on B; g2 untouched
    assert group_offsets(a, g1) == {
        (topic, 0): want[0],
        (topic, 1): want[1],
        (f"B.{local}", 0): copies[LOCAL_AT].offset,
    }
    assert source[0][want[0]].value == on_b[0][want[0]].value  # the same record next
    assert all(o < 0 for o in group_offsets(a, g2).values())
