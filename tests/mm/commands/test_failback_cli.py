"""`mm failback`, steps 1-3: failback quarantines exactly the divergent records and
leaves every group on A exact.

A->B mirrors a topic once; `mm failover` records the failover point on B. Then A
takes records the mirror never copies (the divergence), B takes records of its own
(``local``), and the groups on B commit: ``g1`` part-way through A's copies on
partition 0, at B's end of them on partition 1, and part-way through ``local``;
``g2`` is also in use on A. `mm failback` must quarantine exactly A's divergent
records, mirror exactly B's records to A (``B.<local>``), and commit g1 on A at
the source offsets its offsets on B correspond to; g2 is refused.

The ways out its refusals name are then followed: ``g3`` has a consumer on B and a
producer still writes to ``local`` during that failback, so g3 is refused (not idle
on B) and the reverse flow is behind B; with g2's and g3's consumers and the
producer stopped, `mm failback` again moves g2 and g3 exactly, leaves g1 as it was
and mirrors every record of ``local``.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from support.apache_kafka import KRaftBroker, kafka_tool
from support.clusters import KafkaCluster
from support.groups import commit_admin, group_offsets, run_mm
from support.mirror import (
    create_topic,
    mirror_properties,
    mm_env,
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
G3_AT = 5  # where g3 stands on A's copies, partition 0
TXN_RECORDS = 4  # a transaction on A's partition 0 after the failover


class _Writer:
    """Writes ``local``'s next records (``b0-<i>``) on B while a command runs, one
    every 0.1 s: producers still running on B during the failback."""

    def __init__(self, bootstrap: str, topic: str, first: int) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        self.topic, self.next, self.last = topic, first, 0.0

    def poll(self) -> None:
        if time.monotonic() - self.last >= 0.1:
            self.producer.produce(self.topic, f"b0-{self.next}".encode(), partition=0)
            self.next, self.last = self.next + 1, time.monotonic()
        self.producer.poll(0)

    def close(self) -> int:
        """Stops writing; the number of records ``local`` holds."""
        assert self.producer.flush(30) == 0
        return self.next


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


def _failover(props: Path, b: str, suffix: str) -> dict[str, Any]:
    """`mm failover` of no group: the failover point it records."""
    if partition_count(b, "A.checkpoints.internal") is None:
        create_topic(b, "A.checkpoints.internal", 1, {"cleanup.policy": "compact"})
    res = run_mm(props, "failover", "--groups", f"fb-none-{suffix}", "--json")
    assert res.returncode == 1, res.describe()  # no group has checkpoints; the point is kept
    point: dict[str, Any] = json.loads(res.stdout)["failover_point"]
    return point


def test_failback_quarantines_the_divergence_and_leaves_every_group_on_a_exact(
    cluster_a: KafkaCluster, cluster_b: KafkaCluster, tmp_path: Path
) -> None:
    a, b = cluster_a.bootstrap_servers, cluster_b.bootstrap_servers
    suffix = uuid.uuid4().hex[:8]
    topic, local = f"fb-{suffix}", f"fbl-{suffix}"
    g1, g2, g3 = f"fb-g1-{suffix}", f"fb-g2-{suffix}", f"fb-g3-{suffix}"
    create_topic(a, topic, PARTITIONS)
    _produce(a, topic, dict.fromkeys(range(PARTITIONS), MIRRORED), "a")
    props = mirror_properties(
        tmp_path / "mm2.properties", a, b, [topic], state_dir=tmp_path / "state"
    )
    run = run_mirror_once(props)
    assert run.returncode == 0, run.describe()
    on_b = read_topic_committed(b, f"A.{topic}", PARTITIONS)
    assert [len(on_b[p]) for p in range(PARTITIONS)] == [MIRRORED] * PARTITIONS

    point = _failover(props, b, suffix)
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
    commit_admin(b, g3, f"A.{topic}", {0: on_b[0][G3_AT].offset})
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
    # g2 in use on A, g3 on B, and B's producer still writing
    member, member_b = _Member(a, g2, topic), _Member(b, g3, f"A.{topic}")
    writer = _Writer(b, local, LOCAL_RECORDS)

    def meanwhile() -> None:
        member.poll()
        member_b.poll()
        writer.poll()

    try:
        real = run_mm(
            back,
            "failback",
            "--flow",
            "A->B",
            "--groups",
            f"{g1}|{g2}|{g3}",
            "--quarantine-dir",
            str(quarantine),
            while_waiting=meanwhile,
        )
    finally:
        member.close()
        member_b.close()
        written = writer.close()
    # g2 is in use on A, g3 on B: refused (exit 1); everything else is done
    assert real.returncode == 1, real.describe()
    assert f"group {g2!r} is not idle on A" in real.stderr, real.describe()
    assert f"group {g3!r} is not idle on B" in real.stderr, real.describe()
    assert "stop its consumers there and retry" in real.stderr, real.describe()
    assert "producers still write there? Stop them and run `mm failback` again" in real.stderr
    rows = [ln.split() for ln in real.stdout.splitlines() if ln.startswith("fb-g")]
    assert [r[6] for r in rows if r[0] in (g2, g3)] == ["refused"] * 2, real.stdout
    assert sorted(r[6] for r in rows if r[0] == g1) == ["moved"] * 3, real.stdout

    # step 1: exactly A's records past the failover point
    source = read_topic(a, topic, PARTITIONS)
    for p in range(PARTITIONS):
        held = pq.read_table(quarantine / f"{topic}-{p}.parquet").to_pylist()
        assert [(r["offset"], r["value"]) for r in held] == [
            (r.offset, r.value) for r in source[p][MIRRORED:]
        ]
        assert len(held) == DIVERGENT[p]
    # step 2: B.<local> on A holds exactly B's records, as far as they were mirrored
    copies = read_topic(a, f"B.{local}", 1)[0]
    assert LOCAL_RECORDS <= len(copies) < written
    assert [r.value for r in copies] == [f"b0-{i}".encode() for i in range(len(copies))]
    # step 3: g1 on A exactly where it stood on B; g2 untouched
    assert group_offsets(a, g1) == {
        (topic, 0): want[0],
        (topic, 1): want[1],
        (f"B.{local}", 0): copies[LOCAL_AT].offset,
    }
    assert source[0][want[0]].value == on_b[0][want[0]].value  # the same record next
    assert all(o < 0 for o in group_offsets(a, g2).values())
    assert all(o < 0 for o in group_offsets(a, g3).values())

    # a transaction open on A past the failover point (a producer still on A): what
    # it holds is divergent only if it commits, so nothing is done
    g1_on_a = group_offsets(a, g1)
    groups = f"fb-g[123]-{suffix}"
    # and one on partition 1 that nobody will end (a hanging transaction's stand-in:
    # its producer's timeout is the broker's longest)
    txn, hanging = (
        Producer({"bootstrap.servers": a, "transactional.id": f"fb-txn{p}-{suffix}", **conf})
        # the first outlives a failback run: not the 60 s default, which a loaded
        # machine can pass
        for p, conf in (
            (0, {"transaction.timeout.ms": 600_000}),
            (1, {"transaction.timeout.ms": 900_000}),
        )
    )
    for p, producer in enumerate((txn, hanging)):
        producer.init_transactions(30)
        producer.begin_transaction()
        for i in range(TXN_RECORDS):
            producer.produce(topic, f"txn{p}-{i}".encode(), partition=p)
        assert producer.flush(30) == 0
    held = run_mm(back, "failback", "--flow", "A->B", "--groups", groups, "--json")
    assert held.returncode == 1, held.describe()
    assert f"a transaction is open on A past the failover point in {topic}[0] " in held.stderr
    assert held.stderr.rstrip().endswith("run mm failback again"), held.describe()
    report = json.loads(held.stdout)
    assert report["reverse"] is None and report["groups"] == [], held.stdout
    assert [x["transaction_open"] for x in report["partitions"]] == [True, True]
    assert group_offsets(a, g1) == g1_on_a
    assert all(o < 0 for o in group_offsets(a, g2).values())
    txn.commit_transaction(30)
    # the hanging one aborted with Kafka's tool, exactly as the message prints it
    printed = re.findall(
        r"kafka-transactions\.sh --bootstrap-server (\S+) (abort --topic \S+ --partition "
        r"(\d+) --start-offset \d+)",
        held.stderr,
    )
    assert [(servers, int(p)) for servers, _, p in printed] == [(a, 0), (a, 1)], held.stderr
    main = "org.apache.kafka.tools.TransactionsCommand"
    kafka_tool("kafka-transactions.sh", main, a, *printed[1][1].split())

    # the ways out, as printed: the transaction ended, the consumers and the producer
    # stopped, run it again
    again_dir = tmp_path / "quarantine-again"
    again = run_mm(
        back,
        "failback",
        "--flow",
        "A->B",
        "--groups",
        groups,
        "--json",
        "--quarantine-dir",
        str(again_dir),
    )
    assert again.returncode == 0, again.describe()
    report = json.loads(again.stdout)
    # the committed transaction's records are divergent too, the aborted one's are not
    source = read_topic_committed(a, topic, PARTITIONS)
    assert len(source[0]) == MIRRORED + DIVERGENT[0] + TXN_RECORDS
    assert len(source[1]) == MIRRORED + DIVERGENT[1]
    for p in range(PARTITIONS):
        held_now = pq.read_table(again_dir / f"{topic}-{p}.parquet").to_pylist()
        assert [(r["offset"], r["value"]) for r in held_now] == [
            (r.offset, r.value) for r in source[p][MIRRORED:]
        ]
    assert report["ok"] and report["problems"] == [], again.describe()
    assert {g["group"]: g["status"] for g in report["groups"]} == {
        g1: "unchanged",
        g2: "moved",
        g3: "moved",
    }
    assert [(x["topic"], x["unmirrored"]) for x in report["reverse"]["partitions"]] == [(local, 0)]
    copies = read_topic(a, f"B.{local}", 1)[0]
    assert [r.value for r in copies] == [f"b0-{i}".encode() for i in range(written)]
    assert group_offsets(a, g1) == g1_on_a
    assert group_offsets(a, g2) == {(topic, 0): 0}
    assert group_offsets(a, g3) == {(topic, 0): G3_AT}
    assert source[0][G3_AT].value == on_b[0][G3_AT].value


def test_identity_policy_reverse_filter_selecting_a_copy_is_refused_then_narrowed(
    cluster_a: KafkaCluster, cluster_b: KafkaCluster, tmp_path: Path
) -> None:
    """With IdentityReplicationPolicy A's topic keeps its name on B: a B->A filter that
    selects it would append B's copies to A's topic. Refused (exit 2) with nothing
    read or written on A; B->A.topics narrowed as the message says, the failback
    mirrors B's own topic to A and moves its group there, A's topic untouched."""
    a, b = cluster_a.bootstrap_servers, cluster_b.bootstrap_servers
    suffix = uuid.uuid4().hex[:8]
    topic, local, group = f"idf-{suffix}", f"idl-{suffix}", f"fb-id-{suffix}"
    create_topic(a, topic, 1)
    _produce(a, topic, {0: 10}, "a")
    identity = {"replication.policy.class": "IdentityReplicationPolicy"}
    # patterns, not names: the config check finds an overlap only among names spelt out
    props = mirror_properties(
        tmp_path / "mm2.properties",
        a,
        b,
        [f"idf-{suffix}.*"],
        state_dir=tmp_path / "state",
        extra=identity,
    )
    run = run_mirror_once(props)
    assert run.returncode == 0, run.describe()
    assert [r["topic"] for r in _failover(props, b, suffix)["partitions"]] == [topic]
    create_topic(b, local, 1)
    _produce(b, local, {0: LOCAL_RECORDS}, "b")
    commit_admin(b, group, local, {0: LOCAL_AT})

    def failback(reverse_topics: str) -> Any:
        back = mirror_properties(
            tmp_path / "failback.properties",
            a,
            b,
            [f"idf-{suffix}.*"],
            state_dir=tmp_path / "state",
            extra={**identity, "B->A.enabled": "true", "B->A.topics": reverse_topics},
        )
        return run_mm(back, "failback", "--flow", "A->B", "--groups", group, "--json")

    wide = failback(f".*-{suffix}")
    assert wide.returncode == 2, wide.describe()
    assert (
        f"invalid config B->A.topics='.*-{suffix}': expected a filter that leaves out {topic}:"
        in wide.stderr
    ), wide.describe()
    assert partition_count(a, local) is None and not (tmp_path / "state" / "failback").exists()

    # the way out, as printed: a B->A filter that leaves A's topic out
    narrow = failback(local)
    assert narrow.returncode == 0, narrow.describe()
    report = json.loads(narrow.stdout)
    assert report["ok"] and [g["status"] for g in report["groups"]] == ["moved"], narrow.stdout
    copies = read_topic(a, local, 1)[0]
    assert [r.value for r in copies] == [f"b0-{i}".encode() for i in range(LOCAL_RECORDS)]
    assert group_offsets(a, group) == {(local, 0): copies[LOCAL_AT].offset}
    assert [r.value for r in read_topic(a, topic, 1)[0]] == [f"a0-{i}".encode() for i in range(10)]


# `mm failback` with A's broker killed (its process group: argv[1]) just before the
# groups are committed there, in the one moment between two reads of one command
_A_GOES_DOWN = """
import os, signal, socket, sys, time
from mm import cli
from mm.dr import failback_run

pgid, port, move = int(sys.argv[1]), int(sys.argv[2]), failback_run.move_groups

def a_goes_down(*args, **kwargs):
    os.killpg(pgid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # until A refuses connections
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
        except OSError:
            break
        time.sleep(0.05)
    return move(*args, **kwargs)

failback_run.move_groups = a_goes_down
sys.exit(cli.main(sys.argv[3:]))
"""


def test_a_group_whose_state_on_a_cannot_be_read_is_refused_then_moved_on_retry(
    own_kafka: Callable[..., KRaftBroker], cluster_b: KafkaCluster, tmp_path: Path
) -> None:
    """A stops answering after step 3 has read it, just before the group is committed
    there (in a cluster of several brokers: the group's coordinator going down): the
    group's state cannot be read, so it is refused, nothing committed. A down from the
    start stops the failback at its first read of A instead. Once A answers again, the
    retry moves the group exactly."""
    broker = own_kafka()
    assert broker.proc is not None
    a, b = broker.bootstrap, cluster_b.bootstrap_servers
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"fbd-{suffix}", f"fb-down-{suffix}"
    create_topic(a, topic, 1)
    _produce(a, topic, {0: 10}, "a")
    props = mirror_properties(
        tmp_path / "mm2.properties", a, b, [topic], state_dir=tmp_path / "state"
    )
    run = run_mirror_once(props)
    assert run.returncode == 0, run.describe()
    _failover(props, b, suffix)
    on_b = read_topic(b, f"A.{topic}", 1)[0]
    commit_admin(b, group, f"A.{topic}", {0: on_b[4].offset})
    # B has nothing of its own to mirror back: no Spark run in step 2
    back = mirror_properties(
        tmp_path / "failback.properties",
        a,
        b,
        [topic],
        state_dir=tmp_path / "state",
        extra={"B->A.enabled": "true", "B->A.topics": f"none-{suffix}"},
    )
    opts = ("--flow", "A->B", "--groups", group, "--timeout", "5")
    pid, port = str(broker.proc.pid), str(broker.port)
    killed = subprocess.run(
        [sys.executable, "-c", _A_GOES_DOWN, pid, port, "failback", "-c", str(back), *opts],
        env=mm_env(),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert killed.returncode == 1, killed.stderr
    assert f"group {group!r}: its state on A could not be read" in killed.stderr, killed.stderr
    assert "retry when the cluster answers. Its offsets were not changed" in killed.stderr
    broker.kill()  # reaps the process

    down = run_mm(back, "failback", *opts)
    assert down.returncode == 1, down.describe()
    # what an operator sees with A down from the start: its first read of A fails
    # (_ALL_BROKERS_DOWN or _TIMED_OUT), before anything is written
    assert f"mm failback: error: list offsets of {topic}[0]: " in down.stderr, down.describe()

    # the way out, as printed: retry once A answers
    broker.restart()
    assert group_offsets(a, group) == {}
    again = run_mm(back, "failback", *opts, "--json")
    assert again.returncode == 0, again.describe()
    assert [g["status"] for g in json.loads(again.stdout)["groups"]] == ["moved"]
    assert group_offsets(a, group) == {(topic, 0): 4}


def test_a_rebuilt_from_a_copy_older_than_the_failover_point_diverges_where_content_differs(
    own_kafka: Callable[..., KRaftBroker], cluster_b: KafkaCluster, tmp_path: Path
) -> None:
    """A's log directory copied at 30 records, A written on to 50, all mirrored, the
    failover recorded at 50; then A rebuilt from that copy (stopped, the old directory
    put back, started) and written again past the point, to 70. A's offsets 30-49 now
    hold records B never had: offsets alone (50 to 70) would miss them. The failback
    compares A's records below the point with B's copies and quarantines from 30."""
    broker = own_kafka()
    a, b = broker.bootstrap, cluster_b.bootstrap_servers
    suffix = uuid.uuid4().hex[:8]
    topic = f"fbr-{suffix}"
    create_topic(a, topic, 1)
    _produce(a, topic, {0: 30}, "old")
    broker.kill()
    snapshot = tmp_path / "a-at-30"
    shutil.copytree(broker.dir / "data", snapshot)
    broker.restart()
    _produce(a, topic, {0: 20}, "gone")  # offsets 30-49: mirrored, then lost with A
    props = mirror_properties(
        tmp_path / "mm2.properties", a, b, [topic], state_dir=tmp_path / "state"
    )
    run = run_mirror_once(props)
    assert run.returncode == 0, run.describe()
    point = _failover(props, b, suffix)
    assert [(r["partition"], r["mirrored_to"]) for r in point["partitions"]] == [(0, 50)]

    broker.kill()
    shutil.rmtree(broker.dir / "data")
    shutil.copytree(snapshot, broker.dir / "data")
    broker.restart()
    assert _end(a, topic, 0) == 30
    _produce(a, topic, {0: 40}, "new")  # offsets 30-69: past the point again
    source = read_topic(a, topic, 1)[0]
    assert [r.offset for r in source] == list(range(70))

    quarantine = tmp_path / "quarantine"
    res = run_mm(
        props, "failback", "--flow", "A->B", "--quarantine-only", "--json",
        "--quarantine-dir", str(quarantine),
    )  # fmt: skip
    # A lost records B has: exit 1, naming where its records part from B's copies
    assert res.returncode == 1, res.describe()
    assert f"from offset 30 in {topic}[0] (A was rebuilt from an older copy" in res.stderr
    (row,) = json.loads(res.stdout)["partitions"]
    assert (row["failover_at"], row["end_now"]) == (50, 70), row
    assert row["content_differs_at"] == 30 and row["content_agreement_found"] is True, row
    assert row["divergence_starts_at"] == 30 and row["content_depth_scanned"] == 50, row
    assert (row["records"], row["first_offset"], row["last_offset"]) == (40, 30, 69), row
    held = pq.read_table(quarantine / f"{topic}-0.parquet").to_pylist()
    assert [(r["offset"], r["value"]) for r in held] == [(r.offset, r.value) for r in source[30:]]
    assert held[0]["value"] == b"new0-0" and held[-1]["value"] == b"new0-39"
