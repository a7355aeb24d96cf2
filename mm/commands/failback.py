"""`mm failback` (first step): the divergence on the old primary, quarantined.

With the source cluster (A) back, reports per partition the records A holds past
the failover point `mm failover` recorded on B (written to A, never mirrored to B:
the applications on B never saw them): count, offset range and time range; and
copies them to Parquet files before anything else (``--dry-run`` only reports).
Mirroring B's new records back to A and moving the groups back are not built yet
(docs/dr-runbook.md says how to do them with `mm mirror` and `mm failover` on the
B->A flow).

Exit codes: 0 reported (and quarantined unless ``--dry-run``); 1 no failover point
recorded, or A now ends below the failover point on some partition (A lost records
B has: an unclean recovery to look at); 2 invalid configuration or usage.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from pathlib import Path

from mm.commands.flows import add_config_option, add_one_flow_option, one_flow
from mm.config import load_config
from mm.dr.divergence import DivergenceReport


def add_parser(parser: argparse.ArgumentParser) -> None:
    add_config_option(parser)
    add_one_flow_option(parser, "failover to undo (the flow A->B that consumers left A by)")
    parser.add_argument(
        "--dry-run", action="store_true", help="report the divergence; write nothing"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--quarantine-dir",
        metavar="DIR",
        help="where the divergent records go (default: "
        "<mm.state.dir>/failback/<SRC>-<TGT>/<UTC time>/)",
    )
    parser.add_argument(
        "--timeout", type=float, default=60.0, help="seconds per cluster operation (default 60)"
    )


def run(args: argparse.Namespace) -> int:
    from mm.dr.failback_run import find_divergence
    from mm.errors import UsageError

    if args.timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    cfg = load_config(args.config)
    flow = one_flow(cfg, args.flow)
    report = find_divergence(
        cfg,
        flow,
        dry_run=args.dry_run,
        timeout=args.timeout,
        out_dir=Path(args.quarantine_dir) if args.quarantine_dir else None,
    )
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        print(render(report))
    return 1 if report.behind else 0


def render(report: DivergenceReport) -> str:
    header = ("TOPIC", "PARTITION", "FAILOVER AT", "END NOW", "DIVERGENT", "OFFSETS", "TIME")
    rows = [
        (
            p.topic,
            str(p.partition),
            "-" if p.failover_at is None else str(p.failover_at),
            str(p.end_now),
            str(p.records) if not p.behind else f"A {p.behind} BEHIND",
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
    for p in report.behind:
        lines.append(
            f"  {p.topic}[{p.partition}]: {report.source} now ends at {p.end_now}, below the "
            f"failover point {p.failover_at}: it lost {p.behind} offsets the target has"
        )
    lines.append(
        "next (not built into this command yet): mirror the target's new records back "
        "and move the groups back; see docs/dr-runbook.md"
    )
    return "\n".join(lines)


def _utc(ms: int | None) -> str:
    if ms is None:
        return "?"
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
