"""`mm switchover`: a planned move of consumer groups from the source to the target,
with proof that nothing is lost or read twice (:mod:`mm.dr.switchover`).

Exit codes: 0 the proof holds (0 records unmirrored, every translation exact) and
every group was moved (or already there; with ``--dry-run``: would be); 1 a
condition did not hold within ``--timeout`` (producers still writing, mirror or
checkpoints behind, a translation inexact, a group not idle on the target): the
report says which, and nothing was committed unless the proof held; 2 invalid
configuration or usage. The report is also written as JSON (``--report``).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from mm.commands.flows import add_config_option, add_one_flow_option, groups_pattern, one_flow
from mm.config import load_config
from mm.dr.switchover import SwitchoverReport


def add_parser(parser: argparse.ArgumentParser) -> None:
    add_config_option(parser)
    add_one_flow_option(parser, "consumers switch over")
    parser.add_argument(
        "--groups",
        metavar="REGEX",
        help="only groups whose whole name matches REGEX (default: every group the flow "
        "checkpoints that has offsets on mirrored topics)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        help="seconds to wait for the mirror and the checkpoints to catch up (default 300)",
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=5.0,
        help="seconds the source end offsets must stay unchanged to show producers stopped "
        "(default 5)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="skip the producers-stopped check (records written later stay on the source)",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="prove and report; commit nothing on the target"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--report",
        metavar="PATH",
        help="where to write the JSON report (default: "
        "<mm.state.dir>/reports/switchover-<SRC>-<TGT>-<UTC time>.json)",
    )


def run(args: argparse.Namespace) -> int:
    from mm.dr.switchover_run import run_switchover
    from mm.errors import UsageError

    if args.timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    if args.settle < 0:
        raise UsageError("--settle must be zero or more seconds")
    groups = groups_pattern(args.groups)
    cfg = load_config(args.config)
    flow = one_flow(cfg, args.flow)
    report = run_switchover(
        cfg,
        flow,
        groups=groups,
        timeout=args.timeout,
        settle=args.settle,
        force=args.force,
        dry_run=args.dry_run,
    )
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    path = Path(
        args.report
        or Path(cfg.state_dir) / "reports" / f"switchover-{flow.source}-{flow.target}-{stamp}.json"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(report.to_json(), indent=2)
    path.write_text(text + "\n")
    if args.json:
        print(text)
    else:
        print(render(report))
        print(f"report: {path}")
    return 0 if report.ok else 1


def render(report: SwitchoverReport) -> str:
    lines = [
        _table(
            ("TOPIC", "PARTITION", "SOURCE END", "MIRRORED", "UNMIRRORED"),
            [
                (
                    p.topic,
                    str(p.partition),
                    str(p.source_end),
                    "-" if p.position is None else str(p.position),
                    str(p.unmirrored),
                )
                for p in report.partitions
            ],
        )
    ]
    if report.groups:
        lines += [
            "",
            _table(
                ("GROUP", "TOPIC", "PARTITION", "SOURCE", "BEFORE", "AFTER", "EXACT", "NOTE"),
                [
                    (
                        g.group,
                        g.topic,
                        str(g.partition),
                        str(g.source_offset),
                        "-" if g.before is None else str(g.before),
                        "-" if g.after is None else str(g.after),
                        {True: "yes", False: "NO", None: "-"}[g.exact],
                        g.reason or g.note,
                    )
                    for g in report.groups
                ],
            ),
        ]
    exact = sum(1 for g in report.groups if g.exact)
    lines += [
        "",
        f"proof: {report.records_unmirrored} records unmirrored, "
        f"{report.translations_inexact} translations inexact, {exact} exact"
        + (
            f", {report.translations_unchecked} not checked"
            if report.translations_unchecked
            else ""
        ),
    ]
    counts: dict[str, int] = {}
    for s in report.group_status.values():
        counts[s] = counts.get(s, 0) + 1
    moved = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no group"
    mode = " (dry run: nothing committed)" if report.dry_run else ""
    verdict = "OK" if report.ok else f"NOT DONE (stopped at: {report.stopped_at or 'groups'})"
    lines.append(f"switchover {report.flow}: {verdict}; groups: {moved}{mode}")
    lines += [f"  - {p}" for p in report.problems]
    return "\n".join(lines)


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    cells = [header, *rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(header))]
    return "\n".join(
        "  ".join(c[i].ljust(widths[i]) for i in range(len(header))).rstrip() for c in cells
    )
