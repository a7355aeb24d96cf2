"""`mm switchover`'s reads, waits and commits (the decisions: :mod:`mm.dr.switchover`).

Reads, per round: the source end offsets (read_committed: the last stable offset,
from a real fetch, :func:`mm.kafka.watermarks.watermarks`), the mirror's position
(its state group on the target), the selected groups' committed offsets on the
source and their newest checkpoints on the target (``mm_client.read_checkpoints``,
what consumer applications use). The proof reads, for each group partition, the
first committed record at or after the group's offset on the source and at or
after its translation on the target, with the raw log reader and Kafka's
read_committed rule (so a broker serving aborted records cannot mislead it).
The groups are then moved exactly as `mm failover` moves them (idle groups only).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from mm.checkpoint.emitter import tracked_group
from mm.config import FlowConfig, MirrorConfig
from mm.dr.groups import move_groups
from mm.dr.switchover import (
    CATCH_UP,
    CHECKPOINTS,
    GROUPS,
    PROOF,
    SETTLE,
    GroupPartition,
    GroupRow,
    Key,
    PartitionRow,
    Stillness,
    SwitchoverReport,
    grown,
    record_content,
    translation_verdict,
    uncovered,
    unmirrored,
)
from mm.dr.transactions import (
    describe_open,
    describe_producers,
    hanging_way_out,
    open_transactions,
)
from mm.kafka.committed import LogReader, reader_of
from mm.kafka.rawlog import LogRecord, ScanStats
from mm.source.plan import NameFilter
from mm.source.runtime import state_group
from mm.source.topics import select_topics
from mm.verify import reads


class FlowReads:
    """The flow's clusters, mirrored partitions and the reads a switchover repeats
    (also failback's view of the reverse flow)."""

    def __init__(self, cfg: MirrorConfig, flow: FlowConfig, timeout: float) -> None:
        self.flow = flow
        self.timeout = timeout
        source, target = cfg.cluster(flow.source), cfg.cluster(flow.target)
        self.src_reader = reader_of(source, "mm-switchover")
        self.tgt_reader = reader_of(target, "mm-switchover")
        self.src_reader.check("mm switchover / mm failback")
        self.tgt_reader.check("mm switchover / mm failback")
        self.policy = flow.policy()
        self.src_admin = source.librdkafka("admin")
        self.tgt_admin = target.librdkafka("admin")
        self.src_consumer = source.librdkafka("consumer")
        self.tgt_consumer = target.librdkafka("consumer")
        self.src_profile, self.tgt_profile = source.profile, target.profile
        self.src_meta = reads.cluster_meta(self.src_admin, f"cluster {flow.source}", timeout)
        topics = select_topics(
            self.src_meta.partitions,
            topic_filter=NameFilter(tuple(flow.topics), tuple(flow.topics_exclude)),
            policy=self.policy,
            target_alias=flow.target,
        )
        self.remote = {t: self.policy.format_remote_topic(flow.source, t) for t in topics}
        self.upstream_of = {tt: t for t, tt in self.remote.items()}
        # heartbeats are mirrored but are no application's data, and `mm heartbeat`
        # keeps writing them during a switchover: they neither show producers still
        # running nor hold anything a group must find on the target
        self.keys: list[Key] = [
            (t, p)
            for t in sorted(topics)
            if not self.policy.is_heartbeats_topic(t)
            for p in range(self.src_meta.partitions[t])
        ]

    def ends(self) -> dict[Key, int]:
        return {
            k: hi
            for k, (_, hi) in reads.log_bounds(
                self.src_consumer, self.keys, self.timeout, self.src_profile
            ).items()
        }

    def log_ends(self) -> dict[Key, int]:
        """High watermarks: past the read_committed ends where a transaction is open."""
        return reads.log_ends(self.src_consumer, self.keys, self.timeout)

    def open_transactions(self, ends: Mapping[Key, int]) -> dict[Key, tuple[int, int]] | None:
        """Transactions open past ``ends`` (read_committed); None where the source's
        broker does not show them (:attr:`BrokerProfile.open_transactions_visible`)."""
        if not self.src_profile.open_transactions_visible:
            return None
        return open_transactions(ends, self.log_ends())

    def target_ends(self) -> dict[Key, int]:
        """The target's read_committed ends of the copies, per source partition (none
        for a topic the mirror has not created there yet)."""
        on_target = reads.cluster_meta(
            self.tgt_admin, f"cluster {self.flow.target}", self.timeout
        ).partitions
        keys = [(self.remote[t], p) for t, p in self.keys if p < on_target.get(self.remote[t], 0)]
        return {(self.upstream_of[tt], p): hi for (tt, p), hi in self.copy_ends(keys).items()}

    def copy_ends(self, keys: list[Key]) -> dict[Key, int]:
        """The target's read_committed ends of ``keys`` (target topics)."""
        bounds = reads.log_bounds(self.tgt_consumer, keys, self.timeout, self.tgt_profile)
        return {k: hi for k, (_lo, hi) in bounds.items()}

    def positions(self) -> dict[Key, int]:
        """The mirror's committed position per source partition."""
        read = reads.mirror_positions(
            self.tgt_admin, state_group(self.flow), f"cluster {self.flow.target}", self.timeout
        )
        out: dict[Key, int] = {}
        for (tt, p), pos in read.items():
            t = self.upstream_of.get(tt)
            if t is not None:
                out[(t, p)] = pos
        return out

    def groups(self, selected: re.Pattern[str] | None) -> list[str]:
        from mm_client.kafka import new_admin
        from mm_client.kafka.errors import wrap

        admin = new_admin(self.src_admin)
        try:
            res = admin.list_consumer_groups(request_timeout=self.timeout).result(self.timeout + 5)
        except Exception as exc:
            raise wrap(exc, f"list consumer groups on {self.flow.source}") from exc
        names = {g.group_id for g in res.valid}
        return sorted(
            g
            for g in names
            if tracked_group(self.flow, g) and (selected is None or selected.fullmatch(g))
        )

    def group_partitions(self, groups: list[str]) -> list[GroupPartition]:
        """Each group's committed offsets on mirrored partitions, with its newest checkpoint."""
        from mm.status.reads import group_offsets

        offsets = group_offsets(self.src_admin, groups, f"cluster {self.flow.source}", self.timeout)
        mirrored = set(self.keys)
        cps = self._checkpoints(groups)
        rows = []
        for g in groups:
            for key, off in sorted(offsets.get(g, {}).items()):
                if key not in mirrored:
                    continue
                up, down = cps.get((g, *key), (None, None))
                rows.append(GroupPartition(g, key[0], key[1], off, up, down))
        return rows

    def _checkpoints(self, groups: list[str]) -> dict[tuple[str, str, int], tuple[int, int]]:
        from mm_client import read_checkpoints
        from mm_client.cluster_errors import CheckpointsUnavailableError

        wanted = set(groups)
        try:
            snap = read_checkpoints(
                self.tgt_consumer,
                self.flow.source,
                lambda g: g in wanted,
                self.timeout,
                replication_policy=self.policy,
            )
        except CheckpointsUnavailableError as exc:
            if exc.reason == "missing":
                return {}  # the checkpoint job has not written any yet
            raise
        out: dict[tuple[str, str, int], tuple[int, int]] = {}
        for g in snap.groups:
            for tp, cp in snap.checkpoints(g).items():
                t = self.upstream_of.get(tp.topic)
                if t is not None:
                    out[(g, t, tp.partition)] = (cp.upstream_offset, cp.downstream_offset)
        return out


def _first_from(
    reader: LogReader,
    address: str,
    topic: str,
    partition: int,
    offset: int,
    end: int,
    timeout: float,
) -> LogRecord | None:
    """The first committed record at or after ``offset`` and before ``end``."""
    if offset >= end:
        return None
    found = reader.scan(
        address, topic, partition, max(0, offset), end, ScanStats(), timeout=timeout
    )
    return next(iter(found), None)


#: a mirror copying moves its positions or its copies within this long (or two
#: micro-batch triggers and 5 s, when longer); long enough for a mirror starting
#: from cold (20-45 s to its first committed batch on a loaded 2-core host)
STILL_SECONDS = 30.0


def run_switchover(
    cfg: MirrorConfig,
    flow: FlowConfig,
    *,
    groups: re.Pattern[str] | None,
    timeout: float,
    settle: float,
    force: bool,
    dry_run: bool,
    poll_seconds: float = 1.0,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    still_seconds: float | None = None,
) -> SwitchoverReport:
    """Wait for the switchover's conditions (up to ``timeout`` seconds), prove it,
    then move the groups (not with ``dry_run``). A mirror that does not move for
    ``still_seconds`` while records wait stops the wait at once. Never raises for a
    condition that does not hold: the report says where it stopped and why."""
    report = SwitchoverReport(flow.name, flow.source, flow.target, dry_run, force, settle)
    f = FlowReads(cfg, flow, timeout)
    if not f.keys:
        report.stopped_at = CATCH_UP
        report.problems.append(f"flow {flow.name} mirrors no topic of {flow.source}")
        return report
    ends = f.ends()
    if not force:
        sleep(settle)
        again = f.ends()
        report.grown = grown(ends, again)
        ends = again
        if report.grown:
            _fill_partitions(report, f, ends, f.positions())
            report.stopped_at = SETTLE
            report.problems.append(
                f"producers on {flow.source} have not stopped: {len(report.grown)} partition(s) "
                f"grew during {settle:g}s ({_keys(report.grown)}). Stop them, or pass --force "
                "to switch over anyway (records written after the mirror's last copy stay "
                f"on {flow.source})"
            )
            return report
        still_open = f.open_transactions(ends)
        report.open_transactions_checked = still_open is not None
        if still_open:
            report.open_transactions = still_open
            _fill_partitions(report, f, ends, f.positions())
            report.stopped_at = SETTLE
            report.problems.append(_open_transactions_problem(cfg, flow, still_open))
            return report
    selected = f.groups(groups)
    started = clock()
    stillness = Stillness(started)
    if still_seconds is None:  # a mirror also stands still between its micro-batches
        still_seconds = max(STILL_SECONDS, 2 * float(cfg.setting("mirror.trigger.seconds")) + 5)
    while True:
        positions = f.positions()
        missing = unmirrored(ends, positions)
        rows = f.group_partitions(selected)
        not_covered = uncovered(rows)
        if not missing and not not_covered:
            break
        still = stillness.still_for(clock(), (positions, f.target_ends())) if missing else 0.0
        if still > still_seconds and clock() - started <= timeout:
            report.waited_seconds = clock() - started
            _fill_partitions(report, f, ends, positions)
            report.groups = [_group_row(r, f) for r in rows]
            report.stopped_at = CATCH_UP
            report.problems.append(
                f"the mirror of {flow.name} is not advancing: neither its positions nor "
                f"{flow.target}'s copies moved for {still:.0f}s, with "
                f"{sum(missing.values())} offsets unmirrored on {len(missing)} partition(s) "
                f"({_keys(missing)}). Is `mm mirror` (or `mm run`) running for {flow.name}? "
                "Start it, then run the switchover again"
            )
            return report
        if clock() - started > timeout:
            report.waited_seconds = clock() - started
            _fill_partitions(report, f, ends, positions)
            report.groups = [_group_row(r, f) for r in rows]
            if missing:
                report.stopped_at = CATCH_UP
                report.problems.append(
                    f"the mirror did not reach the source end within {timeout:g}s: "
                    f"{sum(missing.values())} offsets unmirrored on {len(missing)} partition(s) "
                    f"({_keys(missing)}). Is `mm mirror` running for {flow.name}?"
                )
            if not_covered:
                report.stopped_at = report.stopped_at or CHECKPOINTS
                report.problems.append(
                    f"{len(not_covered)} group partition(s) have no checkpoint for the group's "
                    f"current offset within {timeout:g}s ("
                    + ", ".join(
                        f"{r.group} {r.topic}[{r.partition}]@{r.offset}" for r in not_covered[:10]
                    )
                    + f"). Is `mm checkpoint` running for {flow.name}?"
                )
            return report
        sleep(poll_seconds)
    report.waited_seconds = clock() - started
    _fill_partitions(report, f, ends, positions)
    report.groups = _prove(f, rows, ends)
    if report.translations_inexact:
        report.stopped_at = PROOF
        report.problems.append(
            f"{report.translations_inexact} translation(s) are not exact; nothing was committed"
        )
        return report
    if not force:
        late = grown(ends, f.ends())
        if late:
            report.grown = late
            report.stopped_at = SETTLE
            report.problems.append(
                f"producers on {flow.source} wrote again during the switchover ({_keys(late)}); "
                "nothing was committed"
            )
            return report
        opened = f.open_transactions(ends)
        if opened:
            report.open_transactions = opened
            report.stopped_at = SETTLE
            report.problems.append(
                "nothing was committed: " + _open_transactions_problem(cfg, flow, opened)
            )
            return report
    _move_groups(report, f, dry_run, timeout)
    if any(s not in ("moved", "unchanged", "dry-run") for s in report.group_status.values()):
        report.stopped_at = GROUPS
    return report


def _open_transactions_problem(
    cfg: MirrorConfig, flow: FlowConfig, open_at: Mapping[Key, tuple[int, int]]
) -> str:
    servers = ",".join(cfg.cluster(flow.source).bootstrap_servers)
    holders = producers_holding(cfg, flow.source, open_at)
    return (
        f"a transaction is open on {flow.source} in {describe_open(open_at)}; {holders}: what it "
        f"commits after the switchover would exist only on {flow.source}. Let its producer "
        "commit or abort it (and stop), or abort a hanging one (open past its producer's "
        "transaction.timeout.ms) with Kafka's tool: "
        f"{hanging_way_out(servers, flow.source, open_at)}; "
        "or pass --force to switch over anyway"
    )


def producers_holding(
    cfg: MirrorConfig, alias: str, open_at: Mapping[Key, Any], timeout: float = 10.0
) -> str:
    """Who holds each open transaction and for how long, from kafka-python's
    DescribeProducers, ListTransactions and DescribeTransactions (confluent-kafka has
    none of them); when they cannot be asked, why not."""
    from mm.kafka.producers import open_producers

    try:
        found = open_producers(cfg.cluster(alias).librdkafka("admin"), sorted(open_at), timeout)
    except Exception as exc:  # reported in the refusal: the producers stay unnamed
        return f"its producers not named ({type(exc).__name__}: {exc})"
    asked = "kafka-python's DescribeProducers and DescribeTransactions"
    return describe_producers(found, int(time.time() * 1000), asked)


def translation_records(
    f: FlowReads,
    tgt_meta: reads.ClusterMeta,
    key: Key,
    upstream: int,
    downstream: int,
    src_end: int,
    tgt_end: int,
) -> tuple[LogRecord | None, LogRecord | None]:
    """The first committed record at or after ``upstream`` on the source (``key``) and
    at or after ``downstream`` on the target's copy (None: none before the end)."""
    topic, partition = key
    tt = f.remote[topic]
    src_next = _first_from(
        f.src_reader,
        f.src_meta.leader(topic, partition, f"cluster {f.flow.source}"),
        topic,
        partition,
        upstream,
        src_end,
        f.timeout,
    )
    tgt_next = _first_from(
        f.tgt_reader,
        tgt_meta.leader(tt, partition, f"cluster {f.flow.target}"),
        tt,
        partition,
        downstream,
        tgt_end,
        f.timeout,
    )
    return src_next, tgt_next


def last_before(
    f: FlowReads, tgt_meta: reads.ClusterMeta, key: Key, downstream: int, window: int
) -> LogRecord | None:
    """The last committed record of the target's copy of ``key`` below ``downstream``
    and at most ``window`` offsets back (None: none there)."""
    topic, partition = key
    tt = f.remote[topic]
    start = max(0, downstream - window)
    if downstream <= start:
        return None
    leader = tgt_meta.leader(tt, partition, f"cluster {f.flow.target}")
    last = None
    for r in f.tgt_reader.scan(
        leader, tt, partition, start, downstream, ScanStats(), timeout=f.timeout
    ):
        last = r
    return last


def source_offset_of_copy(
    f: FlowReads, key: Key, copy: LogRecord, below: int, window: int, log_start: int
) -> int | None:
    """The source offset, below ``below`` and at most ``window`` offsets back, of the
    committed record whose content ``copy`` (a record of the target) has; None when
    none there has it."""
    topic, partition = key
    start = max(log_start, below - window)
    if below <= start:
        return None
    want = record_content(copy)
    leader = f.src_meta.leader(topic, partition, f"cluster {f.flow.source}")
    found = None
    for r in f.src_reader.scan(
        leader, topic, partition, start, below, ScanStats(), timeout=f.timeout
    ):
        if record_content(r) == want:
            found = r.offset  # the last one before ``below``: the nearest copy
    return found


def _prove(f: FlowReads, rows: list[GroupPartition], ends: Mapping[Key, int]) -> list[GroupRow]:
    tgt_ends = f.copy_ends(sorted({(f.remote[r.topic], r.partition) for r in rows}))
    tgt_meta = reads.cluster_meta(f.tgt_admin, f"cluster {f.flow.target}", f.timeout)
    out = []
    for r in rows:
        assert r.downstream is not None  # covered
        key = (r.topic, r.partition)
        tgt_end = tgt_ends[(f.remote[r.topic], r.partition)]
        src_next, tgt_next = translation_records(
            f, tgt_meta, key, r.offset, r.downstream, ends[key], tgt_end
        )
        why = translation_verdict(r.downstream, tgt_end, src_next, tgt_next)
        row = _group_row(r, f)
        row.exact, row.reason = why is None, why
        out.append(row)
    return out


def _group_row(r: GroupPartition, f: FlowReads) -> GroupRow:
    return GroupRow(
        r.group,
        f.remote[r.topic],
        r.partition,
        r.offset,
        None,
        r.downstream if r.covered else None,
        None,
        None if r.covered else "no checkpoint for the group's current offset",
    )


def _move_groups(report: SwitchoverReport, f: FlowReads, dry_run: bool, timeout: float) -> None:
    """Commit the proven translations into each group on the target, as `mm failover` does."""
    translations: dict[str, dict[tuple[str, int], tuple[int, int | None]]] = {}
    for row in report.groups:
        if row.after is not None:
            translations.setdefault(row.group, {})[(row.topic, row.partition)] = (
                row.after,
                row.source_offset,
            )
    results = move_groups(f.tgt_admin, f.flow.target, translations, dry_run, timeout)
    for g, result in results.items():
        notes = {(x.topic, x.partition): x for x in result.rows}
        for r in report.groups:
            x = notes.get((r.topic, r.partition)) if r.group == g else None
            if x is not None:
                r.before, r.note = x.before, x.note
        report.group_status[g] = result.status
        if result.message:
            report.problems.append(result.message)


def _fill_partitions(
    report: SwitchoverReport, f: FlowReads, ends: Mapping[Key, int], positions: Mapping[Key, int]
) -> None:
    report.partitions = [
        PartitionRow(t, p, f.remote[t], ends.get((t, p), 0), positions.get((t, p)))
        for t, p in f.keys
    ]


def _keys(d: Mapping[Key, Any], limit: int = 10) -> str:
    names = [f"{t}[{p}]" for t, p in sorted(d)]
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more
