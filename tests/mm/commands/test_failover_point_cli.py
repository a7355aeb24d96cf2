"""`mm failover` records the failover point on B, with A unreachable; `mm failback`
finds and quarantines what A holds past it once A is back.

A continuous mirror copies a 2-partition backlog 100 offsets per partition per
micro-batch and is killed (SIGKILL, whole process tree) part-way. `mm failover` then
runs with a config whose A answers nowhere: it reads only B, records where the mirror
stood and gives the loss from the source ends the mirror had seen, labelled a lower
bound. Here it must equal the records acknowledged on A that never reached B (all of
them were written before the mirror started).

A's alias is the test's own (``A-<tag>``): the failover points of a source are kept on
the shared B in one topic per source alias, which this test leaves without a point
and then with a corrupt one, as the refusals' ways out need.
"""

from __future__ import annotations

import json
import socket
import uuid
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from support.clusters import KafkaCluster
from support.eos import wait_for_batches
from support.groups import run_mm
from support.mirror import (
    ContinuousMirror,
    create_topic,
    mirror_properties,
    read_topic,
    read_topic_committed,
)

from mm.dr.failover_point import FailoverPoint

pytestmark = pytest.mark.integration

PARTITIONS = 2
PER_PARTITION = 1500


def _dead_address() -> str:
    """A loopback port nothing listens on (the source cluster is gone)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def _recorded(bootstrap: str, topic: str) -> list[bytes]:
    """The values of ``topic``'s records, in order (a failover point each, unless corrupt)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"mm-test-{uuid.uuid4().hex[:8]}",
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        }
    )
    points = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        while True:
            msgs = consumer.consume(100, 5.0)
            assert msgs, f"no end of {topic}"
            for m in msgs:
                err = m.error()
                if err is not None and err.code() == KafkaError._PARTITION_EOF:
                    return points
                assert err is None, err
                points.append(m.value())
    finally:
        consumer.close()


def _mirrored_to(point: bytes) -> dict[tuple[str, int], int | None]:
    return {(x.topic, x.partition): x.mirrored_to for x in FailoverPoint.decode(point).partitions}


def test_failover_records_the_point_and_the_loss_without_the_source(
    cluster_a: KafkaCluster, cluster_b: KafkaCluster, tmp_path: Path
) -> None:
    a, b = cluster_a.bootstrap_servers, cluster_b.bootstrap_servers
    tag = uuid.uuid4().hex[:8]
    topic, alias = f"fop-{tag}", f"A-{tag}"
    flow, remote = f"{alias}->B", f"{alias}.{topic}"
    points_topic = f"mm-failover-points.{alias}.internal"
    create_topic(a, topic, PARTITIONS)
    producer = Producer({"bootstrap.servers": a, "linger.ms": 20})
    for i in range(PER_PARTITION * PARTITIONS):
        producer.produce(topic, f"v{i}".encode(), f"k{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0  # every record acknowledged on A
    props = mirror_properties(
        tmp_path / "mm2.properties",
        a,
        b,
        [topic],
        state_dir=tmp_path / "state",
        extra={
            "mm.mirror.max.records.per.partition.per.batch": "100",
            "mm.mirror.trigger.seconds": "1",
        },
        source_alias=alias,
    )
    mirror = ContinuousMirror(props, tmp_path)
    try:
        alive = lambda: mirror.proc.poll() is None  # noqa: E731
        assert wait_for_batches(mirror.stderr_path, 3, 180, alive) >= 3, mirror.output()[-6000:]
    finally:
        mirror.close()  # SIGKILL to the whole process group: the disaster

    on_b = read_topic_committed(b, remote, PARTITIONS)
    missing = {p: PER_PARTITION - len(on_b[p]) for p in range(PARTITIONS)}
    assert sum(missing.values()) > 0, "the mirror finished before it was killed"

    # no failover point is recorded for this flow yet: failback cannot tell the divergence
    res = run_mm(props, "failback", "--quarantine-only", "--dry-run")
    assert res.returncode == 1, res.describe()
    assert (
        f"no failover point of {flow} is recorded on B: `mm failover` records one" in res.stderr
    ), res.describe()
    # the way out: `mm failover` (below, A unreachable) records one; failback then proceeds

    # what `mm checkpoint` creates on B (no group of this test has checkpoints)
    create_topic(b, f"{alias}.checkpoints.internal", 1, {"cleanup.policy": "compact"})
    # from now on A is unreachable
    dead = mirror_properties(
        tmp_path / "dead-a.properties",
        _dead_address(),
        b,
        [topic],
        state_dir=tmp_path / "state",
        source_alias=alias,
    )
    res = run_mm(dead, "failover", "--groups", f"fop-none-{uuid.uuid4().hex[:6]}", "--json")
    # no group has checkpoints (exit 1), yet the point is recorded: it is the flow's
    assert res.returncode == 1, res.describe()
    point = json.loads(res.stdout)["failover_point"]
    assert point["recorded_in"] == points_topic
    # A unreachable: against the ends the mirror published, so a lower bound
    assert (point["loss_kind"], point["ends_seen_by"]) == ("lower_bound", "mirror"), point
    assert point["ends_age_seconds"] >= 0, point
    rows = {r["partition"]: r for r in point["partitions"] if r["topic"] == topic}
    assert sorted(rows) == list(range(PARTITIONS))
    for p, row in rows.items():
        # plain records: offsets are records, the position is what B holds
        assert row["mirrored_to"] == len(on_b[p]), row
        assert row["source_end_seen"] == PER_PARTITION, row
        assert row["loss_offsets"] == missing[p], row
        assert row["target_topic"] == remote
        assert row["loss_seconds"] is None or 0 <= row["loss_seconds"] < 600, row
    if all(r["loss_seconds"] is not None for r in rows.values()):
        assert point["loss_seconds"] is not None

    [recorded] = [FailoverPoint.decode(v) for v in _recorded(b, points_topic)]
    assert recorded.flow == flow
    assert {x.partition: x.loss_offsets for x in recorded.partitions if x.topic == topic} == missing

    # the text form says the same; --dry-run records nothing more
    text = run_mm(dead, "failover", "--groups", "fop-none-x", "--dry-run")
    lost = sum(missing.values())
    assert (
        f"loss: at least {lost} offsets not mirrored ({lost} known), a lower bound: {alias} "
        "was last seen" in text.stdout
    ), text.describe()
    for p in range(PARTITIONS):
        assert (
            f"{topic}[{p}]: mirrored up to {len(on_b[p])}, source end seen {PER_PARTITION} "
            f"({missing[p]} offsets behind, or more)" in text.stdout
        ), text.describe()
    assert "failover point (dry run, not recorded)" in text.stdout
    assert len(_recorded(b, points_topic)) == 1

    # A is back, and took 10 more records on partition 0 after the disaster
    late = Producer({"bootstrap.servers": a})
    for i in range(10):
        late.produce(topic, f"late{i}".encode(), b"late", partition=0)
    assert late.flush(30) == 0
    diverged = {0: missing[0] + 10, 1: missing[1]}

    # step 1 alone: this flow has no reverse flow B->A (test_failback_cli runs all 3)
    dry = run_mm(props, "failback", "--quarantine-only", "--dry-run", "--json")
    assert dry.returncode == 0, dry.describe()
    report = json.loads(dry.stdout)
    rows = {r["partition"]: r for r in report["partitions"] if r["topic"] == topic}
    assert {p: r["records"] for p, r in rows.items()} == diverged
    for p, r in rows.items():
        assert r["failover_at"] == len(on_b[p]) and r["first_offset"] == len(on_b[p])
        assert r["last_offset"] == PER_PARTITION + (10 if p == 0 else 0) - 1
    assert report["quarantine"] is None

    # the newest point of the flow is corrupt: refused, never an older point used
    corrupt = b"{not a failover point"
    writer = Producer({"bootstrap.servers": b})
    writer.produce(points_topic, corrupt, flow.encode(), partition=0)
    assert writer.flush(30) == 0
    quarantine = tmp_path / "quarantine"
    failback = ("failback", "--quarantine-only", "--quarantine-dir", str(quarantine))
    res = run_mm(props, *failback)
    assert res.returncode == 1, res.describe()
    assert f"the newest failover point of {flow} in {points_topic}[0] at offset 1" in res.stderr
    assert "is corrupt" in res.stderr, res.describe()
    assert "Record the point again with `mm failover`" in res.stderr, res.describe()
    assert not quarantine.exists()
    # the way out, as printed: `mm failover` records the point again (from B's mirror
    # position, unchanged), then the failback again quarantines exactly the divergence
    res = run_mm(props, "failover", "--groups", f"fop-none-{tag}", "--json")
    assert res.returncode == 1, res.describe()  # no group has checkpoints, as above
    first, bad, again = _recorded(b, points_topic)
    assert bad == corrupt and FailoverPoint.decode(again).flow == flow
    assert _mirrored_to(again) == _mirrored_to(first) == {(topic, p): len(on_b[p]) for p in on_b}
    real = run_mm(props, *failback)
    assert real.returncode == 0, real.describe()
    assert f"{sum(diverged.values())} divergent records on A" in real.stdout
    assert f"quarantined in {quarantine}" in real.stdout
    source = read_topic(a, topic, PARTITIONS)
    for p in range(PARTITIONS):
        table = pq.read_table(quarantine / f"{topic}-{p}.parquet").to_pylist()
        # exactly A's records from the failover point on: keys, values, offsets
        want = [r for r in source[p] if r.offset >= len(on_b[p])]
        assert [(r["offset"], r["key"], r["value"]) for r in table] == [
            (r.offset, r.key, r.value) for r in want
        ]
        assert all(r["topic"] == topic and r["partition"] == p for r in table)
