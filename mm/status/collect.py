"""Collects one flow's status from its source and target clusters (see :mod:`mm.status.model`).

Per flow X->Y, in this order:

1. topics on X and Y; the flow's source topics are chosen as the mirror chooses
   them (:func:`mm.source.topics.select_topics`: its filters plus every
   heartbeats topic), each mapped to its target topic by the flow's policy;
2. the mirror's positions: the committed offsets of the state group
   ``__mm.mirror.X.Y`` on Y, per target partition;
3. source log start and end (fetch high watermark) per partition, and the
   first record not mirrored yet where the mirror is behind (record age);
4. the newest record of every target partition and of ``X.heartbeats`` on Y
   (replication latency);
5. the newest checkpoint records per group in ``X.checkpoints.internal`` on Y, of
   the groups the flow checkpoints (its group filters), compared with the groups'
   committed offsets on X;
6. the newest record of the offset-syncs topic;
7. the checkpoint job's report (``<mm.state.dir>/checkpoint/X-Y/report.json``,
   when readable here): holes in the translation history and conservative
   translations per group.

Any Kafka failure makes the whole flow ``error`` (reported as *unavailable*).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import KafkaException
from mm_client.kafka.errors import wrap
from mm_client.records import Checkpoint, Heartbeat

from mm.checkpoint import snapshot
from mm.checkpoint.emitter import tracked_group
from mm.config import FlowConfig, MirrorConfig
from mm.config.settings import SETTINGS
from mm.errors import MirrorError, RecordDecodeError
from mm.source.runtime import offset_syncs_topic, state_group
from mm.source.topics import select_topics
from mm.status import reads
from mm.status.model import (
    FlowStatus,
    GroupCheckpointStatus,
    HeartbeatStatus,
    PartitionStatus,
    StatusReport,
    Thresholds,
)
from mm.status.reads import Key, Rec, now_ms

DEFAULT_TIMEOUT = 15.0
# newest records of X.checkpoints.internal read per round (compaction keeps the
# topic small on Kafka; the scan is bounded where it does not run)
CHECKPOINT_SCAN_KEY = "status.checkpoints.scan.records"
_CORRUPT_NAMED = 5  # undecodable checkpoint records named in notes (the rest counted)
DEFAULT_CHECKPOINT_SCAN: int = SETTINGS[CHECKPOINT_SCAN_KEY].default


def collect(
    cfg: MirrorConfig,
    flows: Iterable[FlowConfig],
    timeout: float = DEFAULT_TIMEOUT,
    *,
    down: Mapping[str, str] | None = None,
) -> StatusReport:
    """Status of ``flows`` and the alerts they raise against the configured thresholds.

    ``down`` maps the aliases of clusters known not to answer to why
    (:func:`mm.reach.unreachable`): their flows are reported unavailable with
    that reason, naming the cluster and its address, without waiting again."""
    thresholds = Thresholds.from_config(cfg)
    scan = _scan_limit(cfg)
    down = down or {}
    statuses = []
    for f in flows:
        if f.source in down or f.target in down:
            st = FlowStatus(f.name, f.source, f.target, now_ms())
            role, alias = ("source", f.source) if f.source in down else ("target", f.target)
            st.error = f"{role} {down[alias]}"
            statuses.append(st)
        else:
            statuses.append(collect_flow(cfg, f, timeout, checkpoint_scan=scan))
    report = StatusReport.build(statuses, thresholds, now_ms())
    from mm.status.run_jobs import attach_run

    attach_run(report, cfg.state_dir, report.collected_at_ms)
    return report


def _scan_limit(cfg: MirrorConfig) -> int:
    return int(cfg.setting(CHECKPOINT_SCAN_KEY))


def collect_flow(
    cfg: MirrorConfig,
    flow: FlowConfig,
    timeout: float = DEFAULT_TIMEOUT,
    *,
    checkpoint_scan: int = DEFAULT_CHECKPOINT_SCAN,
) -> FlowStatus:
    st = FlowStatus(flow.name, flow.source, flow.target, now_ms())
    try:
        _FlowCollector(cfg, flow, st, timeout, checkpoint_scan).run()
    except KafkaException as exc:
        st.error = str(wrap(exc, f"status of {flow.name}"))
    except MirrorError as exc:
        st.error = str(exc)
    return st


def _age(now: int, rec: Rec | None) -> int | None:
    if rec is None or rec.timestamp is None:
        return None
    return max(0, now - rec.timestamp)


class _FlowCollector:
    def __init__(
        self, cfg: MirrorConfig, flow: FlowConfig, st: FlowStatus, timeout: float, scan: int
    ) -> None:
        self.flow = flow
        self.st = st
        self.timeout = timeout
        self.scan = scan
        self.policy = flow.policy()
        src, tgt = cfg.cluster(flow.source), cfg.cluster(flow.target)
        self.report_path = (
            snapshot.snapshot_dir(cfg.state_dir, flow.source, flow.target)
            / snapshot.REPORT_FILE_NAME
        )
        self.src_admin: dict[str, Any] = dict(src.librdkafka("admin"))
        self.src_consumer: dict[str, Any] = dict(src.librdkafka("consumer"))
        self.tgt_admin: dict[str, Any] = dict(tgt.librdkafka("admin"))
        self.tgt_consumer: dict[str, Any] = dict(tgt.librdkafka("consumer"))
        self.src_profile, self.tgt_profile = src.profile, tgt.profile

    def run(self) -> None:
        flow, st, t = self.flow, self.st, self.timeout
        src_topics = reads.topic_partitions(self.src_admin, f"source cluster {flow.source}", t)
        tgt_topics = reads.topic_partitions(self.tgt_admin, f"target cluster {flow.target}", t)
        selected = select_topics(
            src_topics,
            topic_filter=flow.topic_filter,
            policy=self.policy,
            target_alias=flow.target,
        )
        target_of = {s: self.policy.format_remote_topic(flow.source, s) for s in selected}
        keys: list[Key] = [(s, p) for s in selected for p in range(src_topics[s])]
        positions = reads.group_offsets(
            self.tgt_admin, [state_group(flow)], f"target cluster {flow.target}", t
        ).get(state_group(flow), {})

        # source side: bounds, newest record, first record not mirrored yet
        src_bounds = reads.bounds(self.src_consumer, keys, t, self.src_profile)
        src_newest = reads.newest_records(self.src_consumer, src_bounds, t, flow.source)

        # target side: mirrored partitions and the heartbeats copy
        hb_topic = self.policy.format_remote_topic(flow.source, self.policy.heartbeats_topic())
        tgt_keys = {
            (target_of[s], p)
            for s, p in keys
            if target_of[s] in tgt_topics and p < tgt_topics[target_of[s]]
        }
        tgt_keys |= {(hb_topic, p) for p in range(tgt_topics.get(hb_topic, 0))}
        tgt_bounds = reads.bounds(self.tgt_consumer, sorted(tgt_keys), t, self.tgt_profile)
        now = now_ms()
        tgt_newest = reads.newest_records(self.tgt_consumer, tgt_bounds, t, flow.target)

        starts: dict[Key, int] = {}
        for k in keys:
            lo, hi = src_bounds[k]
            pos = positions.get((target_of[k[0]], k[1]))
            part = PartitionStatus(
                topic=k[0],
                partition=k[1],
                target_topic=target_of[k[0]],
                log_start=lo,
                log_end=hi,
                position=pos,
                lag=max(0, hi - max(lo, pos if pos is not None else lo)),
                source_newest_age_ms=self._age_noting_skew(
                    now, src_newest.get(k), f"the newest record of {k[0]}[{k[1]}] on {flow.source}"
                ),
                target_newest_age_ms=_age(now, tgt_newest.get((target_of[k[0]], k[1]))),
            )
            if pos is not None:
                part.truncated = max(0, lo - pos)
                part.source_reset = pos > hi
            if part.lag > 0:
                starts[k] = max(lo, pos if pos is not None else lo)
            else:
                part.record_age_ms = 0
            st.partitions.append(part)
        if starts:
            firsts = reads.first_records(
                self.src_consumer, starts, {k: src_bounds[k][1] for k in starts}, t, flow.source
            )
            for part in st.partitions:
                k = (part.topic, part.partition)
                if k in starts:
                    part.record_age_ms = _age(now, firsts.get(k))

        self._heartbeats(
            hb_topic, tgt_bounds, tgt_newest, now, self.policy.heartbeats_topic() in src_topics
        )
        if flow.emit_checkpoints_enabled:
            self._checkpoints(tgt_topics, target_of)
        else:
            st.checkpoints_enabled = False
        self._offset_syncs(src_topics, tgt_topics)
        if flow.emit_checkpoints_enabled:
            apply_checkpoint_report(st, snapshot.load_report(self.report_path, flow.name), now_ms())

    def _age_noting_skew(self, now: int, rec: Rec | None, where: str) -> int | None:
        if rec is not None and rec.timestamp is not None:
            self.st.saw_timestamp(rec.timestamp, now, where)
        return _age(now, rec)

    # --- replication latency ---------------------------------------------------------
    def _heartbeats(
        self,
        topic: str,
        tgt_bounds: dict[Key, tuple[int, int]],
        newest: dict[Key, Rec | None],
        now: int,
        source_has_heartbeats: bool,
    ) -> None:
        st, flow = self.st, self.flow
        hb = st.heartbeats = HeartbeatStatus(topic, flow.emit_heartbeats_enabled)
        best: Heartbeat | None = None
        for k, rec in newest.items():
            if k[0] != topic or rec is None:
                continue
            try:
                beat = Heartbeat.from_bytes(rec.key, rec.value)
            except RecordDecodeError as exc:
                st.notes.append(
                    f"newest record of {topic}[{k[1]}] (offset {rec.offset}) is not an MM2 "
                    f"heartbeat, skipped: {exc}"
                )
                continue
            if best is None or beat.timestamp > best.timestamp:
                best = beat
        if best is not None:
            hb.present = True
            hb.newest_timestamp_ms = best.timestamp
            hb.newest_source = best.source_cluster_alias
            hb.newest_target = best.target_cluster_alias
            hb.age_ms = max(0, now - best.timestamp)
            st.saw_timestamp(
                best.timestamp,
                now,
                f"the newest heartbeat in {topic} on {flow.target} (written on "
                f"{best.source_cluster_alias or flow.source})",
            )
            st.latency_ms = hb.age_ms
            st.latency_method = "heartbeat"
            return
        if not flow.emit_heartbeats_enabled:
            why = f"heartbeats are disabled ({flow.name}.emit.heartbeats.enabled = false)"
        elif not source_has_heartbeats:
            why = (
                f"no heartbeats topic on {flow.source}: is `mm heartbeat` running for {flow.name}?"
            )
        elif not any(k[0] == topic for k in tgt_bounds):
            why = f"{topic} does not exist on {flow.target} yet: has the mirror run?"
        else:
            why = f"no heartbeat in {topic} on {flow.target}"
        ages = [p.record_age_ms for p in st.partitions if p.record_age_ms is not None]
        st.notes.append(
            f"{why}; replication latency estimated from record age (oldest unmirrored record)"
        )
        if ages:
            st.latency_ms = max(ages)
            st.latency_method = "record_age"

    # --- checkpoints -------------------------------------------------------------------
    def _checkpoints(self, tgt_topics: dict[str, int], target_of: dict[str, str]) -> None:
        st, flow, t = self.st, self.flow, self.timeout
        topic = self.policy.checkpoints_topic(flow.source)
        st.checkpoints_topic = topic
        if topic not in tgt_topics:
            return
        st.checkpoints_present = True
        keys = [(topic, p) for p in range(tgt_topics[topic])]
        b = reads.bounds(self.tgt_consumer, keys, t, self.tgt_profile)
        newest_ts: dict[str, int | None] = {}
        newest_cp: dict[str, dict[tuple[str, int], Checkpoint]] = {}
        for k in keys:
            lo, hi = b[k]
            for rec in reads.all_records(
                self.tgt_consumer, k, max(lo, hi - self.scan), hi, t, flow.target
            ):
                try:
                    cp = Checkpoint.from_bytes(rec.key, rec.value)
                except RecordDecodeError as exc:
                    st.checkpoints_corrupt += 1
                    if st.checkpoints_corrupt <= _CORRUPT_NAMED:
                        st.notes.append(
                            f"{topic}[{k[1]}] offset {rec.offset} is not an MM2 checkpoint "
                            f"(skipped; the group keeps its previous checkpoint): {exc}"
                        )
                    continue
                g = cp.consumer_group
                if not tracked_group(flow, g):
                    # another flow's (or an older filter's) group: not this flow's to
                    # report, and its principal may not be allowed to describe it
                    continue
                if rec.timestamp is not None:
                    prev = newest_ts.get(g)
                    newest_ts[g] = rec.timestamp if prev is None else max(prev, rec.timestamp)
                else:
                    newest_ts.setdefault(g, None)
                newest_cp.setdefault(g, {})[(cp.topic, cp.partition)] = cp
        if st.checkpoints_corrupt > _CORRUPT_NAMED:
            st.notes.append(
                f"{st.checkpoints_corrupt - _CORRUPT_NAMED} more undecodable record(s) in {topic}"
            )
        if not newest_cp:
            return
        source_of = {v: k for k, v in target_of.items()}
        committed = reads.group_offsets(
            self.src_admin, sorted(newest_cp), f"source cluster {flow.source}", t
        )
        now = now_ms()
        for g in sorted(newest_cp):
            cps = newest_cp[g]
            mine = committed.get(g, {})
            stale = 0
            for (target_topic, p), cp in cps.items():
                src_topic = source_of.get(target_topic) or self.policy.upstream_topic(target_topic)
                if src_topic is None:
                    continue
                offset = mine.get((src_topic, p))
                if offset is not None and offset != cp.upstream_offset:
                    stale += 1
            ts = newest_ts.get(g)
            age = None if ts is None else max(0, now - ts)
            st.groups.append(
                GroupCheckpointStatus(
                    group=g,
                    partitions=len(cps),
                    newest_age_ms=age,
                    stale_partitions=stale,
                    latency_ms=(age or 0) if stale else 0,
                )
            )

    # --- offset syncs -------------------------------------------------------------------
    def _offset_syncs(self, src_topics: dict[str, int], tgt_topics: dict[str, int]) -> None:
        st, flow = self.st, self.flow
        on_target = flow.offset_syncs_topic_location == "target"
        topic = offset_syncs_topic(flow)
        st.offset_syncs_topic = topic
        st.offset_syncs_cluster = flow.target if on_target else flow.source
        topics = tgt_topics if on_target else src_topics
        conf = self.tgt_consumer if on_target else self.src_consumer
        profile = self.tgt_profile if on_target else self.src_profile
        if topic not in topics:
            return
        keys = [(topic, p) for p in range(topics[topic])]
        b = reads.bounds(conf, keys, self.timeout, profile)
        newest = reads.newest_records(conf, b, self.timeout, st.offset_syncs_cluster)
        now = now_ms()
        ages = [a for a in (_age(now, r) for r in newest.values()) if a is not None]
        st.offset_syncs_age_ms = min(ages) if ages else None


def apply_checkpoint_report(st: FlowStatus, report: snapshot.Report | None, now: int) -> None:
    """Fold the checkpoint job's report into the flow's status (pure)."""
    if report is None:
        return
    st.offset_syncs_cleanup_policy = report.syncs_cleanup_policy
    st.translation_holes = report.holes
    st.inexact_translations = sum(report.inexact.values())
    st.checkpoint_report_age_ms = max(0, now - report.at_ms)
    for g in st.groups:
        g.inexact_partitions = report.inexact.get(g.group, 0)
    if st.inexact_translations:
        groups = ", ".join(f"{g} ({n})" for g, n in sorted(report.inexact.items()))
        st.notes.append(
            f"{st.inexact_translations} group partition(s) translated conservatively (holes in "
            f"the offset-syncs history; consumers would re-read records at failover, never "
            f"skip): {groups}"
        )
    policy = report.syncs_cleanup_policy
    if policy is not None and "compact" in policy:
        st.notes.append(
            f"offset-syncs topic {report.syncs_topic} has cleanup.policy={policy}: history read "
            f"from it may have holes ({report.holes} kept now); set cleanup.policy=delete with a "
            "retention.ms (see docs/offset-syncs.md)"
        )
