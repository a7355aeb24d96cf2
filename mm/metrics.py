"""Prometheus metrics of the toolkit: what `mm status --serve` and the mirror expose.

Names follow the Prometheus conventions (``mm_`` prefix, base units: seconds,
``_total`` for counters); meanings follow MirrorMaker 2's metrics where one
exists (MM2's ``replication-latency-ms`` is our ``mm_replication_latency_seconds``
x 1000, and so on). :data:`METRICS` is the catalogue; ``docs/metrics.md``
documents every entry and a unit test keeps the two (and
``deploy/alerts.yml``) in step.

* ``mm status --serve PORT``: :class:`StatusCollector` exposes the latest
  :class:`~mm.status.model.StatusReport` (refreshed by the command's loop; a
  scrape never queries Kafka, and series of partitions or groups that are gone
  disappear with the next report).
* ``mm mirror`` with ``mm.metrics.port`` set: :class:`MirrorCollector` exposes
  the running mirror's totals (:class:`~mm.source.job.FlowStats`), read at
  scrape time.
* ``mm run`` with ``mm.metrics.port`` set: the same, plus :class:`RunCollector`
  (each job's state and restarts).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from mm.errors import ConfigError

if TYPE_CHECKING:
    from mm.config import FlowConfig, MirrorConfig
    from mm.status.model import StatusReport

FLOW = ("flow", "source", "target")
PARTITION = (*FLOW, "topic", "partition")


@dataclass(frozen=True)
class MetricSpec:
    name: str  # as exposed (counters with their _total suffix)
    kind: str  # gauge or counter
    labels: tuple[str, ...]
    # "status" (mm status --serve), "mirror" (mm mirror or mm run, mm.metrics.port),
    # "run" (mm run, mm.metrics.port)
    origin: str
    help: str


METRICS: tuple[MetricSpec, ...] = (
    # --- mm status --serve -------------------------------------------------------------
    MetricSpec(
        "mm_status_up",
        "gauge",
        FLOW,
        "status",
        "1 when the flow's status could be read from both clusters, 0 when not.",
    ),
    MetricSpec(
        "mm_replication_latency_seconds",
        "gauge",
        FLOW,
        "status",
        "Now minus the timestamp of the newest heartbeat in <source>.heartbeats on the "
        "target (MM2 replication-latency-ms, in seconds); without heartbeats, the largest "
        "record age of the flow.",
    ),
    MetricSpec(
        "mm_heartbeats_present",
        "gauge",
        FLOW,
        "status",
        "1 when the latency comes from heartbeats, 0 when it is estimated from record age.",
    ),
    MetricSpec(
        "mm_record_lag",
        "gauge",
        PARTITION,
        "status",
        "Records behind: source log end (fetch high watermark) minus the mirror's position.",
    ),
    MetricSpec(
        "mm_record_age_seconds",
        "gauge",
        PARTITION,
        "status",
        "Age of the oldest source record not mirrored yet (MM2 record-age-ms, in seconds); "
        "0 when the partition is caught up.",
    ),
    MetricSpec(
        "mm_source_records_truncated",
        "gauge",
        PARTITION,
        "status",
        "Source records deleted before they were mirrored: log start minus the mirror's "
        "position while the position is below the log start.",
    ),
    MetricSpec(
        "mm_source_reset",
        "gauge",
        PARTITION,
        "status",
        "1 when the mirror's position is past the source log end (topic recreated or log "
        "truncated): records below the position would not be mirrored.",
    ),
    MetricSpec(
        "mm_checkpoint_age_seconds",
        "gauge",
        (*FLOW, "group"),
        "status",
        "Age of the group's newest record in <source>.checkpoints.internal on the target.",
    ),
    MetricSpec(
        "mm_checkpoint_latency_seconds",
        "gauge",
        (*FLOW, "group"),
        "status",
        "The checkpoint age while the group's committed offsets on the source differ from "
        "its newest checkpoints (MM2 checkpoint-latency-ms, in seconds); 0 when current.",
    ),
    MetricSpec(
        "mm_checkpoint_inexact_partitions",
        "gauge",
        (*FLOW, "group"),
        "status",
        "Partitions of the group whose last translation by the checkpoint job was "
        "conservative (maybe below the exact offset: a hole in the offset-syncs history); "
        "from the job's report, absent without one.",
    ),
    MetricSpec(
        "mm_offset_syncs_history_holes",
        "gauge",
        FLOW,
        "status",
        "Intervals of the checkpoint job's kept sync history that are not known complete "
        "(syncs compacted or deleted before they were read); from the job's report.",
    ),
    MetricSpec(
        "mm_offset_syncs_age_seconds",
        "gauge",
        FLOW,
        "status",
        "Age of the newest record in the flow's offset-syncs topic.",
    ),
    MetricSpec(
        "mm_status_alerts",
        "gauge",
        (*FLOW, "kind"),
        "status",
        "Alerts `mm status` raises now, per kind (replication_latency, record_lag, "
        "checkpoint_age, source_truncated, source_reset, clock_skew, unavailable).",
    ),
    MetricSpec(
        "mm_clock_skew_seconds",
        "gauge",
        FLOW,
        "status",
        "How far the furthest-ahead timestamp read for the flow (newest heartbeat or source "
        "record) is ahead of the status host's clock; 0 when none is.",
    ),
    MetricSpec(
        "mm_status_last_collect_timestamp_seconds",
        "gauge",
        (),
        "status",
        "Unix time at which the exposed status was collected.",
    ),
    # --- mm mirror (mm.metrics.port) ----------------------------------------------------
    MetricSpec(
        "mm_records_mirrored_total",
        "counter",
        FLOW,
        "mirror",
        "Records written to the target (committed) by this mirror process.",
    ),
    MetricSpec(
        "mm_bytes_mirrored_total",
        "counter",
        FLOW,
        "mirror",
        "Key and value bytes of the mirrored records (MM2 byte-count).",
    ),
    MetricSpec(
        "mm_source_records_lost_total",
        "counter",
        PARTITION,
        "mirror",
        "Source records the mirror found deleted (retention, DeleteRecords) before it "
        "could mirror them.",
    ),
    MetricSpec(
        "mm_mirror_batches_total",
        "counter",
        FLOW,
        "mirror",
        "Spark micro-batches the mirror completed.",
    ),
    MetricSpec(
        "mm_mirror_partition_lag",
        "gauge",
        PARTITION,
        "mirror",
        "Records between the mirror's committed position and the source end, read "
        "every 5 s while the mirror runs (and at each micro-batch's end).",
    ),
    MetricSpec(
        "mm_mirror_partition_stopped",
        "gauge",
        PARTITION,
        "mirror",
        "1 when the partition stopped on an error (e.g. a record too large for the target).",
    ),
    # --- mm run (mm.metrics.port) -------------------------------------------------------
    MetricSpec(
        "mm_job_up",
        "gauge",
        ("job",),
        "run",
        "1 while the job (mirror, checkpoint or heartbeat) of `mm run` is running, 0 while it "
        "is failed and waiting to restart, starting, or stopped.",
    ),
    MetricSpec(
        "mm_job_restarts_total",
        "counter",
        ("job",),
        "run",
        "Times `mm run` restarted the job after a failure.",
    ),
    MetricSpec(
        "mm_job_failures_in_a_row",
        "gauge",
        ("job",),
        "run",
        "Failures of the job since it last ran long enough to count as recovered; 0 when healthy.",
    ),
)

_SPECS = {m.name: m for m in METRICS}


def _family(name: str) -> Metric:
    spec = _SPECS[name]
    if spec.kind == "counter":
        return CounterMetricFamily(name, spec.help, labels=list(spec.labels))
    return GaugeMetricFamily(name, spec.help, labels=list(spec.labels))


def _s(ms: int | None) -> float | None:
    return None if ms is None else ms / 1000.0


# --- mm status -------------------------------------------------------------------------


class StatusCollector(Collector):
    """Exposes the latest status report (swap it in with :meth:`update`)."""

    def __init__(self) -> None:
        self._report: StatusReport | None = None
        self._lock = threading.Lock()

    def update(self, report: StatusReport) -> None:
        with self._lock:
            self._report = report

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            report = self._report
        if report is None:
            return
        fams = {m.name: _family(m.name) for m in METRICS if m.origin == "status"}

        def add(name: str, labels: list[str], value: float | None) -> None:
            if value is not None:
                fams[name].add_metric(labels, value)  # type: ignore[attr-defined]

        for f in report.flows:
            fl = [f.flow, f.source, f.target]
            add("mm_status_up", fl, 0.0 if f.error else 1.0)
            kinds: dict[str, int] = {}
            for a in report.alerts:
                if a.flow == f.flow:
                    kinds[a.kind] = kinds.get(a.kind, 0) + 1
            for kind, n in sorted(kinds.items()):
                add("mm_status_alerts", [*fl, kind], float(n))
            if f.error:
                continue
            add("mm_replication_latency_seconds", fl, _s(f.latency_ms))
            add("mm_heartbeats_present", fl, 1.0 if f.latency_method == "heartbeat" else 0.0)
            add("mm_clock_skew_seconds", fl, f.clock_skew_ms / 1000.0)
            add("mm_offset_syncs_age_seconds", fl, _s(f.offset_syncs_age_ms))
            holes = f.translation_holes
            add("mm_offset_syncs_history_holes", fl, None if holes is None else float(holes))
            for p in f.partitions:
                pl = [*fl, p.topic, str(p.partition)]
                add("mm_record_lag", pl, float(p.lag))
                add("mm_record_age_seconds", pl, _s(p.record_age_ms))
                add("mm_source_records_truncated", pl, float(p.truncated))
                add("mm_source_reset", pl, 1.0 if p.source_reset else 0.0)
            for g in f.groups:
                gl = [*fl, g.group]
                add("mm_checkpoint_age_seconds", gl, _s(g.newest_age_ms))
                add("mm_checkpoint_latency_seconds", gl, _s(g.latency_ms))
                if f.inexact_translations is not None:
                    add("mm_checkpoint_inexact_partitions", gl, float(g.inexact_partitions))
        add("mm_status_last_collect_timestamp_seconds", [], report.collected_at_ms / 1000.0)
        yield from fams.values()


# --- mm mirror -------------------------------------------------------------------------


class MirrorCollector(Collector):
    """Exposes running mirror totals: ``stats`` maps flow name -> FlowStats (read live)."""

    def __init__(self, flows: list[FlowConfig], stats: Mapping[str, Any]) -> None:
        self._flows = {f.name: f for f in flows}
        self._stats = stats

    def collect(self) -> Iterator[Metric]:
        fams = {m.name: _family(m.name) for m in METRICS if m.origin == "mirror"}
        for name, st in list(self._stats.items()):
            flow = self._flows.get(name)
            if flow is None:
                continue
            fl = [name, flow.source, flow.target]
            fams["mm_records_mirrored_total"].add_metric(fl, float(st.records))  # type: ignore[attr-defined]
            fams["mm_bytes_mirrored_total"].add_metric(fl, float(st.bytes))  # type: ignore[attr-defined]
            fams["mm_mirror_batches_total"].add_metric(fl, float(st.batches))  # type: ignore[attr-defined]
            lost: dict[tuple[str, int], int] = {}
            for topic, partition, lo, hi in set(st.lost_ranges):
                lost[(topic, partition)] = lost.get((topic, partition), 0) + max(0, hi - lo)
            for (topic, partition), n in sorted(lost.items()):
                fams["mm_source_records_lost_total"].add_metric(  # type: ignore[attr-defined]
                    [*fl, topic, str(partition)], float(n)
                )
            positions = dict(st.positions)
            ends = dict(getattr(st, "ends", {}) or {})
            errors = dict(st.errors)
            for (topic, partition), pos in sorted(positions.items()):
                pl = [*fl, topic, str(partition)]
                if (topic, partition) in ends:
                    lag = max(0, ends[(topic, partition)] - pos)
                    fams["mm_mirror_partition_lag"].add_metric(pl, float(lag))  # type: ignore[attr-defined]
                stopped = 1.0 if (topic, partition) in errors else 0.0
                fams["mm_mirror_partition_stopped"].add_metric(pl, stopped)  # type: ignore[attr-defined]
        yield from fams.values()


# --- mm run ----------------------------------------------------------------------------


class RunCollector(Collector):
    """Exposes the state of ``mm run``'s jobs (a :class:`~mm.run.state.RunState`)."""

    def __init__(self, state: Any) -> None:
        self._state = state

    def collect(self) -> Iterator[Metric]:
        fams = {m.name: _family(m.name) for m in METRICS if m.origin == "run"}
        for j in self._state.jobs():
            fams["mm_job_up"].add_metric([j.job], 1.0 if j.state == "running" else 0.0)  # type: ignore[attr-defined]
            fams["mm_job_restarts_total"].add_metric([j.job], float(j.restarts))  # type: ignore[attr-defined]
            fams["mm_job_failures_in_a_row"].add_metric([j.job], float(j.failures_in_a_row))  # type: ignore[attr-defined]
        yield from fams.values()


# --- serving -----------------------------------------------------------------------------


class MetricsServer:
    """A Prometheus text-format endpoint (any path) on ``addr:port``, in a daemon thread."""

    def __init__(self, registry: CollectorRegistry, port: int, addr: str = "0.0.0.0") -> None:
        self.registry = registry
        try:
            self._server, self._thread = start_http_server(port, addr, registry)
        except OSError as exc:
            raise ConfigError("metrics port", port, f"a free TCP port on {addr} ({exc})") from None
        self.port = int(self._server.server_port)
        self.addr = addr

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def serve_status(port: int, addr: str = "0.0.0.0") -> tuple[StatusCollector, MetricsServer]:
    registry = CollectorRegistry(auto_describe=True)
    collector = StatusCollector()
    registry.register(collector)
    return collector, MetricsServer(registry, port, addr)


METRICS_PORT_KEY = "metrics.port"
METRICS_ADDR_KEY = "metrics.bind.address"


def serve_mirror_metrics(
    cfg: MirrorConfig, flows: list[FlowConfig], stats: Mapping[str, Any]
) -> MetricsServer | None:
    """Serve the mirror's metrics on ``mm.metrics.port`` (None when that key is unset)."""
    return _serve_configured(cfg, "mirror", MirrorCollector(flows, stats))


def serve_run_metrics(
    cfg: MirrorConfig, flows: list[FlowConfig], stats: Mapping[str, Any], state: Any
) -> MetricsServer | None:
    """``mm run``'s endpoint on ``mm.metrics.port``: the mirror's metrics and the jobs'
    (None when that key is unset)."""
    return _serve_configured(cfg, "run", MirrorCollector(flows, stats), RunCollector(state))


def _serve_configured(cfg: MirrorConfig, what: str, *collectors: Collector) -> MetricsServer | None:
    port = cfg.setting(METRICS_PORT_KEY)
    if port is None:
        return None
    addr = cfg.setting(METRICS_ADDR_KEY)
    registry = CollectorRegistry(auto_describe=True)
    for c in collectors:
        registry.register(c)
    from mm.logs import get_logger

    server = MetricsServer(registry, port, addr)
    get_logger("mm.metrics").info(f"serving {what} metrics", port=server.port, address=addr)
    return server
