"""A shard's ranges mirrored through one transactional producer (mm.source.shard_run),
on Apache Kafka: exactly once across batches, workers and a zombie of the shard's id,
offset syncs that translate every record exactly, one partition's stop leaving the
others going, and a run planned with an outdated shard map writing nothing.

Each ``ClientPool`` stands for one Spark Python worker. The target is judged as
Kafka's read_committed serves it (the raw log with its transaction markers).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer
from mm_client.kafka.pool import ClientPool
from support.mirror import (
    assert_translation_exact,
    create_topic,
    read_offset_syncs,
    read_topic_committed,
)
from support.shard_runs import fill, runtime_on

from mm.kafka.rawlog import committed_view, read_log
from mm.source.shard_run import ShardMapChangedError, ShardRun
from mm.source.spec import FlowRuntime, RangeSpec

pytestmark = pytest.mark.integration


def _markers_written(bootstrap: str, topic: str, partitions: int) -> None:
    """Wait until no transaction is open in the stored log: a commit returns before
    the coordinator has written its markers into the partitions (a read_committed
    consumer waits for them too, at the last stable offset)."""
    deadline = time.monotonic() + 30
    for p in range(partitions):
        while committed_view(read_log(bootstrap, topic, p)).open_records:
            assert time.monotonic() < deadline, f"{topic}[{p}]: a transaction stays open"
            time.sleep(0.05)


def _values(bootstrap: str, topic: str, partition: int) -> list[bytes | None]:
    _markers_written(bootstrap, topic, partition + 1)
    return [r.value for r in committed_view(read_log(bootstrap, topic, partition)).records]


class Flow:
    """Two source topics of ``partitions`` each, their targets, one shard over all."""

    def __init__(self, a: Any, b: Any, unique_topic: Callable[..., str], partitions: int,
                 **rt: Any) -> None:  # fmt: skip
        self.a, self.b, self.partitions = a, b, partitions
        self.topics = [unique_topic("shard"), unique_topic("shard")]
        for t in self.topics:
            create_topic(a.bootstrap_servers, t, partitions)
            create_topic(b.bootstrap_servers, f"A.{t}", partitions)
        self.rt = runtime_on(a, b, self.topics[0], **rt)
        create_topic(a.bootstrap_servers, self.rt.offset_syncs_topic, 1)
        self.ends = {(t, p): 0 for t in self.topics for p in range(partitions)}
        self.shard_id = f"{self.rt.transactional_id_prefix}.g1.s0"

    def fill(self, count: int, tag: str) -> None:
        for t in self.topics:
            fill(self.a.bootstrap_servers, t, self.partitions, count, f"{t}-{tag}")

    def specs(self, up_to: int | None = None) -> list[RangeSpec]:
        out = []
        for (t, p), start in sorted(self.ends.items()):
            end = up_to if up_to is not None else start + 10**9
            out.append(RangeSpec(t, p, f"A.{t}", start, end))
        return out

    def run(self, pool: ClientPool, specs: list[RangeSpec], **kw: Any) -> dict[Any, Any]:
        results = ShardRun(self.rt, self.shard_id, specs, pool=pool, **kw).run()
        for key, r in results.items():
            if r.error is None:
                self.ends[key] = max(self.ends[key], r.position)
        return results

    def assert_exactly_once(self) -> None:
        syncs = read_offset_syncs(self.a.bootstrap_servers, self.rt.offset_syncs_topic)
        for t in self.topics:
            source = read_topic_committed(self.a.bootstrap_servers, t, self.partitions)
            _markers_written(self.b.bootstrap_servers, f"A.{t}", self.partitions)
            target = read_topic_committed(self.b.bootstrap_servers, f"A.{t}", self.partitions)
            assert sum(len(v) for v in source.values()) > 0
            assert_translation_exact(syncs, t, source, target)


def test_a_shard_mirrors_its_partitions_exactly_once_across_batches_and_workers(
    cluster_a: Any, cluster_b: Any, unique_topic: Callable[..., str], workers: list[ClientPool]
) -> None:
    flow = Flow(cluster_a, cluster_b, unique_topic, 3, max_records_per_txn=70)
    for batch in range(4):
        flow.fill(300, f"b{batch}")
        planned = {k: e + 50 for k, e in flow.ends.items()}
        # batches alternate between the workers: each finds the other's commits
        results = flow.run(
            workers[batch % 2],
            [RangeSpec(t, p, f"A.{t}", flow.ends[(t, p)], planned[(t, p)])
             for (t, p) in sorted(flow.ends)],
        )  # fmt: skip
        for key, r in results.items():
            assert r.error is None and r.position == planned[key], r
            assert r.records == 50 and r.transactions >= 1
    # then everything left, in one batch
    results = flow.run(workers[0], flow.specs())
    assert all(r.position == 400 and r.records == 200 and r.error is None for r in results.values())
    flow.assert_exactly_once()


def test_a_zombie_of_the_shards_id_is_fenced_and_its_records_never_visible(
    cluster_a: Any, cluster_b: Any, unique_topic: Callable[..., str], workers: list[ClientPool]
) -> None:
    flow = Flow(cluster_a, cluster_b, unique_topic, 2)
    flow.fill(40, "one")
    flow.run(workers[0], flow.specs())
    target = f"A.{flow.topics[0]}"
    zombie = Producer({"bootstrap.servers": cluster_b.bootstrap_servers,
                       "transactional.id": flow.shard_id})  # fmt: skip
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce(target, b"zombie", partition=0)
    assert zombie.flush(30) == 0
    flow.fill(40, "two")
    # another worker (a fresh producer of the id): fences the zombie, aborting its record
    results = flow.run(workers[1], flow.specs())
    assert all(r.error is None and r.position == 40 for r in results.values())
    with pytest.raises(KafkaException):
        zombie.commit_transaction(30)
    assert b"zombie" not in _values(cluster_b.bootstrap_servers, target, 0)
    # and the first worker's pooled producer, fenced meanwhile, is replaced
    flow.fill(40, "three")
    results = flow.run(workers[0], flow.specs())
    assert all(r.error is None and r.position == 60 for r in results.values())
    flow.assert_exactly_once()


def test_a_run_planned_with_an_outdated_shard_map_writes_nothing(
    cluster_a: Any, cluster_b: Any, unique_topic: Callable[..., str], workers: list[ClientPool]
) -> None:
    flow = Flow(cluster_a, cluster_b, unique_topic, 2)
    flow.fill(30, "x")
    with pytest.raises(ShardMapChangedError, match="no longer the newest recorded"):
        flow.run(workers[0], flow.specs(), still_newest=lambda: False)
    for t in flow.topics:
        for p in range(2):
            assert _values(cluster_b.bootstrap_servers, f"A.{t}", p) == []
    results = flow.run(workers[0], flow.specs(), still_newest=lambda: True)
    assert all(r.position == 15 for r in results.values())
    flow.assert_exactly_once()


def test_a_record_too_large_stops_its_partition_and_the_others_go_on(
    cluster_a: Any, cluster_b: Any, unique_topic: Callable[..., str], workers: list[ClientPool]
) -> None:
    flow = Flow(cluster_a, cluster_b, unique_topic, 2)
    big = flow.topics[1]
    flow.fill(20, "small")
    p = Producer({"bootstrap.servers": cluster_a.bootstrap_servers})
    p.produce(big, b"x" * 5000, b"big", 1)
    assert p.flush(30) == 0
    flow.fill(20, "after")
    specs = [
        RangeSpec(s.topic, s.partition, s.target_topic, 0, 10**9, max_record_bytes=1000)
        for s in flow.specs()
    ]
    results = flow.run(workers[0], specs)
    stopped = results[(big, 1)]
    assert stopped.error is not None and f"record {big}[1]@10 is 5003 bytes" in stopped.error
    assert stopped.position == 10 and stopped.records == 10
    assert f"--topic {big} --set 1=11" in stopped.error
    for key, r in results.items():
        if key != (big, 1):
            assert r.error is None and r.position == 20 and r.records == 20, r
    assert len(_values(cluster_b.bootstrap_servers, f"A.{big}", 1)) == 10


def test_ranges_of_one_target_partition_twice_are_refused() -> None:
    rt = FlowRuntime("A", "B", {}, {}, {}, {}, "s", False, "g", "p")
    spec = RangeSpec("t", 0, "A.t", 0, 1)
    with pytest.raises(ValueError, match="distinct target partitions"):
        ShardRun(rt, f"p.g1.s{uuid.uuid4().hex[:4]}", [spec, spec], pool=ClientPool())


def test_two_shards_side_by_side_in_one_worker_translate_exactly(
    cluster_a: Any, cluster_b: Any, unique_topic: Callable[..., str], workers: list[ClientPool]
) -> None:
    """As a Spark task runs its shards (mm.source.reader.read): two shards of one flow
    at once, in threads of one worker, the batches alternating between two workers;
    every record's offset syncs translate it exactly."""
    from concurrent.futures import ThreadPoolExecutor

    flow = Flow(cluster_a, cluster_b, unique_topic, 3, max_records_per_txn=40)
    keys = sorted(flow.ends)
    shards = {f"{flow.rt.transactional_id_prefix}.g1.s{s}": keys[s::2] for s in range(2)}
    for batch in range(4):
        flow.fill(120 + 37 * batch, f"b{batch}")
        pool = workers[batch % 2]

        def one(item: tuple[str, list[tuple[str, int]]], pool: ClientPool = pool) -> Any:
            shard_id, members = item
            specs = [RangeSpec(t, p, f"A.{t}", flow.ends[(t, p)], flow.ends[(t, p)] + 10**9)
                     for t, p in members]  # fmt: skip
            return ShardRun(flow.rt, shard_id, specs, pool=pool).run()

        with ThreadPoolExecutor(2) as threads:
            for results in threads.map(one, shards.items()):
                for key, r in results.items():
                    assert r.error is None, r
                    flow.ends[key] = max(flow.ends[key], r.position)
    flow.assert_exactly_once()
