"""`mm heartbeat` + `mm mirror` + `mm status` end to end, on real brokers.

* heartbeats mirrored by a continuous mirror give a replication latency of a few
  trigger intervals; both metrics endpoints (status and mirror) serve the
  documented metrics; stopping the mirror raises the latency alert within two
  thresholds' time, restarting it clears the alert;
* checkpoint age alerts only for groups that moved since their newest checkpoint;
* source truncation (retention simulated by deleting the oldest log objects of a
  durable broker) is reported by `mm status` and counted by the mirror;
* an unreachable cluster is an alert, not a hang;
* two hops (A->B, B->C): heartbeat topic chains give upstream_clusters and
  replication_hops on C.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from mm_client.records import Checkpoint, Heartbeat
from mm_client.remote import heartbeat_topics, replication_hops, upstream_clusters
from status_support import (
    Background,
    Run,
    flow_of,
    partition_of,
    read_raw,
    run_mm,
    scrape_until,
    status,
    status_until,
    value,
    write_properties,
)
from support.apache_kafka import KRaftBroker, configs_cli
from support.clusters import KafkaCluster, KafkaFactory
from support.groups import commit_admin
from support.mirror import (
    ContinuousMirror,
    create_topic,
    partition_count,
    produce_batch,
    read_partition,
    topic_configs,
)

from mm.embedded import EmbeddedCluster, procs
from mm.metrics import METRICS

pytestmark = pytest.mark.integration

THRESHOLD_MS = 3000
STARTUP = 240.0  # a Spark session and the first micro-batch on a busy 2-core machine


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _alert_kinds(run: Run) -> list[str]:
    return [a["kind"] for a in run.json()["alerts"]]


def _exposed_names() -> set[str]:
    return {m.name for m in METRICS}


def test_heartbeat_latency_metrics_alert_on_stop_and_recovery(
    cluster_a: KafkaCluster,
    cluster_b: KafkaCluster,
    unique_topic: Callable[..., str],
    tmp_path: Path,
) -> None:
    a, b = cluster_a.bootstrap_servers, cluster_b.bootstrap_servers
    topic = unique_topic("hb")
    create_topic(a, topic, 2)
    for p in range(2):
        produce_batch(a, topic, p, 50, f"p{p}")
    mirror_port = procs.free_port()
    cfg = write_properties(
        tmp_path / "mm.properties",
        {"A": a, "B": b},
        {"A->B": f"{topic}, heartbeats"},
        state_dir=tmp_path / "state",
        extra={
            "emit.heartbeats.interval.seconds": "1",
            "mm.mirror.trigger.seconds": "0.5",
            "mm.alert.replication.latency.ms": str(THRESHOLD_MS),
            "mm.metrics.port": str(mirror_port),
            "mm.metrics.bind.address": "127.0.0.1",
        },
    )
    started_ms = _now_ms()
    (tmp_path / "m1").mkdir()
    (tmp_path / "m2").mkdir()
    heartbeat = Background(tmp_path, "heartbeat", "heartbeat", "-c", str(cfg), cwd=tmp_path)
    mirror = ContinuousMirror(cfg, tmp_path / "m1")
    serve: Background | None = None
    mirror2: ContinuousMirror | None = None
    try:
        # --- 1. running: latency from heartbeats, a few trigger intervals ------------------
        def healthy(run: Run) -> bool:
            if run.returncode != 0:
                return False
            f = flow_of(run.json(), "A->B")
            hb = f["heartbeats"]
            return (
                f["latency_method"] == "heartbeat"
                and hb["newest_timestamp_ms"] >= started_ms
                and all(p["lag"] == 0 for p in f["partitions"] if p["topic"] == topic)
            )

        run, _ = status_until(cfg, healthy, timeout=STARTUP)
        f = flow_of(run.json(), "A->B")
        assert f["latency_ms"] <= THRESHOLD_MS, run.describe()
        assert f["heartbeats"]["topic"] == "A.heartbeats"
        assert (f["heartbeats"]["newest_source"], f["heartbeats"]["newest_target"]) == ("A", "B")
        for p in range(2):
            part = partition_of(f, topic, p)
            assert part["target_topic"] == f"A.{topic}"
            assert part["position"] == part["log_end"] == 50
            assert (part["lag"], part["truncated"], part["source_reset"]) == (0, 0, False)
        assert run.json()["alerts"] == []

        # what reached B is MM2 heartbeats, in order, stamped when emitted on A
        beats = [(Heartbeat.from_bytes(k, v), ts) for k, v, ts in read_raw(b, "A.heartbeats")]
        mine = [(hb, ts) for hb, ts in beats if hb.timestamp >= started_ms]
        assert len(mine) >= 2
        assert all(
            (hb.source_cluster_alias, hb.target_cluster_alias) == ("A", "B") for hb, _ in mine
        )
        assert all(
            hb.timestamp == ts for hb, ts in mine
        )  # the record timestamp, kept by the mirror
        stamps = [hb.timestamp for hb, _ in mine]
        assert stamps == sorted(stamps)

        # --- metrics: `mm status --serve` and the running mirror ------------------------------
        # its port chosen now, not at the start: a port found free minutes before may be
        # some client's by now (a fresh-clone run: "Address already in use")
        status_port = procs.free_port()
        serve = Background(
            tmp_path,
            "status-serve",
            "status",
            "-c",
            str(cfg),
            "--serve",
            str(status_port),
            "--bind",
            "127.0.0.1",
            "--interval",
            "1",
            cwd=tmp_path,
        )
        got = scrape_until(
            f"http://127.0.0.1:{status_port}/metrics",
            lambda s: value(s, "mm_replication_latency_seconds", flow="A->B") is not None,
            60,
            serve.output,
        )
        flow = {"flow": "A->B", "source": "A", "target": "B"}
        assert value(got, "mm_status_up", **flow) == 1
        assert value(got, "mm_heartbeats_present", **flow) == 1
        latency = value(got, "mm_replication_latency_seconds", **flow)
        assert latency is not None and 0 <= latency < 3 * THRESHOLD_MS / 1000
        for pn in ("0", "1"):
            part = {**flow, "topic": topic, "partition": pn}
            assert value(got, "mm_record_lag", **part) == 0
            assert value(got, "mm_record_age_seconds", **part) == 0
            assert value(got, "mm_source_records_truncated", **part) == 0
            assert value(got, "mm_source_reset", **part) == 0
        assert value(got, "mm_offset_syncs_age_seconds", **flow) is not None
        collected = value(got, "mm_status_last_collect_timestamp_seconds")
        assert collected is not None and abs(collected - time.time()) < 60
        assert set(got) <= _exposed_names(), set(got) - _exposed_names()

        mirrored = scrape_until(
            f"http://127.0.0.1:{mirror_port}/metrics",
            lambda s: (value(s, "mm_records_mirrored_total", flow="A->B") or 0) >= 100,
            60,
            mirror.output,
        )
        assert (value(mirrored, "mm_bytes_mirrored_total", **flow) or 0) > 0
        assert (value(mirrored, "mm_mirror_batches_total", **flow) or 0) >= 1
        for pn in ("0", "1"):
            part = {**flow, "topic": topic, "partition": pn}
            assert value(mirrored, "mm_mirror_partition_lag", **part) == 0
            assert value(mirrored, "mm_mirror_partition_stopped", **part) == 0
        assert value(mirrored, "mm_source_records_lost_total", **flow) is None  # nothing lost
        assert set(mirrored) <= _exposed_names(), set(mirrored) - _exposed_names()

        # --- 2. mirror stopped: latency alert within two thresholds' time --------------------
        assert mirror.terminate() == 0, mirror.output()[-4000:]
        stopped = time.monotonic()

        def latency_alert(run: Run) -> bool:
            return run.returncode == 1 and "replication_latency" in _alert_kinds(run)

        run, started = status_until(cfg, latency_alert, timeout=60, interval=0.2)
        assert started - stopped <= 2 * THRESHOLD_MS / 1000, (
            f"alert seen {started - stopped:.1f}s after the mirror stopped"
        )
        assert _alert_kinds(run) == ["replication_latency"], run.describe()
        assert flow_of(run.json(), "A->B")["latency_ms"] > THRESHOLD_MS
        text = status(cfg)  # the table says the same, exit 1
        assert text.returncode == 1, text.describe()
        assert "[replication_latency] A->B" in text.stdout
        assert "mm.alert.replication.latency.ms=3000" in text.stdout

        # --- 3. mirror restarted: the alert clears ------------------------------------------
        mirror2 = ContinuousMirror(cfg, tmp_path / "m2")
        run, _ = status_until(cfg, lambda r: r.returncode == 0, timeout=STARTUP)
        f = flow_of(run.json(), "A->B")
        assert f["latency_method"] == "heartbeat" and f["latency_ms"] <= THRESHOLD_MS
        assert mirror2.terminate() == 0, mirror2.output()[-4000:]
        assert heartbeat.terminate() == 0, heartbeat.output()[-4000:]
        assert "written to heartbeats on A" in heartbeat.output()
    finally:
        for proc in (serve, heartbeat):
            if proc is not None:
                proc.close()
        mirror.close()
        if mirror2 is not None:
            mirror2.close()


def test_checkpoint_age_alerts_only_for_groups_that_moved(
    cluster_a: KafkaCluster,
    cluster_b: KafkaCluster,
    unique_topic: Callable[..., str],
    unique_group: Callable[..., str],
    tmp_path: Path,
) -> None:
    # cluster A under the alias S: S.checkpoints.internal on B is this test's own
    a, b = cluster_a.bootstrap_servers, cluster_b.bootstrap_servers
    topic = unique_topic("ckpt")
    create_topic(a, topic, 1)
    produce_batch(a, topic, 0, 40, "c")
    moved, idle = unique_group("moved"), unique_group("idle")
    # another flow's group (this flow's filters exclude it): its checkpoints share the
    # topic, and status neither reports it nor asks S for its offsets
    elsewhere = unique_group("elsewhere")
    admin = AdminClient({"bootstrap.servers": a})
    for group, offset in ((moved, 30), (idle, 20)):
        fut = admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, offset)])]
        )[group]
        fut.result(30)
    checkpoints = "S.checkpoints.internal"
    if partition_count(b, checkpoints) is None:
        create_topic(b, checkpoints, 1, {"cleanup.policy": "compact"})
    written = _now_ms() - 400_000  # both checkpointed 400 s ago, at upstream offset 20
    producer = Producer({"bootstrap.servers": b})
    for group in (moved, idle, elsewhere):
        cp = Checkpoint(group, f"S.{topic}", 0, 20, 20, "")
        producer.produce(checkpoints, cp.value_bytes(), cp.key_bytes(), 0, timestamp=written)
    assert producer.flush(30) == 0
    cfg = write_properties(
        tmp_path / "mm.properties",
        {"S": a, "B": b},
        {"S->B": topic},
        state_dir=tmp_path / "state",
        # only the checkpoint threshold matters here (S is never mirrored)
        extra={
            "mm.alert.replication.latency.ms": str(10**12),
            "mm.alert.record.lag": str(10**9),
            "S->B.groups.exclude": elsewhere,
        },
    )
    run = status(cfg, "--json")
    assert run.returncode == 1, run.describe()
    alerts = [a for a in run.json()["alerts"] if a["kind"] == "checkpoint_age"]
    assert len(alerts) == 1 and moved in alerts[0]["message"], run.describe()
    f = flow_of(run.json(), "S->B")
    groups = {g["group"]: g for g in f["groups"]}
    assert sorted(groups) == sorted([moved, idle]), f["groups"]
    assert groups[moved]["stale_partitions"] == 1
    assert groups[moved]["latency_ms"] >= 400_000
    assert groups[idle]["stale_partitions"] == 0 and groups[idle]["latency_ms"] == 0
    assert groups[idle]["newest_age_ms"] >= 400_000
    assert f["checkpoints_topic"] == checkpoints

    port = procs.free_port()
    serve = Background(
        tmp_path,
        "serve",
        "status",
        "-c",
        str(cfg),
        "--serve",
        str(port),
        "--bind",
        "127.0.0.1",
        cwd=tmp_path,
    )
    try:
        got = scrape_until(
            f"http://127.0.0.1:{port}/metrics",
            lambda s: value(s, "mm_checkpoint_age_seconds", group=moved) is not None,
            60,
            serve.output,
        )
        assert (value(got, "mm_checkpoint_latency_seconds", group=moved) or 0) >= 400
        assert value(got, "mm_checkpoint_latency_seconds", group=idle) == 0
        assert (value(got, "mm_checkpoint_age_seconds", group=idle) or 0) >= 400
        assert value(got, "mm_status_alerts", flow="S->B", kind="checkpoint_age") == 1
        assert serve.terminate() == 0
    finally:
        serve.close()


def _delete_log_objects_below(
    kafka_factory: KafkaFactory, cluster: EmbeddedCluster, topic: str, below: int
) -> list[int]:
    """Retention, simulated: delete the durable broker's batch objects of ``topic``
    whose base offset is below ``below``. Returns the base offsets deleted."""
    import boto3

    from mm.embedded.s3 import AWS_ENV

    moto = kafka_factory.embedded.moto
    assert moto is not None
    bucket = cluster.storage_engine.removeprefix("s3://").strip("/")
    s3 = boto3.client(
        "s3",
        endpoint_url=moto.endpoint,
        aws_access_key_id=AWS_ENV["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=AWS_ENV["AWS_SECRET_ACCESS_KEY"],
        region_name=AWS_ENV["AWS_DEFAULT_REGION"],
    )
    prefix = f"clusters/{cluster.name}/topics/{topic}/partitions/0000000000/records/"
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])]
    bases = sorted(int(k.rsplit("/", 1)[1].split(".")[0]) for k in keys if k.endswith(".batch"))
    assert bases, f"no log objects under {prefix} in bucket {bucket}"
    deleted = [base for base in bases if base < below]
    for base in deleted:
        s3.delete_object(Bucket=bucket, Key=f"{prefix}{base:020d}.batch")
    return deleted


def _produce_batches(bootstrap: str, topic: str, first: int, batches: int, size: int) -> None:
    """``batches`` separate batches of ``size`` records (values v<offset>)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    n = first
    for _ in range(batches):
        for _ in range(size):
            producer.produce(topic, f"v{n}".encode(), partition=0)
            n += 1
        assert producer.flush(30) == 0


def test_source_truncation_reported_by_status_and_counted_by_mirror(
    kafka_factory: KafkaFactory,
    durable_cluster: Callable[[], EmbeddedCluster],
    cluster_b: KafkaCluster,
    unique_topic: Callable[..., str],
    tmp_path: Path,
) -> None:
    """Tansu never runs retention and has no DeleteRecords, but a durable broker reads
    its log from S3 objects, one per batch: deleting the oldest ones is what
    retention does on Kafka (the log start moves up), on a real broker."""
    d = durable_cluster()
    src, b = d.bootstrap_servers, cluster_b.bootstrap_servers
    topic = unique_topic("trunc")
    create_topic(src, topic, 1)
    _produce_batches(src, topic, 0, 4, 5)  # offsets 0..19
    mirror_port = procs.free_port()
    cfg = write_properties(
        tmp_path / "mm.properties",
        {"D": src, "B": b},
        {"D->B": topic},
        state_dir=tmp_path / "state",
        extra={
            "emit.heartbeats.enabled": "false",
            "mm.alert.replication.latency.ms": str(10**12),  # only truncation matters here
            "mm.mirror.trigger.seconds": "0.5",
            "mm.metrics.port": str(mirror_port),
            "mm.metrics.bind.address": "127.0.0.1",
        },
    )
    once = run_mm("mirror", "-c", str(cfg), "--once", cwd=tmp_path, timeout=300)
    assert once.returncode == 0, once.describe()

    _produce_batches(src, topic, 20, 4, 5)  # offsets 20..39, not mirrored yet
    run = status(cfg, "--json")
    assert run.returncode == 0, run.describe()
    part = partition_of(flow_of(run.json(), "D->B"), topic, 0)
    assert (part["position"], part["log_end"], part["lag"], part["truncated"]) == (20, 40, 20, 0)
    assert "heartbeats are disabled" in " ".join(flow_of(run.json(), "D->B")["notes"])

    # retention deletes 0..34: 15 records (20..34) were never mirrored
    assert _delete_log_objects_below(kafka_factory, d, topic, 35) == [0, 5, 10, 15, 20, 25, 30]
    run = status(cfg, "--json")
    assert run.returncode == 1, run.describe()
    assert _alert_kinds(run) == ["source_truncated"], run.describe()
    part = partition_of(flow_of(run.json(), "D->B"), topic, 0)
    assert (part["log_start"], part["position"], part["truncated"], part["lag"]) == (35, 20, 15, 5)
    table = status(cfg)
    assert table.returncode == 1
    assert "15 source records deleted before they were mirrored" in table.stdout

    # the mirror skips to the log start and counts the loss (log event and metric)
    mirror = ContinuousMirror(cfg, tmp_path)
    try:
        got = scrape_until(
            f"http://127.0.0.1:{mirror_port}/metrics",
            lambda s: value(s, "mm_source_records_lost_total", topic=topic) is not None,
            STARTUP,
            mirror.output,
        )
        assert (
            value(got, "mm_source_records_lost_total", flow="D->B", topic=topic, partition="0")
            == 15
        )
        assert mirror.terminate() == 0, mirror.output()[-4000:]
        events = [
            line
            for line in mirror.output().splitlines()
            if "source records deleted before they were mirrored" in line
        ]
        assert len(events) == 1 and '"lost": 15' in events[0], events
    finally:
        mirror.close()
    run = status(cfg, "--json")
    assert run.returncode == 0, run.describe()
    part = partition_of(flow_of(run.json(), "D->B"), topic, 0)
    assert (part["position"], part["truncated"], part["lag"]) == (40, 0, 0)
    values = [r.value for r in read_partition(b, f"D.{topic}", 0)]
    assert values == [f"v{i}".encode() for i in [*range(20), *range(35, 40)]]


def test_unreachable_cluster_is_an_alert(cluster_a: KafkaCluster, tmp_path: Path) -> None:
    closed = f"127.0.0.1:{procs.free_port()}"  # nothing listens there
    cfg = write_properties(
        tmp_path / "mm.properties",
        {"A": cluster_a.bootstrap_servers, "B": closed},
        {"A->B": "nothing"},
        state_dir=tmp_path / "state",
    )
    run = status(cfg, "--json", "--timeout", "3", timeout=60)
    assert run.returncode == 1, run.describe()
    assert run.seconds < 30
    alert = run.json()["alerts"][0]
    assert alert["kind"] == "unavailable" and "target cluster B" in alert["message"]


def test_two_hops_upstream_clusters_and_replication_hops(
    own_kafka: Callable[..., KRaftBroker],
    unique_topic: Callable[..., str],
    tmp_path: Path,
) -> None:
    """A->B->C on three Apache Kafka clusters of the test's own: the shared ones hold
    other tests' heartbeat topics, which the mirror rightly carries along (and C would
    then name their aliases upstream too)."""
    brokers = [own_kafka(wait=False) for _ in range(3)]
    for broker in brokers:
        broker.wait_ready()
    a, b, c = (broker.bootstrap for broker in brokers)
    topic = unique_topic("hop")
    create_topic(a, topic, 1)
    produce_batch(a, topic, 0, 10, "h")
    cfg = write_properties(
        tmp_path / "mm.properties",
        {"A": a, "B": b, "C": c},
        {"A->B": topic, "B->C": f"A.{topic}"},
        state_dir=tmp_path / "state",
        extra={"mm.alert.replication.latency.ms": str(10**9)},
    )
    started_ms = _now_ms()
    hb = run_mm("heartbeat", "-c", str(cfg), "--once", cwd=tmp_path, timeout=120)
    assert hb.returncode == 0, hb.describe()
    assert "heartbeat A->B: 1 written to heartbeats on A" in hb.stdout
    assert "heartbeat B->C: 1 written to heartbeats on B" in hb.stdout
    for flow in ("A->B", "B->C"):  # in order: B->C then finds A.heartbeats on B
        run = run_mm("mirror", "-c", str(cfg), "--once", "--flow", flow, cwd=tmp_path, timeout=300)
        assert run.returncode == 0, run.describe()

    conf_c = {"bootstrap.servers": c}
    assert heartbeat_topics(conf_c) >= {"B.heartbeats", "B.A.heartbeats"}
    assert upstream_clusters(conf_c) == {"B", "A"}
    assert replication_hops(conf_c, "A") == 2
    assert replication_hops(conf_c, "B") == 1
    assert replication_hops(conf_c, "Z") == -1
    assert replication_hops({"bootstrap.servers": b}, "A") == 1
    assert partition_count(c, "B.A.heartbeats") == 1  # a real topic on C, as on A
    # the heartbeat emitted on A for A->B travelled both hops, byte for byte
    newest = Heartbeat.from_bytes(*read_raw(c, "B.A.heartbeats")[-1][:2])
    assert (newest.source_cluster_alias, newest.target_cluster_alias) == ("A", "B")
    assert newest.timestamp >= started_ms

    run = status(cfg, "--json")
    assert run.returncode == 0, run.describe()
    ab, bc = flow_of(run.json(), "A->B"), flow_of(run.json(), "B->C")
    assert ab["latency_method"] == bc["latency_method"] == "heartbeat"
    assert bc["heartbeats"]["topic"] == "B.heartbeats"
    assert partition_of(ab, topic, 0)["lag"] == 0
    assert partition_of(bc, f"A.{topic}", 0)["target_topic"] == f"B.A.{topic}"
    assert partition_of(bc, f"A.{topic}", 0)["lag"] == 0


def test_compacted_offset_syncs_topic_set_to_delete_as_its_warning_says(
    cluster_a: KafkaCluster,
    cluster_b: KafkaCluster,
    unique_topic: Callable[..., str],
    unique_group: Callable[..., str],
    tmp_path: Path,
) -> None:
    """An operator's way out followed: the offset-syncs topic created compacted (as
    MirrorMaker 2 creates it) makes `mm checkpoint` warn with a kafka-configs.sh command
    and `mm status` note it; that command run with Kafka's own tool, the next
    checkpoint run reads cleanup.policy=delete and the note is gone."""
    a, b = cluster_a.bootstrap_servers, cluster_b.bootstrap_servers
    tag = uuid.uuid4().hex[:8]
    source, target = f"S{tag}", f"T{tag}"  # the test's own offset-syncs and checkpoints topics
    flow, syncs = f"{source}->{target}", f"mm2-offset-syncs.{target}.internal"
    topic, group = unique_topic("cpol"), unique_group("cpol")
    create_topic(a, topic, 1)
    produce_batch(a, topic, 0, 40, "c")
    create_topic(a, syncs, 1, {"cleanup.policy": "compact"})
    commit_admin(a, group, topic, {0: 25})
    cfg = write_properties(
        tmp_path / "mm.properties",
        {source: a, target: b},
        {flow: topic},
        state_dir=tmp_path / "state",
        extra={f"{flow}.groups": group, "mm.alert.replication.latency.ms": str(10**12)},
    )
    mirrored = run_mm("mirror", "-c", str(cfg), "--once", cwd=tmp_path, timeout=300)
    assert mirrored.returncode == 0, mirrored.describe()

    def checkpoint() -> tuple[list[dict[str, Any]], list[str], Checkpoint]:
        """One `mm checkpoint --once`: its compaction warnings, the status notes on the
        offset-syncs topic, the group's newest checkpoint."""
        run = run_mm("checkpoint", "-c", str(cfg), "--once", cwd=tmp_path, timeout=300)
        assert run.returncode == 0, run.describe()
        events = [json.loads(e) for e in run.stderr.splitlines() if e.startswith("{")]
        warned = [e for e in events if e.get("topic") == syncs and "fix" in e]
        shown = status(cfg, "--json")
        notes = [n for n in flow_of(shown.json(), flow)["notes"] if syncs in n]
        records = [
            Checkpoint.from_bytes(k, v)
            for k, v, _ts in read_raw(b, f"{source}.checkpoints.internal")
        ]
        (newest,) = [c for c in records if c.consumer_group == group][-1:]
        return warned, notes, newest

    warned, notes, newest = checkpoint()
    assert len(warned) == 1 and "compacted" in warned[0]["event"], warned
    (note,) = notes
    assert "cleanup.policy=compact" in note and "set cleanup.policy=delete" in note, note
    assert (newest.topic, newest.upstream_offset, newest.downstream_offset) == (
        f"{source}.{topic}",
        25,
        25,
    )

    # the warning's command, as an operator fills it in: the cluster's bootstrap, and the
    # source topic's retention (the broker's default here: 7 days)
    fix = warned[0]["fix"].split()
    assert fix[:3] == ["kafka-configs.sh", "--bootstrap-server", f"<{source}>"], fix
    args = " ".join(fix[3:]).replace("<at least the source topics' retention>", "604800000")
    configs_cli(a, *args.split())
    assert topic_configs(a, syncs)["cleanup.policy"][0] == "delete"

    # the group moved on (inside what was mirrored): the next run must checkpoint it
    commit_admin(a, group, topic, {0: 35})
    warned, notes, newest = checkpoint()
    assert warned == [] and notes == []
    assert (newest.upstream_offset, newest.downstream_offset) == (35, 35)
