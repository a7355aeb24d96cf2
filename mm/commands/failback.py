"""`mm failback`: consumers back from the target (B) to the old primary (A), in 3 steps.

1. **Divergence.** Reads the newest failover point `mm failover` recorded on B and
   reports per partition the records A holds past it (written to A, never mirrored
   to B: the applications on B never saw them): count, offset range and time
   range; copies them to Parquet files before anything else.
2. **Reverse.** Runs the mirror of the reverse flow B->A once, as
   ``mm mirror --once --flow B->A`` does (or, when a mirror of B->A already runs
   with this state dir, waits up to ``--timeout`` for it to reach B's ends), so what
   was written on B since the failover is on A (``orders`` on B as ``B.orders`` on A
   with the default policy). B->A must be enabled in the config (exit 2 otherwise).
3. **Groups back.** Each selected group on B (``--groups RE``, default every group
   the flow tracks with offsets on B for either flow's topics) gets, per partition,
   an exact offset on A: on A's copies of B's topics from the B->A offset syncs
   (the checkpoint job's rule); on A's own topics from the A->B offset syncs read
   backwards, the failover point's position past the last mirrored record (the
   group then starts at the first divergent record). A group is committed on A
   only when every partition is exact, it is idle on B (its offsets there are
   final) and idle on A (:mod:`mm.dr.groups`, as `mm failover`); otherwise it is
   left alone and named.

``--dry-run`` reports all three steps (offsets on A before and after), writes and
commits nothing; offsets on B's own topics that the reverse mirror has not copied
yet are reported as known after step 2. ``--quarantine-only`` runs step 1 alone.

Exit codes: 0 every step done and every selected group moved exactly (or would be,
with ``--dry-run``); 1 no failover point, A ends below the failover point on some
partition or its records below it differ from B's copies (A lost records B has:
they are reported and quarantined, nothing is mirrored nor moved), the reverse mirror
failed or is still behind B, or some group was refused or has no exact offset; 2
invalid configuration or usage (among them: B->A not enabled, or the identity
policy with a B->A filter that would mirror A's own topics back).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from mm.commands.flows import add_config_option, add_one_flow_option, groups_pattern, one_flow
from mm.config import load_config
from mm.dr.divergence import DivergenceReport
from mm.dr.failback import FailbackReport, Reverse


def add_parser(parser: argparse.ArgumentParser) -> None:
    add_config_option(parser)
    add_one_flow_option(parser, "failover to undo (the flow A->B that consumers left A by)")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="report what each step would do; write, mirror and commit nothing",
    )
    parser.add_argument(
        "--groups",
        metavar="REGEX",
        help="only the groups whose whole name matches REGEX (default: every group the "
        "flow tracks with offsets on the target for either flow's topics)",
    )
    parser.add_argument(
        "--quarantine-only",
        action="store_true",
        help="step 1 only: report and quarantine the divergence (no reverse flow needed)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--quarantine-dir",
        metavar="DIR",
        help="where the divergent records go (default: "
        "<mm.state.dir>/failback/<SRC>-<TGT>/<UTC time>/)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        help="seconds per cluster operation, and for a running reverse mirror to catch up "
        "(default 60)",
    )


def run(args: argparse.Namespace) -> int:
    from mm.dr.failback_run import run_failback
    from mm.errors import UsageError

    if args.timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    if args.quarantine_only and args.groups is not None:
        raise UsageError(
            "--groups with --quarantine-only: step 1 moves no group, so --groups would be "
            "ignored; expected one of them (--quarantine-only alone, or --groups without it)"
        )
    groups = groups_pattern(args.groups)
    cfg = load_config(args.config)
    flow = one_flow(cfg, args.flow)
    report = run_failback(
        cfg,
        flow,
        groups=groups,
        dry_run=args.dry_run,
        timeout=args.timeout,
        out_dir=Path(args.quarantine_dir) if args.quarantine_dir else None,
        quarantine_only=args.quarantine_only,
    )
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        print(render(report))
    for problem in report.problems:
        print(f"mm failback: {problem}", file=sys.stderr)
    lost = report.divergence.behind or report.divergence.rewritten
    return 0 if report.ok and not lost else 1


def render(report: FailbackReport) -> str:
    lines = [render_divergence(report.divergence)]
    if report.reverse is not None:
        lines.append(render_reverse(report.reverse))
    if report.reverse_flow is not None:
        lines.append(render_groups(report))
    else:
        lines.append("steps 2 and 3 not run (--quarantine-only)")
    return "\n".join(lines)


def _table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> list[str]:
    cells = [header, *rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(header))]
    return ["  ".join(c[i].ljust(widths[i]) for i in range(len(c))).rstrip() for c in cells]


def render_reverse(rev: Reverse) -> str:
    rows = [
        (
            p.topic,
            str(p.partition),
            p.target_topic,
            str(p.end),
            "-" if p.position is None else str(p.position),
            str(p.unmirrored),
        )
        for p in rev.partitions
    ]
    lines = _table(("B TOPIC", "PARTITION", "A TOPIC", "END ON B", "MIRRORED TO", "BEHIND"), rows)
    lines.append(
        f"reverse {rev.flow}: {rev.how} in {rev.seconds:.1f}s; {rev.unmirrored} offsets of "
        f"{len(rev.partitions)} partition(s) not mirrored"
    )
    return "\n".join(lines)


def render_groups(report: FailbackReport) -> str:
    def num(x: int | None) -> str:
        return "-" if x is None else str(x)

    rows = [
        (
            r.group,
            r.topic,
            str(r.partition),
            num(r.before),
            num(r.after),
            f"{r.from_topic}[{r.partition}]@{r.from_offset}",
            r.note if r.exact or r.note else "not exact",
            r.how,
        )
        for r in report.rows
    ]
    lines = (
        _table(
            ("GROUP", "A TOPIC", "PARTITION", "BEFORE", "AFTER", "FROM (B)", "NOTE", "HOW"), rows
        )
        if rows
        else []
    )
    counts: dict[str, int] = {}
    for status in report.group_status.values():
        counts[status] = counts.get(status, 0) + 1
    shown = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "none"
    mode = " (dry run: nothing committed)" if report.dry_run else ""
    lines.append(f"groups back on {report.divergence.source}: {shown}{mode}")
    return "\n".join(lines)


def render_divergence(report: DivergenceReport) -> str:
    header = ("TOPIC", "PARTITION", "FAILOVER AT", "END NOW", "DIVERGENT", "OFFSETS", "TIME")
    rows = [
        (
            p.topic,
            str(p.partition),
            "-" if p.failover_at is None else str(p.failover_at),
            str(p.end_now),
            f"A {p.behind} BEHIND"
            if p.behind
            else ("TRANSACTION OPEN" if p in report.open else str(p.records)),
            f"{p.first_offset}-{p.last_offset}" if p.records else "-",
            f"{_utc(p.first_ms)} .. {_utc(p.last_ms)}" if p.records else "-",
        )
        for p in report.partitions
    ]
    cells = [header, *rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(header))]
    lines = ["  ".join(c[i].ljust(widths[i]) for i in range(len(c))).rstrip() for c in cells]
    where = (
        "dry run: nothing written"
        if report.dry_run
        else f"quarantined in {report.quarantine}"
        if report.records
        else "nothing to quarantine"
    )
    lines.append(
        f"failback {report.flow}: {report.records} divergent records on {report.source} "
        f"(written after the mirror's last copy, never on the target); {where}"
    )
    for p in report.rewritten:
        lines.append(
            f"  {p.topic}[{p.partition}]: {report.source}'s records differ from the target's "
            f"copies from offset {p.start}, below the failover point {p.failover_at} "
            f"({p.depth_scanned} offsets compared): divergent from there"
        )
    for p in report.behind:
        lines.append(
            f"  {p.topic}[{p.partition}]: {report.source} now ends at {p.end_now}, below the "
            f"failover point {p.failover_at}: it lost {p.behind} offsets the target has"
        )
    return "\n".join(lines)


def _utc(ms: int | None) -> str:
    if ms is None:
        return "?"
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
