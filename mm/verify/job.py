"""A whole `mm verify` run: plan on the driver, digest on Spark, judge on the driver.

1. Per flow: the mirrored topics (the mirror's own selection rules, narrowed by
   ``--topics``), partition leaders, log bounds of both sides, the mirror's
   position (state group), offset syncs and checkpoints (:mod:`mm.verify.reads`).
2. One Spark job for all flows: every partition of both sides cut into offset
   ranges, digested in Python tasks (:mod:`mm.verify.spark`).
3. Per partition: :func:`mm.verify.compare.compare_partition`; for a first
   difference of content, the two records are read once more to name the fields.

Both sides are read raw with Apache Kafka's read_committed rule, so the verdict
is what a read_committed consumer of Apache Kafka would see, also on brokers
(the embedded one) that serve aborted transactions' records.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from mm.config import FlowConfig, MirrorConfig
from mm.kafka.committed import LogReader, reader_of
from mm.source.plan import NameFilter
from mm.source.runtime import offset_syncs_topic, state_group
from mm.source.topics import select_topics
from mm.verify import reads
from mm.verify.compare import CONTENT, PartitionInput, PartitionReport, compare_partition
from mm.verify.digest import DigestSeq, differing_fields, split_ranges
from mm.verify.spark import SOURCE, TARGET, RangeDigests, RangeTask, digest_ranges

Key = tuple[str, int]

DEFAULT_RANGE_RECORDS = 250_000
DEFAULT_PAGE_BYTES = 4 << 20


@dataclass
class FlowReport:
    flow: str
    offset_syncs: str  # "<topic> on <cluster>"
    checkpoints_topic: str
    partitions: list[PartitionReport] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    not_compared: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and all(p.ok for p in self.partitions)

    def to_json(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "ok": self.ok,
            "offset_syncs": self.offset_syncs,
            "checkpoints_topic": self.checkpoints_topic,
            "problems": list(self.problems),
            "not_compared": list(self.not_compared),
            "partitions": [p.to_json() for p in self.partitions],
        }


@dataclass
class VerifyReport:
    flows: list[FlowReport]
    seconds: float = 0.0
    spark_tasks: int = 0

    @property
    def ok(self) -> bool:
        return all(f.ok for f in self.flows)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "seconds": round(self.seconds, 3),
            "spark_tasks": self.spark_tasks,
            "flows": [f.to_json() for f in self.flows],
        }


@dataclass
class _FlowPlan:
    flow: FlowConfig
    report: FlowReport
    # source topic -> (target topic, partitions on the source, partitions on the target)
    topics: dict[str, tuple[str, int, int]]
    source_bounds: dict[Key, tuple[int, int]]
    target_bounds: dict[Key, tuple[int, int]]
    source_leaders: dict[Key, str]
    target_leaders: dict[Key, str]
    source_reader: LogReader
    target_reader: LogReader
    positions: dict[Key, int]
    syncs: reads.SyncRead
    checkpoints: reads.CheckpointRead


def _plan_flow(
    cfg: MirrorConfig,
    flow: FlowConfig,
    topics_re: re.Pattern[str] | None,
    timeout: float,
    page: int,
) -> _FlowPlan:
    source, target = cfg.cluster(flow.source), cfg.cluster(flow.target)
    reads.require_readable(source)
    reads.require_readable(target)
    policy = flow.policy()
    src_meta = reads.cluster_meta(source.librdkafka("admin"), f"cluster {flow.source}", timeout)
    tgt_meta = reads.cluster_meta(target.librdkafka("admin"), f"cluster {flow.target}", timeout)
    selected = select_topics(
        src_meta.partitions,
        topic_filter=NameFilter(tuple(flow.topics), tuple(flow.topics_exclude)),
        policy=policy,
        target_alias=flow.target,
    )
    if topics_re is not None:
        selected = [t for t in selected if topics_re.fullmatch(t)]
    syncs_topic = offset_syncs_topic(flow)
    syncs_where = flow.target if flow.offset_syncs_topic_location == "target" else flow.source
    syncs_meta = tgt_meta if syncs_where == flow.target else src_meta
    report = FlowReport(
        flow.name,
        f"{syncs_topic} on {syncs_where}",
        policy.checkpoints_topic(flow.source),
    )
    if not selected:
        report.problems.append(
            "no topic to verify: no source topic is mirrored by this flow"
            + (f" and matches --topics {topics_re.pattern!r}" if topics_re is not None else "")
        )
    topics = {
        t: (
            policy.format_remote_topic(flow.source, t),
            src_meta.partitions[t],
            tgt_meta.partitions.get(policy.format_remote_topic(flow.source, t), 0),
        )
        for t in selected
    }
    src_keys = [(t, p) for t, (_, n, _) in topics.items() for p in range(n)]
    tgt_keys = [(tt, p) for tt, n, m in topics.values() for p in range(min(n, m))]
    for t, (tt, n, m) in topics.items():
        if m == 0:
            report.problems.append(f"target topic {tt} does not exist on {flow.target}")
        elif m > n:
            report.problems.append(
                f"target topic {tt} has {m} partitions, the source {t} {n}: the extra "
                "ones are not compared"
            )
    source_conf = source.librdkafka("consumer")
    target_conf = target.librdkafka("consumer")
    plan = _FlowPlan(
        flow,
        report,
        topics,
        reads.log_bounds(source_conf, src_keys, timeout, source.profile),
        reads.log_bounds(target_conf, tgt_keys, timeout, target.profile),
        {k: src_meta.leader(*k, f"cluster {flow.source}") for k in src_keys},
        {k: tgt_meta.leader(*k, f"cluster {flow.target}") for k in tgt_keys},
        reader_of(source, "mm-verify"),
        reader_of(target, "mm-verify"),
        reads.mirror_positions(
            target.librdkafka("admin"), state_group(flow), f"cluster {flow.target}", timeout
        ),
        reads.read_syncs(
            reader_of(source if syncs_where == flow.source else target, "mm-verify"),
            syncs_meta.leaders.get((syncs_topic, 0)),
            syncs_topic,
            set(topics),
            timeout,
            page,
            reads.syncs_gaps_are_holes(
                (target if syncs_where == flow.target else source).librdkafka("admin"),
                syncs_topic,
                syncs_where == flow.target,
                timeout,
            ),
        ),
        reads.read_all_checkpoints(target_conf, flow.source, policy, timeout),
    )
    if not plan.syncs.exists:
        report.not_compared.append(f"offset-syncs topic {report.offset_syncs}: does not exist")
    if plan.syncs.undecodable:
        report.not_compared.append(
            f"{plan.syncs.undecodable} undecodable records in {syncs_topic} (skipped)"
        )
    if plan.checkpoints.missing:
        report.not_compared.append(
            f"checkpoints topic {report.checkpoints_topic} does not exist on {flow.target}: "
            "no checkpoint checked"
        )
    return plan


def _tasks(plan: _FlowPlan, timeout: float, range_records: int, page: int) -> list[RangeTask]:
    out = []
    for side, bounds, leaders, reader in (
        (SOURCE, plan.source_bounds, plan.source_leaders, plan.source_reader),
        (TARGET, plan.target_bounds, plan.target_leaders, plan.target_reader),
    ):
        for (t, p), (lo, hi) in sorted(bounds.items()):
            for s, e in split_ranges(lo, hi, range_records):
                flow = plan.report.flow
                task = RangeTask(flow, side, reader, leaders[(t, p)], t, p, s, e, timeout, page)
                out.append(task)
    return out


@dataclass
class _Side:
    seq: DigestSeq = field(default_factory=DigestSeq)
    committed_txns: int = 0
    aborted_txns: int = 0
    aborted_records: int = 0
    open_records: int = 0
    gap_offsets: int = 0
    open_offsets: int = 0

    def notes(self, name: str) -> list[str]:
        out = []
        if self.gap_offsets:
            out.append(
                f"{name}: {self.gap_offsets} offsets hold no committed record "
                "(transaction markers, aborted transactions' records; read_committed)"
            )
        if self.open_offsets:
            out.append(
                f"{name}: {self.open_offsets} offsets past the last stable offset left out "
                "(an open transaction; not committed yet)"
            )
        if self.aborted_records or self.aborted_txns:
            out.append(
                f"{name}: {self.aborted_records} records of {self.aborted_txns} aborted "
                "transactions left out (read_committed)"
            )
        if self.open_records:
            out.append(
                f"{name}: {self.open_records} records of open transactions left out "
                "(not committed yet)"
            )
        return out


def _assemble(results: list[RangeDigests]) -> dict[tuple[str, str, int], _Side]:
    sides: dict[tuple[str, str, int], _Side] = {}
    for r in sorted(
        results, key=lambda r: (r.task.side, r.task.topic, r.task.partition, r.task.start)
    ):
        s = sides.setdefault((r.task.side, r.task.topic, r.task.partition), _Side())
        s.seq.extend(r.seq())
        s.committed_txns += r.committed_txns
        s.aborted_txns += r.aborted_txns
        s.aborted_records += r.aborted_records
        s.open_records += r.open_records
        s.gap_offsets += r.gap_offsets
        s.open_offsets += r.open_offsets
    return sides


def _judge(
    plan: _FlowPlan, sides: dict[tuple[str, str, int], _Side], timeout: float
) -> list[PartitionReport]:
    out = []
    for t, (tt, n, m) in sorted(plan.topics.items()):
        for p in range(n):
            src = sides.get((SOURCE, t, p), _Side())
            tgt = sides.get((TARGET, tt, p), _Side())
            s_lo, s_hi = plan.source_bounds[(t, p)]
            t_lo, t_hi = plan.target_bounds.get((tt, p), (0, 0))
            rep = compare_partition(
                PartitionInput(
                    t,
                    p,
                    tt,
                    src.seq,
                    tgt.seq,
                    s_lo,
                    s_hi,
                    t_lo,
                    t_hi,
                    plan.positions.get((tt, p)),
                    plan.syncs.syncs.get((t, p), []),
                    plan.checkpoints.checkpoints.get((tt, p), []),
                    target_exists=p < m,
                )
            )
            rep.notes += src.notes("source") + tgt.notes("target")
            d = rep.difference
            if d is not None and d.kind == CONTENT:
                rep.difference = replace(d, fields=tuple(_fields(plan, t, tt, p, d, timeout)))
                rep.problems = [
                    rep.difference.describe() if x == d.describe() else x for x in rep.problems
                ]
            out.append(rep)
    return out


def _fields(plan: _FlowPlan, t: str, tt: str, p: int, d: Any, timeout: float) -> list[str]:
    src, tgt = plan.source_reader, plan.target_reader
    a = reads.read_record(src, plan.source_leaders[(t, p)], t, p, d.source_offset, timeout)
    b = reads.read_record(tgt, plan.target_leaders[(tt, p)], tt, p, d.target_offset, timeout)
    if a is None or b is None:
        return []
    return differing_fields(
        (a.key, a.value, a.headers, a.timestamp), (b.key, b.value, b.headers, b.timestamp)
    )


def run_verify(
    cfg: MirrorConfig,
    flows: list[FlowConfig],
    *,
    topics: re.Pattern[str] | None = None,
    timeout: float = 60.0,
    range_records: int = DEFAULT_RANGE_RECORDS,
    page_bytes: int = DEFAULT_PAGE_BYTES,
    spark_factory: Callable[[], Any] | None = None,
) -> VerifyReport:
    """Verify ``flows``; Spark starts only when some partition holds data."""
    started = time.monotonic()
    plans = [_plan_flow(cfg, f, topics, timeout, page_bytes) for f in flows]
    tasks = [t for plan in plans for t in _tasks(plan, timeout, range_records, page_bytes)]
    results: list[RangeDigests] = []
    if tasks:
        spark = spark_factory() if spark_factory else _spark(cfg)
        try:
            results = digest_ranges(spark, tasks)
        finally:
            if spark_factory is None:
                spark.stop()
    report = VerifyReport([], spark_tasks=len(tasks))
    for plan in plans:
        flow_results = [r for r in results if r.task.flow == plan.report.flow]
        plan.report.partitions = _judge(plan, _assemble(flow_results), timeout)
        report.flows.append(plan.report)
    report.seconds = time.monotonic() - started
    return report


def _spark(cfg: MirrorConfig) -> Any:
    from mm.spark_session import build_spark

    return build_spark("mm-verify", cfg.spark, cfg.setting("spark.class.archive"))
