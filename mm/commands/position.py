"""`mm position`: show or set the mirror's positions for one source topic.

A position is the next source offset the mirror copies into a target partition
(committed in the flow's state group on the target). ``--set`` moves it backwards
(copy again from there) or forwards (skip to there), checked against the source
partition's log (:mod:`mm.source.position_set`; Kafka's kafka-consumer-groups.sh
would clamp it to the target topic's offsets). A running mirror follows the change
at its next look at the positions (``mm.mirror`` checks every few seconds).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from mm.commands.flows import add_config_option, add_one_flow_option, one_flow
from mm.config import load_config


def add_parser(parser: argparse.ArgumentParser) -> None:
    add_config_option(parser)
    add_one_flow_option(parser, "positions to show or set")
    parser.add_argument("--topic", required=True, help="the source topic")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="PARTITION=OFFSET",
        help="commit this next source offset for the partition (a number, 'start' or "
        "'end' of the source log); repeat for more partitions",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds (default 30)")


def run(args: argparse.Namespace) -> int:
    from mm_client import commit_group_offsets

    from mm.errors import MirrorError, UsageError
    from mm.kafka.watermarks import watermarks
    from mm.source.position_set import parse_sets, resolve_sets
    from mm.source.runtime import state_group

    if args.timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    try:
        wanted = parse_sets(args.set)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    cfg = load_config(args.config)
    flow = one_flow(cfg, args.flow)
    source, target = cfg.cluster(flow.source), cfg.cluster(flow.target)
    target_topic = flow.policy().format_remote_topic(flow.source, args.topic)
    group = state_group(flow)
    count = _partition_count(source.librdkafka("admin"), args.topic, flow.source, args.timeout)
    keys = [(args.topic, p) for p in range(count)]
    ranges = {
        p: marks
        for (_t, p), marks in watermarks(
            source.librdkafka("consumer"), keys, args.timeout, profile=source.profile
        ).items()
    }
    committed = _committed(target.librdkafka("consumer"), group, target_topic, count, args.timeout)
    changes, errors = resolve_sets(args.topic, wanted, ranges, committed)
    if errors:
        raise MirrorError("mm position: nothing changed: " + "; ".join(errors))
    if changes:
        commit_group_offsets(
            target.librdkafka("admin"),
            group,
            {(target_topic, c.partition): c.after for c in changes},
            args.timeout,
            allow_rewind=True,  # the operator asked for these positions
        )
    after = {c.partition: c.after for c in changes}
    rows = [
        {
            "partition": p,
            "position": committed.get(p) if committed.get(p, -1) >= 0 else None,
            "set_to": after.get(p),
            "source_log_start": ranges[p][0],
            "source_log_end": ranges[p][1],
        }
        for p in range(count)
    ]
    _render(args, flow.name, group, target_topic, rows)
    return 0


def _render(
    args: argparse.Namespace, flow: str, group: str, target_topic: str, rows: list[dict[str, Any]]
) -> None:
    if args.json:
        doc = {
            "flow": flow,
            "topic": args.topic,
            "target_topic": target_topic,
            "state_group": group,
            "partitions": rows,
        }
        print(json.dumps(doc, indent=2))
        return
    print(f"{args.topic} -> {target_topic} (flow {flow}, positions in group {group})")
    print("partition\tposition\tsource log start\tsource log end")
    for r in rows:
        now = "-" if r["position"] is None else str(r["position"])
        if r["set_to"] is not None:
            now = f"{now} -> {r['set_to']}"
        print(f"{r['partition']}\t{now}\t{r['source_log_start']}\t{r['source_log_end']}")


def _partition_count(admin_conf: dict[str, str], topic: str, alias: str, timeout: float) -> int:
    from confluent_kafka import KafkaException
    from mm_client.kafka.clients import new_admin
    from mm_client.kafka.errors import wrap

    from mm.errors import MirrorError

    try:
        md = new_admin(admin_conf).list_topics(timeout=timeout)
    except KafkaException as exc:
        raise wrap(exc, f"list topics on {alias}") from exc
    found = md.topics.get(topic)
    if found is None or found.error is not None:
        raise MirrorError(f"mm position: topic {topic} does not exist on {alias} (the source)")
    return len(found.partitions)


def _committed(
    consumer_conf: dict[str, str], group: str, topic: str, count: int, timeout: float
) -> dict[int, int]:
    from confluent_kafka import KafkaException, TopicPartition
    from mm_client.kafka.clients import new_consumer
    from mm_client.kafka.errors import wrap

    consumer = new_consumer({**consumer_conf, "group.id": group, "enable.auto.commit": False})
    try:
        got = consumer.committed([TopicPartition(topic, p) for p in range(count)], timeout)
    except KafkaException as exc:
        raise wrap(exc, f"read the mirror's positions in group {group}") from exc
    finally:
        consumer.close()
    return {tp.partition: int(tp.offset) for tp in got}
