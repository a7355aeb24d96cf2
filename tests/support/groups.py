"""Consumer groups in end-to-end tests: commit offsets without joining, read them, read
what a group would consume from its committed offsets, run `mm` commands that move groups.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient

from support.cli import run_command
from support.mirror import (
    MirrorRun,
    Rec,
    create_topic,
    mirror_properties,
    produce_mixed,
    read_topic,
)

KV = tuple[bytes | None, bytes | None]


def unread(source: dict[int, list[Rec]], committed: dict[int, int]) -> dict[int, list[KV]]:
    """Per partition, what a group at ``committed`` has not read of ``source`` yet."""
    return {p: [(r.key, r.value) for r in source[p] if r.offset >= u] for p, u in committed.items()}


def run_mm(
    config: Path,
    command: str,
    *args: str,
    timeout: float = 300.0,
    while_waiting: Callable[[], Any] | None = None,
) -> MirrorRun:
    """`mm <command> -c config <args>` to its end; output kept next to ``config`` as
    ``<command>-<n>.out`` / ``.err``.

    ``while_waiting`` is called repeatedly until the command ends (e.g. to keep a
    consumer polling).
    """
    n = len(list(config.parent.glob(f"{command}-*.out")))
    return run_command(
        [command, "-c", str(config), *args],
        cwd=config.parent,
        timeout=timeout,
        while_waiting=while_waiting,
        keep=config.parent / f"{command}-{n}",
    )


def commit_admin(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Commit offsets for ``group`` without joining it (AdminClient)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tps = [TopicPartition(topic, p, o) for p, o in sorted(offsets.items())]
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, tps)])[group].result(30)


def commit_assigned(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Commit offsets for ``group`` from a consumer that assign()s (never joins)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        tps = [TopicPartition(topic, p, o) for p, o in sorted(offsets.items())]
        consumer.assign(tps)
        answer = consumer.commit(offsets=tps, asynchronous=False) or []
        assert all(tp.error is None for tp in answer), answer
    finally:
        consumer.close()


def group_offsets(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
    return {(tp.topic, tp.partition): tp.offset for tp in res.topic_partitions or []}


def gap_offset(records: list[Rec]) -> int:
    """An offset no record has (a transaction marker or an aborted record)."""
    offsets = [r.offset for r in records]
    gaps = [o + 1 for o, n in pairwise(offsets) if n - o > 1]
    assert gaps, "no gap in the source partition"
    return gaps[len(gaps) // 2]


def read_group(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, list[KV]]:
    """A consumer in ``group`` assigned at the group's committed offsets, read to the end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            "auto.offset.reset": "error",  # a partition without a committed offset fails
        }
    )
    got: dict[int, list[KV]] = {p: [] for p in range(partitions)}
    try:
        positions = consumer.committed(
            [TopicPartition(topic, p) for p in range(partitions)], timeout=30
        )
        assert all(tp.offset >= 0 for tp in positions), positions
        consumer.assign(positions)
        pending = set(range(partitions))
        deadline = time.monotonic() + 60
        while pending:
            assert time.monotonic() < deadline, f"no end of {topic} {sorted(pending)} within 60s"
            for m in consumer.consume(1000, 0.5):
                err = m.error()
                if err is not None:
                    assert err.code() == KafkaError._PARTITION_EOF, err
                    pending.discard(m.partition() or 0)
                    continue
                got[m.partition() or 0].append((m.key(), m.value()))
    finally:
        consumer.close()
    return got


@dataclass
class GroupsTopic:
    """A mirrored topic with transactional gaps, and the flow config checkpointing groups."""

    props: Path
    topic: str
    source: dict[int, list[Rec]]
    end: dict[int, int]  # per partition: the offset after the last record
    gap: dict[int, int]  # per partition: an offset holding no record (a marker)


def topic_for_groups(
    a: str, b: str, tmp: Path, topic: str, groups_regex: str, partitions: int, tag: str
) -> GroupsTopic:
    """``topic`` on A with :func:`support.mirror.produce_mixed` data, and a flow A->B
    config mirroring it and checkpointing the groups matching ``groups_regex``."""
    props = mirror_properties(
        tmp / "mm2.properties",
        a,
        b,
        [topic],
        state_dir=tmp / "state",
        extra={"A->B.groups": groups_regex},
    )
    create_topic(a, topic, partitions)
    produce_mixed(a, topic, partitions, tag=f"{tag}-")
    source = read_topic(a, topic, partitions)
    return GroupsTopic(
        props,
        topic,
        source,
        {p: source[p][-1].offset + 1 for p in range(partitions)},
        {p: gap_offset(source[p]) for p in range(partitions)},
    )
