"""`mm run`: the mirror, checkpoint and heartbeat jobs of every enabled flow in one
process and one Spark application (what MirrorMaker 2's dedicated mode is to
operators). A failed job is restarted with backoff without stopping the others;
SIGTERM or Ctrl-C stops them all (exit 0)."""

from __future__ import annotations

import argparse

from mm.commands.flows import (
    add_config_option,
    add_flow_option,
    require_flow_clusters,
    select_flows,
)
from mm.config import load_config
from mm.run import JOB_NAMES


def add_parser(parser: argparse.ArgumentParser) -> None:
    add_config_option(parser)
    add_flow_option(parser, "every enabled flow")
    parser.add_argument(
        "--jobs",
        metavar="JOB[,JOB]",
        default=None,
        help=f"only these jobs, comma-separated (default: all of {','.join(JOB_NAMES)})",
    )
    parser.add_argument(
        "--trigger-seconds",
        type=float,
        default=None,
        help="the mirror's micro-batch trigger interval (default: mm.mirror.trigger.seconds)",
    )


def parse_jobs(value: str | None) -> list[str] | None:
    from mm.errors import UsageError

    if value is None:
        return None
    names = [n.strip() for n in value.split(",") if n.strip()]
    unknown = [n for n in names if n not in JOB_NAMES]
    if unknown or not names:
        raise UsageError(
            f"--jobs {value!r}: unknown job {', '.join(unknown) or '(none given)'}; "
            f"expected a comma-separated list of {', '.join(JOB_NAMES)}"
        )
    return names


def run(args: argparse.Namespace) -> int:
    from mm.run.jobs import plan_jobs
    from mm.run.process import run_all

    only = parse_jobs(args.jobs)
    cfg = load_config(args.config)
    flows = select_flows(cfg, args.flow)
    require_flow_clusters(cfg, cfg.job_flows(flows))
    trigger = args.trigger_seconds
    if trigger is None:
        trigger = float(cfg.setting("mirror.trigger.seconds"))
    flows = cfg.job_flows(flows)
    if not plan_jobs(flows, only):
        from mm.errors import UsageError

        raise UsageError(
            f"--jobs {args.jobs}: no selected flow has these jobs enabled "
            "(emit.checkpoints.enabled / emit.heartbeats.enabled are false); expected a job "
            "some flow runs"
        )
    result = run_all(cfg, flows, only=only, trigger_seconds=trigger)
    for j in result.jobs:
        failed = f", last error: {j.last_error}" if j.last_error else ""
        print(f"{j.job} ({', '.join(j.flows)}): {j.state}, {j.restarts} restart(s){failed}")
    return 1 if result.not_stopped else 0
