"""`mm verify`: prove a mirror complete and exact, partition by partition.

Exit codes: 0 everything compared is exact and complete, 1 a difference (or
something not yet mirrored), 2 invalid configuration or usage. See
:mod:`mm.verify.job` for what is read and :mod:`mm.verify.compare` for what is
decided.
"""

from __future__ import annotations

import argparse
import re

from mm.commands.flows import (
    add_config_option,
    add_flow_option,
    require_flow_clusters,
    select_flows,
)
from mm.config import load_config


def add_parser(parser: argparse.ArgumentParser) -> None:
    add_config_option(parser)
    add_flow_option(parser, "every enabled flow")
    parser.add_argument(
        "--topics",
        metavar="REGEX",
        help="only source topics whose whole name matches REGEX (default: every mirrored topic)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        help="seconds for each cluster operation (default 60)",
    )
    parser.add_argument(
        "--range-records",
        type=int,
        default=None,
        metavar="N",
        help="offsets per Spark task; larger partitions are split (default 250000)",
    )


def run(args: argparse.Namespace) -> int:
    from mm.errors import ConfigError, UsageError
    from mm.verify.job import DEFAULT_RANGE_RECORDS, run_verify
    from mm.verify.render import render, to_json

    topics = None
    if args.topics is not None:
        try:
            topics = re.compile(args.topics)
        except re.error as exc:
            raise UsageError(f"--topics {args.topics!r} is not a valid regex: {exc}") from None
    range_records = DEFAULT_RANGE_RECORDS if args.range_records is None else args.range_records
    if range_records <= 0:
        raise UsageError("--range-records must be a positive number of offsets")
    if args.timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    cfg = load_config(args.config)
    flows = select_flows(cfg, args.flow)
    if not flows:
        raise ConfigError(
            "clusters",
            ",".join(cfg.clusters),
            "at least one enabled flow (e.g. A->B.enabled = true), or --flow SRC->TGT",
        )
    from mm.verify.reads import require_readable

    # configuration first (exit 2), then whether the clusters answer (exit 1)
    for alias in sorted({f.source for f in flows} | {f.target for f in flows}):
        require_readable(cfg.cluster(alias))
    require_flow_clusters(cfg, flows, args.timeout)
    report = run_verify(
        cfg, flows, topics=topics, timeout=args.timeout, range_records=range_records
    )
    print(to_json(report) if args.json else render(report))
    return 0 if report.ok else 1
