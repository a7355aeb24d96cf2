"""The planner reads the state group stable (mm.source.moved, on Apache Kafka).

A transaction's offsets become visible to a plain offset fetch only once its commit
markers reach the group coordinator, after the producer's commit has returned. A
``--once`` run right after another read the previous run's last positions as the
ones before them, took them for positions moved back and ran a refresh batch for
them. The planner now reads with ``require_stable`` and waits for them to settle.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from mm_client.errors import KafkaOperationError
from mm_client.kafka.admin import (
    UNSTABLE_OFFSET_COMMIT,
    group_offsets_or_errors,
    stable_group_offsets,
)

from mm.source.keepalive import REFRESH_PREFIX
from mm.source.plan import MirrorPlan
from mm.source.reader import OPTION_PLAN, MirrorStreamReader
from mm.source.shard_map import ShardMap
from mm.source.topics import MirroredTopic
from tests.support.fake_kafka import runtime

pytestmark = pytest.mark.integration

SOURCE_TOPIC = "orders"


class Positions:
    """Commits a group's offsets the way the mirror does: in a transaction."""

    def __init__(self, bootstrap: str, group: str) -> None:
        self.bootstrap, self.group = bootstrap, group
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
        self.metadata = consumer.consumer_group_metadata()
        consumer.close()
        self.producers: list[Producer] = []

    def pending(self, target: str, offsets: dict[int, int]) -> Producer:
        """A transaction holding ``offsets`` (partition -> offset), not committed yet."""
        producer = Producer(
            {"bootstrap.servers": self.bootstrap, "transactional.id": f"t-{uuid.uuid4().hex}"}
        )
        self.producers.append(producer)
        producer.init_transactions(30)
        producer.begin_transaction()
        tps = [TopicPartition(target, p, o) for p, o in offsets.items()]
        producer.send_offsets_to_transaction(tps, self.metadata, 30)
        return producer

    def commit(self, target: str, offsets: dict[int, int]) -> None:
        self.pending(target, offsets).commit_transaction(30)

    def abort_all(self) -> None:
        for producer in self.producers:
            try:
                producer.abort_transaction(10)
            except KafkaException:
                pass  # committed already: nothing to abort


@pytest.fixture
def target(cluster_b: Any) -> Iterator[tuple[str, str, AdminClient, Positions]]:
    """(target topic, state group, admin, positions) on B."""
    bootstrap = cluster_b.bootstrap_servers
    topic, group = f"A.{SOURCE_TOPIC}-{uuid.uuid4().hex[:8]}", f"__mm.mirror.{uuid.uuid4().hex}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    positions = Positions(bootstrap, group)
    yield topic, group, admin, positions
    positions.abort_all()
    admin.delete_topics([topic])[topic].result(30)


def _reader(tmp_path: Path, topic: str, group: str, admin: AdminClient) -> MirrorStreamReader:
    plan = MirrorPlan(
        runtime=runtime(state_group=group),
        planner={},
        refresh_topics_interval_seconds=3600.0,
        position_refresh_seconds=3600.0,
        position_refresh_file=str(tmp_path / f"refreshed-{uuid.uuid4().hex}.json"),
    )
    reader = MirrorStreamReader({OPTION_PLAN: plan.encode()})
    reader._topics = {SOURCE_TOPIC: MirroredTopic(SOURCE_TOPIC, topic, 2, 0)}
    reader._target_admin = admin  # the state group lives on B
    one_shard = ShardMap(1, 1, {(topic, p): 0 for p in range(2)})
    reader._settled_map = lambda keys: one_shard  # type: ignore[method-assign]
    return reader


def _refreshes(reader: MirrorStreamReader, planned: dict[int, int]) -> list[str]:
    """The refreshes the planner asks for with every partition idle at ``planned``."""
    start = {f"{SOURCE_TOPIC}:{p}": o for p, o in planned.items()}
    reader._current_ends = lambda: dict(start)  # type: ignore[method-assign]
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    return sorted(k[len(REFRESH_PREFIX) :] for k in end if k.startswith(REFRESH_PREFIX))


def _later(delay: float, action: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=lambda: (time.sleep(delay), action()), daemon=True)
    thread.start()
    return thread


def test_positions_of_a_transaction_completing_are_not_taken_for_moved_ones(
    tmp_path: Path, target: tuple[str, str, AdminClient, Positions]
) -> None:
    topic, group, admin, positions = target
    positions.commit(topic, {0: 40, 1: 60})
    last = positions.pending(topic, {0: 50, 1: 70})  # the previous run's last commit
    # what a plain read answers meanwhile: the positions before (the planner's old read)
    plain = group_offsets_or_errors(admin, [group], 10.0, "B")[group]
    assert not isinstance(plain, Exception), plain
    assert sorted((tp.partition, tp.offset) for tp in plain) == [(0, 40), (1, 60)]

    committer = _later(1.0, lambda: last.commit_transaction(30))
    started = time.monotonic()
    assert _refreshes(_reader(tmp_path, topic, group, admin), {0: 50, 1: 70}) == []
    waited = time.monotonic() - started
    committer.join(30)
    assert waited >= 0.9, f"the planner answered in {waited:.2f}s, before the commit settled"

    # a position truly moved back (an operator's reset) is still looked at again
    positions.commit(topic, {0: 30})
    assert _refreshes(_reader(tmp_path, topic, group, admin), {0: 50, 1: 70}) == [
        f"{SOURCE_TOPIC}:0"
    ]


def test_a_transaction_left_open_is_an_error_not_an_old_position(
    target: tuple[str, str, AdminClient, Positions],
) -> None:
    topic, group, admin, positions = target
    positions.commit(topic, {0: 40})
    positions.pending(topic, {0: 50})
    started = time.monotonic()
    read = stable_group_offsets(admin, group, [(topic, 0), (topic, 1)], 1.5, "B")
    assert isinstance(read, KafkaOperationError), read
    assert read.code == UNSTABLE_OFFSET_COMMIT and read.retriable
    assert f"{topic}[0]" in str(read) and "on B" in str(read), str(read)
    assert 1.4 <= time.monotonic() - started < 10.0

    # settled (aborted): the offset before it; a partition without any stays out
    positions.abort_all()
    assert stable_group_offsets(admin, group, [(topic, 0), (topic, 1)], 10.0, "B") == {
        (topic, 0): 40
    }
