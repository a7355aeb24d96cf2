"""Fault 6: clock skew. Timestamps ahead of this host's clock never give a negative
or a healthy-looking age unnoticed: the flow reports the skew and where it was
seen, beyond 5 s it is a `clock_skew` alert (JSON, table, metrics); timestamps
far in the past are plain ages, 0 once a partition is caught up.

The unit tests check the rule; the integration test produces records 1 h ahead
and 30 days behind to a topic on an Apache Kafka source of its own, mirrors it once and reads
`mm status --json`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Producer
from status_support import flow_of, partition_of, status, write_properties
from support.apache_kafka import KRaftBroker
from support.clusters import KafkaCluster
from support.mirror import create_topic, run_mirror_once

from mm.metrics import StatusCollector
from mm.status.model import (
    CLOCK_SKEW_TOLERANCE_MS,
    FlowStatus,
    StatusReport,
    Thresholds,
    evaluate,
)

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS


def _flow() -> FlowStatus:
    return FlowStatus("A->B", "A", "B", 1_000_000, latency_ms=0, latency_method="heartbeat")


@pytest.mark.unit
def test_a_timestamp_ahead_is_skew_named_with_where_it_was_seen() -> None:
    f = _flow()
    now = 1_700_000_000_000
    f.saw_timestamp(now - 30 * DAY_MS, now, "old record")  # the past: no skew
    f.saw_timestamp(now + 2_000, now, "heartbeat")
    f.saw_timestamp(now + HOUR_MS, now, "orders[0] on A")
    f.saw_timestamp(now + 10, now, "later, smaller")
    assert (f.clock_skew_ms, f.clock_skew_where) == (HOUR_MS, "orders[0] on A")
    [alert] = evaluate(f, Thresholds())
    assert alert.kind == "clock_skew"
    assert alert.message.startswith("clock skew: orders[0] on A is 3600.0 s ahead")
    assert "expected clocks within 5 s" in alert.message
    assert (alert.value, alert.threshold) == (HOUR_MS, CLOCK_SKEW_TOLERANCE_MS)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("ahead", "alerted"), [(0, False), (CLOCK_SKEW_TOLERANCE_MS, False), (5_001, True)]
)
def test_skew_within_the_tolerance_is_reported_but_not_alerted(ahead: int, alerted: bool) -> None:
    f = _flow()
    f.saw_timestamp(1_000 + ahead, 1_000, "heartbeat")
    assert f.clock_skew_ms == ahead
    assert [a.kind for a in evaluate(f, Thresholds())] == (["clock_skew"] if alerted else [])


@pytest.mark.unit
def test_skew_is_in_the_json_and_the_metrics() -> None:
    f = _flow()
    f.saw_timestamp(HOUR_MS, 0, "heartbeat")
    report = StatusReport.build([f], Thresholds(), 0)
    doc = report.to_json()
    assert doc["ok"] is False
    assert doc["flows"][0]["clock_skew_ms"] == HOUR_MS
    assert [a["kind"] for a in doc["flows"][0]["alerts"]] == ["clock_skew"]
    collector = StatusCollector()
    collector.update(report)
    got = {fam.name: [(s.labels, s.value) for s in fam.samples] for fam in collector.collect()}
    assert got["mm_clock_skew_seconds"] == [
        ({"flow": "A->B", "source": "A", "target": "B"}, 3600.0)
    ]
    assert ({"flow": "A->B", "source": "A", "target": "B", "kind": "clock_skew"}, 1.0) in got[
        "mm_status_alerts"
    ]


@pytest.mark.integration
def test_status_with_records_an_hour_ahead_and_a_month_behind(
    own_kafka: Callable[..., KRaftBroker],
    cluster_b: KafkaCluster,
    unique_topic: Callable[..., str],
    tmp_path: Path,
) -> None:
    # a source of the test's own: the shared A's `heartbeats` topic holds other tests'
    # heartbeats, which the mirror carries to B, and their age is a latency alert
    a, b = own_kafka().bootstrap, cluster_b.bootstrap_servers
    topic = unique_topic("skew")
    # kept forever: Apache Kafka's retention (7 days by default) deletes a month-old
    # record at its first retention check, 30 s after the broker started
    create_topic(a, topic, 2, {"retention.ms": "-1"})
    now = time.time_ns() // 1_000_000
    producer = Producer({"bootstrap.servers": a})
    producer.produce(topic, b"future", partition=0, timestamp=now + HOUR_MS)
    producer.produce(topic, b"ancient", partition=1, timestamp=now - 30 * DAY_MS)
    assert producer.flush(30) == 0
    # the source under the alias SKEW: nothing of other tests on B under that name, so
    # the only alert can come from the skew
    cfg = write_properties(
        tmp_path / "mm.properties",
        {"SKEW": a, "B": b},
        {"SKEW->B": topic},
        state_dir=tmp_path / "s",
    )
    mirrored = run_mirror_once(cfg)
    assert mirrored.returncode == 0, mirrored
    asked_ms = time.time_ns() // 1_000_000
    run = status(cfg, "--json", "--timeout", "20", timeout=120)
    answered_ms = time.time_ns() // 1_000_000
    doc = run.json()
    flow = flow_of(doc, "SKEW->B")
    future, ancient = partition_of(flow, topic, 0), partition_of(flow, topic, 1)
    # caught up: a month-old record is no lag and no age
    assert (ancient["lag"], ancient["record_age_ms"]) == (0, 0)
    assert ancient["source_newest_age_ms"] >= 30 * DAY_MS
    # an hour ahead: clamped to 0, and said so
    assert (future["lag"], future["record_age_ms"], future["source_newest_age_ms"]) == (0, 0, 0)
    # the record's timestamp less this host's clock while `mm status` ran
    future_ts = now + HOUR_MS
    assert future_ts - answered_ms <= flow["clock_skew_ms"] <= future_ts - asked_ms
    assert flow["clock_skew_where"] == f"the newest record of {topic}[0] on SKEW"
    assert [a["kind"] for a in flow["alerts"]] == ["clock_skew"], run.describe()
    assert run.returncode == 1  # an alert: not shown as healthy
    numbers = [v for p in flow["partitions"] for v in p.values() if isinstance(v, int)]
    assert min(numbers) >= 0 and (flow["latency_ms"] or 0) >= 0
