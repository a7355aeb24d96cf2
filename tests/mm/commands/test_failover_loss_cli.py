"""`mm failover`'s loss figure is never a misleading 0 (Apache Kafka).

(The second test: `mm status --serve` publishes what it saw of A, so a failover
after the mirror stopped still counts what A acknowledged since.)

The finding: a continuous mirror from A to B, 10 records acknowledged on A less than
a second before A froze. The mirror had not copied them, and the source ends it had
published did not include them, so `mm failover` printed "estimated loss: 0 offsets
not mirrored" although 10 acknowledged records never reached B.

Here A is the test's own broker, frozen with SIGSTOP right after the 10 records are
acknowledged. With A frozen the figure must be labelled a lower bound, with how long
before the failover A was last seen, never a bare 0; once A answers again it must be
exact, and equal to what A's log holds that B does not.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from support.clusters import KafkaCluster
from support.groups import run_mm
from support.mirror import (
    ContinuousMirror,
    create_topic,
    mirror_properties,
    read_topic,
    read_topic_committed,
    run_mirror_once,
    running_job,
    wait_for_records,
)

from mm.dr.failover_point import FailoverPoint
from mm.source.ends import decode_ends

pytestmark = pytest.mark.integration

FIRST = 20  # mirrored before the freeze
LATE = 10  # acknowledged on A just before it froze


def _wait_answers(bootstrap: str, timeout: float = 60.0) -> None:
    """Until the broker answers a metadata request again."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while True:
        try:
            admin.list_topics(timeout=2)
            return
        except KafkaException:
            assert time.monotonic() < deadline, f"{bootstrap} does not answer after SIGCONT"


def _to_end(bootstrap: str, topic: str) -> list[Any] | None:
    """Every record of the one-partition ``topic``, to its end (None: no such topic yet)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"mm-test-{uuid.uuid4().hex[:8]}",
            "enable.partition.eof": True,
        }
    )
    out = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        while True:
            msgs = consumer.consume(100, 5.0)
            assert msgs, f"no end of {topic}"
            for m in msgs:
                err = m.error()
                if err is not None and err.code() == KafkaError._PARTITION_EOF:
                    return out
                if err is not None and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    return None  # not created yet
                assert err is None, err
                out.append(m)
    finally:
        consumer.close()


def _newest_ends(bootstrap: str, topic: str, key: str) -> Any:
    """The newest mirror-ends record with ``key`` on B (None: none yet)."""
    mine = [m for m in _to_end(bootstrap, topic) or [] if m.key() == key.encode()]
    return decode_ends(mine[-1].value()) if mine else None


def _points(bootstrap: str, topic: str) -> list[FailoverPoint]:
    found = _to_end(bootstrap, topic)
    assert found is not None, f"no {topic} on {bootstrap}"
    return [FailoverPoint.decode(m.value()) for m in found]


def test_failover_loss_is_a_lower_bound_with_a_frozen_and_exact_when_a_answers(
    own_kafka: Callable[..., Any], cluster_b: KafkaCluster, tmp_path: Path
) -> None:
    broker = own_kafka()
    a, b = broker.bootstrap, cluster_b.bootstrap_servers
    tag = uuid.uuid4().hex[:8]
    topic, alias = f"fol-{tag}", f"A-{tag}"
    flow, remote = f"{alias}->B", f"{alias}.{topic}"
    ends_topic = f"mm-mirror-ends.{alias}.internal"
    points_topic = f"mm-failover-points.{alias}.internal"
    create_topic(a, topic, 1)
    producer = Producer({"bootstrap.servers": a, "linger.ms": 0})
    for i in range(FIRST):
        producer.produce(topic, f"first-{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    props = mirror_properties(
        tmp_path / "mm2.properties",
        a,
        b,
        [topic],
        state_dir=tmp_path / "state",
        extra={"mm.mirror.trigger.seconds": "2"},
        source_alias=alias,
    )
    # what `mm checkpoint` creates on B (no group of this test has checkpoints)
    create_topic(b, f"{alias}.checkpoints.internal", 1, {"cleanup.policy": "compact"})
    frozen = False
    try:
        mirror = ContinuousMirror(props, tmp_path)
        try:
            wait_for_records(b, remote, 1, read_topic(a, topic, 1), 240)
            deadline = time.monotonic() + 60
            while (seen := _newest_ends(b, ends_topic, flow)) is None or seen.ends.get(
                (topic, 0), 0
            ) < FIRST:
                assert mirror.proc.poll() is None, mirror.output()[-6000:]
                assert time.monotonic() < deadline, f"no mirror-ends of {FIRST} published: {seen}"
                time.sleep(0.2)
            # the finding: acknowledged, then A freezes before the mirror's next batch
            for i in range(LATE):
                producer.produce(topic, f"late-{i}".encode(), partition=0)
            assert producer.flush(30) == 0
            broker.freeze()
            frozen = True
            frozen_ms = int(time.time() * 1000)
        finally:
            mirror.close()  # SIGKILL to the whole process group: the mirror is stopped
        res = run_mm(props, "failover", "--groups", f"fol-none-{tag}", "--json")
        # no group has checkpoints (exit 1), yet the point is recorded
        assert res.returncode == 1, res.describe()
        point = json.loads(res.stdout)["failover_point"]
        text = run_mm(props, "failover", "--groups", f"fol-none-{tag}", "--dry-run")
    finally:
        if frozen:
            broker.thaw()
    print(f"A frozen: --json failover_point without partitions: "
          f"{ {k: v for k, v in point.items() if k != 'partitions'} }")  # fmt: skip
    print(f"A frozen: text: {text.stdout}")

    # the truth, from A's log (plain records: one offset each) and B's copy
    _wait_answers(a)
    del producer  # not left to reconnect to A after the test stops it
    on_a = read_topic(a, topic, 1)[0]
    on_b = {r.value for r in read_topic_committed(b, remote, 1)[0]}
    lost = [r for r in on_a if r.value not in on_b]
    assert len(on_a) == FIRST + LATE
    assert lost, "the mirror copied the late records before A froze: not the finding"
    assert [r.offset for r in lost] == list(range(len(on_a) - len(lost), len(on_a)))

    # A frozen: a lower bound, with when A was last seen, never a bare 0
    known = point["loss_offsets"]
    assert point["loss_kind"] == "lower_bound", point
    assert point["ends_seen_by"] == "mirror", point
    assert isinstance(known, int) and 0 <= known <= len(lost), (known, len(lost))
    age = point["ends_age_seconds"]
    assert point["ends_seen_ms"] <= frozen_ms, (point["ends_seen_ms"], frozen_ms)
    assert age == pytest.approx((point["recorded_ms"] - point["ends_seen_ms"]) / 1000, abs=0.01)
    assert age >= (point["recorded_ms"] - frozen_ms) / 1000 > 0, point
    assert point["recorded_in"] == points_topic
    assert text.returncode == 1, text.describe()
    out = text.stdout
    assert f"at least {known} offsets not mirrored ({known} known), a lower bound" in out, out
    shown_age = float(out.split(f"{alias} was last seen ")[1].split(" s before")[0])
    assert age <= shown_age < age + 60, out  # the dry run came later: older still
    assert (
        f"before the failover (by the mirror); records {alias} acknowledged after that are "
        "not counted" in out
    ), out
    assert "estimated loss: 0 offsets" not in out and "loss: 0 offsets" not in out, out
    # the point recorded on B keeps the figure's kind and age
    [recorded] = _points(b, points_topic)
    assert (recorded.loss_kind, recorded.loss_offsets) == ("lower_bound", known)
    assert recorded.ends_age_seconds == pytest.approx(age, abs=0.01)

    # A answers: the figure is exact, and is the truth
    res = run_mm(props, "failover", "--groups", f"fol-none-{tag}", "--json")
    assert res.returncode == 1, res.describe()
    point = json.loads(res.stdout)["failover_point"]
    print(f"A answering: --json failover_point without partitions: "
          f"{ {k: v for k, v in point.items() if k != 'partitions'} }")  # fmt: skip
    assert (point["loss_kind"], point["ends_seen_by"]) == ("exact", "source"), point
    assert point["loss_offsets"] == len(lost), (point, len(lost))
    assert [p["source_end_seen"] for p in point["partitions"]] == [FIRST + LATE]
    assert 0 <= point["ends_age_seconds"] < 30, point
    text = run_mm(props, "failover", "--groups", f"fol-none-{tag}", "--dry-run")
    print(f"A answering: text: {text.stdout}")
    assert f"loss: {len(lost)} offsets not mirrored, exact: {alias} answered" in text.stdout, (
        text.describe()
    )


def test_failover_counts_what_the_status_job_saw_after_the_mirror_stopped(
    own_kafka: Callable[..., Any], cluster_b: KafkaCluster, tmp_path: Path
) -> None:
    """The mirror stopped (here: one batch, then no more), `mm status --serve` kept
    reading A's ends: the lower bound counts the records A took since, by the status."""
    broker = own_kafka()
    a, b = broker.bootstrap, cluster_b.bootstrap_servers
    tag = uuid.uuid4().hex[:8]
    topic, alias = f"fos-{tag}", f"A-{tag}"
    flow = f"{alias}->B"
    ends_topic = f"mm-mirror-ends.{alias}.internal"
    create_topic(a, topic, 1)
    producer = Producer({"bootstrap.servers": a})
    for i in range(FIRST):
        producer.produce(topic, f"first-{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    props = mirror_properties(
        tmp_path / "mm2.properties", a, b, [topic], state_dir=tmp_path / "state",
        source_alias=alias,
    )  # fmt: skip
    create_topic(b, f"{alias}.checkpoints.internal", 1, {"cleanup.policy": "compact"})
    once = run_mirror_once(props)
    assert once.returncode == 0, once.describe()
    for i in range(LATE):  # never mirrored: the mirror does not run any more
        producer.produce(topic, f"late-{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    status = ("status", "--serve", "0", "--interval", "1")
    with running_job(props, tmp_path, status) as job:
        deadline = time.monotonic() + 120
        while (seen := _newest_ends(b, ends_topic, f"{flow}@status")) is None or seen.ends.get(
            (topic, 0)
        ) != FIRST + LATE:
            assert job.proc.poll() is None, job.output()[-6000:]
            assert time.monotonic() < deadline, f"the status job published no ends: {seen}"
            time.sleep(0.2)
    broker.freeze()
    try:
        frozen_ms = int(time.time() * 1000)
        res = run_mm(props, "failover", "--groups", f"fos-none-{tag}", "--json")
    finally:
        broker.thaw()
    assert res.returncode == 1, res.describe()  # no group has checkpoints
    point = json.loads(res.stdout)["failover_point"]
    assert (point["loss_kind"], point["ends_seen_by"]) == ("lower_bound", "status"), point
    assert point["loss_offsets"] == LATE, point
    assert point["ends_seen_ms"] <= frozen_ms and point["ends_age_seconds"] > 0, point
    [row] = point["partitions"]
    assert (row["mirrored_to"], row["source_end_seen"]) == (FIRST, FIRST + LATE), row
    _wait_answers(a)
    del producer
