"""What `mm status` reports, and when a number breaks a threshold (pure; no I/O).

Definitions (times in ms since the epoch, ages relative to the moment of the read):

* **replication latency** of flow X->Y: ``now - timestamp`` of the newest
  heartbeat in ``X.heartbeats`` on Y (MM2's meaning of ``replication-latency-ms``
  measured end to end, heartbeat emission included, so it is at most one
  ``emit.heartbeats.interval.seconds`` above the true latency). Without
  heartbeats it falls back to the largest **record age** of the flow.
* **record lag** of a source partition: its log end (the high watermark of a
  fetch) minus the mirror's position (the next source offset to mirror, the
  state group's committed offset on Y); the whole retained log when the mirror
  never committed a position.
* **record age** of a source partition (MM2's ``record-age-ms``: the age of a
  record when the mirror takes it): ``now -`` the timestamp of the oldest record
  not mirrored yet, 0 when nothing is waiting.
* **truncated**: records the source deleted (retention, DeleteRecords) before
  the mirror reached them, ``log start - position`` while the position is below
  the log start. **source reset**: the position is past the source's log end
  (the topic was recreated, or its log truncated by an unclean leader election),
  so new records below the position would not be mirrored.
* **checkpoint age** of a group: age of the newest record of the group in
  ``X.checkpoints.internal`` on Y (the record's own timestamp). Checkpoints are
  written only when a group moves, so an old checkpoint alone is normal; the
  group is **stale** when its committed offsets on X differ from what its
  newest checkpoints say, and only then does the age count as **checkpoint
  latency** (MM2's ``checkpoint-latency-ms``) and against the threshold.
* **clock skew**: a timestamp read for the flow (the newest heartbeat, the newest
  record of a source partition) that lies ahead of this host's clock. Its age is
  clamped to 0, so a latency computed from it would read as healthy: the flow
  reports how far ahead (``clock_skew_ms``) and where it was seen, and beyond
  :data:`CLOCK_SKEW_TOLERANCE_MS` that is a ``clock_skew`` alert. Timestamps far in
  the past are ages like any other: a caught-up partition has record age 0
  whatever its records' timestamps say.
* **conservative translations** (per group) and **history holes**: from the
  checkpoint job's report (``report.json`` in its state directory, when this
  process can read ``mm.state.dir``): group partitions whose last translation
  may be below the exact offset because the offset-syncs history has a hole
  there (their consumers would re-read records at failover, never skip), and
  the number of such holes kept; see ``docs/offset-syncs.md``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from mm.config import MirrorConfig
from mm.config.settings import SETTINGS

# a timestamp further ahead of this host's clock than this is a clock_skew alert
# (heartbeats are written every second by default; NTP keeps hosts within ms)
CLOCK_SKEW_TOLERANCE_MS = 5000

# mm.* keys (without the prefix) and defaults
LATENCY_KEY = "alert.replication.latency.ms"
RECORD_LAG_KEY = "alert.record.lag"
CHECKPOINT_AGE_KEY = "alert.checkpoint.age.seconds"
DEFAULT_LATENCY_MS: int = SETTINGS[LATENCY_KEY].default
DEFAULT_RECORD_LAG: int = SETTINGS[RECORD_LAG_KEY].default
DEFAULT_CHECKPOINT_AGE_S: int = SETTINGS[CHECKPOINT_AGE_KEY].default


@dataclass(frozen=True)
class Thresholds:
    """Alert thresholds; a value strictly above one is a breach."""

    replication_latency_ms: int = DEFAULT_LATENCY_MS
    record_lag: int = DEFAULT_RECORD_LAG
    checkpoint_age_seconds: int = DEFAULT_CHECKPOINT_AGE_S

    @classmethod
    def from_config(cls, cfg: MirrorConfig) -> Thresholds:
        return cls(
            cfg.setting(LATENCY_KEY),
            cfg.setting(RECORD_LAG_KEY),
            cfg.setting(CHECKPOINT_AGE_KEY),
        )

    def as_properties(self) -> dict[str, int]:
        return {
            f"mm.{LATENCY_KEY}": self.replication_latency_ms,
            f"mm.{RECORD_LAG_KEY}": self.record_lag,
            f"mm.{CHECKPOINT_AGE_KEY}": self.checkpoint_age_seconds,
        }


@dataclass
class PartitionStatus:
    """One source partition of the flow and its mirror on the target."""

    topic: str
    partition: int
    target_topic: str
    log_start: int
    log_end: int
    # next source offset to mirror (the state group's commit), None if never mirrored
    position: int | None
    lag: int
    record_age_ms: int | None = None
    truncated: int = 0
    source_reset: bool = False
    # age of the newest record on each side (record timestamps), None if empty/unknown
    source_newest_age_ms: int | None = None
    target_newest_age_ms: int | None = None


@dataclass
class GroupCheckpointStatus:
    """The newest checkpoints of one consumer group in ``X.checkpoints.internal``."""

    group: str
    partitions: int
    newest_age_ms: int | None
    # partitions whose source committed offset differs from the newest checkpoint's
    stale_partitions: int = 0
    # the age while stale, else 0 (what the threshold applies to)
    latency_ms: int = 0
    # partitions translated conservatively (maybe below exact) in the checkpoint
    # job's last round, from its report
    inexact_partitions: int = 0


@dataclass
class HeartbeatStatus:
    topic: str  # X.heartbeats, on the target
    emit_enabled: bool
    present: bool = False
    newest_timestamp_ms: int | None = None
    newest_source: str | None = None
    newest_target: str | None = None
    age_ms: int | None = None


@dataclass
class FlowStatus:
    flow: str
    source: str
    target: str
    collected_at_ms: int
    error: str | None = None
    latency_ms: int | None = None
    # "heartbeat", "record_age" (fallback) or None when unknown
    latency_method: str | None = None
    heartbeats: HeartbeatStatus | None = None
    partitions: list[PartitionStatus] = field(default_factory=list)
    checkpoints_enabled: bool = True
    checkpoints_topic: str | None = None
    checkpoints_present: bool = False
    checkpoints_corrupt: int = 0
    groups: list[GroupCheckpointStatus] = field(default_factory=list)
    offset_syncs_topic: str | None = None
    offset_syncs_cluster: str | None = None
    offset_syncs_age_ms: int | None = None
    # from the checkpoint job's report; None when no report was found
    offset_syncs_cleanup_policy: str | None = None
    translation_holes: int | None = None
    inexact_translations: int | None = None
    checkpoint_report_age_ms: int | None = None
    # how far the furthest-ahead timestamp read for the flow is ahead of this host's
    # clock (0: none ahead), and which one it was
    clock_skew_ms: int = 0
    clock_skew_where: str | None = None
    notes: list[str] = field(default_factory=list)

    def saw_timestamp(self, timestamp_ms: int, now_ms: int, where: str) -> None:
        """Note a timestamp read for the flow; one ahead of ``now_ms`` is clock skew."""
        ahead = timestamp_ms - now_ms
        if ahead > self.clock_skew_ms:
            self.clock_skew_ms, self.clock_skew_where = ahead, where

    @property
    def max_lag(self) -> int:
        return max((p.lag for p in self.partitions), default=0)

    @property
    def total_lag(self) -> int:
        return sum(p.lag for p in self.partitions)

    @property
    def truncated(self) -> int:
        return sum(p.truncated for p in self.partitions)


@dataclass(frozen=True)
class Alert:
    """A breached threshold (or a condition that is always alerted)."""

    flow: str
    kind: str  # replication_latency, record_lag, checkpoint_age, source_truncated, ...
    message: str
    value: int | None = None
    threshold: int | None = None


ALERT_KINDS = (
    "run_down",  # mm run's state file not refreshed (mm.status.run_jobs)
    "job_failed",  # a job of mm run waiting to restart
    "unavailable",
    "replication_latency",
    "record_lag",
    "checkpoint_age",
    "source_truncated",
    "source_reset",
    "clock_skew",
)


def evaluate(flow: FlowStatus, t: Thresholds) -> list[Alert]:
    """The alerts of one flow's status."""
    name = flow.flow
    if flow.error is not None:
        return [Alert(name, "unavailable", f"status of {name} unknown: {flow.error}")]
    alerts: list[Alert] = []
    if flow.latency_ms is not None and flow.latency_ms > t.replication_latency_ms:
        how = "newest heartbeat" if flow.latency_method == "heartbeat" else "oldest unmirrored"
        alerts.append(
            Alert(
                name,
                "replication_latency",
                f"replication latency {flow.latency_ms} ms ({how}) > "
                f"mm.{LATENCY_KEY}={t.replication_latency_ms}",
                flow.latency_ms,
                t.replication_latency_ms,
            )
        )
    for p in flow.partitions:
        where = f"{p.topic}[{p.partition}]"
        if p.lag > t.record_lag:
            alerts.append(
                Alert(
                    name,
                    "record_lag",
                    f"{where}: {p.lag} records behind > mm.{RECORD_LAG_KEY}={t.record_lag}",
                    p.lag,
                    t.record_lag,
                )
            )
        if p.truncated > 0:
            alerts.append(
                Alert(
                    name,
                    "source_truncated",
                    f"{where}: {p.truncated} source records deleted before they were mirrored "
                    f"(offsets {p.position}..{p.log_start - 1}; log start {p.log_start})",
                    p.truncated,
                    0,
                )
            )
        if p.source_reset:
            alerts.append(
                Alert(
                    name,
                    "source_reset",
                    f"{where}: the mirror's position {p.position} is past the source's log end "
                    f"{p.log_end} (topic recreated or log truncated): records below "
                    f"{p.position} would not be mirrored",
                    p.position,
                    p.log_end,
                )
            )
    if flow.clock_skew_ms > CLOCK_SKEW_TOLERANCE_MS:
        alerts.append(
            Alert(
                name,
                "clock_skew",
                f"clock skew: {flow.clock_skew_where} is {flow.clock_skew_ms / 1000:.1f} s "
                "ahead of this host's clock; ages from it read 0 and the replication latency "
                "cannot be trusted (expected clocks within "
                f"{CLOCK_SKEW_TOLERANCE_MS // 1000} s: check NTP on the producers, the "
                "heartbeat job's host and this one)",
                flow.clock_skew_ms,
                CLOCK_SKEW_TOLERANCE_MS,
            )
        )
    limit_ms = t.checkpoint_age_seconds * 1000
    for g in flow.groups:
        if g.latency_ms > limit_ms:
            alerts.append(
                Alert(
                    name,
                    "checkpoint_age",
                    f"group {g.group}: newest checkpoint {g.latency_ms // 1000} s old while "
                    f"{g.stale_partitions} partition(s) moved on {flow.source} > "
                    f"mm.{CHECKPOINT_AGE_KEY}={t.checkpoint_age_seconds}",
                    g.latency_ms // 1000,
                    t.checkpoint_age_seconds,
                )
            )
    return alerts


@dataclass
class StatusReport:
    collected_at_ms: int
    thresholds: Thresholds
    flows: list[FlowStatus]
    alerts: list[Alert] = field(default_factory=list)
    # the jobs of an mm run process using the same state dir (None: no run state file)
    run: dict[str, Any] | None = None

    @classmethod
    def build(cls, flows: list[FlowStatus], thresholds: Thresholds, at_ms: int) -> StatusReport:
        alerts = [a for f in flows for a in evaluate(f, thresholds)]
        return cls(at_ms, thresholds, flows, alerts)

    @property
    def ok(self) -> bool:
        return not self.alerts

    def to_json(self) -> dict[str, Any]:
        flows = []
        for f in self.flows:
            d = asdict(f)
            d.update(max_lag=f.max_lag, total_lag=f.total_lag, truncated=f.truncated)
            d["alerts"] = [asdict(a) for a in self.alerts if a.flow == f.flow]
            flows.append(d)
        return {
            "collected_at_ms": self.collected_at_ms,
            "ok": self.ok,
            "thresholds": self.thresholds.as_properties(),
            "alerts": [asdict(a) for a in self.alerts],
            "flows": flows,
            "run": self.run,
        }
