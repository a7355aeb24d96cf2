"""`mm mirror`: mirror every enabled flow (X->Y) on Spark."""

from __future__ import annotations

import argparse

from mm.commands.flows import (
    add_config_option,
    add_flow_option,
    require_flow_clusters,
    select_flows,
)
from mm.config import load_config


def add_parser(parser: argparse.ArgumentParser) -> None:
    add_config_option(parser)
    parser.add_argument(
        "--once",
        action="store_true",
        help="mirror everything present on the source now, commit, exit 0",
    )
    parser.add_argument(
        "--trigger-seconds",
        type=float,
        default=None,
        help="micro-batch trigger interval (default: mm.mirror.trigger.seconds or 1)",
    )
    add_flow_option(parser, "every enabled flow")


def run(args: argparse.Namespace) -> int:
    from mm.source.job import run_mirror
    from mm.state_dir import require_writable

    cfg = load_config(args.config)
    flows = select_flows(cfg, args.flow, enabled_only=True)
    require_writable(cfg.state_dir)  # a read-only or full disk: one line, before Spark
    require_flow_clusters(cfg, cfg.job_flows(flows))
    trigger = args.trigger_seconds
    if trigger is None:
        trigger = float(cfg.setting("mirror.trigger.seconds"))
    stats = run_mirror(cfg, once=args.once, trigger_seconds=trigger, flows=flows)
    failed = {k: v for s in stats.values() for k, v in s.errors.items()}
    failed_topics = {t: v for s in stats.values() for t, v in s.failed_topics.items()}
    for topic, err in sorted(failed_topics.items()):
        print(f"not mirrored: {topic}: {err}")
    for (topic, partition), err in sorted(failed.items()):
        print(f"stopped: {topic}[{partition}]: {err}")
    return 1 if failed or failed_topics else 0
