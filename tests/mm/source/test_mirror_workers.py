"""Pooled clients on real brokers: a partition moving between Python workers, and a
worker killed in the middle of a range. (Two instances racing for the same
partitions is test_mirror_exactly_once's second-instance test.)

Each ``ClientPool`` here stands for one Spark Python worker (its clients outlive
tasks). The target is judged as Apache Kafka's read_committed would serve it:
the raw log with its transaction markers (Tansu serves aborted records to
read_committed consumers, see tests/support/eos.py).
"""

from __future__ import annotations

import base64
import pickle
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from mm_client.kafka.pool import ClientPool
from support.mirror import create_topic, delete_topic
from support.shard_runs import fill, mirror_one, runtime_on

from mm.kafka.rawlog import committed_view, read_log
from mm.source.spec import FlowRuntime, RangeSpec
from mm.source.task import PartitionStoppedError

pytestmark = pytest.mark.integration


def _records(bootstrap: str, topic: str, partition: int) -> list[tuple[Any, Any]]:
    """(key, value) of the partition's records as Kafka's read_committed serves them."""
    return [(r.key, r.value) for r in committed_view(read_log(bootstrap, topic, partition)).records]


def _setup(
    a: Any, b: Any, unique_topic: Callable[..., str], partitions: int, **rt: Any
) -> tuple[str, str, FlowRuntime]:
    """A source topic, its target topic, the offset-syncs topic and the flow's runtime."""
    topic = unique_topic("moving")
    create_topic(a.bootstrap_servers, topic, partitions)
    create_topic(b.bootstrap_servers, f"A.{topic}", partitions)
    runtime = runtime_on(a, b, topic, **rt)
    create_topic(a.bootstrap_servers, runtime.offset_syncs_topic, 1)
    return topic, f"A.{topic}", runtime


def test_a_partition_moving_between_workers_stays_exactly_once(
    cluster_a: Any, cluster_b: Any, unique_topic: Callable[..., str], workers: list[ClientPool]
) -> None:
    topic, target, rt = _setup(cluster_a, cluster_b, unique_topic, 2, max_records_per_txn=40)
    fenced: list[str] = []

    def log(event: str, **kw: Any) -> None:
        if "state is out of date" in event:
            fenced.append(kw.get("error", ""))

    ends = dict.fromkeys(range(2), 0)
    # Spark hands each micro-batch's task to whichever worker is free: here the
    # partitions alternate between the two workers, batch after batch
    for batch in range(6):
        fill(cluster_a.bootstrap_servers, topic, 2, 300, f"b{batch}")
        for p in range(2):
            end = ends[p] + 150
            spec = RangeSpec(topic, p, target, ends[p], end)
            result = mirror_one(rt, spec, log=log, pool=workers[(batch + p) % 2])
            assert result.position == end, result
            ends[p] = end
    # every move after a partition's first visit to each worker found its cached
    # producer stale: 2 partitions x 4 moves back to a worker that had it before.
    # The other worker moved the position on, so the state read notices it first
    # (_MIRROR_STATE_MOVED), before the fenced producer's next transactional call
    assert len(fenced) == 8 and all("_MIRROR_STATE_MOVED" in e for e in fenced), fenced
    for p in range(2):
        source = _records(cluster_a.bootstrap_servers, topic, p)
        assert len(source) == 900
        assert _records(cluster_b.bootstrap_servers, target, p) == source


_WORKER = """
import base64, pickle, sys
from mm_client.kafka.pool import ClientPool
from mm.source.shard_map import legacy_transactional_id
from mm.source.shard_run import ShardRun
rt, spec = pickle.loads(base64.b64decode(sys.argv[1]))
# the id tests.support.shard_runs.mirror_one writes the partition with
txn_id = legacy_transactional_id(rt.transactional_id_prefix, spec.target_topic, spec.partition)
ShardRun(rt, txn_id, [spec], pool=ClientPool()).run()
print("finished", flush=True)
"""


def _state_reader(b: Any, rt: FlowRuntime) -> Consumer:
    """A consumer of the flow's state group on B (never subscribes)."""
    return Consumer(
        {
            "bootstrap.servers": b.bootstrap_servers,
            "group.id": rt.state_group,
            "isolation.level": "read_committed",
        }
    )


def _committed(b: Any, rt: FlowRuntime, target: str) -> int:
    c = _state_reader(b, rt)
    try:
        return int(c.committed([TopicPartition(target, 0)], 10)[0].offset)
    finally:
        c.close()


def test_a_worker_killed_mid_range_loses_nothing(
    cluster_a: Any, cluster_b: Any, unique_topic: Callable[..., str], workers: list[ClientPool]
) -> None:
    # 1,000 transactions of 20 records: the worker cannot finish between two looks
    # (one consumer kept, each look one request; with a consumer per look, a slow
    # one let a worker of 400 transactions finish first, once in a full suite)
    topic, target, rt = _setup(cluster_a, cluster_b, unique_topic, 1, max_records_per_txn=20)
    fill(cluster_a.bootstrap_servers, topic, 1, 20_000, "kill")
    spec = RangeSpec(topic, 0, target, 0, 20_000)
    arg = base64.b64encode(pickle.dumps((rt, spec))).decode()
    state = _state_reader(cluster_b, rt)
    try:
        state.committed([TopicPartition(target, 0)], 10)  # finds the coordinator first
        worker = subprocess.Popen(
            [sys.executable, "-c", _WORKER, arg], stdout=subprocess.PIPE, text=True
        )
        deadline = time.monotonic() + 60
        position = -1
        while position <= 0 and time.monotonic() < deadline and worker.poll() is None:
            time.sleep(0.01)
            position = int(state.committed([TopicPartition(target, 0)], 10)[0].offset)
        worker.send_signal(signal.SIGKILL)
        worker.wait(10)
    finally:
        state.close()
    assert 0 < position < 20_000, f"the worker was not killed mid-range (position {position})"
    # Spark runs the task again, in another worker: the same range, fresh clients
    result = mirror_one(rt, spec, pool=workers[0])
    assert result.resumed_from >= position and result.position == 20_000
    source = _records(cluster_a.bootstrap_servers, topic, 0)
    assert len(source) == 20_000
    assert _records(cluster_b.bootstrap_servers, target, 0) == source


def test_a_position_past_the_source_end_at_fetch_time_stops_the_partition(
    cluster_a: Any, cluster_b: Any, unique_topic: Callable[..., str], workers: list[ClientPool]
) -> None:
    """The source topic is deleted and recreated shorter between the planner's look
    and the fetch (the plan still names the old end): the position is past the new
    log's end. The consumer's reset to the log start must not copy the new topic
    after the old one's copy: the partition is refused with the position check's own
    message, nothing produced (before: the 20 new records were appended to B)."""
    topic, target, rt = _setup(cluster_a, cluster_b, unique_topic, 1)
    a = cluster_a.bootstrap_servers
    fill(a, topic, 1, 60, "old")
    first = mirror_one(rt, RangeSpec(topic, 0, target, 0, 60), pool=workers[0])
    assert first.position == 60, first
    delete_topic(a, topic)
    create_topic(a, topic, 1)
    fill(a, topic, 1, 20, "new")
    with pytest.raises(PartitionStoppedError) as stopped:
        # planned before the recreation: [60, 100) of the old topic
        mirror_one(rt, RangeSpec(topic, 0, target, 60, 100), pool=workers[0])
    message = str(stopped.value)
    assert f"the mirror's position 60 for {topic}[0] is past the source log end 20" in message
    assert f"then topic {target} on B, then run the mirror again" in message
    copied = _records(cluster_b.bootstrap_servers, target, 0)
    assert [v for _k, v in copied] == [f"old-{i}".encode() for i in range(60)]
    assert _committed(cluster_b, rt, target) == 60
