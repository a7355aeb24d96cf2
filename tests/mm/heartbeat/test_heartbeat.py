"""`mm heartbeat`: MM2 heartbeats in each flow's source `heartbeats` topic.

Integration tests write to the session's cluster C (its `heartbeats` topic is
shared, so they look only at records stamped after they started; the mirror
tests' cluster A is left alone); unit tests cover the error path a broker
without authorization cannot produce.
"""

from __future__ import annotations

import itertools
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient
from mm_client.records import Heartbeat
from support.clusters import KafkaCluster
from support.mirror import partition_count, topic_configs

from mm.config import build_config
from mm.heartbeat.emitter import HeartbeatEmitter, HeartbeatWriteError, unwritable_message
from mm.logs import get_logger

ROOT = Path(__file__).resolve().parents[3]


def _props(path: Path, clusters: dict[str, str], lines: list[str]) -> Path:
    text = [f"clusters = {', '.join(clusters)}"]
    text += [f"{a}.bootstrap.servers = {b}" for a, b in clusters.items()]
    path.write_text("\n".join([*text, *lines]) + "\n")
    return path


def _mm(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mm", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _beats_since(bootstrap: str, since_ms: int) -> list[tuple[Heartbeat, int]]:
    """Heartbeats in `heartbeats`[0] stamped at or after ``since_ms``, with record timestamps."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"mm-test-hb-{time.monotonic_ns()}",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    out: list[tuple[Heartbeat, int]] = []
    try:
        consumer.assign([TopicPartition("heartbeats", 0, 0)])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for m in consumer.consume(10_000, 1.0):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        return [b for b in out if b[0].timestamp >= since_ms]
                    raise AssertionError(str(err))
                out.append((Heartbeat.from_bytes(m.key(), m.value()), m.timestamp()[1]))
        raise AssertionError("no end of heartbeats within 60s")
    finally:
        consumer.close()


@pytest.mark.integration
def test_once_writes_one_mm2_heartbeat_per_flow(
    cluster_a: KafkaCluster, cluster_b: KafkaCluster, cluster_c: KafkaCluster, tmp_path: Path
) -> None:
    # C is the source here: the mirror tests' cluster A gets no heartbeats topic from us
    c = cluster_c.bootstrap_servers
    cfg = _props(
        tmp_path / "mm.properties",
        {"A": cluster_a.bootstrap_servers, "B": cluster_b.bootstrap_servers, "C": c},
        [
            "C->A.enabled = true",
            "C->B.enabled = true",
            "B->C.enabled = true",
            "B->C.emit.heartbeats.enabled = false",
            "A->C.emit.heartbeats.enabled = true",  # declared, not enabled: no heartbeats
        ],
    )
    before = time.time_ns() // 1_000_000
    run = _mm("heartbeat", "-c", str(cfg), "--once", cwd=tmp_path)
    after = time.time_ns() // 1_000_000
    assert run.returncode == 0, run.stdout + run.stderr
    assert "heartbeat C->A: 1 written to heartbeats on C" in run.stdout
    assert "heartbeat C->B: 1 written to heartbeats on C" in run.stdout
    assert "heartbeat B->C: disabled (emit.heartbeats.enabled = false)" in run.stderr

    assert partition_count(c, "heartbeats") == 1
    assert topic_configs(c, "heartbeats")["cleanup.policy"][0] == "compact"
    beats = _beats_since(c, before)
    assert sorted((hb.source_cluster_alias, hb.target_cluster_alias) for hb, _ in beats) == [
        ("C", "A"),
        ("C", "B"),
    ]
    for hb, record_ts in beats:
        assert before <= hb.timestamp <= after
        assert record_ts == hb.timestamp


def _beats_if_any(bootstrap: str, since_ms: int) -> list[tuple[Heartbeat, int]]:
    """:func:`_beats_since`, or none while the job has not created `heartbeats` yet."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    if "heartbeats" not in admin.list_topics(timeout=10).topics:
        return []
    return _beats_since(bootstrap, since_ms)


@pytest.mark.integration
def test_runs_at_the_interval_until_sigterm(cluster_c: KafkaCluster, tmp_path: Path) -> None:
    cfg = _props(
        tmp_path / "mm.properties",
        {"C": cluster_c.bootstrap_servers, "B": "127.0.0.1:1"},
        ["C->B.enabled = true", "C->B.emit.heartbeats.interval.seconds = 1"],
    )
    before = time.time_ns() // 1_000_000
    proc = subprocess.Popen(
        [sys.executable, "-m", "mm", "heartbeat", "-c", str(cfg)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # wait for three beats rather than a fixed time: on a loaded machine the
        # process can take seconds to start, and that is not what is tested here
        deadline = time.monotonic() + 60
        while len(_beats_if_any(cluster_c.bootstrap_servers, before)) < 3:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "fewer than 3 heartbeats in 60 s"
            time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, out + err
    assert "heartbeats stopped on request" in err
    beats = [hb for hb, _ in _beats_since(cluster_c.bootstrap_servers, before)]
    assert all((hb.source_cluster_alias, hb.target_cluster_alias) == ("C", "B") for hb in beats)
    assert 3 <= len(beats) <= 6, [hb.timestamp for hb in beats]
    gaps = [b.timestamp - a.timestamp for a, b in itertools.pairwise(beats)]
    assert all(700 <= g <= 2500 for g in gaps), gaps
    assert f"heartbeat C->B: {len(beats)} written to heartbeats on C" in out


@pytest.mark.integration
def test_disabled_flows_say_so(cluster_c: KafkaCluster, tmp_path: Path) -> None:
    cfg = _props(
        tmp_path / "mm.properties",
        {"A": cluster_c.bootstrap_servers, "B": "127.0.0.1:1"},
        ["A->B.enabled = true", "emit.heartbeats.enabled = false"],
    )
    run = _mm("heartbeat", "-c", str(cfg), "--once", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "no flow emits heartbeats (emit.heartbeats.enabled = false)" in run.stderr
    run = _mm("heartbeat", "-c", str(cfg), "--once", "--flow", "A->B", cwd=tmp_path)
    assert run.returncode == 2
    assert "heartbeats are disabled for A->B (emit.heartbeats.enabled = false)" in run.stderr


@pytest.mark.integration
def test_entry_point_beside_the_spark_jobs(cluster_c: KafkaCluster, tmp_path: Path) -> None:
    cfg = _props(
        tmp_path / "mm.properties",
        {"C": cluster_c.bootstrap_servers, "B": "127.0.0.1:1"},
        ["C->B.enabled = true"],
    )
    run = subprocess.run(
        [sys.executable, str(ROOT / "spark_jobs" / "heartbeat.py"), "-c", str(cfg), "--once"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "heartbeat C->B: 1 written" in run.stdout


# --- unit: a source that refuses the write ------------------------------------------------


class _RefusingProducer:
    """Acknowledges every produce with ``code`` (what a broker with ACLs answers)."""

    def __init__(self, code: int) -> None:
        self.code = code
        self.callbacks: list[Callable[..., None]] = []

    def produce(self, *_args: Any, on_delivery: Callable[..., None], **_kw: Any) -> None:
        self.callbacks.append(on_delivery)

    def flush(self, _timeout: float = 0) -> int:
        for cb in self.callbacks:
            cb(KafkaError(self.code), None)
        self.callbacks.clear()
        return 0


def _emitter(monkeypatch: pytest.MonkeyPatch, code: int) -> HeartbeatEmitter:
    cfg = build_config(
        {"clusters": "A, B", "A.bootstrap.servers": "a:9092", "B.bootstrap.servers": "b:9092"}
        | {"A->B.enabled": "true"}
    )
    emitter = HeartbeatEmitter(cfg, cfg.enabled_flows(), log=get_logger("test"))
    producer = _RefusingProducer(code)
    monkeypatch.setattr(emitter, "_producer", lambda _cluster: producer)
    return emitter


@pytest.mark.unit
def test_unauthorized_source_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    emitter = _emitter(monkeypatch, KafkaError.TOPIC_AUTHORIZATION_FAILED)
    with pytest.raises(HeartbeatWriteError) as err:
        emitter.emit(emitter.flows)
    text = str(err.value)
    assert "not authorized to write heartbeats to topic heartbeats on cluster A" in text
    assert "WRITE and DESCRIBE on topic heartbeats" in text
    assert "emit.heartbeats.enabled = false for A->B" in text
    assert emitter.stats["A->B"].failed == 1


@pytest.mark.unit
def test_transient_failure_is_retried_not_fatal(monkeypatch: pytest.MonkeyPatch) -> None:
    emitter = _emitter(monkeypatch, KafkaError._MSG_TIMED_OUT)
    errors = emitter.emit(emitter.flows)
    assert errors["A->B"] is not None
    assert emitter.stats["A->B"].failed == 1 and emitter.stats["A->B"].emitted == 0


class _SlowProducer:
    """Its queue is full once; then records are queued and never answered in time."""

    def __init__(self) -> None:
        self.full = True
        self.queued = 0

    def produce(self, *_args: Any, **_kw: Any) -> None:
        if self.full:
            self.full = False
            raise BufferError("queue full")
        self.queued += 1

    def poll(self, _timeout: float = 0) -> int:
        return 0

    def flush(self, _timeout: float = 0) -> int:
        return self.queued


@pytest.mark.unit
def test_unacknowledged_heartbeats_are_reported_per_flow(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = build_config(
        {"clusters": "A, B", "A.bootstrap.servers": "a:9092", "B.bootstrap.servers": "b:9092"}
        | {"A->B.enabled": "true"}
    )
    emitter = HeartbeatEmitter(cfg, cfg.enabled_flows(), log=get_logger("test"))
    producer = _SlowProducer()
    monkeypatch.setattr(emitter, "_producer", lambda _cluster: producer)
    errors = emitter.emit(emitter.flows)
    assert producer.queued == 1  # a full queue is waited out, not reported
    assert errors == {"A->B": "1 heartbeats not acknowledged in time"}
    assert emitter.stats["A->B"].failed == 1


@pytest.mark.unit
def test_unwritable_messages() -> None:
    auth = unwritable_message("_AUTHENTICATION", "heartbeats", "A", "A->B", "bad password")
    assert "cannot authenticate to cluster A" in auth and "A.sasl.*" in auth
    other = unwritable_message("POLICY_VIOLATION", "heartbeats", "A", "A->B", "refused")
    assert other.startswith("cannot write heartbeats to topic heartbeats on cluster A: refused")
