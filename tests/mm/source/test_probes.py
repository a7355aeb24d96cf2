"""A shard's new partitions are probed in batches: the prepare lists the log starts
and ends of all of them in two requests per cluster, and each range starts from
its own partition's answer (fakes modelling Apache Kafka's ListOffsets)."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition
from mm_client.kafka.pool import ClientPool

from mm.source.clients import MirrorClients
from mm.source.position import Probes
from mm.source.shard_run import ShardRun
from mm.source.spec import RangeSpec
from tests.support.fake_kafka import (
    SOURCE,
    TARGET,
    TARGET_TOPIC,
    TOPIC,
    FakeCluster,
    fake_clients,
    runtime,
)

pytestmark = pytest.mark.unit


class Calls:
    """The consumers' listing calls: (cluster, method, partitions)."""

    def __init__(self, base: MirrorClients) -> None:
        self.base = base
        self.calls: list[tuple[str, str, list[tuple[str, int]]]] = []

    def consumer(self, conf: dict[str, Any]) -> Any:
        made = self.base.consumer(conf)
        side = "source" if conf.get("bootstrap.servers") == SOURCE else "target"
        watermarks, listing = made.get_watermark_offsets, made.offsets_for_times

        def one(tp: TopicPartition, timeout: float = 0, cached: bool = False) -> Any:
            self.calls.append((side, "one", [(tp.topic, tp.partition)]))
            return watermarks(tp, timeout, cached)

        def batch(tps: list[TopicPartition], timeout: float = 0) -> Any:
            kind = "starts" if tps[0].offset == OFFSET_BEGINNING else "ends"
            self.calls.append((side, kind, [(tp.topic, tp.partition) for tp in tps]))
            return listing(tps, timeout)

        made.get_watermark_offsets, made.offsets_for_times = one, batch
        return made

    def clients(self) -> MirrorClients:
        return MirrorClients(self.base.producer, self.consumer, self.base.sync_producer)


def test_new_partitions_are_listed_in_two_requests_per_cluster() -> None:
    source, target = FakeCluster("A"), FakeCluster("B")
    for p in range(4):
        source.log(TOPIC, p)
        target.log(TARGET_TOPIC, p)
    source.log(TOPIC, 2).log_start = 7  # retention deleted offsets 0-6
    calls = Calls(fake_clients(source, target, TARGET))
    # nothing committed for any of them: new partitions; Spark planned empty ranges
    planned = {p: 7 if p == 2 else 0 for p in range(4)}
    specs = [RangeSpec(TOPIC, p, TARGET_TOPIC, at, at) for p, at in planned.items()]
    pool = ClientPool()
    run = ShardRun(runtime(), "mm.A.B.g1.s0", specs, pool=pool, clients=calls.clients())
    try:
        results = run.run()
    finally:
        pool.clear()
    everything = [(TARGET_TOPIC, p) for p in range(4)]
    sources = [(TOPIC, p) for p in range(4)]
    assert sorted(calls.calls) == sorted(
        [
            ("target", "starts", everything),
            ("target", "ends", everything),
            ("source", "starts", sources),
            ("source", "ends", sources),
        ]
    )
    assert {p: results[(TOPIC, p)].resumed_from for p in range(4)} == {0: 0, 1: 0, 2: 7, 3: 0}
    assert all(r.error is None for r in results.values())


def test_a_partition_the_listing_did_not_answer_is_asked_on_its_own() -> None:
    """A failed batch leaves every partition to its own request (which reports its
    own error, as before the batches); the others' answers are used once."""
    cluster = FakeCluster("A")
    cluster.log(TOPIC, 0).log_start = 3
    calls = Calls(fake_clients(cluster, FakeCluster("B"), TARGET))
    probes = Probes(runtime(), calls.clients())
    consumer = probes._consumer("source")
    listing = consumer.offsets_for_times

    def failing(tps: list[TopicPartition], timeout: float = 0) -> Any:
        if tps[0].offset != OFFSET_BEGINNING:
            raise KafkaException("listing failed")
        return listing(tps, timeout)

    consumer.offsets_for_times = failing
    probes.prefetch("source", [TopicPartition(TOPIC, 0)])
    assert probes.watermarks("source", TopicPartition(TOPIC, 0)) == (3, 3)
    assert [c[1] for c in calls.calls] == ["starts", "one"]

    consumer.offsets_for_times = listing
    calls.calls.clear()
    probes.prefetch("source", [TopicPartition(TOPIC, 0)])
    assert probes.watermarks("source", TopicPartition(TOPIC, 0)) == (3, 3)
    assert probes.watermarks("source", TopicPartition(TOPIC, 0)) == (3, 3)  # asked again
    assert [c[1] for c in calls.calls] == ["starts", "ends", "one"]
    probes.close()


def test_the_offset_syncs_producer_is_built_before_the_shard_fences() -> None:
    """Built at the start of a worker's first shard run (its producer id then arrives
    while the shard fences and copies), only where the syncs go to the source and
    the flow has no producer factory of its own; one per worker for the flow."""
    from mm.source import task

    rt = runtime(source_producer={"bootstrap.servers": "127.0.0.1:1", "client.id": "early"})
    key = task._sync_producer_key(rt)
    assert key not in task._SYNC_PRODUCERS
    try:
        on_target = runtime(offset_syncs_on_target=True, source_producer=rt.source_producer)
        task.start_sync_producer(on_target)
        task.start_sync_producer(rt, fake_clients(FakeCluster("A"), FakeCluster("B"), TARGET))
        assert key not in task._SYNC_PRODUCERS  # syncs on the target; a factory given
        task.start_sync_producer(rt)
        built = task._SYNC_PRODUCERS[key]
        task.start_sync_producer(rt)
        assert task._SYNC_PRODUCERS[key] is built
    finally:
        producer = task._SYNC_PRODUCERS.pop(key, None)
        if producer is not None:
            producer.flush(0)
