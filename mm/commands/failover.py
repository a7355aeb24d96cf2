"""`mm failover`: move consumer groups to their translated offsets on the target.

For each selected group (``--group``, repeatable, or ``--groups REGEX``, a regex
matching the whole group name as MM2's ``groups``):

1. its translated offsets are taken from ``<source>.checkpoints.internal`` on the
   flow's target, read once for all groups with the failover client's reader
   (:func:`mm_client.read_checkpoints`, what ``mm_client.translate_offsets`` and
   ``translate_all`` use);
2. its committed offsets on the target are read (``ListConsumerGroupOffsets``);
3. a group that is not idle on the target is refused before anything is
   committed, with the checkpoint job's own rule
   (:func:`mm.checkpoint.rules.group_is_idle`: EMPTY or DEAD only; STABLE, the
   rebalancing states and UNKNOWN, what some brokers answer while a consumer joins,
   mean members even when the broker lists none), and so is a group whose state
   cannot be read. Apache Kafka refuses commits into an active group itself, but
   not every Kafka-compatible broker does (the embedded one accepts some), so the
   check is ours. A member that joins between the check and the commit is not seen;
4. otherwise the translated offsets are committed into the group on the target
   (:func:`mm_client.commit_group_offsets`), unless ``--dry-run``.

The translation is committed as is, also when it is behind the group's offset on
the target (the note says ``backwards``): the checkpoints say where the group
stopped on the source, so the group re-reads rather than skips. Partitions
without a checkpoint are left alone.

Where the source still answers (within 5 s), each translation is also proven by
content before it is committed (:mod:`mm.dr.failover_proof`): ``proven``,
``conservative`` (the group committed further on the source after its checkpoint:
it reads those records again) or ``unprovable`` with the reason; with the source
down the report says so. The proof never holds a group back (``--no-proof`` skips
it).

Prints one row per partition (group, topic, partition, offset before or ``-``,
translated offset, note) or JSON. Exit code 1 when a group was refused or failed,
or when none of the selected groups has checkpoints; the other groups are still
processed. The proof does not change the exit code: read its counts.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from typing import Any

from mm.commands.flows import add_config_option, add_one_flow_option, groups_pattern, one_flow
from mm.commands.translate import skipped_json
from mm.config import FlowConfig, load_config
from mm.dr.failover_point import EXACT, FailoverPoint, point_loss_sentence
from mm.dr.failover_proof import PROVEN, FailoverProof
from mm.dr.groups import (
    DRY_RUN,
    FAILED,
    MOVED,
    NO_CHECKPOINTS,
    REFUSED,
    UNCHANGED,
    GroupResult,
    Row,
    move_groups,
)


def add_parser(parser: argparse.ArgumentParser) -> None:
    add_config_option(parser)
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--group",
        action="append",
        metavar="G",
        help="consumer group to fail over (repeatable)",
    )
    which.add_argument(
        "--groups",
        metavar="REGEX",
        help="every group with checkpoints whose whole name matches REGEX",
    )
    add_one_flow_option(parser, "checkpoints to use")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print what would be committed; commit nothing",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument(
        "--no-proof",
        action="store_true",
        help="do not prove the translations on the source, even when it answers",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        help="seconds for each cluster operation (checkpoints read, group reads, commit; "
        "default 30)",
    )


def _selector(args: argparse.Namespace) -> Callable[[str], bool] | re.Pattern[str]:
    from mm.errors import UsageError

    pattern = groups_pattern(args.groups)
    if pattern is not None:
        return pattern
    wanted = set(args.group)
    if "" in wanted:
        raise UsageError("--group must not be empty")
    return lambda g: g in wanted


def run(args: argparse.Namespace) -> int:
    from mm_client import read_checkpoints

    from mm.errors import UsageError

    if args.timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    cfg = load_config(args.config)
    flow = one_flow(cfg, args.flow)
    selector = _selector(args)
    from mm.dr.failover_point_run import read_failover_point, record_failover_point, source_down

    # asked once: the point's exact loss and the proof both need the source to answer
    down = source_down(cfg, flow, args.timeout)
    # where the mirror stood, read from the target (the source may be gone; where it
    # answers, its ends make the loss exact); recorded there before any group moves,
    # also when no selected group has checkpoints: the point is the flow's (the
    # application moved to the target), and failback needs it to quarantine what the
    # source took afterwards
    point = read_failover_point(cfg, flow, args.timeout, down=down)
    policy = flow.policy()
    target = cfg.cluster(flow.target)
    # one read of the checkpoints topic for every selected group
    snap = read_checkpoints(
        target.librdkafka("consumer"),
        flow.source,
        selector,
        args.timeout,
        replication_policy=policy,
    )
    topic = snap.topic
    found = set(snap.groups)
    if args.groups is not None:
        selected = snap.groups
    else:
        selected = list(dict.fromkeys(args.group))
    results: dict[str, GroupResult] = {}
    for g in selected:
        if g not in found:
            results[g] = GroupResult(
                g,
                NO_CHECKPOINTS,
                message=f"no checkpoints for group {g!r} in {topic} on {flow.target}",
            )
    todo = [g for g in selected if g in found]
    recorded = not args.dry_run
    point_topic = record_failover_point(cfg, flow, point, args.timeout) if recorded else None
    translations = {}
    for g in todo:
        cps = snap.checkpoints(g)
        translations[g] = {
            (tp.topic, tp.partition): (cp.downstream_offset, cp.upstream_offset)
            for tp, cp in cps.items()
        }
    from mm.dr.failover_proof import prove_failover

    if args.no_proof or not translations:
        proof = FailoverProof(False, "not proven: --no-proof")
    elif down is not None:
        proof = FailoverProof(False, f"not proven: {down}")
    else:
        proof = prove_failover(cfg, flow, translations, args.timeout)
    results |= move_groups(
        target.librdkafka("admin"), flow.target, translations, args.dry_run, args.timeout
    )
    ordered = [results[g] for g in selected]
    if args.groups is not None and not selected:
        message = f"no group matching {args.groups!r} has checkpoints in {topic} on {flow.target}"
    elif not todo:
        message = "none of the selected groups has checkpoints"
    else:
        message = None
    ok = bool(todo) and not any(r.failed for r in ordered)
    if args.json:
        out = {**_as_json(flow, topic, args, ordered, ok, message), **skipped_json(snap)}
        out["failover_point"] = {**point.to_json(), "recorded_in": point_topic}
        out["proof"] = proof.to_json()
        print(json.dumps(out, indent=2))
    else:
        rows = [row for r in ordered for row in r.rows]
        if rows:
            print(format_table(rows))
        print(summary(flow, ordered, dry_run=args.dry_run))
        print(describe_point(point, point_topic, flow.target, dry_run=args.dry_run))
        print(describe_proof(proof, flow.source))
    for r in ordered:
        if r.message:
            print(f"mm failover: {r.message}", file=sys.stderr)
    if message and (args.groups is not None or len(selected) > 1):
        print(f"mm failover: {message}", file=sys.stderr)
    return 0 if ok else 1


COLUMNS = ("GROUP", "TOPIC", "PARTITION", "BEFORE", "AFTER", "NOTE")


def format_table(rows: list[Row]) -> str:
    """Aligned columns with a header; ``-`` where the group had no offset before."""
    cells = [COLUMNS] + [
        (
            r.group,
            r.topic,
            str(r.partition),
            "-" if r.before is None else str(r.before),
            str(r.after),
            r.note,
        )
        for r in rows
    ]
    widths = [max(len(c[i]) for c in cells) for i in range(len(COLUMNS))]
    right = {2, 3, 4}  # numbers
    lines = []
    for c in cells:
        parts = [
            c[i].rjust(widths[i]) if i in right else c[i].ljust(widths[i]) for i in range(len(c))
        ]
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)


def summary(flow: FlowConfig, results: list[GroupResult], *, dry_run: bool) -> str:
    counts = {s: sum(1 for r in results if r.status == s) for s in _STATUSES}
    shown = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    mode = " (dry run: nothing committed)" if dry_run else ""
    return f"failover {flow.name}: {len(results)} group(s): {shown or 'none'}{mode}"


_STATUSES = (MOVED, UNCHANGED, DRY_RUN, REFUSED, NO_CHECKPOINTS, FAILED)


def describe_point(
    point: FailoverPoint, recorded_in: str | None, cluster: str, *, dry_run: bool = True
) -> str:
    """The failover point in a few lines: the estimated loss, then the partitions behind."""
    where = (
        f"recorded in {recorded_in} on {cluster}"
        if recorded_in
        else "dry run, not recorded"
        if dry_run
        else "not recorded: no selected group has checkpoints"
    )
    loss = point_loss_sentence(point)
    if point.loss_kind == EXACT:
        seconds = point.loss_seconds
        loss += f", up to {'an unknown span' if seconds is None else f'{seconds:.1f}s'} of data"
    elif point.ends_seen_ms is not None:
        loss += f"; the ends were read at {_utc(point.ends_seen_ms)}"
    else:
        loss += (
            " (mm-mirror-ends topic missing or empty, or its newest record for the flow "
            "corrupt: see the log)"
        )
    if point.source_unread is not None and point.loss_kind != EXACT:
        loss += f"; not read at the failover: {point.source_unread}"
    lines = [f"failover point ({where}): {loss}"]
    behind = [p for p in point.partitions if p.loss_offsets]
    known = "" if point.loss_kind == EXACT else ", or more"
    for p in behind[:20]:
        lines.append(
            f"  {p.topic}[{p.partition}]: mirrored up to {p.mirrored_to}, source end seen "
            f"{p.source_end_seen} ({p.loss_offsets} offsets behind{known})"
        )
    if len(behind) > 20:
        lines.append(f"  ... and {len(behind) - 20} more partitions behind")
    return "\n".join(lines)


def describe_proof(proof: FailoverProof, source: str) -> str:
    """The proof on the source in a line, and each translation not proven exact."""
    if not proof.source_answered:
        return f"translations on {source}: {proof.message}"
    counts = proof.counts()
    lines = [
        f"translations proven on {source} by content: "
        + ", ".join(f"{n} {status}" for status, n in counts.items())
    ]
    for p in [p for p in proof.partitions if p.status != PROVEN][:20]:
        lines.append(f"  {p.group} {p.topic}[{p.partition}]: {p.status}: {p.reason}")
    return "\n".join(lines)


def _utc(ms: int) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _as_json(
    flow: FlowConfig,
    topic: str,
    args: argparse.Namespace,
    results: list[GroupResult],
    ok: bool,
    message: str | None,
) -> dict[str, Any]:
    return {
        "flow": flow.name,
        "cluster": flow.target,
        "checkpoints_topic": topic,
        "dry_run": bool(args.dry_run),
        "ok": ok,
        "message": message,
        "groups": [
            {
                "group": r.group,
                "status": r.status,
                "state": r.state,
                "members": r.members,
                "message": r.message,
                "partitions": [
                    {
                        "topic": row.topic,
                        "partition": row.partition,
                        "before": row.before,
                        "after": row.after,
                        "upstream_offset": row.upstream,
                        "note": row.note,
                    }
                    for row in r.rows
                ],
            }
            for r in results
        ],
    }
