"""`mm drill`: a disaster-recovery drill on two embedded clusters, with its figures.

Parses, runs :class:`mm.drill.run.Drill`, renders: a progress line every few
seconds, the summary table, and the JSON / HTML / PNG report paths.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path


def add_parser(parser: argparse.ArgumentParser) -> None:
    from mm.drill.run import SCENARIOS

    parser.add_argument(
        "--duration",
        type=float,
        default=20.0,
        help="seconds of workload on A per scenario (default 20)",
    )
    parser.add_argument(
        "--rate",
        type=float,
        default=100.0,
        help="records/s of the plain producer; the transactional one writes half (default 100)",
    )
    parser.add_argument(
        "--scenarios",
        default=",".join(SCENARIOS),
        help=f"comma-separated, in this order: {', '.join(SCENARIOS)} (default: all)",
    )
    parser.add_argument(
        "--disaster",
        choices=("freeze", "kill"),
        default="freeze",
        help="how A fails: freeze = SIGSTOP its broker, resumed for failback (default); "
        "kill = SIGKILL a durable A, restarted for failback (slow storage: see docs)",
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        help="where the report, the logs and the brokers' data go (default: ./mm-drill-<UTC time>)",
    )


def _scenarios(raw: str) -> list[str]:
    from mm.drill.run import SCENARIOS
    from mm.errors import UsageError

    wanted = [s.strip() for s in raw.split(",") if s.strip()]
    unknown = [s for s in wanted if s not in SCENARIOS]
    if unknown or not wanted:
        raise UsageError(
            f"--scenarios {raw!r}: expected a comma-separated list of {', '.join(SCENARIOS)}"
        )
    if "failback" in wanted and "failover" not in wanted:
        raise UsageError("--scenarios: failback needs failover (A must have failed first)")
    return [s for s in SCENARIOS if s in wanted]


def run(args: argparse.Namespace) -> int:
    from mm.drill.report import summary_table, to_json, write_html, write_pngs
    from mm.drill.run import Drill, DrillOptions
    from mm.errors import UsageError

    if args.duration <= 0 or args.rate <= 0:
        raise UsageError("--duration and --rate must be positive numbers")
    scenarios = _scenarios(args.scenarios)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = Path(args.out) if args.out else Path.cwd() / f"mm-drill-{stamp}"
    out.mkdir(parents=True, exist_ok=True)
    drill = Drill(
        DrillOptions(
            duration=args.duration, rate=args.rate, scenarios=scenarios, disaster=args.disaster
        ),
        out,
    )
    try:
        report = drill.run()
    finally:
        drill.close()
    json_path = out / "drill-report.json"
    json_path.write_text(to_json(report))
    html = write_html(report, out / "drill-report.html")
    pngs = write_pngs(report, out)
    print()
    print(summary_table(report))
    print(f"\nreport: {json_path}\n        {html}")
    for png in pngs:
        print(f"        {png}")
    print(f"logs:   {out / 'logs'}")
    judged = [s for s in report.scenarios if s.name in ("switchover", "failover")]
    return 0 if all(s.passed for s in judged) else 1
