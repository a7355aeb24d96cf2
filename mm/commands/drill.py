"""`mm drill`: a disaster-recovery drill on two embedded clusters, or with ``-c FILE``
on the two clusters of a flow of yours (its own topics and groups only, the disaster
simulated, cleaned up unless ``--keep``), with its figures.

Parses, runs :class:`mm.drill.run.Drill` (``-c``: set up by
:func:`mm.drill.external.prepare_external`), renders: a progress line every few
seconds, the summary table, the JSON / HTML / PNG report paths and, with ``-c``, what
was deleted or kept. Exit codes: 0 switchover and failover passed (and, with ``-c``,
everything the drill created was deleted or kept as asked); 1 otherwise; 2 usage or
configuration errors.
"""

from __future__ import annotations

import argparse
import dataclasses
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from mm.commands.flows import add_one_flow_option

if TYPE_CHECKING:
    from mm.drill.external import ExternalSetup


def add_parser(parser: argparse.ArgumentParser) -> None:
    from mm.commands.embedded import add_broker_option
    from mm.drill.scenarios import SCENARIOS

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
        choices=("freeze", "kill", "simulated"),
        help="how A fails: freeze = SIGSTOP its broker, resumed for failback "
        "(default); kill = SIGKILL A's broker, restarted for failback (on the embedded "
        "broker a durable A, slow storage: see docs); simulated = the drill's mirror jobs "
        "are killed, A keeps running (the only one, and the default, with -c)",
    )
    add_broker_option(parser)
    parser.add_argument(
        "-c",
        "--config",
        metavar="FILE",
        help="drill on the clusters of a flow of this MM2 properties file instead of "
        "embedded ones: the drill's own topics and groups only, cleaned up afterwards",
    )
    add_one_flow_option(parser, "clusters the drill uses, with -c")
    parser.add_argument(
        "--keep",
        action="store_true",
        help="with -c: leave the drill's topics and groups on the clusters (listed at the end)",
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        help="where the report, the logs and the brokers' data go (default: ./mm-drill-<UTC time>)",
    )


def _scenarios(raw: str) -> list[str]:
    from mm.drill.scenarios import SCENARIOS
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


def _disaster(args: argparse.Namespace) -> str:
    from mm.errors import UsageError

    if args.config:
        if args.disaster not in (None, "simulated"):
            raise UsageError(
                f"--disaster {args.disaster} with -c: the drill never stops a broker it did "
                "not start; on your clusters the disaster is simulated (its mirror jobs "
                "are killed)"
            )
        return "simulated"
    if args.config and args.broker != "auto":
        raise UsageError("--broker is for the drill's own clusters, not with -c FILE")
    for flag, given in (("--flow", args.flow), ("--keep", args.keep)):
        if given:
            raise UsageError(f"{flag} needs -c FILE (embedded clusters have one flow, A->B)")
    if args.disaster == "simulated":
        raise UsageError("--disaster simulated is for -c FILE: embedded brokers really fail")
    return str(args.disaster or "freeze")


def run(args: argparse.Namespace) -> int:
    from mm.drill.report import summary_table, to_json, write_html, write_pngs
    from mm.drill.run import Drill, DrillOptions
    from mm.errors import UsageError

    if args.duration <= 0 or args.rate <= 0:
        raise UsageError("--duration and --rate must be positive numbers")
    scenarios = _scenarios(args.scenarios)
    disaster = _disaster(args)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = Path(args.out) if args.out else Path.cwd() / f"mm-drill-{stamp}"
    external = _external(args, scenarios, out) if args.config else None
    out.mkdir(parents=True, exist_ok=True)
    drill = Drill(
        DrillOptions(
            duration=args.duration,
            rate=args.rate,
            scenarios=scenarios,
            disaster=disaster,
            external=external,
            keep=args.keep,
            broker=args.broker,
        ),
        out,
    )
    from mm.signals import terminate_as_interrupt

    # SIGTERM as Ctrl-C: the jobs run in their own process groups and the brokers are
    # ours; without this a `kill` of the drill left them all running
    with terminate_as_interrupt():
        try:
            report = drill.run()
        finally:
            drill.close()
            if external is not None:
                _print_cleanup(drill.cleanup, drill.config if args.keep else None)
    report = dataclasses.replace(report, cleanup=drill.cleanup)
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
    left = bool(drill.cleanup.get("not deleted"))
    return 0 if all(s.passed for s in judged) and not left else 1


def _external(args: argparse.Namespace, scenarios: list[str], out: Path) -> ExternalSetup:
    from mm.commands.flows import one_flow
    from mm.config import load_config
    from mm.config.loader import effective_properties
    from mm.drill.external import new_mark, prepare_external

    cfg = load_config(args.config)
    return prepare_external(
        cfg,
        effective_properties(args.config),
        one_flow(cfg, args.flow),
        mark=new_mark(),
        state_dir=out.resolve() / "state",
        scenarios=scenarios,
    )


def _print_cleanup(cleanup: dict[str, list[str]], config: Path | None) -> None:
    print()
    for what in ("deleted", "kept", "not deleted"):
        items = cleanup.get(what, [])
        if what == "deleted":
            print(f"clean-up: deleted {len(items)} topics and groups the drill created")
        elif items:
            print(f"{what}:" + ("" if what == "kept" else " (delete them yourself)"))
        if what != "deleted":
            for item in items:
                print(f"  {item}")
    if config is not None:
        print(f"the drill's config (your connection settings, mode 0600): {config}")
