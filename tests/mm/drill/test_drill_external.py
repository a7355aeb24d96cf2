"""`mm drill -c FILE` on clusters it did not start (the session's test clusters, standing
in for a user's): figures as on embedded clusters, and the user's topic, group and
brokers exactly as they were; nothing of the drill's left behind."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import NewTopic
from mm_client.kafka import new_admin, new_consumer, new_producer
from support.clusters import KafkaCluster, KafkaFactory

from mm.drill.report import from_json

pytestmark = pytest.mark.integration


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYSPARK_PYTHON"] = env.get("PYSPARK_PYTHON", sys.executable)
    env["PYSPARK_DRIVER_PYTHON"] = env.get("PYSPARK_DRIVER_PYTHON", sys.executable)
    return env


def _pid(factory: KafkaFactory, cluster: KafkaCluster) -> int | None:
    if cluster.kind != "embedded":
        return None
    proc = factory.embedded.clusters[cluster.name].process
    assert proc is not None and proc.poll() is None
    return proc.pid


def _state(bootstrap: str, topic: str, group: str) -> tuple[list[int], list[int]]:
    """(end offset, committed offset of ``group``) per partition of ``topic``."""
    consumer = new_consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        tps = [TopicPartition(topic, p) for p in range(3)]
        ends = [consumer.get_watermark_offsets(tp, timeout=30)[1] for tp in tps]
        committed = [tp.offset for tp in consumer.committed(tps, timeout=30)]
        return ends, committed
    finally:
        consumer.close()


def _names(bootstrap: str) -> tuple[set[str], set[str]]:
    admin = new_admin({"bootstrap.servers": bootstrap})
    topics = set(admin.list_topics(timeout=30).topics)
    groups = {g.group_id for g in admin.list_consumer_groups().result(30).valid}
    return topics, groups


def test_drill_on_user_clusters_touches_nothing_of_theirs_and_cleans_up(
    tmp_path: Path,
    kafka_factory: KafkaFactory,
    cluster_a: KafkaCluster,
    cluster_b: KafkaCluster,
    unique_topic: Callable[..., str],
    unique_group: Callable[..., str],
) -> None:
    a, b = cluster_a.bootstrap_servers, cluster_b.bootstrap_servers
    pids = (_pid(kafka_factory, cluster_a), _pid(kafka_factory, cluster_b))
    # the user's own topic, with records, and group, with committed offsets
    topic, group = unique_topic("orders"), unique_group("billing")
    admin = new_admin({"bootstrap.servers": a})  # kept: a destroyed admin fails its futures
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(30)
    producer = new_producer({"bootstrap.servers": a})
    for i in range(30):
        producer.produce(topic, f"order {i}".encode(), partition=i % 3)
    assert producer.flush(30) == 0
    committer = new_consumer({"bootstrap.servers": a, "group.id": group})
    offsets = [TopicPartition(topic, p, 4 + p) for p in range(3)]
    committer.commit(offsets=offsets, asynchronous=False)
    committer.close()
    before = _state(a, topic, group)

    config = tmp_path / "mm.properties"
    config.write_text(
        "clusters = A, B\n"
        f"A.bootstrap.servers = {a}\n"
        f"B.bootstrap.servers = {b}\n"
        "A->B.enabled = true\n"
        f"A->B.topics = {topic}\n"
        f"A->B.groups = {group}\n"
    )
    out = tmp_path / "drill"
    res = subprocess.run(
        [
            *(sys.executable, "-m", "mm", "drill", "-c", str(config), "--duration", "5"),
            *("--scenarios", "switchover,failover,failback", "--out", str(out)),
        ],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=900,
        check=False,
    )
    assert res.returncode == 0, res.stdout[-5000:] + res.stderr[-5000:]

    report = from_json((out / "drill-report.json").read_text())
    assert not report.embedded and report.clusters == {"A": a, "B": b}
    assert report.disaster.startswith("simulated")
    by_name = {s.name: s for s in report.scenarios}
    sw, fo, fb = by_name["switchover"], by_name["failover"], by_name["failback"]
    assert sw.passed, sw.reasons
    assert sw.loss.lost_records == 0 and sw.loss.acked_records > 0
    for g in sw.groups:
        assert (g.figures.processed_twice, g.figures.never_processed) == (0, 0), g
    assert fo.passed, fo.reasons
    # A still answers (only the drill's jobs died): every moved translation proven
    # on it by content, each at most conservative (a group committed after its
    # newest checkpoint reads those records again)
    assert fo.proof and fo.proof_message is None, (fo.proof, fo.proof_message)
    assert {r.status for r in fo.proof} <= {"proven", "conservative"}, fo.proof
    assert fb.passed, fb.reasons
    assert fb.loss.acked_records == fo.loss.lost_records
    # the failback compared A's records below the failover point with B's copies
    assert fb.content_compared is not None and fb.content_compared > 0, fb
    assert fb.content_differs == 0, fb

    # the brokers the drill did not start still run, the user's data as it was
    assert (_pid(kafka_factory, cluster_a), _pid(kafka_factory, cluster_b)) == pids
    assert _state(a, topic, group) == before

    # nothing of the run's is left: its mark is in each of its names
    mark = report.aliases["A"].removesuffix("-A")
    assert mark.startswith("drill-")
    deleted = report.cleanup["deleted"]
    assert f"A topic mm-{mark}-switchover" in deleted
    assert f"B group mm-{mark}-failover-keeping-up" in deleted
    assert f"B group __mm.mirror.{mark}-A.{mark}-B" in deleted
    assert "not deleted" not in report.cleanup
    for bootstrap in (a, b):
        topics, groups = _names(bootstrap)
        assert not {t for t in topics if mark in t}, topics
        assert not {g for g in groups if mark in g}, groups
    assert topic in _names(a)[0] and group in _names(a)[1]
    assert not (out / "mm.properties").exists()  # the copy of the connection settings
