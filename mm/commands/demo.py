"""`mm demo`: mirror a demo topic between two embedded clusters and verify it."""

from __future__ import annotations

import argparse

from mm.commands.embedded import add_broker_option


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--records", type=int, default=30_000, help="records to write on cluster A (default 30000)"
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the clusters running after the demo until Ctrl-C"
    )
    add_broker_option(parser)


def run(args: argparse.Namespace) -> int:
    from mm.demo import run_demo

    return run_demo(args.records, keep=args.keep, broker=args.broker)
