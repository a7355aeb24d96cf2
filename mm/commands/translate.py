"""`mm translate`: a consumer group's offsets on the target, from the checkpoints topic.

Reads ``<source>.checkpoints.internal`` on the flow's target once with the
failover client's reader (:func:`mm_client.read_checkpoints`, what
``mm_client.translate_offsets`` uses; MM2's RemoteClusterUtils.translateOffsets
semantics) and prints, per target partition, the offset the group should resume
from on the target, with the source offset it was translated from.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from mm.commands.flows import add_config_option, add_one_flow_option, one_flow
from mm.config import load_config


def skipped_json(snap: Any) -> dict[str, Any]:
    """The undecodable records a checkpoints read skipped (a CheckpointSnapshot's)."""
    return {
        "skipped_records": snap.skipped,
        "skipped_at": [
            {"partition": s.partition, "offset": s.offset, "reason": s.reason}
            for s in snap.skipped_at
        ],
    }


def add_parser(parser: argparse.ArgumentParser) -> None:
    add_config_option(parser)
    parser.add_argument("--group", required=True, help="consumer group to translate")
    add_one_flow_option(parser, "checkpoints to read")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        help="seconds to read the checkpoints topic to its end (default 30)",
    )


def run(args: argparse.Namespace) -> int:
    from mm_client.checkpoints_reader import read_checkpoints

    from mm.errors import UsageError

    if args.timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    cfg = load_config(args.config)
    flow = one_flow(cfg, args.flow)
    policy = flow.policy()
    topic = policy.checkpoints_topic(flow.source)
    group = args.group
    snap = read_checkpoints(
        cfg.cluster(flow.target).librdkafka("consumer"),
        flow.source,
        lambda g: g == group,
        args.timeout,
        replication_policy=policy,
    )
    found = snap.checkpoints(group)
    rows = sorted(found.values(), key=lambda c: (c.topic, c.partition))
    if args.json:
        print(
            json.dumps(
                {
                    "group": args.group,
                    "flow": flow.name,
                    "cluster": flow.target,
                    "checkpoints_topic": topic,
                    "offsets": [
                        {
                            "topic": c.topic,
                            "partition": c.partition,
                            "offset": c.downstream_offset,
                            "upstream_offset": c.upstream_offset,
                            "metadata": c.metadata,
                        }
                        for c in rows
                    ],
                    **skipped_json(snap),
                },
                indent=2,
            )
        )
    else:
        for c in rows:
            print(f"{c.topic}\t{c.partition}\t{c.downstream_offset}")
    if not rows:
        print(
            f"mm translate: no checkpoints for group {args.group!r} in {topic} on "
            f"{flow.target}; expected a group the checkpoint job has translated (one with "
            f"offsets committed on {flow.source} that {flow.name}.groups selects)",
            file=sys.stderr,
        )
        return 1
    return 0
