"""Backup, compaction, then `mm restore` into another cluster: real brokers, real
Spark, the real CLI, the store on a local directory and on S3 (a local moto server).

The source topic holds plain records (headers in order with duplicate keys and a
null value, a null key, a tombstone, explicit timestamps) and a transactional
producer's records (committed transactions around an aborted one whose records
reached the broker: offsets with no committed record). Two backup runs, a consumer
group saved by each, their segments compacted to level 1. The restore must write,
per partition and in order, exactly the records Apache Kafka's read_committed
consumer sees on the source (judged on both sides by the raw log under Kafka's
rule), once, even when run again; the group must land where the brute-force mapping
of the two logs says; ``--until`` must stop each partition at its first record after
the time and take the group offsets of the run before it.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from mm_client.kafka import produce_retrying
from support.clusters import KafkaCluster
from support.groups import commit_admin, run_mm
from support.mirror import MirrorRun, create_topic

from mm.kafka.profile import EMBEDDED
from mm.kafka.rawlog import committed_view, read_log
from mm.kafka.watermarks import watermarks

pytestmark = pytest.mark.integration

PARTITIONS = 2
TIMEOUT = 300.0


def _mm(config: Path, command: str, *args: str) -> MirrorRun:
    return run_mm(config, command, *args, timeout=TIMEOUT)


def _produce_phase_one(bootstrap: str, topic: str, ts: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for part in range(PARTITIONS):
        records: list[dict[str, Any]] = [
            {
                "key": b"k1",
                "value": f"a{part}".encode(),
                "timestamp": ts + 5,
                "headers": [("h", b"1"), ("x", None), ("h", b"2"), ("", b"")],
            },
            {"key": None, "value": f"b{part}".encode(), "timestamp": ts + 1},
            {"key": b"k1", "value": None, "timestamp": ts + 9},  # a tombstone
            {"key": b"", "value": b"", "timestamp": ts},
        ]
        for r in records:
            p.produce(topic, partition=part, **r)
    assert p.flush(30) == 0
    t = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"rs-{uuid.uuid4().hex}"})
    t.init_transactions(30)
    for round_ in range(3):
        t.begin_transaction()
        for part in range(PARTITIONS):
            for i in range(3):
                t.produce(
                    topic,
                    f"txn{round_}-{part}-{i}".encode(),
                    b"k-t",
                    partition=part,
                    timestamp=ts + 20 + i,
                    headers=[("txn", str(round_).encode())],
                )
        assert t.flush(30) == 0  # on the broker before the commit or abort
        if round_ == 1:
            t.abort_transaction(30)
        else:
            t.commit_transaction(30)


def _produce_phase_two(bootstrap: str, topic: str, ts: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for part in range(PARTITIONS):
        for i in range(5):
            p.produce(topic, f"late{part}-{i}".encode(), b"k2", partition=part, timestamp=ts + i)
    assert p.flush(30) == 0


def _committed(bootstrap: str, topic: str, partition: int) -> list[tuple[Any, ...]]:
    """(offset, key, value, headers, timestamp) of Kafka's read_committed records, once no
    transaction is open: Apache Kafka writes a transaction's markers after the producer's
    commit returned, so right after it the last transaction can still read as open."""
    deadline = time.monotonic() + 30
    view = committed_view(read_log(bootstrap, topic, partition))
    while view.open_records and time.monotonic() < deadline:
        time.sleep(0.1)
        view = committed_view(read_log(bootstrap, topic, partition))
    assert not view.open_records, f"{topic}[{partition}]: a transaction still open after 30 s"
    return [(r.offset, r.key, r.value, tuple(r.headers or ()), r.timestamp) for r in view.records]


def _expected_resume(source: list[Any], target: list[Any], at: int, target_end: int) -> int:
    """Brute force: the target offset of the first restored record whose source offset
    is at or past ``at`` (the target's end when there is none)."""
    for s, t in zip(source, target, strict=True):
        if s[0] >= at:
            return int(t[0])
    return target_end


def _group_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, p) for p in range(PARTITIONS)]
    )
    answer = admin.list_consumer_group_offsets([request])[group].result(30)
    return {tp.partition: tp.offset for tp in answer.topic_partitions if tp.offset >= 0}


@pytest.fixture(params=["local", "s3"])
def store_path(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """``backup.path``: a local directory, or a bucket on a local moto S3 server (the
    AWS credentials in this process's environment: `mm` subprocesses inherit it)."""
    if request.param == "local":
        yield str(tmp_path / "store")
        return
    from mm.embedded.s3 import AWS_ENV, MotoServer

    for k, v in AWS_ENV.items():
        monkeypatch.setenv(k, v)
    server = MotoServer(tmp_path / "moto.log")
    server.start()
    try:
        server.create_bucket("mm-restore")
        host = server.endpoint.removeprefix("http://")
        region = AWS_ENV["AWS_DEFAULT_REGION"]
        yield f"s3://mm-restore/bk?endpoint_override={host}&scheme=http&region={region}"
    finally:
        server.stop()


def test_restore_is_exact_once_and_point_in_time(
    cluster_a: KafkaCluster,
    cluster_b: KafkaCluster,
    unique_topic: Any,
    unique_group: Any,
    tmp_path: Path,
    store_path: str,
) -> None:
    a, b = cluster_a.bootstrap_servers, cluster_b.bootstrap_servers
    topic, group = unique_topic("rs"), unique_group("rs")
    create_topic(a, topic, PARTITIONS)
    ts = int(time.time() * 1000) - 60_000
    _produce_phase_one(a, topic, ts)
    one = {p: _committed(a, topic, p) for p in range(PARTITIONS)}
    # the group stopped on partition 0 inside the aborted transaction (an offset
    # with no committed record), on partition 1 at its second record
    aborted_at = min(
        o
        for o in range(one[0][0][0], one[0][-1][0])
        if o not in {r[0] for r in one[0]} and o > one[0][3][0] + 1
    )
    commit_admin(a, group, topic, {0: aborted_at, 1: one[1][1][0]})
    config = tmp_path / "mm.properties"
    config.write_text(
        "\n".join(
            [
                "clusters = A, B",
                f"A.bootstrap.servers = {a}",
                f"B.bootstrap.servers = {b}",
                "backup.cluster = A",
                f"backup.path = {store_path}",
                f"backup.topics = {topic}",
                f"backup.groups = {group}",
                "backup.region = east",
                "backup.compact.min.segments = 2",
                f"mm.state.dir = {tmp_path / 'state'}",
                "spark.master = local[2]",
            ]
        )
        + "\n"
    )
    first = _mm(config, "backup", "--once")
    assert first.returncode == 0, first.describe()
    time.sleep(1.0)
    cut = int(time.time() * 1000)
    time.sleep(1.0)
    _produce_phase_two(a, topic, cut + 1_000)
    ends = {
        p: e
        for (_t, p), (_s, e) in watermarks(
            {"bootstrap.servers": a}, [(topic, p) for p in range(PARTITIONS)], profile=EMBEDDED
        ).items()
    }
    commit_admin(a, group, topic, ends)
    second = _mm(config, "backup", "--once")
    assert second.returncode == 0, second.describe()
    source = {p: _committed(a, topic, p) for p in range(PARTITIONS)}
    # the two passes' level-0 segments merged into one level-1 segment per partition
    compacted = _mm(config, "backup", "compact")
    assert compacted.returncode == 0, compacted.describe()
    listed = _mm(config, "backup", "ls", "--json")
    assert listed.returncode == 0, listed.describe()
    rows = json.loads(listed.stdout)["partitions"]
    assert [(r["levels"], r["segments"]) for r in rows] == [([1], 1)] * PARTITIONS, rows

    # a dry run writes nothing
    dry = _mm(config, "restore", "--to", "B", "--topic-prefix", "full.", "--dry-run", "--json")
    assert dry.returncode == 0, dry.describe()
    doc = json.loads(dry.stdout)
    assert doc["created_topics"] == [f"full.{topic}"]
    assert (
        f"full.{topic}" not in AdminClient({"bootstrap.servers": b}).list_topics(timeout=30).topics
    )

    # the whole backup
    full = _mm(config, "restore", "--to", "B", "--topic-prefix", "full.", "--json")
    assert full.returncode == 0, full.describe()
    doc = json.loads(full.stdout)
    assert [g["status"] for g in doc["groups"]] == ["moved"], full.describe()
    target_topic = f"full.{topic}"
    target_ends = watermarks(
        {"bootstrap.servers": b}, [(target_topic, p) for p in range(PARTITIONS)], profile=EMBEDDED
    )
    moved = _group_offsets(b, group, target_topic)
    for p in range(PARTITIONS):
        target = _committed(b, target_topic, p)
        assert [r[1:] for r in target] == [r[1:] for r in source[p]], f"partition {p}"
        end = target_ends[(target_topic, p)][1]
        assert moved[p] == _expected_resume(source[p], target, ends[p], end) == end
    restored = sum(r["summary"]["records"] for r in doc["partitions"])
    assert restored == sum(len(v) for v in source.values())

    # again: nothing is written twice
    again = _mm(config, "restore", "--to", "B", "--topic-prefix", "full.", "--json")
    assert again.returncode == 0, again.describe()
    assert sum(r["summary"]["records"] for r in json.loads(again.stdout)["partitions"]) == 0
    for p in range(PARTITIONS):
        assert [r[1:] for r in _committed(b, target_topic, p)] == [r[1:] for r in source[p]]

    # point in time: phase one only, and the group as the first run saved it
    pit = _mm(
        config, "restore", "--to", "B", "--topic-prefix", "pit.", "--until", str(cut), "--json"
    )
    assert pit.returncode == 0, pit.describe()
    doc = json.loads(pit.stdout)
    assert doc["groups_snapshot_ms"] is not None and doc["groups_snapshot_ms"] <= cut
    pit_topic = f"pit.{topic}"
    pit_ends = watermarks(
        {"bootstrap.servers": b}, [(pit_topic, p) for p in range(PARTITIONS)], profile=EMBEDDED
    )
    moved = _group_offsets(b, group, pit_topic)
    saved = {0: aborted_at, 1: one[1][1][0]}
    for p in range(PARTITIONS):
        target = _committed(b, pit_topic, p)
        assert [r[1:] for r in target] == [r[1:] for r in one[p]], f"partition {p}"
        stops = {r["partition"]: r["summary"]["until_stop"] for r in doc["partitions"]}
        assert stops[p] == source[p][len(one[p])][0]  # the first record after the cut
        end = pit_ends[(pit_topic, p)][1]
        assert moved[p] == _expected_resume(one[p], target, saved[p], end)
    assert moved[0] != pit_ends[(pit_topic, 0)][1]  # inside the data, past the aborted gap


def test_restore_killed_at_random_moments_writes_each_record_once(
    cluster_a: KafkaCluster,
    cluster_b: KafkaCluster,
    unique_topic: Any,
    unique_group: Any,
    tmp_path: Path,
) -> None:
    """SIGKILL of the restore while transactions are in flight, three times: first of
    Spark's Python workers only (the restore says the Spark job failed and that
    running it again continues), then of the whole restore (driver, JVM, Python
    workers); the restore run again to its end must leave each
    backed-up record exactly once on the target (Kafka's read_committed rule on the
    raw log: a killed transaction's records stay in the log, aborted) and the group
    exactly where the mapping says, aborted attempts' mapping records included."""
    import random
    import signal
    import subprocess
    import sys

    from support.eos import kill_groups, process_tree, signal_all
    from support.mirror import mm_env

    a, b = cluster_a.bootstrap_servers, cluster_b.bootstrap_servers
    topic, group = unique_topic("rk"), unique_group("rk")
    create_topic(a, topic, PARTITIONS)
    # enough that every round's kill comes before the restore ends: with 30,000 a
    # restore on an idle host finished in its second round (kills 1 of 2 needed)
    per_partition = 60_000
    p = Producer({"bootstrap.servers": a, "linger.ms": 20})
    for part in range(PARTITIONS):
        for i in range(per_partition):
            # the local queue fills when the loaded broker is slower than this loop
            # (seen: BufferError "Queue full" on a fresh-clone run)
            value, key = f"v{part}-{i:06d}".encode(), f"k{i % 97}".encode()
            produce_retrying(p, topic, value, key, partition=part)
            if i % 10_000 == 0:
                p.poll(0)
    assert p.flush(60) == 0
    commit_admin(a, group, topic, {0: 12_345, 1: per_partition})
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
                "backup.region = kill",
                f"mm.state.dir = {tmp_path / 'state'}",
                "spark.master = local[2]",
            ]
        )
        + "\n"
    )
    backup = _mm(config, "backup", "--once")
    assert backup.returncode == 0, backup.describe()
    target_topic = f"k.{topic}"
    args = ["--to", "B", "--topic-prefix", "k.", "--transaction-records", "700", "--json"]
    rng = random.Random(20261126)
    kills = 0
    for round_ in range(3):
        proc = subprocess.Popen(
            [sys.executable, "-m", "mm", "restore", "-c", str(config), *args],
            cwd=tmp_path,
            env=mm_env(),
            stdout=subprocess.DEVNULL,
            stderr=(tmp_path / f"killed-{round_}.err").open("w"),
            start_new_session=True,
        )

        # kill once the target has grown by a random amount since this run started
        def high() -> int:
            try:
                marks = watermarks(
                    {"bootstrap.servers": b}, [(target_topic, 0)], 5, profile=EMBEDDED
                )
            except Exception:
                return -1
            return marks[(target_topic, 0)][1]

        before = max(high(), 0)
        grow = rng.randint(500, 6_000)
        deadline = time.monotonic() + 180
        while proc.poll() is None and high() < before + grow:
            assert time.monotonic() < deadline, (tmp_path / f"killed-{round_}.err").read_text()
            time.sleep(rng.uniform(0.01, 0.2))
        if proc.poll() is None and round_ == 0:
            # only Spark's Python workers, the restore's tasks: the Spark job fails and
            # mm says so, naming the way out (run again), which the next rounds take
            workers = [q for q in process_tree(proc.pid) if "mm.spark_daemon" in q.cmd]
            assert workers, [q.cmd for q in process_tree(proc.pid)]
            signal_all(workers, signal.SIGKILL)
            kills += 1
            assert proc.wait(120) == 1
            err = (tmp_path / f"killed-{round_}.err").read_text()
            assert "mm restore: error: the Spark job failed: " in err, err[-4000:]
            assert (
                "the partitions' committed transactions stay, and running the restore "
                "again continues from them"
            ) in err, err[-4000:]
        elif proc.poll() is None:
            kill_groups(process_tree(proc.pid))
            kills += 1
        proc.wait(30)
    assert kills >= 2, "the restore finished before it could be killed: give it more data"
    final = _mm(config, "restore", *args)
    assert final.returncode == 0, final.describe()
    doc = json.loads(final.stdout)
    assert [g["status"] for g in doc["groups"]] == ["moved"], final.describe()
    ends = watermarks(
        {"bootstrap.servers": b}, [(target_topic, q) for q in range(PARTITIONS)], profile=EMBEDDED
    )
    moved = _group_offsets(b, group, target_topic)
    for part in range(PARTITIONS):
        source = _committed(a, topic, part)
        target = _committed(b, target_topic, part)
        assert len(source) == per_partition
        assert [r[1:] for r in target] == [r[1:] for r in source], f"partition {part}"
        end = ends[(target_topic, part)][1]
        at = 12_345 if part == 0 else per_partition
        assert moved[part] == _expected_resume(source, target, at, end)
