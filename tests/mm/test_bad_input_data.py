"""Corrupt records in the internal topics, read by the commands that read them.

Raw bytes are produced into each internal topic of a flow on the embedded clusters
(the flow's aliases are unique to the module, so no other test reads these topics),
then the commands run as a user runs them. Each must name the record (topic,
partition, offset) and what it expected, go on with the records that are valid,
and never turn a corrupt record into an offset: a corrupt checkpoint leaves the
group's previous one in place, a corrupt heartbeat is not a latency, a corrupt
mirror-ends record leaves the loss unknown (never an older, smaller one), and a
corrupt failover point stops `mm failback` (an older point is another failover's).

The checkpoint job's reading of a corrupt offset sync is tested in
tests/mm/checkpoint/test_checkpoint_job.py (real job) and test_emitter.py (the hole).
"""

from __future__ import annotations

import json
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Producer
from mm_client.records import Checkpoint, Heartbeat
from support.clusters import KafkaCluster
from support.mirror import (
    create_topic,
    partition_count,
    read_partition,
    run_mirror_once,
)

from tests.support.cli import run_mm

pytestmark = pytest.mark.integration


@dataclass
class Flow:
    source: str
    target: str
    config: Path
    dir: Path

    @property
    def name(self) -> str:
        return f"{self.source}->{self.target}"


def _produce(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes | None]]) -> None:
    """Produce in order to partition 0; the offsets are 0, 1, ... on a new topic."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for key, value in records:
        p.produce(topic, value, key, partition=0)
        p.flush(30)


@pytest.fixture(scope="module")
def flow(
    cluster_a: KafkaCluster, cluster_b: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> Flow:
    tag = uuid.uuid4().hex[:6]
    source, target = f"S{tag}", f"T{tag}"
    d = tmp_path_factory.mktemp("bad-data")
    cfg = d / "mm.properties"
    cfg.write_text(
        "\n".join(
            [
                f"clusters = {source}, {target}",
                f"{source}.bootstrap.servers = {cluster_a.bootstrap_servers}",
                f"{target}.bootstrap.servers = {cluster_b.bootstrap_servers}",
                f"{source}->{target}.enabled = true",
                f"{source}->{target}.topics = orders-{tag}",
                f"mm.state.dir = {d / 'state'}",
                "",
            ]
        )
    )
    return Flow(source, target, cfg, d)


def _mm(flow: Flow, *args: str) -> subprocess.CompletedProcess[str]:
    return run_mm(*args, "-c", str(flow.config), cwd=flow.dir, timeout=120)


@pytest.fixture(scope="module")
def corrupt_checkpoints(flow: Flow, cluster_b: KafkaCluster) -> str:
    """``<source>.checkpoints.internal``: a valid checkpoint, then two corrupt records."""
    topic = f"{flow.source}.checkpoints.internal"
    create_topic(cluster_b.bootstrap_servers, topic, 1)
    good = Checkpoint("g1", f"{flow.source}.orders", 0, 10, 12)
    _produce(
        cluster_b.bootstrap_servers,
        topic,
        [
            (good.key_bytes(), good.value_bytes()),  # offset 0
            (good.key_bytes(), good.value_bytes()[:9]),  # 1: truncated, same key
            (b"\x00\x05g1", b"junk"),  # 2: key cut short
        ],
    )
    return topic


def test_translate_names_corrupt_checkpoints_and_keeps_the_valid_one(
    flow: Flow, corrupt_checkpoints: str
) -> None:
    run = _mm(flow, "translate", "--group", "g1", "--json")
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout)
    # the truncated record after it does not replace (nor drop) the valid checkpoint
    assert [(o["topic"], o["partition"], o["offset"]) for o in out["offsets"]] == [
        (f"{flow.source}.orders", 0, 12)
    ]
    assert out["skipped_records"] == 2
    assert [(s["partition"], s["offset"]) for s in out["skipped_at"]] == [(0, 1), (0, 2)]
    assert "Checkpoint value" in out["skipped_at"][0]["reason"]
    assert "Checkpoint key" in out["skipped_at"][1]["reason"]
    # a person reading stderr learns where and what was expected
    assert f"{corrupt_checkpoints}[0]@1" in run.stderr, run.stderr[-2000:]
    assert "expected MM2 Checkpoint records" in run.stderr


@pytest.fixture(scope="module")
def failover_run(
    flow: Flow, corrupt_checkpoints: str, cluster_b: KafkaCluster
) -> subprocess.CompletedProcess[str]:
    """`mm failover --dry-run` with a corrupt newest record in mm-mirror-ends after a
    valid one: the valid one is older, so the loss it gives would be too small."""
    topic = f"mm-mirror-ends.{flow.source}.internal"
    create_topic(cluster_b.bootstrap_servers, topic, 1)
    valid = json.dumps({"flow": flow.name, "time_ms": 1000, "ends": {"orders": {"0": 5}}})
    _produce(
        cluster_b.bootstrap_servers,
        topic,
        [(flow.name.encode(), valid.encode()), (flow.name.encode(), b'{"flow": ')],
    )
    return _mm(flow, "failover", "--group", "g1", "--dry-run", "--json")


def test_failover_names_corrupt_checkpoints_and_moves_to_the_valid_one(
    failover_run: subprocess.CompletedProcess[str], corrupt_checkpoints: str
) -> None:
    assert failover_run.returncode == 0, failover_run.stderr[-3000:]
    out = json.loads(failover_run.stdout)
    [group] = out["groups"]
    assert [p["after"] for p in group["partitions"]] == [12]
    assert [(s["partition"], s["offset"]) for s in out["skipped_at"]] == [(0, 1), (0, 2)]
    assert f"{corrupt_checkpoints}[0]@1" in failover_run.stderr


def test_failover_names_a_corrupt_mirror_ends_record_and_leaves_the_loss_unknown(
    flow: Flow, failover_run: subprocess.CompletedProcess[str]
) -> None:
    out = json.loads(failover_run.stdout)
    assert out["failover_point"]["ends_seen_ms"] is None  # not the older record's 1000
    events = [json.loads(x) for x in failover_run.stderr.splitlines() if x.startswith("{")]
    [bad] = [e for e in events if e.get("event", "").startswith("corrupt mirror-ends record")]
    assert (bad["topic"], bad["partition"], bad["offset"]) == (
        f"mm-mirror-ends.{flow.source}.internal",
        0,
        1,
    )
    assert "not a mirror-ends record" in bad["error"] and "JSON" in bad["expected"]


def test_failback_refuses_a_corrupt_failover_point_and_names_it(
    flow: Flow, cluster_b: KafkaCluster
) -> None:
    topic = f"mm-failover-points.{flow.source}.internal"
    create_topic(cluster_b.bootstrap_servers, topic, 1)
    _produce(cluster_b.bootstrap_servers, topic, [(flow.name.encode(), b"\x00\x01garbage")])
    run = _mm(flow, "failback", "--flow", flow.name, "--dry-run", "--quarantine-only")
    assert run.returncode == 1, run.stdout[-2000:] + run.stderr[-3000:]
    text = run.stdout + run.stderr
    assert f"{topic}[0] at offset 0" in text and "is corrupt" in text, text[-3000:]
    assert "Record the point again with `mm failover`" in text
    assert "Traceback" not in text


def test_status_names_corrupt_checkpoints_and_heartbeats(
    flow: Flow, corrupt_checkpoints: str, cluster_b: KafkaCluster
) -> None:
    # the mirror copies heartbeats as data: a corrupt one on the source arrives as is
    hb_topic = f"{flow.source}.heartbeats"
    create_topic(cluster_b.bootstrap_servers, hb_topic, 1)
    beat = Heartbeat.now(flow.source, flow.target)
    _produce(
        cluster_b.bootstrap_servers,
        hb_topic,
        [(beat.key_bytes(), beat.value_bytes()), (beat.key_bytes(), b"\xff\xff" + b"\x00" * 8)],
    )
    run = _mm(flow, "status", "--json")
    assert run.returncode in (0, 1), run.stderr[-3000:]  # 1: alerts, expected here
    assert "Traceback" not in run.stderr
    [st] = json.loads(run.stdout)["flows"]
    assert st["checkpoints_corrupt"] == 2
    notes = "\n".join(st["notes"])
    assert f"{corrupt_checkpoints}[0] offset 1 is not an MM2 checkpoint" in notes, notes
    assert f"{corrupt_checkpoints}[0] offset 2 is not an MM2 checkpoint" in notes
    assert f"newest record of {hb_topic}[0] (offset 1) is not an MM2 heartbeat" in notes
    assert "negative version" in notes
    # a corrupt newest heartbeat is no latency: the estimate falls back to record age
    assert st["latency_method"] != "heartbeat"


def test_two_flows_into_one_topic_are_refused_and_the_rest_mirrored(
    cluster_a: KafkaCluster,
    cluster_b: KafkaCluster,
    cluster_c: KafkaCluster,
    tmp_path: Path,
) -> None:
    """S->T and U->T with the identity policy would both write `orders-<tag>` on T: the
    topic is refused in both flows (the line names the target topic and both sources).
    Excluded from U->T as the refusal says (``U->T.topics.exclude``), the next run
    mirrors it from S alone, exactly."""
    tag = uuid.uuid4().hex[:6]
    s, u, t = f"S{tag}", f"U{tag}", f"T{tag}"
    orders, solo = f"orders-{tag}", f"solo-{tag}"
    for bootstrap, value in (
        (cluster_a.bootstrap_servers, b"s"),
        (cluster_c.bootstrap_servers, b"u"),
    ):
        create_topic(bootstrap, orders, 1)
        _produce(bootstrap, orders, [(b"k", value)] * 3)
    create_topic(cluster_a.bootstrap_servers, solo, 1)
    _produce(cluster_a.bootstrap_servers, solo, [(b"k", b"solo")] * 4)
    cfg = tmp_path / "mm.properties"
    cfg.write_text(
        "\n".join(
            [
                f"clusters = {s}, {u}, {t}",
                f"{s}.bootstrap.servers = {cluster_a.bootstrap_servers}",
                f"{u}.bootstrap.servers = {cluster_c.bootstrap_servers}",
                f"{t}.bootstrap.servers = {cluster_b.bootstrap_servers}",
                f"{s}->{t}.enabled = true",
                f"{s}->{t}.topics = {orders}, {solo}",
                f"{u}->{t}.enabled = true",
                f"{u}->{t}.topics = {orders}",
                "replication.policy.class = "
                "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
                f"mm.state.dir = {tmp_path / 'state'}",
                "spark.master = local[2]",
                "",
            ]
        )
    )
    run = run_mirror_once(cfg)
    assert run.returncode == 1, run.describe()
    refused = [ln for ln in run.stdout.splitlines() if ln.startswith(f"not mirrored: {orders}:")]
    assert refused, run.describe()
    want = (
        f"target topic {orders} on {t} would receive topic {orders} of {s} (flow {s}->{t}) "
        f"and topic {orders} of {u} (flow {u}->{t})"
    )
    assert all(want in ln for ln in refused), refused
    # nothing of either source in the shared name; the other topic mirrored in full
    assert partition_count(cluster_b.bootstrap_servers, orders) is None
    assert [r.value for r in read_partition(cluster_b.bootstrap_servers, solo, 0)] == [b"solo"] * 4

    # the way out: exclude it from all flows but one; run again, S's records alone
    cfg.write_text(cfg.read_text() + f"{u}->{t}.topics.exclude = {orders}\n")
    again = run_mirror_once(cfg)
    assert again.returncode == 0, again.describe()
    assert "would receive" not in again.stdout + again.stderr, again.describe()
    assert [r.value for r in read_partition(cluster_b.bootstrap_servers, orders, 0)] == [b"s"] * 3
    assert [r.value for r in read_partition(cluster_b.bootstrap_servers, solo, 0)] == [b"solo"] * 4
