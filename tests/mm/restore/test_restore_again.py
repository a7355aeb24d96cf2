"""A restored topic deleted and restored again: the operator's way to redo a restore
(another ``--until``, a bad first attempt). The second restore must write the
backup from its start into the new topic, exactly, and move the groups through the
new topic's offsets; the first topic's offset mapping (still on the target) must not
decide where it starts.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from support.clusters import KafkaCluster
from support.groups import commit_admin, run_mm
from support.mirror import MirrorRun, create_topic, delete_topic

pytestmark = pytest.mark.integration

PARTITIONS = 2
PER_PHASE = 300
TIMEOUT = 300.0


def _mm(config: Path, *args: str) -> MirrorRun:
    return run_mm(config, *args, timeout=TIMEOUT)


def _produce(bootstrap: str, topic: str, tag: str, ts: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for part in range(PARTITIONS):
        for i in range(PER_PHASE):
            p.produce(topic, f"{tag}-{part}-{i}".encode(), b"k", partition=part, timestamp=ts + i)
    assert p.flush(30) == 0


def _values(bootstrap: str, topic: str) -> dict[int, list[bytes]]:
    """Every committed record's value per partition, to the partition's end."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    out: dict[int, list[bytes]] = {}
    try:
        for p in range(PARTITIONS):
            _low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            c.assign([TopicPartition(topic, p, 0)])
            got: list[bytes] = []
            deadline = time.monotonic() + 60
            while c.position([TopicPartition(topic, p)])[0].offset < high:
                assert time.monotonic() < deadline, f"{topic}[{p}]: not read to {high} in 60 s"
                for m in c.consume(500, 1.0):
                    assert m.error() is None, m.error()
                    got.append(m.value())
            out[p] = got
    finally:
        c.close()
    return out


def _moved(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, p) for p in range(PARTITIONS)]
    )
    answer = admin.list_consumer_group_offsets([request])[group].result(30)
    return {tp.partition: tp.offset for tp in answer.topic_partitions if tp.offset >= 0}


def test_restored_topic_deleted_and_restored_again_is_exact_from_the_backup_start(
    cluster_a: KafkaCluster,
    cluster_b: KafkaCluster,
    unique_topic: Any,
    unique_group: Any,
    tmp_path: Path,
) -> None:
    """Restore all, delete the restored topic, restore again up to an earlier time,
    delete it again, restore all: each restore is exactly the backup's prefix it asked
    for, and the group lands at the same record each time it is restored (before: the second
    restore ended in a traceback, "restored end 0: expected it past the last restored
    offset", having written nothing). Refusals on the way are followed as they say:
    another producer writing into the restored topic, the restored topic recreated
    with fewer records, a group with members, a target with too few partitions."""
    a, b = cluster_a.bootstrap_servers, cluster_b.bootstrap_servers
    topic, group = unique_topic("again"), unique_group("again")
    create_topic(a, topic, PARTITIONS)
    ts = int(time.time() * 1000) - 600_000
    _produce(a, topic, "one", ts)
    cut = ts + 100_000
    _produce(a, topic, "two", cut + 1_000)
    commit_admin(a, group, topic, {p: 100 for p in range(PARTITIONS)})
    config = tmp_path / "mm.properties"
    config.write_text(
        "\n".join(
            [
                "clusters = A, B",
                f"A.bootstrap.servers = {a}",
                f"B.bootstrap.servers = {b}",
                "backup.cluster = A",
                f"backup.path = {tmp_path / 'store'}",
                f"backup.topics = {topic}",
                f"backup.groups = {group}",
                "backup.region = east",
                f"mm.state.dir = {tmp_path / 'state'}",
                "spark.master = local[2]",
            ]
        )
        + "\n"
    )
    backup = _mm(config, "backup", "--once")
    assert backup.returncode == 0, backup.describe()
    source = _values(a, topic)
    assert [len(v) for v in source.values()] == [2 * PER_PHASE] * PARTITIONS
    target = f"r.{topic}"

    def restore(*until: str) -> dict[str, Any]:
        run = _mm(config, "restore", "--to", "B", "--topic-prefix", "r.", "--json", *until)
        assert run.returncode == 0, run.describe()
        assert "Traceback" not in run.stderr, run.describe()
        doc: dict[str, Any] = json.loads(run.stdout)
        # the backup saved the group once, after the cut: --until the cut moves none
        assert [g["status"] for g in doc["groups"]] == ([] if until else ["moved"]), run.describe()
        return doc

    # another producer writing into the restored partition while the restore writes
    # it: partition 0 refused, naming the way out (another --topic-prefix, one nobody
    # else writes to); the restore into r. below is that way out, exact
    busy = f"busy.{topic}"
    create_topic(b, busy, PARTITIONS)
    other = Producer({"bootstrap.servers": b, "linger.ms": 0})

    def write_other() -> None:
        other.produce(busy, b"other", partition=0)
        other.poll(0.002)

    # one record per produce request: the restore's transaction reaches the broker
    # in many requests, so the other producer's records land between them
    one_per_request = tmp_path / "one-per-request.properties"
    one_per_request.write_text(config.read_text() + "B.producer.batch.size = 1\n")
    refused = run_mm(
        one_per_request, "restore", "--to", "B", "--topic-prefix", "busy.", "--json",
        timeout=TIMEOUT, while_waiting=write_other,
    )  # fmt: skip
    assert other.flush(30) == 0
    assert refused.returncode == 1, refused.describe()
    rows = {r["partition"]: r for r in json.loads(refused.stdout)["partitions"]}
    assert rows[0]["summary"]["error"].endswith(
        "another producer writes into this partition, so the offset mapping cannot be "
        "exact. Restore into a topic nobody else writes to (--topic-prefix), or stop the "
        "other producer"
    ), rows
    assert rows[1]["summary"]["error"] is None, rows

    first = restore()
    assert sum(r["summary"]["records"] for r in first["partitions"]) == 2 * PER_PHASE * PARTITIONS
    assert _values(b, target) == source
    assert _moved(b, group, target) == {p: 100 for p in range(PARTITIONS)}

    # the restored topic recreated by someone else with fewer records than the restore
    # wrote: each partition refused, naming the way out (delete the topic, run the
    # restore again), which the first round of the loop below takes
    delete_topic(b, target)
    create_topic(b, target, PARTITIONS)
    _produce(b, target, "stranger", ts)
    args = ("--to", "B", "--topic-prefix", "r.", "--json", "--until", str(cut))
    refused = _mm(config, "restore", *args)
    assert refused.returncode == 1, refused.describe()
    errors = [r["summary"]["error"] for r in json.loads(refused.stdout)["partitions"]]
    assert errors == [
        f"{target}[{p}] on cluster B ends at offset {PER_PHASE}, but the restore's offset "
        f"mapping says it wrote records up to offset {2 * PER_PHASE - 1} there: records it "
        "restored are gone (a truncated partition, or the topic was recreated and written "
        f"by another producer). Way out: delete topic {target} on cluster B and run the "
        "restore again; it restores the backup from its start"
        for p in range(PARTITIONS)
    ], refused.describe()

    for until, expected in (
        ((("--until", str(cut))), {p: v[:PER_PHASE] for p, v in source.items()}),
        ((), source),
    ):
        delete_topic(b, target)
        doc = restore(*until)
        rows = {r["partition"]: r for r in doc["partitions"]}
        for p in range(PARTITIONS):
            assert rows[p]["summary"]["resumed_from"] == 0, doc
            assert rows[p]["summary"]["records"] == len(expected[p]), doc
        assert _values(b, target) == expected, f"restore {until or 'all'} after the delete"
        if not until:  # the group committed at offset 100 resumes at the 101st record
            assert _moved(b, group, target) == {p: 100 for p in range(PARTITIONS)}

    # a consumer of the group on B: the group is refused, the way out printed is to
    # stop its consumers and run the restore again; done, the group is moved and no
    # record is written twice
    commit_admin(b, group, target, dict.fromkeys(range(PARTITIONS), 0))
    member = Consumer(
        {"bootstrap.servers": b, "group.id": group, "enable.auto.commit": False,
         "session.timeout.ms": 6000}
    )  # fmt: skip
    try:
        member.subscribe([target])
        deadline = time.monotonic() + 60
        while not member.assignment():
            assert time.monotonic() < deadline, "the member got no assignment within 60 s"
            member.poll(0.2)
        refused = _mm(config, "restore", "--to", "B", "--topic-prefix", "r.", "--json")
        member.poll(0.1)
    finally:
        member.close()
    assert refused.returncode == 1, refused.describe()
    (row,) = json.loads(refused.stdout)["groups"]
    assert row["status"].startswith("refused: the group has members on B"), row
    assert "stop its consumers and run the restore again" in row["status"]
    assert _moved(b, group, target) == dict.fromkeys(range(PARTITIONS), 0)
    doc = restore()
    assert sum(r["summary"]["records"] for r in doc["partitions"]) == 0
    assert _values(b, target) == source
    assert _moved(b, group, target) == {p: 100 for p in range(PARTITIONS)}

    # a target topic with too few partitions: partition 1 refused, naming the ways
    # out; partitions added as it says, the restore run again restores it exactly
    small = f"small.{topic}"
    create_topic(b, small, 1)
    few = _mm(config, "restore", "--to", "B", "--topic-prefix", "small.", "--json")
    assert few.returncode == 1, few.describe()
    rows = {r["partition"]: r for r in json.loads(few.stdout)["partitions"]}
    assert rows[1]["error"].endswith(
        f"add partitions to {small} or restore under another --topic-prefix"
    ), rows
    from confluent_kafka.admin import AdminClient, NewPartitions

    admin = AdminClient({"bootstrap.servers": b})
    admin.create_partitions([NewPartitions(small, 2)])[small].result(30)
    grown = _mm(config, "restore", "--to", "B", "--topic-prefix", "small.", "--json")
    assert grown.returncode == 0, grown.describe()
    assert _values(b, small) == source
