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
   rebalancing states and UNKNOWN, what Tansu answers while a consumer joins,
   mean members even when the broker lists none), and so is a group whose state
   cannot be read. Apache Kafka refuses commits into an active group itself, but
   not every Kafka-compatible broker does (Tansu accepts some), so the check is
   ours. A member that joins between the check and the commit is not seen;
4. otherwise the translated offsets are committed into the group on the target
   (:func:`mm_client.commit_group_offsets`), unless ``--dry-run``.

The translation is committed as is, also when it is behind the group's offset on
the target (the note says ``backwards``): the checkpoints say where the group
stopped on the source, so the group re-reads rather than skips. Partitions
without a checkpoint are left alone.

Prints one row per partition (group, topic, partition, offset before or ``-``,
translated offset, note) or JSON. Exit code 1 when a group was refused or failed,
or when none of the selected groups has checkpoints; the other groups are still
processed.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mm.commands.flows import add_config_option
from mm.config import FlowConfig, MirrorConfig, load_config

# (target topic, partition)
TP = tuple[str, int]

MOVED = "moved"
UNCHANGED = "unchanged"
DRY_RUN = "dry-run"
REFUSED = "refused"
NO_CHECKPOINTS = "no-checkpoints"
FAILED = "failed"


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
    parser.add_argument(
        "--flow",
        metavar="SRC->TGT",
        help="flow whose checkpoints to use (default: the only enabled flow)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print what would be committed; commit nothing",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        help="seconds for each cluster operation (checkpoints read, group reads, commit; "
        "default 30)",
    )


@dataclass(frozen=True)
class Row:
    """One partition of one group: its offset on the target before, and the translation."""

    group: str
    topic: str
    partition: int
    before: int | None
    after: int
    upstream: int | None
    note: str


@dataclass
class GroupResult:
    group: str
    status: str
    rows: list[Row] = field(default_factory=list)
    state: str | None = None
    members: int | None = None
    message: str | None = None

    @property
    def failed(self) -> bool:
        return self.status in (REFUSED, FAILED)


def note_for(before: int | None, after: int, *, dry_run: bool, refused: bool = False) -> str:
    """``refused`` for every partition of a refused group; else ``unchanged``, or what
    happens to a partition moving from ``before`` to ``after``."""
    if refused:
        return REFUSED
    if before == after:
        return UNCHANGED
    note = DRY_RUN if dry_run else MOVED
    if before is not None and after < before:
        note += ", backwards"
    return note


def plan_rows(
    group: str,
    translated: Mapping[TP, int],
    before: Mapping[TP, int],
    *,
    dry_run: bool,
    refused: bool = False,
    upstream: Mapping[TP, int] | None = None,
) -> list[Row]:
    """One row per translated partition, sorted; ``before`` lacks partitions never committed."""
    return [
        Row(
            group,
            topic,
            partition,
            before.get((topic, partition)),
            after,
            (upstream or {}).get((topic, partition)),
            note_for(before.get((topic, partition)), after, dry_run=dry_run, refused=refused),
        )
        for (topic, partition), after in sorted(translated.items())
    ]


def changes(rows: Iterable[Row]) -> dict[TP, int]:
    """The partitions whose committed offset differs from the translation."""
    return {(r.topic, r.partition): r.after for r in rows if r.before != r.after}


def group_status(rows: list[Row], *, dry_run: bool) -> str:
    if not changes(rows):
        return UNCHANGED
    return DRY_RUN if dry_run else MOVED


def resolve_flow(cfg: MirrorConfig, name: str | None) -> FlowConfig:
    from mm.errors import ConfigError, UsageError

    if name:
        source, sep, target = name.partition("->")
        try:
            if not sep:
                raise KeyError(name)
            return cfg.flow(source.strip(), target.strip())
        except KeyError:
            names = sorted(f.name for f in cfg.flows)
            raise ConfigError("--flow", name, f"one of the configured flows {names}") from None
    enabled = cfg.enabled_flows()
    if len(enabled) != 1:
        names = sorted(f.name for f in enabled)
        raise UsageError(
            f"--flow is required: {len(enabled)} enabled flows ({', '.join(names) or 'none'})"
        )
    return enabled[0]


def _selector(args: argparse.Namespace) -> Callable[[str], bool] | re.Pattern[str]:
    from mm.errors import UsageError

    if args.groups is not None:
        try:
            return re.compile(args.groups)
        except re.error as exc:
            raise UsageError(f"--groups {args.groups!r} is not a valid regex: {exc}") from None
    wanted = set(args.group)
    if "" in wanted:
        raise UsageError("--group must not be empty")
    return lambda g: g in wanted


class _Target:
    """The target cluster's group reads (one AdminClient, requests in parallel)."""

    def __init__(self, admin_conf: Mapping[str, Any], timeout: float) -> None:
        from mm_client.kafka import new_admin

        self.admin = new_admin(admin_conf)
        self.timeout = timeout

    def describe(self, groups: list[str]) -> dict[str, tuple[str, int] | Exception]:
        """Group -> (state name, members listed), or the error describing it."""
        from mm_client.kafka import describe_groups

        return {
            g: d if isinstance(d, Exception) else (d.state, d.members)
            for g, d in describe_groups(self.admin, groups, self.timeout).items()
        }

    def committed(self, groups: list[str]) -> dict[str, dict[TP, int] | Exception]:
        """Group -> its committed offsets (partitions without one left out), or the error."""
        from mm_client.kafka import group_offsets_or_errors

        out: dict[str, dict[TP, int] | Exception] = {}
        for g, tps in group_offsets_or_errors(self.admin, groups, self.timeout).items():
            if isinstance(tps, Exception):
                out[g] = tps
                continue
            bad = [tp for tp in tps if tp.error is not None]
            if bad:
                out[g] = RuntimeError(
                    f"committed offsets of group {g}: "
                    + ", ".join(f"{tp.topic}[{tp.partition}]: {tp.error}" for tp in bad)
                )
                continue
            out[g] = {(tp.topic, tp.partition): tp.offset for tp in tps if tp.offset >= 0}
        return out


def run(args: argparse.Namespace) -> int:
    from mm_client import commit_group_offsets, read_checkpoints

    from mm.errors import MirrorError

    cfg = load_config(args.config)
    flow = resolve_flow(cfg, args.flow)
    selector = _selector(args)
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
    if todo:
        admin_conf = target.librdkafka("admin")
        reads = _Target(admin_conf, args.timeout)
        described = reads.describe(todo)
        committed = reads.committed(todo)
        for g in todo:
            cps = snap.checkpoints(g)
            translated = {(tp.topic, tp.partition): cp.downstream_offset for tp, cp in cps.items()}
            upstream = {(tp.topic, tp.partition): cp.upstream_offset for tp, cp in cps.items()}
            result = judge_group(
                g,
                flow.target,
                described[g],
                committed[g],
                translated,
                upstream,
                dry_run=args.dry_run,
            )
            if result.status in (REFUSED, FAILED):
                results[g] = result
                continue
            rows, state, members = result.rows, result.state, result.members
            todo_offsets = changes(rows)
            if todo_offsets and not args.dry_run:
                try:
                    commit_group_offsets(admin_conf, g, todo_offsets, args.timeout)
                except MirrorError as exc:
                    result = GroupResult(
                        g,
                        FAILED,
                        [_failed(r) for r in rows],
                        state,
                        members,
                        f"group {g!r}: committing its offsets on {flow.target} failed: {exc}",
                    )
            results[g] = result
    ordered = [results[g] for g in selected]
    if args.groups is not None and not selected:
        message = f"no group matching {args.groups!r} has checkpoints in {topic} on {flow.target}"
    elif not todo:
        message = "none of the selected groups has checkpoints"
    else:
        message = None
    ok = bool(todo) and not any(r.failed for r in ordered)
    if args.json:
        print(json.dumps(_as_json(flow, topic, args, ordered, ok, message), indent=2))
    else:
        rows = [row for r in ordered for row in r.rows]
        if rows:
            print(format_table(rows))
        print(summary(flow, ordered, dry_run=args.dry_run))
    for r in ordered:
        if r.message:
            print(f"mm failover: {r.message}", file=sys.stderr)
    if message and (args.groups is not None or len(selected) > 1):
        print(f"mm failover: {message}", file=sys.stderr)
    return 0 if ok else 1


def judge_group(
    group: str,
    cluster: str,
    described: tuple[str, int] | Exception,
    before: Mapping[TP, int] | Exception,
    translated: Mapping[TP, int],
    upstream: Mapping[TP, int],
    *,
    dry_run: bool,
) -> GroupResult:
    """What failing ``group`` over on ``cluster`` does (pure): refused unless the group
    is provably idle there (its state read and EMPTY or DEAD); otherwise its rows
    and status (moved / unchanged / dry-run) before anything is committed."""
    from mm.checkpoint.rules import group_is_idle

    if isinstance(described, Exception):
        return GroupResult(
            group,
            REFUSED,
            plan_rows(group, translated, {}, dry_run=dry_run, refused=True, upstream=upstream),
            message=f"group {group!r}: its state on {cluster} could not be read, so it "
            f"cannot be shown to have no consumers there ({described}); retry when the "
            "cluster answers. Its offsets were not changed",
        )
    if isinstance(before, Exception):
        return GroupResult(group, FAILED, message=f"group {group!r}: {before}")
    state, members = described
    if not group_is_idle(state):
        joining = "; a consumer may be joining it" if state.upper() == "UNKNOWN" else ""
        return GroupResult(
            group,
            REFUSED,
            plan_rows(group, translated, before, dry_run=dry_run, refused=True, upstream=upstream),
            state,
            members,
            f"group {group!r} is not idle on {cluster} (state {state}, {members} member(s) "
            f"listed{joining}): only an Empty or Dead group is moved; stop its consumers "
            "there and retry. Its offsets were not changed",
        )
    rows = plan_rows(group, translated, before, dry_run=dry_run, upstream=upstream)
    return GroupResult(group, group_status(rows, dry_run=dry_run), rows, state, members)


def _failed(row: Row) -> Row:
    if row.note == UNCHANGED:
        return row
    return Row(row.group, row.topic, row.partition, row.before, row.after, row.upstream, FAILED)


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
