"""Embedded clusters: the test fixtures, durable restarts and `mm embedded up|down|status`,
on the embedded broker (Tansu) and on Apache Kafka (`--broker kafka`)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from support.cli import MMProcess, run_mm
from support.clusters import KafkaCluster, KafkaFactory

from mm.embedded import EmbeddedCluster, EmbeddedClusters, procs

pytestmark = pytest.mark.integration


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=30)


def consume_values(bootstrap: str, topic: str, expected: int, timeout: float = 30.0) -> list[bytes]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])  # no group join (slow on the embedded broker)
    values: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(values) < expected and time.monotonic() < deadline:
            for msg in consumer.consume(500, timeout=0.5):
                assert msg.error() is None, msg.error()
                values.append(msg.value() or b"")
    finally:
        consumer.close()
    return values


def test_same_name_gives_the_same_cluster(
    kafka_factory: KafkaFactory, cluster_a: KafkaCluster, cluster_b: KafkaCluster
) -> None:
    assert kafka_factory.cluster("A") is cluster_a
    assert cluster_a.bootstrap_servers != cluster_b.bootstrap_servers


def test_clusters_are_independent(
    cluster_a: KafkaCluster, cluster_b: KafkaCluster, unique_topic: Callable[..., str]
) -> None:
    topic = unique_topic("only-on-a")
    create_topic(cluster_a.bootstrap_servers, topic)
    on_a = AdminClient({"bootstrap.servers": cluster_a.bootstrap_servers})
    on_b = AdminClient({"bootstrap.servers": cluster_b.bootstrap_servers})
    assert topic in on_a.list_topics(timeout=10).topics
    assert topic not in on_b.list_topics(timeout=10).topics


def test_confluent_kafka_produce_consume(
    cluster_a: KafkaCluster, unique_topic: Callable[..., str]
) -> None:
    topic = unique_topic("confluent")
    create_topic(cluster_a.bootstrap_servers, topic)
    producer = Producer({"bootstrap.servers": cluster_a.bootstrap_servers, "linger.ms": 5})
    sent = [f"v{i}".encode() for i in range(200)]
    for i, value in enumerate(sent):
        producer.produce(topic, key=str(i).encode(), value=value)
    assert producer.flush(30) == 0
    assert consume_values(cluster_a.bootstrap_servers, topic, len(sent)) == sent


def test_kafka_python_produce_consume(
    cluster_b: KafkaCluster, unique_topic: Callable[..., str]
) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTopicPartition

    topic = unique_topic("kafka-python")
    create_topic(cluster_b.bootstrap_servers, topic)
    producer = KafkaProducer(bootstrap_servers=cluster_b.bootstrap_servers)
    sent = [f"kp{i}".encode() for i in range(50)]
    for value in sent:
        producer.send(topic, value=value)
    producer.flush(timeout=30)
    producer.close()

    consumer = KafkaConsumer(
        bootstrap_servers=cluster_b.bootstrap_servers, enable_auto_commit=False
    )
    consumer.assign([KTopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < len(sent) and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got.extend(r.value for r in records)
    consumer.close()
    assert got == sent


def test_durable_cluster_keeps_data_across_restart(
    durable_cluster: Callable[[], EmbeddedCluster], unique_topic: Callable[..., str]
) -> None:
    cluster = durable_cluster()
    topic = unique_topic("durable")
    create_topic(cluster.bootstrap_servers, topic)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5})
    sent = [f"d{i}".encode() for i in range(1000)]
    for value in sent:
        producer.produce(topic, value=value)
    assert producer.flush(30) == 0
    del producer

    before = cluster.info()
    after = cluster.restart()
    assert after.bootstrap_servers == before.bootstrap_servers
    assert after.pid != before.pid
    assert before.pid is not None and not procs.pid_alive(before.pid)
    assert consume_values(cluster.bootstrap_servers, topic, len(sent)) == sent


def test_apache_kafka_cluster_keeps_data_across_kill_and_restart(tmp_path: Path) -> None:
    """The drill's `--disaster kill` on Apache Kafka: SIGKILL, restart on the same port,
    every acknowledged record there, in order."""
    with EmbeddedClusters(tmp_path, broker="kafka") as clusters:
        infos = clusters.start(("K",))
        assert infos["K"].profile == "kafka"
        cluster = clusters["K"]
        topic = "killed"
        create_topic(cluster.bootstrap_servers, topic)
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
        sent = [f"k{i}".encode() for i in range(500)]
        for value in sent:
            producer.produce(topic, value=value)
        assert producer.flush(30) == 0
        del producer
        before = cluster.info()
        proc = cluster.process
        assert proc is not None
        proc.kill()
        proc.wait(30)
        after = cluster.restart()
        assert after.bootstrap_servers == before.bootstrap_servers and after.pid != before.pid
        assert consume_values(cluster.bootstrap_servers, topic, len(sent)) == sent


@pytest.mark.parametrize("broker", ["tansu", "kafka"])
def test_brokers_die_with_a_killed_parent(tmp_path: Path, broker: str) -> None:
    # PR_SET_PDEATHSIG: even SIGKILL of the owner (no atexit) takes the brokers down.
    script = textwrap.dedent(
        f"""
        import json, time
        from mm.embedded import EmbeddedClusters
        from mm.logs import configure_logging
        configure_logging()  # logs to stderr: stdout carries the pids
        clusters = EmbeddedClusters({str(tmp_path)!r}, broker={broker!r})
        clusters.start(("P",))
        print(json.dumps([clusters["P"].pid]), flush=True)
        time.sleep(120)
        """
    )
    owner = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=tmp_path
    )
    try:
        assert owner.stdout is not None
        pids = json.loads(owner.stdout.readline())
        assert all(procs.pid_alive(pid) for pid in pids)
        owner.kill()
        owner.wait()
        assert procs.wait_gone(lambda: any(procs.pid_alive(p) for p in pids), 10)
    finally:
        owner.kill()
        owner.wait()


# --- the command line -------------------------------------------------------------


def state_pids(state_file: Path) -> list[tuple[int, int | None]]:
    state = json.loads(state_file.read_text())
    found = [c["proc"] for c in state["clusters"]]
    if state.get("moto"):
        found.append(state["moto"])
    return [(p["pid"], p["start_time"]) for p in found]


def all_gone(pids: list[tuple[int, int | None]], timeout: float = 15.0) -> bool:
    return procs.wait_gone(lambda: any(procs.pid_alive(p, s) for p, s in pids), timeout)


@pytest.fixture
def cli_dir(tmp_path: Path) -> Iterator[Path]:
    """A working directory for CLI runs; whatever they leave running is killed after."""
    yield tmp_path
    state_file = tmp_path / "state.json"
    if state_file.exists():
        procs.stop_pids(state_pids(state_file), grace=1.0)


@pytest.mark.parametrize(
    ("broker", "profile", "processes"), [("tansu", "embedded", 3), ("kafka", "kafka", 2)]
)
def test_cli_detach_status_down(cli_dir: Path, broker: str, profile: str, processes: int) -> None:
    state_file = cli_dir / "state.json"
    up = run_mm("embedded", "up", "--detach", "--durable", "--clusters", "A,B", "--broker", broker,
                "--state-file", str(state_file), cwd=cli_dir)  # fmt: skip
    assert up.returncode == 0, up.stderr
    lines = up.stdout.splitlines()
    assert [line.split()[0] for line in lines[:2]] == ["A", "B"]
    assert any(line.startswith("export MM_A__BOOTSTRAP_SERVERS=127.0.0.1:") for line in lines)
    assert f"export MM_B__MM_BROKER_PROFILE={profile}" in lines
    pids = state_pids(state_file)
    # two brokers, and for the embedded broker's durable storage the moto server
    assert len(pids) == processes

    status = run_mm("embedded", "status", "--state-file", str(state_file), cwd=cli_dir)
    assert status.returncode == 0, status.stdout + status.stderr
    assert status.stdout.count(" up ") == 2

    again = run_mm("embedded", "up", "--detach", "--state-file", str(state_file), cwd=cli_dir)
    assert again.returncode == 1 and "already" in again.stderr

    down = run_mm("embedded", "down", "--state-file", str(state_file), cwd=cli_dir)
    assert down.returncode == 0, down.stdout + down.stderr
    assert all_gone(pids)
    assert not state_file.exists()

    status = run_mm("embedded", "status", "--state-file", str(state_file), cwd=cli_dir)
    assert status.returncode == 1


@pytest.mark.parametrize(
    ("stop_with", "broker"), [("sigint", "tansu"), ("down", "tansu"), ("sigint", "kafka")]
)
def test_cli_foreground_up(cli_dir: Path, stop_with: str, broker: str) -> None:
    state_file = cli_dir / "state.json"
    up = MMProcess("embedded", "up", "--clusters", "A", "--broker", broker,
                   "--state-file", str(state_file),
                   cwd=cli_dir, stderr_path=cli_dir / "up.err")  # fmt: skip
    try:
        line = up.wait_for_line(lambda s: s.startswith("A "))
        bootstrap = line.split()[1]
        up.wait_for_line(lambda s: s.startswith("running"))
        pids = state_pids(state_file)
        assert AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)

        if stop_with == "sigint":
            up.proc.send_signal(signal.SIGINT)
        else:
            down = run_mm("embedded", "down", "--state-file", str(state_file), cwd=cli_dir)
            assert down.returncode == 0, down.stdout + down.stderr
        assert up.proc.wait(timeout=30) == 0
        assert all_gone(pids)
        assert not state_file.exists()
    finally:
        up.close()


def test_unique_names_are_valid_and_distinct(
    unique_topic: Callable[..., str], unique_group: Callable[..., str]
) -> None:
    first, second = unique_topic("orders"), unique_topic("orders")
    assert first != second and first.startswith("orders-unique-names-are-valid")
    assert unique_group().startswith("group-")
    assert all(c.isalnum() or c == "-" for c in first)
    assert len(first.rsplit("-", 1)[1]) == 8
