"""`mm checkpoint`: translate the source's consumer-group offsets into MM2 checkpoints."""

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
        help="read the offset syncs present now, emit checkpoints once, exit",
    )
    add_flow_option(parser, "every enabled flow with emit.checkpoints.enabled")


def run(args: argparse.Namespace) -> int:
    from mm.checkpoint.job import run_checkpoint
    from mm.state_dir import require_writable

    cfg = load_config(args.config)
    flows = select_flows(cfg, args.flow, enabled_only=True)
    require_writable(cfg.state_dir)  # a read-only or full disk: one line, before Spark
    require_flow_clusters(cfg, [f for f in cfg.job_flows(flows) if f.emit_checkpoints_enabled])
    results = run_checkpoint(cfg, once=args.once, flows=flows)
    if not results:
        print("no flow emits checkpoints (emit.checkpoints.enabled = false)")
    ok = True
    for name, (stats, round_ok) in results.items():
        print(f"checkpoint {name}: {stats.summary()}")
        ok = ok and round_ok
    return 0 if ok else 1
