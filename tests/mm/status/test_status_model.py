"""`mm status` without brokers: thresholds, alerts, rendering, metrics and their docs."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console

from mm.cli import build_parser
from mm.config import build_config
from mm.errors import ConfigError
from mm.metrics import METRICS, MirrorCollector, StatusCollector
from mm.source.job import FlowStats
from mm.status.model import (
    FlowStatus,
    GroupCheckpointStatus,
    HeartbeatStatus,
    PartitionStatus,
    StatusReport,
    Thresholds,
    evaluate,
)
from mm.status.render import duration, render

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
BASE = {
    "clusters": "A, B",
    "A.bootstrap.servers": "a:9092",
    "B.bootstrap.servers": "b:9092",
    "A->B.enabled": "true",
}


def _part(lag: int = 0, **kw: object) -> PartitionStatus:
    fields: dict[str, object] = {
        "topic": "orders",
        "partition": 0,
        "target_topic": "A.orders",
        "log_start": 0,
        "log_end": 100,
        "position": 100 - lag,
        "lag": lag,
    }
    fields.update(kw)
    return PartitionStatus(**fields)  # type: ignore[arg-type]


def _flow(**kw: object) -> FlowStatus:
    f = FlowStatus("A->B", "A", "B", 1_000_000, latency_ms=500, latency_method="heartbeat")
    for k, v in kw.items():
        setattr(f, k, v)
    return f


# --- thresholds -------------------------------------------------------------------------


def test_thresholds_default_and_from_mm_keys() -> None:
    assert Thresholds.from_config(build_config(BASE)) == Thresholds(30_000, 100_000, 300)
    cfg = build_config(
        BASE
        | {
            "mm.alert.replication.latency.ms": "3000",
            "mm.alert.record.lag": "10",
            "mm.alert.checkpoint.age.seconds": "60",
        }
    )
    t = Thresholds.from_config(cfg)
    assert t == Thresholds(3000, 10, 60)
    assert t.as_properties()["mm.alert.record.lag"] == 10


@pytest.mark.parametrize(
    ("key", "raw"),
    [
        ("mm.alert.replication.latency.ms", "soon"),
        ("mm.alert.record.lag", "-1"),
        ("mm.alert.checkpoint.age.seconds", "1.5"),
    ],
)
def test_invalid_threshold_names_the_key(key: str, raw: str) -> None:
    with pytest.raises(ConfigError) as err:
        Thresholds.from_config(build_config(BASE | {key: raw}))
    assert err.value.key == key


# --- evaluation ---------------------------------------------------------------------------

T = Thresholds(3000, 100, 60)


@pytest.mark.parametrize(
    ("flow", "kinds"),
    [
        (_flow(partitions=[_part(0)]), []),
        (_flow(latency_ms=3000), []),  # at the threshold: fine
        (_flow(latency_ms=3001), ["replication_latency"]),
        (_flow(latency_ms=9000, latency_method="record_age"), ["replication_latency"]),
        (_flow(latency_ms=None, latency_method=None), []),  # unknown is not an alert
        (_flow(partitions=[_part(101)]), ["record_lag"]),
        (_flow(partitions=[_part(100)]), []),
        (
            _flow(partitions=[_part(5, log_start=40, position=20, truncated=20)]),
            ["source_truncated"],
        ),
        (_flow(partitions=[_part(0, position=150, source_reset=True)]), ["source_reset"]),
        (_flow(groups=[GroupCheckpointStatus("g", 1, 61_000, 1, 61_000)]), ["checkpoint_age"]),
        # old but current: not an alert
        (_flow(groups=[GroupCheckpointStatus("g", 1, 900_000, 0, 0)]), []),
        (_flow(error="list topics on target cluster B: timed out"), ["unavailable"]),
        (
            _flow(latency_ms=5000, partitions=[_part(500), _part(0, partition=1)]),
            ["replication_latency", "record_lag"],
        ),
    ],
)
def test_evaluate(flow: FlowStatus, kinds: list[str]) -> None:
    assert [a.kind for a in evaluate(flow, T)] == kinds


def test_truncation_alert_says_which_offsets() -> None:
    (alert,) = evaluate(_flow(partitions=[_part(5, log_start=35, position=20, truncated=15)]), T)
    assert alert.message == (
        "orders[0]: 15 source records deleted before they were mirrored "
        "(offsets 20..34; log start 35)"
    )


def test_report_json_and_table() -> None:
    flow = _flow(
        latency_ms=4200,
        heartbeats=HeartbeatStatus("A.heartbeats", True, True, 1, "A", "B", 4200),
        partitions=[_part(7, record_age_ms=1500), _part(0, partition=1, record_age_ms=0)],
        groups=[GroupCheckpointStatus("billing", 2, 90_000, 1, 90_000)],
        checkpoints_topic="A.checkpoints.internal",
        checkpoints_present=True,
        offset_syncs_topic="mm2-offset-syncs.B.internal",
        offset_syncs_age_ms=2000,
    )
    report = StatusReport.build([flow], T, 1_000_000)
    doc = report.to_json()
    assert doc["ok"] is False
    assert [a["kind"] for a in doc["alerts"]] == ["replication_latency", "checkpoint_age"]
    assert doc["thresholds"] == {
        "mm.alert.replication.latency.ms": 3000,
        "mm.alert.record.lag": 100,
        "mm.alert.checkpoint.age.seconds": 60,
    }
    (f,) = doc["flows"]
    assert (f["max_lag"], f["total_lag"], f["truncated"]) == (7, 7, 0)
    assert len(f["alerts"]) == 2

    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(render(report))
    text = out.getvalue()
    assert "A->B  replication latency 4.2 s (heartbeats)  lag 7 records" in text
    assert "orders[0]" in text and "A.orders" in text and "0..100" in text
    assert "billing" in text and "1.5 min ago" in text
    assert "2 alert(s):" in text
    assert "[checkpoint_age] A->B: group billing" in text


def test_table_of_a_healthy_and_an_unavailable_flow() -> None:
    ok = _flow(partitions=[_part(0, record_age_ms=0)])
    down = FlowStatus("B->A", "B", "A", 0, error="list topics on source cluster B: timed out")
    out = io.StringIO()
    report = StatusReport.build([ok, down], T, 0)
    Console(file=out, width=200, color_system=None).print(render(report))
    text = out.getvalue()
    assert "B->A  UNAVAILABLE" in text
    assert "[unavailable] B->A: status of B->A unknown: list topics on source cluster B" in text
    healthy = StatusReport.build([ok], T, 0)
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(render(healthy))
    assert "no alerts (latency <= 3000 ms, lag <= 100" in out.getvalue()


@pytest.mark.parametrize(
    ("ms", "text"),
    [(None, "-"), (0, "0.0 s"), (1234, "1.2 s"), (90_000, "1.5 min"), (7_200_000, "2.0 h")],
)
def test_duration(ms: int | None, text: str) -> None:
    assert duration(ms) == text


# --- metrics ------------------------------------------------------------------------------


def _scrape(collector: object) -> dict[str, list[tuple[dict[str, str], float]]]:
    registry = CollectorRegistry()
    registry.register(collector)  # type: ignore[arg-type]
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for fam in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in fam.samples:
            out.setdefault(s.name, []).append((dict(s.labels), s.value))
    return out


def test_status_collector_exposes_the_report_in_seconds() -> None:
    collector = StatusCollector()
    assert _scrape(collector) == {}  # nothing before the first refresh
    flow = _flow(
        latency_ms=2500,
        partitions=[_part(3, record_age_ms=1200, truncated=0)],
        groups=[GroupCheckpointStatus("g1", 1, 400_000, 1, 400_000, inexact_partitions=1)],
        offset_syncs_age_ms=1000,
        translation_holes=3,
        inexact_translations=1,
    )
    collector.update(StatusReport.build([flow], Thresholds(1000, 1, 60), 1_700_000_000_000))
    got = _scrape(collector)
    fl = {"flow": "A->B", "source": "A", "target": "B"}
    part = {**fl, "topic": "orders", "partition": "0"}
    assert got["mm_status_up"] == [(fl, 1.0)]
    assert got["mm_replication_latency_seconds"] == [(fl, 2.5)]
    assert got["mm_heartbeats_present"] == [(fl, 1.0)]
    assert got["mm_record_lag"] == [(part, 3.0)]
    assert got["mm_record_age_seconds"] == [(part, 1.2)]
    assert got["mm_source_records_truncated"] == [(part, 0.0)]
    assert got["mm_source_reset"] == [(part, 0.0)]
    assert got["mm_checkpoint_age_seconds"] == [({**fl, "group": "g1"}, 400.0)]
    assert got["mm_checkpoint_latency_seconds"] == [({**fl, "group": "g1"}, 400.0)]
    assert got["mm_offset_syncs_age_seconds"] == [(fl, 1.0)]
    assert got["mm_offset_syncs_history_holes"] == [(fl, 3.0)]
    assert got["mm_checkpoint_inexact_partitions"] == [({**fl, "group": "g1"}, 1.0)]
    assert sorted((s[0]["kind"], s[1]) for s in got["mm_status_alerts"]) == [
        ("checkpoint_age", 1.0),
        ("record_lag", 1.0),
        ("replication_latency", 1.0),
    ]
    assert got["mm_status_last_collect_timestamp_seconds"] == [({}, 1_700_000_000.0)]
    assert set(got) == {m.name for m in METRICS if m.origin == "status"}


def test_status_collector_for_an_unavailable_flow() -> None:
    collector = StatusCollector()
    down = FlowStatus("A->B", "A", "B", 0, error="timed out")
    collector.update(StatusReport.build([down], T, 0))
    got = _scrape(collector)
    assert got["mm_status_up"][0][1] == 0.0
    assert got["mm_status_alerts"][0][0]["kind"] == "unavailable"
    assert "mm_record_lag" not in got


def test_mirror_collector_reads_flow_stats_live() -> None:
    cfg = build_config(BASE)
    stats = FlowStats(records=120, bytes=4096, batches=3)
    stats.positions = {("orders", 0): 90, ("orders", 1): 50}
    stats.ends = {("orders", 0): 100, ("orders", 1): 50}
    stats.errors = {("orders", 1): "record too large"}
    stats.lost_ranges = {("orders", 0, 20, 35), ("orders", 0, 40, 42)}
    stats.lost = 17
    collector = MirrorCollector(cfg.enabled_flows(), {"A->B": stats})
    got = _scrape(collector)
    fl = {"flow": "A->B", "source": "A", "target": "B"}
    p0 = {**fl, "topic": "orders", "partition": "0"}
    p1 = {**fl, "topic": "orders", "partition": "1"}
    assert got["mm_records_mirrored_total"] == [(fl, 120.0)]
    assert got["mm_bytes_mirrored_total"] == [(fl, 4096.0)]
    assert got["mm_mirror_batches_total"] == [(fl, 3.0)]
    assert got["mm_source_records_lost_total"] == [(p0, 17.0)]
    assert sorted(got["mm_mirror_partition_lag"], key=str) == sorted(
        [(p0, 10.0), (p1, 0.0)], key=str
    )
    assert sorted(got["mm_mirror_partition_stopped"], key=str) == sorted(
        [(p0, 0.0), (p1, 1.0)], key=str
    )
    stats.records += 5  # read at scrape time
    assert _scrape(collector)["mm_records_mirrored_total"] == [(fl, 125.0)]


def test_every_metric_is_documented_and_every_alert_uses_known_metrics() -> None:
    doc = (ROOT / "docs" / "metrics.md").read_text()
    for m in METRICS:
        assert f"| `{m.name}` | {m.kind} |" in doc, f"{m.name} not documented as a {m.kind}"
    names = {m.name for m in METRICS}
    for key in (
        "mm.alert.replication.latency.ms",
        "mm.alert.record.lag",
        "mm.alert.checkpoint.age.seconds",
        "mm.metrics.port",
    ):
        assert key in doc

    rules = yaml.safe_load((ROOT / "deploy" / "alerts.yml").read_text())
    used: set[str] = set()
    alerts = [r for g in rules["groups"] for r in g["rules"]]
    assert alerts
    for rule in alerts:
        assert rule["alert"].startswith("MM") and rule["alert"] in doc
        assert rule["labels"]["severity"] in ("warning", "critical")
        assert rule["annotations"]["summary"]
        used |= set(re.findall(r"\bmm_[a-z_]+", rule["expr"]))
    assert used <= names, used - names
    # every status and mirror metric that signals trouble has a rule
    assert {
        "mm_replication_latency_seconds",
        "mm_record_lag",
        "mm_checkpoint_latency_seconds",
        "mm_source_records_truncated",
        "mm_source_records_lost_total",
        "mm_status_up",
    } <= used


def test_cli_lists_the_commands() -> None:
    parser = build_parser()
    help_text = parser.format_help()
    assert "heartbeat" in help_text and "status" in help_text
    args = parser.parse_args(["status", "-c", "x.properties", "--json", "--serve", "9402"])
    assert (args.json, args.serve, args.watch) == (True, 9402, False)


def test_checkpoint_report_folds_into_status_text_json_and_metrics() -> None:
    from mm.checkpoint.snapshot import Report
    from mm.status.collect import apply_checkpoint_report

    flow = _flow(
        partitions=[_part()],
        groups=[
            GroupCheckpointStatus("g1", 2, 1000),
            GroupCheckpointStatus("g2", 1, 1000),
        ],
    )
    apply_checkpoint_report(flow, None, 0)  # no report: nothing claimed
    assert flow.translation_holes is None and flow.inexact_translations is None
    collector = StatusCollector()
    collector.update(StatusReport.build([flow], T, 0))
    got = _scrape(collector)
    assert "mm_offset_syncs_history_holes" not in got
    assert "mm_checkpoint_inexact_partitions" not in got

    report = Report(
        "A->B", 999_000, "mm2-offset-syncs.B.internal", "compact", holes=4, inexact={"g1": 2}
    )
    apply_checkpoint_report(flow, report, 1_000_000)
    assert (flow.translation_holes, flow.inexact_translations) == (4, 2)
    assert flow.checkpoint_report_age_ms == 1000
    assert [g.inexact_partitions for g in flow.groups] == [2, 0]
    assert flow.offset_syncs_cleanup_policy == "compact"
    notes = " ".join(flow.notes)
    assert "2 group partition(s) translated conservatively" in notes and "g1 (2)" in notes
    assert "mm2-offset-syncs.B.internal has cleanup.policy=compact" in notes
    assert "cleanup.policy=delete" in notes

    rep = StatusReport.build([flow], T, 0)
    assert rep.ok  # conservative translations never skip records: not an alert
    doc = rep.to_json()["flows"][0]
    assert doc["translation_holes"] == 4 and doc["inexact_translations"] == 2
    assert doc["offset_syncs_cleanup_policy"] == "compact"
    assert [g["inexact_partitions"] for g in doc["groups"]] == [2, 0]

    out = io.StringIO()
    Console(file=out, width=200).print(render(rep))
    text = out.getvalue()
    assert "2 conservative translation(s)" in text and "4 history hole(s)" in text
    assert "conservative" in text.split("checkpoints in")[1].splitlines()[1]  # column header

    collector.update(rep)
    got = _scrape(collector)
    fl = {"flow": "A->B", "source": "A", "target": "B"}
    assert got["mm_offset_syncs_history_holes"] == [(fl, 4.0)]
    assert sorted(got["mm_checkpoint_inexact_partitions"], key=str) == sorted(
        [({**fl, "group": "g1"}, 2.0), ({**fl, "group": "g2"}, 0.0)], key=str
    )
