"""`mm failback`'s reads and writes (decisions: mm.dr.divergence, mm.dr.failback).

Step 1, the divergence: reads the newest failover point of the flow from the
target (B), the source's (A) end offsets now, and every committed record of A from
the failover point to that end, read_committed (:mod:`mm.kafka.committed`: a
consumer on Apache Kafka, any listener; the raw reader, PLAINTEXT only, where the
broker profile needs it, as `mm verify`). Unless it is a dry run, the records are
written to Parquet files before anything else happens: one file per partition
under the quarantine directory, columns ``topic, partition, offset, timestamp,
key, value, headers``. A transaction still open on A past the failover point (its
log end above its read_committed end) stops the failback before anything is
written: its records are divergent if it commits, and nobody knows yet.

Step 2, the reverse flow B->A (enabled in the config, never invented here): its
mirror runs once in this process (:func:`mm.source.job.run_mirror`, as
``mm mirror --once``), or, when a mirror of B->A holds the flow's state lock, that
mirror is waited for; then B's ends are compared with its position.

Step 3, the groups: every tracked group on B with offsets on either flow's topics
(A's copies, B's own topics). The offset syncs of both flows are read from
their topics (:func:`mm.verify.reads.read_syncs`) with each mirror's position and
last transaction's syncs from its state group, and each offset is translated
(:mod:`mm.dr.failback`). A group is committed on A by :func:`mm.dr.groups.move_groups`
(idle on A only) when it is idle on B and every partition translated exactly.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from mm.checkpoint.emitter import tracked_group
from mm.checkpoint.rules import group_is_idle
from mm.checkpoint.store import PartitionHistory
from mm.config import FlowConfig, MirrorConfig
from mm.dr.divergence import (
    DivergenceReport,
    PartitionDivergence,
    content_divergence,
    plan_divergence,
)
from mm.dr.failback import (
    AFTER_STEP_2,
    LOCAL,
    NOT_EXACT,
    REMOTE,
    Back,
    FailbackReport,
    Key,
    Reverse,
    ReversePartition,
    forward_offset,
    history,
    identity_overlap,
    inverse_with_tail,
    keep_ahead,
    not_exact,
    plan_group,
    translations,
)
from mm.dr.failover_point import FailoverPoint
from mm.dr.failover_point_run import newest_point
from mm.dr.groups import DRY_RUN, FAILED, REFUSED, UNCHANGED, TargetGroups, move_groups
from mm.dr.switchover_run import FlowReads, producers_holding
from mm.dr.transactions import describe_open, hanging_way_out
from mm.errors import ConfigError, MirrorError
from mm.kafka.committed import TO_THE_END, LogReader, reader_of
from mm.kafka.rawlog import ScanStats
from mm.source.runtime import offset_syncs_topic, state_group
from mm.verify import reads
from mm.verify.digest import DigestSeq, record_digest

_ROW_GROUP = 10_000
_PAGE_BYTES = 4 << 20  # offset-syncs reads, as `mm verify`


def quarantine_dir(cfg: MirrorConfig, flow: FlowConfig) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return Path(cfg.state_dir) / "failback" / f"{flow.source}-{flow.target}" / stamp


def failover_point_of(cfg: MirrorConfig, flow: FlowConfig, timeout: float) -> FailoverPoint:
    """The newest failover point of ``flow``; MirrorError when none was recorded."""
    point = newest_point(cfg.cluster(flow.target).librdkafka("consumer"), flow, timeout)
    if point is None:
        raise MirrorError(
            f"no failover point of {flow.name} is recorded on {flow.target}: `mm failover` "
            "records one when consumers move; without it the divergence cannot be told"
        )
    return point


def find_divergence(
    cfg: MirrorConfig,
    flow: FlowConfig,
    *,
    dry_run: bool,
    timeout: float,
    out_dir: Path | None = None,
    point: FailoverPoint | None = None,
) -> DivergenceReport:
    """The divergence per partition; records written under ``out_dir`` unless ``dry_run``.

    ``point``: the failover point (default: read with :func:`failover_point_of`).
    Raises MirrorError when no failover point was recorded for ``flow``.
    """
    source = cfg.cluster(flow.source)
    reader = reader_of(source, "mm-failback")
    reader.check("mm failback")
    if point is None:
        point = failover_point_of(cfg, flow, timeout)
    keys = [(p.topic, p.partition) for p in point.partitions]
    bounds = reads.log_bounds(source.librdkafka("consumer"), keys, timeout, source.profile)
    # Apache Kafka's read_committed end stops at an open transaction's first record
    log_ends = reads.log_ends(source.librdkafka("consumer"), keys, timeout)
    ends = {k: hi for k, (_lo, hi) in bounds.items()}
    report = plan_divergence(point, ends, dry_run, log_ends)
    if report.open:
        return report  # nothing read or written: the caller refuses
    meta = reads.cluster_meta(source.librdkafka("admin"), f"cluster {flow.source}", timeout)
    _compare_content(cfg, flow, point, report, reader, meta, bounds, timeout)
    writer = None if dry_run else _Quarantine(out_dir or quarantine_dir(cfg, flow))
    try:
        for row in report.partitions:
            if row.start >= row.end_now:
                continue
            address = meta.leader(row.topic, row.partition, f"cluster {flow.source}")
            _read(reader, address, row, timeout, writer)
    finally:
        if writer is not None:
            writer.close()
    if writer is not None:
        report.quarantine = str(writer.root)
    return report


_FIRST_DEPTH = 1_000  # offsets compared first; four times more each time no agreement


def _compare_content(
    cfg: MirrorConfig,
    flow: FlowConfig,
    point: FailoverPoint,
    report: DivergenceReport,
    reader: LogReader,
    meta: reads.ClusterMeta,
    bounds: dict[Key, tuple[int, int]],
    timeout: float,
) -> None:
    """A's records below the failover point against B's copies, per partition, scanning
    back until they agree (at most ``mm.failback.divergence.scan.records`` offsets):
    where they differ, the divergence starts at the first record that differs."""
    limit = int(cfg.setting("failback.divergence.scan.records"))
    target = cfg.cluster(flow.target)
    b_reader = reader_of(target, "mm-failback")
    targets = {(p.topic, p.partition): p.target_topic for p in point.partitions}
    rows = [r for r in report.partitions if (r.failover_at or 0) > 0]
    if not rows:
        return
    b_keys = [(targets[(r.topic, r.partition)], r.partition) for r in rows]
    b_bounds = reads.log_bounds(target.librdkafka("consumer"), b_keys, timeout, target.profile)
    b_meta = reads.cluster_meta(target.librdkafka("admin"), f"cluster {flow.target}", timeout)
    for row, b_key in zip(rows, b_keys, strict=True):
        a_start = bounds.get((row.topic, row.partition), (0, 0))[0]
        b_start, b_end = b_bounds.get(b_key, (0, 0))
        hi = min(row.failover_at or 0, row.end_now)
        depth = min(_FIRST_DEPTH, limit)
        while True:
            lo = max(a_start, (row.failover_at or 0) - depth, 0)
            if hi <= lo:
                break
            a_leader = meta.leader(row.topic, row.partition, f"cluster {flow.source}")
            a = _digests(reader, a_leader, row.topic, row.partition, lo, hi, timeout)
            # B's copies of them end its copy of the topic: a window twice as wide
            b_lo = max(b_start, b_end - 2 * ((row.failover_at or 0) - lo) - 100)
            b_leader = b_meta.leader(b_key[0], b_key[1], f"cluster {flow.target}")
            b = _digests(b_reader, b_leader, b_key[0], b_key[1], b_lo, b_end, timeout)
            found, differs = content_divergence(a, b)
            row.compared_from, row.agreement_found, row.content_differs_at = lo, found, differs
            if found or depth >= limit or lo <= a_start:
                break
            depth = min(depth * 4, limit)


def _digests(
    reader: LogReader, leader: str, topic: str, partition: int, start: int, end: int, timeout: float
) -> DigestSeq:
    out = DigestSeq()
    if end <= start:
        return out
    for r in reader.scan(leader, topic, partition, start, end, ScanStats(), timeout=timeout):
        out.append(r.offset, record_digest(r.key, r.value, r.headers, r.timestamp))
    return out


def _read(
    reader: LogReader,
    address: str,
    row: PartitionDivergence,
    timeout: float,
    writer: _Quarantine | None,
) -> None:
    for r in reader.scan(
        address, row.topic, row.partition, row.start, row.end_now, ScanStats(), timeout=timeout
    ):
        row.add(r.offset, r.timestamp)
        if writer is not None:
            writer.add(row.topic, row.partition, r)


class _Quarantine:
    """Parquet files, one per partition, written in row groups."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._writers: dict[tuple[str, int], Any] = {}
        self._rows: dict[tuple[str, int], list[dict[str, Any]]] = {}

    def add(self, topic: str, partition: int, r: Any) -> None:
        rows = self._rows.setdefault((topic, partition), [])
        rows.append(
            {
                "topic": topic,
                "partition": partition,
                "offset": r.offset,
                "timestamp": r.timestamp,
                "key": r.key,
                "value": r.value,
                "headers": [{"key": k, "value": v} for k, v in r.headers],
            }
        )
        if len(rows) >= _ROW_GROUP:
            self._flush(topic, partition)

    def _flush(self, topic: str, partition: int) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        rows = self._rows.pop((topic, partition), [])
        if not rows:
            return
        table = pa.Table.from_pylist(rows, schema=_schema())
        writer = self._writers.get((topic, partition))
        if writer is None:
            self.root.mkdir(parents=True, exist_ok=True)
            path = self.root / f"{topic}-{partition}.parquet"
            writer = self._writers[(topic, partition)] = pq.ParquetWriter(path, table.schema)
        writer.write_table(table)

    def close(self) -> None:
        for topic, partition in list(self._rows):
            self._flush(topic, partition)
        for w in self._writers.values():
            w.close()


def _schema() -> Any:
    import pyarrow as pa

    header = pa.struct([("key", pa.string()), ("value", pa.binary())])
    return pa.schema(
        [
            ("topic", pa.string()),
            ("partition", pa.int32()),
            ("offset", pa.int64()),
            ("timestamp", pa.int64()),
            ("key", pa.binary()),
            ("value", pa.binary()),
            ("headers", pa.list_(header)),
        ]
    )


# --- steps 2 and 3: the reverse mirror, then the groups back ----------------------------


def reverse_flow(cfg: MirrorConfig, flow: FlowConfig) -> FlowConfig:
    """The enabled flow B->A of ``flow`` A->B; ConfigError (exit 2) otherwise.

    Never enabled behind the operator's back: its topic filter decides what of B
    is copied to A, and its mirror keeps running after the failback.
    """
    key = f"{flow.target}->{flow.source}.enabled"
    try:
        rev = cfg.flow(flow.target, flow.source)
    except KeyError:
        rev = None
    if rev is None or not rev.enabled:
        raise ConfigError(
            key,
            None if rev is None else "false",
            f"true: `mm failback` mirrors what was written on {flow.target} since the "
            f"failover back to {flow.source} with the flow {flow.target}->{flow.source} "
            f"(choose what with {flow.target}->{flow.source}.topics); or pass "
            "--quarantine-only to run step 1 alone",
        )
    return rev


def run_failback(
    cfg: MirrorConfig,
    flow: FlowConfig,
    *,
    groups: re.Pattern[str] | None,
    dry_run: bool,
    timeout: float,
    out_dir: Path | None = None,
    quarantine_only: bool = False,
) -> FailbackReport:
    """Steps 1-3 of failing ``flow`` (A->B) back: quarantine, mirror B->A, groups back.

    Configuration problems (no enabled B->A, the identity-policy overlap) raise
    ConfigError before anything is read or written on A.
    """
    rev = None if quarantine_only else reverse_flow(cfg, flow)
    # a log that only the raw reader can read on a TLS/SASL listener: refuse before
    # the failover point is read, not after a round trip to B
    reads.require_readable(cfg.cluster(flow.source), "mm failback")
    if rev is not None:
        reads.require_readable(cfg.cluster(flow.target), "mm failback")
    point = failover_point_of(cfg, flow, timeout)
    back = None if rev is None else _Back(cfg, flow, rev, point, timeout)
    divergence = find_divergence(
        cfg, flow, dry_run=dry_run, timeout=timeout, out_dir=out_dir, point=point
    )
    report = FailbackReport(flow.name, None if rev is None else rev.name, dry_run, divergence)
    if divergence.open:
        report.problems.append(open_transaction_message(cfg, flow, divergence.open))
        return report
    if divergence.rewritten:
        first = divergence.rewritten[0]
        report.problems.append(
            f"{flow.source}'s records below the failover point differ from "
            f"{flow.target}'s copies on {len(divergence.rewritten)} partition(s), from "
            f"offset {first.start} in {first.topic}[{first.partition}] ({flow.source} was "
            "rebuilt from an older copy, or an unclean election lost records): divergent "
            "from there, with the records past the point; nothing mirrored back, no group "
            f"moved (a group moved back would resume among records {flow.target} never had)"
        )
        return report
    if back is None:
        return report
    if divergence.behind:
        report.problems.append(
            f"{flow.source} ends below the failover point on {len(divergence.behind)} "
            f"partition(s): nothing mirrored back, no group moved ({flow.source} lost "
            f"records {flow.target} has; the embedded broker also answers so while a "
            "transaction is open there)"
        )
        return report
    report.reverse = back.catch_up(dry_run)
    if report.reverse.errors:
        report.problems += report.reverse.errors
    elif report.reverse.unmirrored and not dry_run:
        report.problems.append(
            f"{back.rev.name} is {report.reverse.unmirrored} offsets behind {flow.target}'s "
            "ends after catching up: producers still write there? Stop them and run "
            "`mm failback` again"
        )
    back.groups_back(report, groups, dry_run)
    return report


def open_transaction_message(
    cfg: MirrorConfig, flow: FlowConfig, open_parts: list[PartitionDivergence]
) -> str:
    """The refusal for transactions open on A past the failover point, with the way
    out of each: wait for its end, or abort a hanging one with Kafka's own tool (the
    open transaction's first offset is the partition's read_committed end)."""
    servers = ",".join(cfg.cluster(flow.source).bootstrap_servers)
    open_at = {(p.topic, p.partition): (p.end_now, p.log_end or 0) for p in open_parts}
    holders = producers_holding(cfg, flow.source, open_at)
    return (
        f"a transaction is open on {flow.source} past the failover point in "
        f"{describe_open(open_at)}; {holders}: its records are divergent if it commits, so nothing "
        "was quarantined, nothing mirrored back, no group moved. A transaction ends when "
        "its producer commits or aborts it, or when the broker aborts it after the "
        "producer's transaction.timeout.ms; one open longer is hanging (its producer "
        "gone, its abort never written to the partition), and Kafka's tool aborts it: "
        f"{hanging_way_out(servers, flow.source, open_at)}. Once it has ended, run mm "
        "failback again"
    )


class _Back:
    """Reads and writes of steps 2 and 3 for A->B (``flow``) and B->A (``rev``)."""

    def __init__(
        self,
        cfg: MirrorConfig,
        flow: FlowConfig,
        rev: FlowConfig,
        point: FailoverPoint,
        timeout: float,
    ) -> None:
        self.cfg, self.flow, self.rev, self.point, self.timeout = cfg, flow, rev, point, timeout
        # the reverse flow's view of B: topics it mirrors, their names on A, B's ends
        self.rf = FlowReads(cfg, rev, timeout)
        self.a, self.b = cfg.cluster(flow.source), cfg.cluster(flow.target)
        self.a_admin = self.a.librdkafka("admin")
        self.b_admin = self.b.librdkafka("admin")
        # per remote partition on B: what follows the last offset sync on both sides
        self._tails: dict[Key, tuple[list[int], list[int]]] = {}
        # topic on B -> (kind, topic on A)
        # the failover point's mirror position per source partition of A
        self.positions = {(p.topic, p.partition): p.mirrored_to for p in point.partitions}
        self.routes: dict[str, tuple[str, str]] = {
            p.target_topic: (REMOTE, p.topic) for p in point.partitions
        }
        local = {
            t: tt for t, tt in self.rf.remote.items() if not rev.policy().is_heartbeats_topic(t)
        }
        overlap = identity_overlap(self.routes, local)
        if overlap:
            raise ConfigError(
                f"{rev.name}.topics",
                ",".join(rev.topics),
                f"a filter that leaves out {', '.join(overlap)}: on {flow.target} these hold "
                f"{flow.source}'s records under the same names (identity replication policy), "
                f"and mirroring them back would append them to {flow.source}'s own topics "
                "after the divergent records (docs/dr-runbook.md, the identity policy)",
            )
        self.routes |= {t: (LOCAL, tt) for t, tt in local.items()}

    # --- step 2 ---------------------------------------------------------------------
    def catch_up(self, dry_run: bool) -> Reverse:
        """Run the reverse flow's mirror once (or wait for the one running) and read
        how far it got against B's ends."""
        started = time.monotonic()
        rev = Reverse(self.rev.name, "dry run: nothing mirrored")
        if not self.rf.keys:
            # no Spark run for nothing: B has no topic the reverse flow mirrors
            rev.how = f"nothing to mirror: {self.rev.name} selects no topic of {self.flow.target}"
        elif not dry_run:
            if _flow_locked(self.cfg, self.rev):
                rev.how = "waited for the running mirror"
                deadline = started + self.timeout
                while self._unmirrored() and time.monotonic() < deadline:
                    time.sleep(1.0)
            else:
                rev.how = "mirrored once"
                rev.errors = _mirror_once(self.cfg, self.rev)
        rev.seconds = time.monotonic() - started
        ends, positions = self.rf.ends(), self.rf.positions()
        rev.partitions = [
            ReversePartition(t, p, self.rf.remote[t], ends.get((t, p), 0), positions.get((t, p)))
            for t, p in self.rf.keys
        ]
        return rev

    def _unmirrored(self) -> bool:
        ends, positions = self.rf.ends(), self.rf.positions()
        return any(positions.get(k, 0) < e for k, e in ends.items())

    # --- step 3 ---------------------------------------------------------------------
    def groups_back(
        self, report: FailbackReport, selected: re.Pattern[str] | None, dry_run: bool
    ) -> None:
        on_b = TargetGroups(self.b_admin, self.timeout)
        names = self._groups(selected)
        committed = on_b.committed(names)
        offsets: dict[str, dict[Key, int]] = {}
        for g in names:
            got = committed[g]
            if isinstance(got, Exception):
                report.group_status[g] = FAILED
                report.problems.append(f"group {g!r}: {got}")
                continue
            mine = {k: o for k, o in got.items() if k[0] in self.routes}
            if mine:
                offsets[g] = mine
        if not offsets:
            if selected is not None and not report.group_status:
                report.problems.append(
                    f"no group matching {selected.pattern!r} has offsets on {self.flow.target} "
                    f"for the topics of {self.flow.name} or {self.rev.name}"
                )
            return
        histories = self._histories()
        described = on_b.describe(sorted(offsets))
        before_a = TargetGroups(self.a_admin, self.timeout).committed(sorted(offsets))
        todo: dict[str, dict[Key, tuple[int, int | None]]] = {}
        for g, offs in sorted(offsets.items()):
            rows = plan_group(g, offs, self.routes, lambda *a: self._answer(histories, dry_run, *a))
            was = before_a[g]
            for r in rows:
                r.before = None if isinstance(was, Exception) else was.get((r.topic, r.partition))
            keep_ahead(rows)
            report.rows += rows
            state = described[g]
            if isinstance(state, Exception) or not group_is_idle(state[0]):
                report.group_status[g] = REFUSED
                for r in rows:
                    r.note = REFUSED
                # an unreadable state is no consumer to stop (as mm.dr.groups says it)
                why = (
                    f": its state on {self.flow.target} could not be read, so it cannot be "
                    f"shown to have no consumers there ({state}); retry when the cluster "
                    "answers"
                    if isinstance(state, Exception)
                    else f" is not idle on {self.flow.target} (state {state[0]}): its offsets "
                    "there may still move; stop its consumers there and retry"
                )
                report.problems.append(
                    f"group {g!r}{why}. Nothing was committed on {self.flow.source}"
                )
                continue
            bad = [r for r in not_exact(rows) if not (dry_run and r.how == AFTER_STEP_2)]
            if bad:
                report.group_status[g] = NOT_EXACT
                for r in rows:
                    r.note = NOT_EXACT if r in bad else "not moved"
                report.problems.append(
                    f"group {g!r} not moved: no exact offset on {self.flow.source} for "
                    + ", ".join(
                        f"{r.from_topic}[{r.partition}]@{r.from_offset} ({r.how})" for r in bad
                    )
                )
                continue
            todo[g] = translations(r for r in rows if r.after is not None)
            for r in rows:
                if r.after is None:
                    r.note = AFTER_STEP_2
        results = move_groups(self.a_admin, self.flow.source, todo, dry_run, self.timeout)
        for g, result in results.items():
            notes = {(x.topic, x.partition): x for x in result.rows}
            for r in report.rows:
                x = notes.get((r.topic, r.partition)) if r.group == g else None
                if x is not None:
                    r.before, r.note = x.before, x.note
            waits = any(r.note == AFTER_STEP_2 for r in report.rows if r.group == g)
            # a dry run has not mirrored yet: the group still moves once it has
            report.group_status[g] = (
                DRY_RUN if waits and result.status == UNCHANGED else result.status
            )
            if result.message:
                report.problems.append(result.message)

    def _groups(self, selected: re.Pattern[str] | None) -> list[str]:
        """Groups on B the flow tracks (its groups filters, never ``__*``), matching
        ``selected`` (whole name)."""
        from mm_client.kafka import new_admin
        from mm_client.kafka.errors import wrap

        admin = new_admin(self.b_admin)
        try:
            res = admin.list_consumer_groups(request_timeout=self.timeout).result(self.timeout + 5)
        except Exception as exc:
            raise wrap(exc, f"list consumer groups on {self.flow.target}") from exc
        return sorted(
            g.group_id
            for g in res.valid
            if tracked_group(self.flow, g.group_id)
            and (selected is None or selected.fullmatch(g.group_id))
        )

    def _histories(self) -> dict[str, dict[Key, PartitionHistory]]:
        """Offset syncs per partition of both flows (keyed by their source topic), with
        each mirror's pending syncs and position."""
        return {
            REMOTE: _flow_histories(
                self.cfg, self.flow, {p.topic for p in self.point.partitions}, self.timeout
            ),
            LOCAL: _flow_histories(self.cfg, self.rev, set(self.rf.remote), self.timeout),
        }

    def _answer(
        self,
        histories: dict[str, dict[Key, PartitionHistory]],
        dry_run: bool,
        kind: str,
        topic: str,
        partition: int,
        offset: int,
    ) -> Back:
        if kind == LOCAL:
            got = forward_offset(histories[LOCAL].get((topic, partition)), offset)
            if dry_run and got.offset is None and not self._mirrored(topic, partition, offset):
                return Back(None, True, AFTER_STEP_2)
            return got
        a_topic = self.routes[topic][1]
        at = self.positions.get((a_topic, partition))

        def tail(up: int, down: int) -> tuple[list[int], list[int]]:
            assert at is not None  # only asked for with a failover point
            return self._tail(topic, a_topic, partition, up, down, at)

        return inverse_with_tail(histories[REMOTE].get((a_topic, partition)), offset, at, tail)

    def _mirrored(self, topic: str, partition: int, offset: int) -> bool:
        pos = self.rf.positions().get((topic, partition))
        return pos is not None and offset <= pos

    def _tail(
        self, topic: str, a_topic: str, partition: int, up: int, down: int, position: int
    ) -> tuple[list[int], list[int]]:
        """The committed records after the last offset sync: their offsets on B's
        ``topic`` (to its end) and on A's ``a_topic`` (below the failover point)."""
        key = (topic, partition)
        if key not in self._tails:
            copies = reads.committed_offsets(
                self.b, topic, partition, down + 1, TO_THE_END, self.timeout
            )
            originals = reads.committed_offsets(
                self.a, a_topic, partition, up + 1, position, self.timeout
            )
            self._tails[key] = (copies, originals)
        return self._tails[key]


def _flow_histories(
    cfg: MirrorConfig, flow: FlowConfig, topics: set[str], timeout: float
) -> dict[Key, PartitionHistory]:
    """``flow``'s offset syncs of ``topics`` per source partition, as the checkpoint
    job keeps them, with the mirror's position and its last transaction's syncs
    (from its state group's commit metadata: with the syncs topic on the source, they
    are written there only after the commit)."""
    from mm_client.kafka import group_offsets, new_admin

    from mm.source.state import decode_state

    where = flow.target if flow.offset_syncs_topic_location == "target" else flow.source
    syncs_topic = offset_syncs_topic(flow)
    admin_conf = cfg.cluster(where).librdkafka("admin")
    meta = reads.cluster_meta(admin_conf, f"cluster {where}", timeout)
    holes = reads.syncs_gaps_are_holes(admin_conf, syncs_topic, where == flow.target, timeout)
    read = reads.read_syncs(
        reader_of(cfg.cluster(where), "mm-failback"),
        meta.leaders.get((syncs_topic, 0)),
        syncs_topic,
        topics,
        timeout,
        _PAGE_BYTES,
        holes,
    )
    out = {k: history(syncs) for k, syncs in read.syncs.items()}
    policy = flow.policy()
    tgt_admin = new_admin(cfg.cluster(flow.target).librdkafka("admin"))
    state = group_offsets(tgt_admin, [state_group(flow)], timeout, flow.target)
    for tp in state.get(state_group(flow), []):
        topic = policy.upstream_topic(tp.topic) or tp.topic
        if tp.error is not None or tp.offset < 0 or topic not in topics:
            continue
        h = out.setdefault((topic, tp.partition), PartitionHistory())
        decoded = decode_state(tp.metadata)
        if decoded is not None:
            h.set_pending(decoded[1], decoded[0])
        h.position = tp.offset
    return out


def _flow_locked(cfg: MirrorConfig, flow: FlowConfig) -> bool:
    """Is a mirror of ``flow`` running with this state dir (it holds the flow's lock)?"""
    from mm.source.job import lock_flow_state

    try:
        lock = lock_flow_state(cfg, flow)
    except MirrorError:
        return True
    lock.close()
    return False


def _mirror_once(cfg: MirrorConfig, flow: FlowConfig) -> list[str]:
    """`mm mirror --once --flow B->A` in this process; the partitions and topics it
    could not mirror."""
    from mm.source.job import run_mirror

    stats = run_mirror(cfg, once=True, trigger_seconds=1.0, flows=[flow]).get(flow.name)
    if stats is None:
        return []
    errors = [
        f"{flow.name}: not mirrored: {t}: {e}" for t, e in sorted(stats.failed_topics.items())
    ]
    errors += [f"{flow.name}: stopped: {t}[{p}]: {e}" for (t, p), e in sorted(stats.errors.items())]
    return errors
