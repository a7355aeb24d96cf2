"""`mm checkpoint`: translate the source's consumer-group offsets into MM2 checkpoints."""

from __future__ import annotations

import argparse

from mm.config import load_config


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-c",
        "--config",
        required=True,
        metavar="FILE",
        help="connect-mirror-maker.properties (MM2 format)",
    )
    parser.add_argument(
        "--once",
        action="store_true",
        help="read the offset syncs present now, emit checkpoints once, exit",
    )
    parser.add_argument(
        "--flow",
        action="append",
        metavar="SRC->TGT",
        help="only these flows (default: every enabled flow with emit.checkpoints.enabled)",
    )


def run(args: argparse.Namespace) -> int:
    from mm.checkpoint.job import run_checkpoint
    from mm.errors import ConfigError

    cfg = load_config(args.config)
    flows = cfg.enabled_flows()
    if args.flow:
        names = {f.name for f in cfg.flows}
        for name in args.flow:
            if name not in names:
                raise ConfigError("--flow", name, f"one of the configured flows {sorted(names)}")
        flows = [f for f in cfg.flows if f.name in args.flow]
    results = run_checkpoint(cfg, once=args.once, flows=flows)
    if not results:
        print("no flow emits checkpoints (emit.checkpoints.enabled = false)")
    ok = True
    for name, (stats, round_ok) in results.items():
        print(f"checkpoint {name}: {stats.summary()}")
        ok = ok and round_ok
    return 0 if ok else 1
