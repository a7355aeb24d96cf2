"""`mm heartbeat`: emit MM2 heartbeats into each flow's source ``heartbeats`` topic."""

from __future__ import annotations

import argparse

from mm.commands.flows import add_config_option, add_flow_option, select_flows
from mm.config import load_config


def add_parser(parser: argparse.ArgumentParser) -> None:
    add_config_option(parser)
    parser.add_argument(
        "--once",
        action="store_true",
        help="emit one heartbeat per flow, exit 0 when all were acknowledged",
    )
    add_flow_option(parser, "every enabled flow with emit.heartbeats.enabled")


def run(args: argparse.Namespace) -> int:
    import sys
    from datetime import UTC, datetime

    from mm.errors import UsageError
    from mm.heartbeat.job import heartbeat_flows, run_heartbeat

    cfg = load_config(args.config)
    flows = select_flows(cfg, args.flow, enabled_only=True)
    if args.flow:
        _, off = heartbeat_flows(flows)
        if off:
            raise UsageError(
                "heartbeats are disabled for "
                + ", ".join(f.name for f in off)
                + " (emit.heartbeats.enabled = false); enable them or leave out --flow"
            )
    _, off = heartbeat_flows(flows)
    for f in off:
        print(
            f"heartbeat {f.name}: disabled (emit.heartbeats.enabled = false), nothing written",
            file=sys.stderr,
        )
    if args.once:
        # a continuous run waits for an unreachable source instead (and retries)
        from mm.reach import STARTUP_TIMEOUT, require_reachable

        on, _ = heartbeat_flows(cfg.job_flows(flows))
        require_reachable(cfg, {f.source for f in on}, STARTUP_TIMEOUT)
    stats = run_heartbeat(cfg, once=args.once, flows=flows)
    if not stats:
        print("no flow emits heartbeats (emit.heartbeats.enabled = false)", file=sys.stderr)
        return 0
    by_name = {f.name: f for f in flows}
    for name, st in stats.items():
        flow = by_name[name]
        topic = flow.policy().heartbeats_topic()
        when = (
            datetime.fromtimestamp(st.last_timestamp / 1000, UTC).isoformat(timespec="milliseconds")
            if st.last_timestamp is not None
            else "never"
        )
        print(
            f"heartbeat {name}: {st.emitted} written to {topic} on {flow.source} "
            f"(last {when}), {st.failed} failed"
        )
    return 0
