"""`mm translate`: offsets on the target, for a consumer group or for a list of offsets.

``--group G`` reads ``<source>.checkpoints.internal`` on the flow's target once with
the failover client's reader (:func:`mm_client.read_checkpoints`, what
``mm_client.translate_offsets`` uses; MM2's RemoteClusterUtils.translateOffsets
semantics) and prints, per target partition, the offset the group should resume
from on the target, with the source offset it was translated from.

``--offsets TOPIC:PARTITION:OFFSET[,...]`` translates offsets kept outside Kafka
groups from the history the checkpoint job publishes on the target
(:mod:`mm_client.offset_history`, what ``mm_client.translate_source_offsets``
uses): it needs nothing from the source, so it answers with the source down.
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
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--group", help="consumer group to translate (from its checkpoints)")
    what.add_argument(
        "--offsets",
        metavar="TOPIC:PARTITION:OFFSET[,...]",
        help="source offsets kept outside Kafka groups (a database, a Spark or Flink "
        "checkpoint) to translate; works with the source cluster down",
    )
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
    if args.offsets is not None:
        return _offsets(args, cfg, flow)
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


def _offsets(args: argparse.Namespace, cfg: Any, flow: Any) -> int:
    import time

    from mm_client.offset_history import read_offset_history
    from mm_client.source_offsets import parse_source_offsets, translate_with

    from mm.errors import UsageError

    try:
        asked = parse_source_offsets(args.offsets)
    except ValueError as exc:
        raise UsageError(f"--offsets {exc}") from None
    policy = flow.policy()
    history = read_offset_history(
        cfg.cluster(flow.target).librdkafka("consumer"), flow.source, args.timeout
    )
    rows = translate_with(
        history.store, asked, lambda t: policy.format_remote_topic(flow.source, t)
    )
    age = max(0.0, time.time() - history.time_ms / 1000)
    if args.json:
        doc = {
            "flow": flow.name,
            "cluster": flow.target,
            "history_topic": history.topic,
            "history_published_ms": history.time_ms,
            "history_age_seconds": round(age, 3),
            "offsets": [r.to_json() for r in rows],
        }
        print(json.dumps(doc, indent=2))
    else:
        for r in rows:
            if r.target_offset is None:
                print(f"{r.topic}\t{r.partition}\t{r.offset}\t{r.target_topic}\t-\tnone")
                continue
            kind = "exact" if r.exact else "behind"
            tail = ""
            if r.not_mirrored:
                tail = f"\t{r.not_mirrored} offset(s) past the mirror's position, not mirrored"
            print(
                f"{r.topic}\t{r.partition}\t{r.offset}\t{r.target_topic}\t"
                f"{r.target_offset}\t{kind}{tail}"
            )
    print(
        f"mm translate: from the offset history in {history.topic} on {flow.target}, "
        f"published {age:.1f}s ago by the checkpoint job; 'behind' answers re-read "
        "records, never skip them",
        file=sys.stderr,
    )
    lost = [r for r in rows if r.not_mirrored]
    if lost:
        print(
            "mm translate: past the mirror's position (not on the target; a failover "
            "loses them): " + ", ".join(f"{r.topic}/{r.partition}: {r.not_mirrored}" for r in lost),
            file=sys.stderr,
        )
    failed = [r for r in rows if r.target_offset is None]
    for r in failed:
        print(f"mm translate: {r.topic}:{r.partition}:{r.offset}: {r.problem}", file=sys.stderr)
    return 1 if failed else 0
