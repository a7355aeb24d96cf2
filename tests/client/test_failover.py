"""Client-side failover against real brokers: translate, seek/commit, timestamp fallback.

Checkpoints are written by hand (mm_client.records.Checkpoint) to
``A.checkpoints.internal`` on cluster B, which other tests share: every test
uses its own group names and topic names, and asserts only on those.
"""

from __future__ import annotations

import logging
import re
import socket
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
)
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from mm_client import (
    ApproximateOffset,
    Checkpoint,
    CheckpointsUnavailableError,
    ClusterUnavailableError,
    DefaultReplicationPolicy,
    RewindRefusedError,
    TopicPartition,
    assign_translated,
    checkpoint_topics,
    commit_group_offsets,
    commit_translated,
    heartbeat_topics,
    plan_failover,
    read_checkpoints,
    remote_topics,
    replication_hops,
    seek_to_translated,
    translate_all,
    translate_by_timestamp,
    translate_offsets,
    upstream_clusters,
)
from mm_client.consumers import consumer_kind
from support.clusters import KafkaCluster, KafkaFactory

pytestmark = pytest.mark.integration

CHECKPOINTS = "A.checkpoints.internal"


# --- helpers ---------------------------------------------------------------------------


def conf(cluster: KafkaCluster) -> dict[str, str]:
    return {"bootstrap.servers": cluster.bootstrap_servers}


def ensure_topic(
    bootstrap: str, topic: str, partitions: int = 1, config: Mapping[str, str] | None = None
) -> None:
    """Create ``topic`` unless it exists (shared topics may have been created by others)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    future = admin.create_topics([NewTopic(topic, partitions, -1, config=dict(config or {}))])
    try:
        future[topic].result(30)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
    deadline = time.monotonic() + 30
    while True:
        found = admin.list_topics(topic, timeout=10).topics.get(topic)
        if found is not None and found.error is None and found.partitions:
            return
        assert time.monotonic() < deadline, f"topic {topic} did not show up"
        time.sleep(0.1)


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[tuple[bytes | None, bytes | None]],
    partition: int = 0,
    timestamps: Iterable[int] | None = None,
) -> None:
    """One produce batch (one flush): Tansu under-reports ListOffsets(latest) for it."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
    stamps = list(timestamps) if timestamps is not None else None
    for i, (key, value) in enumerate(records):
        if stamps is not None:
            producer.produce(topic, value, key, partition=partition, timestamp=stamps[i])
        else:
            producer.produce(topic, value, key, partition=partition)
    assert producer.flush(30) == 0


def write_checkpoints(
    bootstrap: str, *batches: list[Checkpoint | tuple[bytes | None, bytes | None]]
) -> None:
    ensure_topic(bootstrap, CHECKPOINTS, 1, {"cleanup.policy": "compact"})
    for batch in batches:
        produce(
            bootstrap,
            CHECKPOINTS,
            [(r.key_bytes(), r.value_bytes()) if isinstance(r, Checkpoint) else r for r in batch],
        )


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def group_offsets(bootstrap: str, group: str) -> dict[TopicPartition, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    answer = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
    return {
        TopicPartition(k.topic, k.partition): k.offset
        for k in answer.result(30).topic_partitions or ()
        if k.offset >= 0
    }


def first_offsets_confluent(
    consumer: Consumer, count: int, timeout: float = 30.0
) -> dict[int, int]:
    """Offset of the first record consumed from each of ``count`` partitions."""
    first: dict[int, int] = {}
    deadline = time.monotonic() + timeout
    while len(first) < count:
        assert time.monotonic() < deadline, f"only got {first}"
        for msg in consumer.consume(100, 0.5):
            if msg.error() is None:
                first.setdefault(msg.partition() or 0, msg.offset() or 0)
    return first


# --- translate_offsets / translate_all -------------------------------------------------


def test_translate_offsets_newest_wins_garbage_skipped_other_groups_ignored(
    cluster_b: KafkaCluster,
    unique_group: Callable[..., str],
    unique_topic: Callable[..., str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    b = cluster_b.bootstrap_servers
    group, other = unique_group("app"), unique_group("other")
    orders, payments = f"A.{unique_topic('orders')}", f"A.{unique_topic('payments')}"
    good_key = Checkpoint(group, orders, 0, 1, 1).key_bytes()
    write_checkpoints(
        b,
        [Checkpoint(group, orders, 0, 10, 8), Checkpoint(group, orders, 1, 5, 5)],
        [
            (good_key, b"\x00\x00garbage"),  # the group's key, undecodable value
            (b"\x00", b"junk"),  # undecodable key
            Checkpoint(other, orders, 0, 100, 90),
        ],
        # the newest checkpoint sits in the last multi-record batch, whose end
        # Tansu's ListOffsets(latest) under-reports: only the fetch watermark sees it
        [
            Checkpoint(group, payments, 3, 7, 6, "meta"),
            Checkpoint(group, orders, 0, 20, 18),
            (good_key, Checkpoint(group, orders, 0, 30, 28).value_bytes() + b"!"),  # garbage
        ],
    )
    with caplog.at_level(logging.WARNING, logger="mm_client.checkpoints"):
        offsets = translate_offsets(conf(cluster_b), "A", group, timeout=30)
    assert offsets == {
        TopicPartition(orders, 0): 18,
        TopicPartition(orders, 1): 5,
        TopicPartition(payments, 3): 6,
    }
    assert all(type(k) is TopicPartition for k in offsets)
    assert any("undecodable" in r.getMessage() for r in caplog.records)

    snap = read_checkpoints(conf(cluster_b), "A", re.escape(group))
    assert snap.skipped >= 3  # two garbage values of this group + one bad key (+ others')
    assert snap.checkpoints(group)[TopicPartition(payments, 3)] == Checkpoint(
        group, payments, 3, 7, 6, "meta"
    )
    assert snap.end_offsets[0] >= snap.records
    assert translate_offsets(conf(cluster_b), "A", other) == {TopicPartition(orders, 0): 90}
    assert translate_offsets(conf(cluster_b), "A", unique_group("nobody")) == {}


def test_translate_all_reads_every_matching_group_at_once(
    cluster_b: KafkaCluster, unique_group: Callable[..., str], unique_topic: Callable[..., str]
) -> None:
    b = cluster_b.bootstrap_servers
    prefix = unique_group("bulk")
    topic = f"A.{unique_topic('t')}"
    groups = [f"{prefix}-{i}" for i in range(5)]
    batch = [
        Checkpoint(g, topic, p, 10 * i + p, 10 * i + p + 1)
        for i, g in enumerate(groups)
        for p in range(3)
    ]
    batch += [
        Checkpoint(f"{prefix}x-1", topic, 0, 1, 1),  # does not match "<prefix>-.*"
        Checkpoint(f"zz{prefix}-1", topic, 0, 1, 1),  # matches only as a search, not fullmatch
    ]
    write_checkpoints(b, batch, [Checkpoint(groups[0], topic, 0, 500, 501)])

    result = translate_all(conf(cluster_b), "A", re.escape(prefix) + "-.*", timeout=30)
    assert set(result) == set(groups)
    for i, g in enumerate(groups):
        expected = {TopicPartition(topic, p): 10 * i + p + 1 for p in range(3)}
        if i == 0:
            expected[TopicPartition(topic, 0)] = 501
        assert result[g] == expected
    # the default selects every group, ours included
    everything = translate_all(conf(cluster_b), "A")
    assert {g: everything[g] for g in groups} == result
    assert f"zz{prefix}-1" in everything


def test_policy_from_mm2_keys_in_config(
    cluster_b: KafkaCluster, unique_group: Callable[..., str], unique_topic: Callable[..., str]
) -> None:
    b = cluster_b.bootstrap_servers
    alias = f"S{uuid.uuid4().hex[:6]}"
    topic = f"{alias}_checkpoints_internal"
    ensure_topic(b, topic, 1, {"cleanup.policy": "compact"})
    group = unique_group("sep")
    cp = Checkpoint(group, f"{alias}_{unique_topic('t')}", 0, 3, 2)
    produce(b, topic, [(cp.key_bytes(), cp.value_bytes())])
    props = {**conf(cluster_b), "replication.policy.separator": "_"}
    assert translate_offsets(props, alias, group) == {TopicPartition(cp.topic, 0): 2}
    policy = DefaultReplicationPolicy("_")
    assert translate_offsets(conf(cluster_b), alias, group, replication_policy=policy) == {
        TopicPartition(cp.topic, 0): 2
    }


# --- errors ----------------------------------------------------------------------------


def test_missing_checkpoints_topic_is_a_typed_error(cluster_b: KafkaCluster) -> None:
    alias = f"Z{uuid.uuid4().hex[:8]}"
    with pytest.raises(CheckpointsUnavailableError) as info:
        translate_offsets(conf(cluster_b), alias, "g", timeout=10)
    err = info.value
    assert err.reason == "missing"
    assert err.topic == f"{alias}.checkpoints.internal"
    assert err.topic in str(err) and cluster_b.bootstrap_servers in str(err)


def test_unreachable_cluster_fails_within_the_timeout() -> None:
    bootstrap = f"127.0.0.1:{closed_port()}"
    down = {"bootstrap.servers": bootstrap}
    started = time.monotonic()
    with pytest.raises(CheckpointsUnavailableError) as info:
        translate_offsets(down, "A", "g", timeout=3)
    assert time.monotonic() - started < 3 + 2
    assert info.value.reason == "unreachable"
    assert bootstrap in str(info.value) and "A.checkpoints.internal" in str(info.value)

    # the other entry points, with a shorter timeout to keep the test quick
    started = time.monotonic()
    with pytest.raises(CheckpointsUnavailableError):
        translate_all(down, "A", timeout=2)
    assert time.monotonic() - started < 2 + 2

    calls: list[Callable[[], object]] = [
        lambda: heartbeat_topics(down, timeout=2),
        lambda: replication_hops(down, "A", timeout=2),
        lambda: translate_by_timestamp(down, down, "A", "g", timeout=2),
        lambda: commit_group_offsets(down, "g", {("t", 0): 1}, timeout=2),
    ]
    for call in calls:
        started = time.monotonic()
        with pytest.raises(ClusterUnavailableError) as cinfo:
            call()
        assert time.monotonic() - started < 2 + 2
        assert bootstrap in str(cinfo.value)


# --- seek / assign / commit helpers -----------------------------------------------------


@pytest.fixture
def data_topic(cluster_b: KafkaCluster, unique_topic: Callable[..., str]) -> str:
    """``A.<topic>`` on B with 2 partitions of 10 records each."""
    topic = f"A.{unique_topic('data')}"
    ensure_topic(cluster_b.bootstrap_servers, topic, 2)
    for p in range(2):
        produce(cluster_b.bootstrap_servers, topic, [(b"k", b"v%d" % i) for i in range(10)], p)
    return topic


def test_confluent_consumer_assign_seek_commit(
    cluster_b: KafkaCluster, data_topic: str, unique_group: Callable[..., str]
) -> None:
    b = cluster_b.bootstrap_servers
    offsets = {TopicPartition(data_topic, 0): 3, TopicPartition(data_topic, 1): 7}
    group = unique_group("cf")
    base = {"bootstrap.servers": b, "group.id": group, "enable.auto.commit": False}

    consumer = Consumer(base)
    try:
        assert consumer_kind(consumer) == "confluent"
        assert assign_translated(consumer, offsets) == sorted(offsets)
        assert first_offsets_confluent(consumer, 2) == {0: 3, 1: 7}
    finally:
        consumer.close()

    consumer = Consumer({**base, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([KafkaTopicPartition(data_topic, p, 0) for p in range(2)])
        extra = {**offsets, TopicPartition("not-assigned", 0): 1}
        assert seek_to_translated(consumer, extra) == sorted(offsets)
        assert first_offsets_confluent(consumer, 2) == {0: 3, 1: 7}

        commit_translated(consumer, offsets)
        committed = consumer.committed(
            [KafkaTopicPartition(data_topic, p) for p in range(2)], timeout=30
        )
        assert {(c.topic, c.partition): c.offset for c in committed} == offsets
    finally:
        consumer.close()
    assert group_offsets(b, group) == offsets

    # on_assign style: only the given partitions, the untranslated one keeps its offset
    consumer = Consumer(base)
    try:
        given = [KafkaTopicPartition(data_topic, 0), KafkaTopicPartition(data_topic, 1, 9)]
        only0 = {TopicPartition(data_topic, 0): 2}
        # the group committed 3 on p0 above: 2 moves it back, refused unless asked for
        with pytest.raises(RewindRefusedError, match=r"\[0\] 3 -> 2 \(1 offsets again\)"):
            assign_translated(consumer, only0, given)
        assert consumer.assignment() == []
        assert assign_translated(consumer, only0, given, allow_rewind=True) == [
            TopicPartition(data_topic, 0)
        ]
        assert first_offsets_confluent(consumer, 2) == {0: 2, 1: 9}
    finally:
        consumer.close()


def test_kafka_python_consumer_assign_seek_commit(
    cluster_b: KafkaCluster, data_topic: str, unique_group: Callable[..., str]
) -> None:
    kafka = pytest.importorskip("kafka")
    b = cluster_b.bootstrap_servers
    offsets = {TopicPartition(data_topic, 0): 4, TopicPartition(data_topic, 1): 6}
    group = unique_group("kp")

    def first_offsets(kc: Any) -> dict[int, int]:
        first: dict[int, int] = {}
        deadline = time.monotonic() + 30
        while len(first) < 2:
            assert time.monotonic() < deadline, f"only got {first}"
            for tp, recs in kc.poll(timeout_ms=500).items():
                if recs:
                    first.setdefault(tp.partition, recs[0].offset)
        return first

    kc = kafka.KafkaConsumer(
        bootstrap_servers=b,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    try:
        assert consumer_kind(kc) == "kafka-python"
        assert assign_translated(kc, offsets) == sorted(offsets)
        assert first_offsets(kc) == {0: 4, 1: 6}

        kc.seek_to_beginning()
        extra = {**offsets, TopicPartition("not-assigned", 0): 1}
        assert seek_to_translated(kc, extra) == sorted(offsets)
        assert first_offsets(kc) == {0: 4, 1: 6}

        commit_translated(kc, offsets)
        for tp, offset in offsets.items():
            assert kc.committed(kafka.TopicPartition(*tp)) == offset
    finally:
        kc.close()
    assert group_offsets(b, group) == offsets


def test_commit_group_offsets_without_a_consumer(
    cluster_b: KafkaCluster, data_topic: str, unique_group: Callable[..., str]
) -> None:
    group = unique_group("admin")
    offsets = {TopicPartition(data_topic, 0): 5, TopicPartition(data_topic, 1): 1}
    commit_group_offsets(conf(cluster_b), group, offsets)
    assert group_offsets(cluster_b.bootstrap_servers, group) == offsets


def test_helpers_reject_bad_input() -> None:
    with pytest.raises(TypeError, match="Consumer"):
        seek_to_translated(object(), {})
    consumer = Consumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "x"})
    try:
        with pytest.raises(ValueError, match=">= 0"):
            assign_translated(consumer, {("t", 0): -1})
    finally:
        consumer.close()


# --- timestamp fallback and plan_failover -------------------------------------------------

BASE_TS = int(time.time() * 1000) - 3_600_000


class Layout:
    """``t`` on A (3 partitions) mirrored to ``A.t`` on B, plus an unmirrored ``u`` on A.

    * p0: 15 records on A (ts BASE+10*i); only the last 10 were mirrored, so B's
      offset = A's - 5. The group is at 8 -> B offset 3.
    * p1: timestamps with duplicates [0, 10, 10, 10, 20, 30]; the group is at 3 (the
      third "10"), the first "10" on B is offset 1: approximate, two re-reads.
    * p2: 4 records, the group at the end (4) -> "end": B's end, 4.
    * u[0]: committed, but no ``A.u`` on B -> unresolved.
    """

    def __init__(self, a: str, b: str, unique_topic: Callable[..., str], group: str) -> None:
        self.t = unique_topic("t")
        self.u = unique_topic("u")
        self.remote = f"A.{self.t}"
        ensure_topic(a, self.t, 3)
        ensure_topic(a, self.u, 1)
        ensure_topic(b, self.remote, 3)
        p0 = [BASE_TS + 10 * i for i in range(15)]
        p1 = [BASE_TS + d for d in (0, 10, 10, 10, 20, 30)]
        p2 = [BASE_TS + 10 * i for i in range(4)]
        for p, stamps, mirrored in ((0, p0, p0[5:]), (1, p1, p1), (2, p2, p2)):
            produce(a, self.t, [(b"k", b"%d" % i) for i in range(len(stamps))], p, stamps)
            produce(b, self.remote, [(b"k", b"m") for _ in mirrored], p, mirrored)
        produce(a, self.u, [(b"k", b"v")], 0, [BASE_TS])
        self.p0_ts = p0[8]
        commit_group_offsets(
            {"bootstrap.servers": a},
            group,
            {(self.t, 0): 8, (self.t, 1): 3, (self.t, 2): 4, (self.u, 0): 0},
        )


def test_translate_by_timestamp(
    cluster_a: KafkaCluster,
    cluster_b: KafkaCluster,
    unique_topic: Callable[..., str],
    unique_group: Callable[..., str],
) -> None:
    group = unique_group("ts")
    lay = Layout(cluster_a.bootstrap_servers, cluster_b.bootstrap_servers, unique_topic, group)
    result = translate_by_timestamp(conf(cluster_a), conf(cluster_b), "A", group, timeout=60)
    r0, r1, r2 = (TopicPartition(lay.remote, p) for p in range(3))
    assert result.approximate == {
        r0: ApproximateOffset(3, TopicPartition(lay.t, 0), 8, lay.p0_ts, "timestamp"),
        r1: ApproximateOffset(1, TopicPartition(lay.t, 1), 3, BASE_TS + 10, "timestamp"),
        r2: ApproximateOffset(4, TopicPartition(lay.t, 2), 4, None, "end"),
    }
    assert set(result.unresolved) == {TopicPartition(lay.u, 0)}
    assert f"A.{lay.u}" in result.unresolved[TopicPartition(lay.u, 0)]
    assert result.offsets() == {r0: 3, r1: 1, r2: 4}

    only = translate_by_timestamp(
        conf(cluster_a), conf(cluster_b), "A", group, partitions=[(lay.t, 1), (lay.t, 9)]
    )
    assert set(only.approximate) == {r1}
    assert set(only.unresolved) == {TopicPartition(lay.t, 9)}  # no committed offset there


def test_plan_failover_keeps_exact_and_approximate_apart(
    cluster_a: KafkaCluster,
    cluster_b: KafkaCluster,
    unique_topic: Callable[..., str],
    unique_group: Callable[..., str],
) -> None:
    group = unique_group("plan")
    lay = Layout(cluster_a.bootstrap_servers, cluster_b.bootstrap_servers, unique_topic, group)
    r0, r1, r2 = (TopicPartition(lay.remote, p) for p in range(3))
    write_checkpoints(cluster_b.bootstrap_servers, [Checkpoint(group, lay.remote, 0, 8, 3)])

    plan = plan_failover(conf(cluster_b), "A", group, source_config=conf(cluster_a), timeout=60)
    assert plan.exact == {r0: 3}
    assert set(plan.approximate) == {r1, r2}
    assert all(isinstance(v, ApproximateOffset) for v in plan.approximate.values())
    assert set(plan.unresolved) == {TopicPartition(lay.u, 0)}
    assert plan.fallback_error is None and not plan.complete
    assert plan.offsets() == {r0: 3}
    assert plan.offsets(include_approximate=True) == {r0: 3, r1: 1, r2: 4}

    # the source is gone: exact offsets only, and the plan says why
    down = {"bootstrap.servers": f"127.0.0.1:{closed_port()}"}
    plan = plan_failover(conf(cluster_b), "A", group, source_config=down, timeout=3)
    assert plan.exact == {r0: 3} and not plan.approximate
    assert plan.fallback_error is not None and "127.0.0.1" in plan.fallback_error

    plan = plan_failover(conf(cluster_b), "A", group)
    assert plan.exact == {r0: 3} and plan.complete


# --- topology from topic names ------------------------------------------------------------


def test_topology_functions_on_a_fresh_cluster(kafka_factory: KafkaFactory) -> None:
    name = f"HOPS{uuid.uuid4().hex[:6]}"
    try:
        cluster = kafka_factory.cluster(name)
    except Exception as exc:  # e.g. only external clusters are available
        pytest.skip(f"cannot start a fresh cluster: {exc}")
    try:
        bootstrap = cluster.bootstrap_servers
        for topic in (
            "heartbeats",
            "B.heartbeats",
            "B.A.heartbeats",
            "B.checkpoints.internal",
            "B.orders",
            "local",
        ):
            ensure_topic(bootstrap, topic, 1)
        c = {"bootstrap.servers": bootstrap}
        assert heartbeat_topics(c) == {"heartbeats", "B.heartbeats", "B.A.heartbeats"}
        assert checkpoint_topics(c) == {"B.checkpoints.internal"}
        assert upstream_clusters(c) == {"A", "B"}
        assert replication_hops(c, "B") == 1
        assert replication_hops(c, "A") == 2
        assert replication_hops(c, "Z") == -1
        assert remote_topics(c) == {"B.heartbeats", "B.A.heartbeats", "B.orders"}
        assert remote_topics(c, "B") == {"B.heartbeats", "B.A.heartbeats", "B.orders"}
    finally:
        kafka_factory.remove(name)
