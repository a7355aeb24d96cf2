"""A Python worker's pooled clients (fakes modelling Apache Kafka's fencing): a
producer reused across ranges is not initialised again, and one that another
worker fenced is noticed, replaced and the partition stays exactly once."""

from __future__ import annotations

from typing import Any

import pytest
from mm_client.kafka.pool import ClientPool

from mm.kafka.profile import EMBEDDED, KAFKA, BrokerProfile
from mm.source.clients import MirrorClients
from mm.source.shard_run import ShardRun
from mm.source.spec import RangeSpec
from mm.source.task import RecordTooLargeError
from tests.support.fake_kafka import (
    TARGET,
    TARGET_TOPIC,
    TOPIC,
    FakeCluster,
    Rec,
    build_source,
    fake_clients,
    runtime,
)
from tests.support.shard_runs import mirror_one

pytestmark = pytest.mark.unit


def _source(n: int) -> FakeCluster:
    entries: list[Rec | None] = []
    for i in range(n):
        entries += [Rec(b"k", f"v{i}".encode(), (), 1_700_000_000_000 + i), None]
    return build_source(entries, 0, [3])


class Log:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, event: str, **kw: Any) -> None:
        self.events.append((event, kw))

    def named(self, text: str) -> list[dict[str, Any]]:
        return [kw for e, kw in self.events if text in e]


def test_a_reused_producer_is_not_initialised_again() -> None:
    source, target = _source(30), FakeCluster("B")
    rt = runtime(max_records_per_txn=4)
    clients = fake_clients(source, target, TARGET)
    pool = ClientPool()
    for a, b in ((0, 20), (20, 40), (40, 60)):
        mirror_one(rt, RangeSpec(TOPIC, 0, TARGET_TOPIC, a, b), clients=clients, pool=pool)
    assert target.inits == 1
    assert pool.created == 3  # the producer, the state consumer, the source consumer
    assert [r.value for _, r in target.log(TARGET_TOPIC, 0).committed()] == [
        f"v{i}".encode() for i in range(30)
    ]
    assert target.offsets[rt.state_group][(TARGET_TOPIC, 0)][0] == 60


def test_a_producer_fenced_by_another_worker_is_replaced_exactly_once() -> None:
    source, target = _source(40), FakeCluster("B")
    rt = runtime(max_records_per_txn=3)
    clients = fake_clients(source, target, TARGET)
    one, two = ClientPool(), ClientPool()
    log = Log()
    # the partition moves: worker one, worker two (fences one), worker one again
    for pool, (a, b) in ((one, (0, 24)), (two, (24, 50)), (one, (50, 80))):
        mirror_one(rt, RangeSpec(TOPIC, 0, TARGET_TOPIC, a, b), log=log, clients=clients, pool=pool)
    fenced = log.named("state is out of date")
    # noticed at the state read, before the fenced producer's next call: worker two
    # moved the position on
    assert len(fenced) == 1 and "is 50, not 24" in fenced[0]["error"]
    assert target.inits == 3  # one each, and the replacement
    assert [r.value for _, r in target.log(TARGET_TOPIC, 0).committed()] == [
        f"v{i}".encode() for i in range(40)
    ]
    assert target.offsets[rt.state_group][(TARGET_TOPIC, 0)][0] == 80


def test_a_fence_without_a_new_position_is_noticed_at_the_next_transactional_call() -> None:
    """Worker two takes the transactional.id (fencing one) but commits nothing: the
    position one reads is its own, so it goes on, and its producer fails as fenced."""
    source, target = _source(40), FakeCluster("B")
    rt = runtime(max_records_per_txn=3)
    clients = fake_clients(source, target, TARGET)
    one, two = ClientPool(), ClientPool()
    log = Log()
    for pool, (a, b) in ((one, (0, 24)), (two, (24, 24)), (one, (24, 80))):
        mirror_one(rt, RangeSpec(TOPIC, 0, TARGET_TOPIC, a, b), log=log, clients=clients, pool=pool)
    fenced = log.named("state is out of date")
    assert len(fenced) == 1 and "_FENCED" in fenced[0]["error"]
    assert target.inits == 3
    assert [r.value for _, r in target.log(TARGET_TOPIC, 0).committed()] == [
        f"v{i}".encode() for i in range(40)
    ]


def test_a_stale_worker_behind_the_committed_position_mirrors_nothing_twice() -> None:
    """Worker one cached position 20; worker two mirrored on to 50. Worker one, handed
    a range Spark planned from an old checkpoint, must not trust its cached position."""
    source, target = _source(40), FakeCluster("B")
    rt = runtime(max_records_per_txn=5)
    clients = fake_clients(source, target, TARGET)
    one, two = ClientPool(), ClientPool()
    mirror_one(rt, RangeSpec(TOPIC, 0, TARGET_TOPIC, 0, 20), clients=clients, pool=one)
    mirror_one(rt, RangeSpec(TOPIC, 0, TARGET_TOPIC, 20, 50), clients=clients, pool=two)
    result = mirror_one(rt, RangeSpec(TOPIC, 0, TARGET_TOPIC, 20, 80), clients=clients, pool=one)
    assert result.resumed_from == 50
    assert [r.value for _, r in target.log(TARGET_TOPIC, 0).committed()] == [
        f"v{i}".encode() for i in range(40)
    ]


def test_a_position_moved_under_a_valid_cached_producer_is_handled_as_a_fence() -> None:
    """The broker says the partition's position is not the one this worker's producer
    committed last, although nobody fenced it (a broker that lost an acknowledged
    commit, or one that does not enforce fencing): the cache is not trusted, the
    producer is replaced, and a position *below* the worker's own acknowledged commit
    is not mirrored from again (the target holds those records: doing so would copy
    them twice). Only where the broker may lose an acknowledged commit (the embedded
    profile); on Apache Kafka see the next test."""
    source, target = _source(40), FakeCluster("B")
    rt = runtime(max_records_per_txn=5, target_profile=EMBEDDED)
    clients = fake_clients(source, target, TARGET)
    pool, log = ClientPool(), Log()
    mirror_one(rt, RangeSpec(TOPIC, 0, TARGET_TOPIC, 0, 40), clients=clients, pool=pool)
    assert target.offsets[rt.state_group][(TARGET_TOPIC, 0)][0] == 40
    # the broker now says 30: its commit of 40 was acknowledged, then lost
    target.offsets[rt.state_group][(TARGET_TOPIC, 0)] = (30, "")
    result = mirror_one(
        rt, RangeSpec(TOPIC, 0, TARGET_TOPIC, 40, 80), log=log, clients=clients, pool=pool
    )
    (moved,) = log.named("state is out of date")
    assert "is 30, not 40" in moved["error"]
    (below,) = log.named("below one this worker committed")
    assert below["committed"] == 30 and below["resumed_from"] == 40
    assert target.inits == 2  # the cached producer was replaced
    assert result.resumed_from == 40 and result.position == 80
    assert [r.value for _, r in target.log(TARGET_TOPIC, 0).committed()] == [
        f"v{i}".encode() for i in range(40)
    ]
    assert target.offsets[rt.state_group][(TARGET_TOPIC, 0)][0] == 80
    # lost again with nothing more to mirror: the position is committed again all the same
    target.offsets[rt.state_group][(TARGET_TOPIC, 0)] = (79, "")
    idle = mirror_one(
        rt, RangeSpec(TOPIC, 0, TARGET_TOPIC, 80, 80), log=log, clients=clients, pool=pool
    )
    assert idle.resumed_from == idle.position == 80
    assert target.offsets[rt.state_group][(TARGET_TOPIC, 0)][0] == 80


def test_a_lost_commit_keeps_no_floor_across_pools_nor_over_a_lost_state() -> None:
    """The floor is what *this* worker process committed: another worker's pool reads
    the broker's position as it is, and a position that is gone altogether (-1) takes
    the lost-state path (offset syncs and the target log), never the floor."""
    source, target = _source(40), FakeCluster("B")
    rt = runtime(max_records_per_txn=5)
    clients = fake_clients(source, target, TARGET)
    one, two, log = ClientPool(), ClientPool(), Log()
    mirror_one(rt, RangeSpec(TOPIC, 0, TARGET_TOPIC, 0, 40), clients=clients, pool=one)
    target.offsets[rt.state_group][(TARGET_TOPIC, 0)] = (30, "")
    other = mirror_one(
        rt, RangeSpec(TOPIC, 0, TARGET_TOPIC, 30, 30), log=log, clients=clients, pool=two
    )
    assert other.resumed_from == 30 and not log.named("below one this worker committed")
    del target.offsets[rt.state_group][(TARGET_TOPIC, 0)]
    back = mirror_one(
        rt, RangeSpec(TOPIC, 0, TARGET_TOPIC, 40, 80), log=log, clients=clients, pool=one
    )
    (recovered,) = log.named("recovered from the offset syncs")
    # one past the last mirrored record (the floor would say 40, past its marker)
    assert recovered["position"] == back.resumed_from == 39
    assert not log.named("below one this worker committed")


def test_a_stopped_partition_keeps_the_shards_clients() -> None:
    source, target = _source(10), FakeCluster("B")
    rt = runtime()
    clients = fake_clients(source, target, TARGET)
    pool = ClientPool()
    mirror_one(rt, RangeSpec(TOPIC, 0, TARGET_TOPIC, 0, 10), clients=clients, pool=pool)
    assert pool.idle() == 3
    # a record the target cannot take stops its partition after the records before it
    # committed: the shard's producer (which the shard's other partitions go on
    # writing with) and its consumer stay valid and pooled
    with pytest.raises(RecordTooLargeError):
        mirror_one(
            rt,
            RangeSpec(TOPIC, 0, TARGET_TOPIC, 10, 20, max_record_bytes=1),
            clients=clients,
            pool=pool,
        )
    assert pool.dropped == 0 and pool.idle() == 3
    result = mirror_one(rt, RangeSpec(TOPIC, 0, TARGET_TOPIC, 10, 20), clients=clients, pool=pool)
    assert result.resumed_from == 10 and result.position == 20
    assert target.inits == 1


def test_a_fresh_shard_producer_fences_before_the_positions_are_read_in_one_request() -> None:
    """A fresh producer must fence before its partitions' positions are read (a read
    before could miss a zombie's last commit, or wait out the transaction a killed
    worker left open); then one OffsetFetch serves every range of the shard. A reused
    producer reads at once, also in one request."""
    source, target = _source(0), FakeCluster("B")
    target.offsets["__mm.mirror.A.B"] = {(TARGET_TOPIC, p): (10 * p, "") for p in range(4)}
    rt = runtime()
    base = fake_clients(source, target, TARGET)
    calls: list[Any] = []

    def consumer(conf: dict[str, Any]) -> Any:
        made = base.consumer(conf)
        committed = made.committed

        def recorded(tps: list[Any], timeout: float = 0) -> Any:
            calls.append(sorted((tp.topic, tp.partition) for tp in tps))
            return committed(tps, timeout)

        made.committed = recorded
        return made

    def producer(conf: dict[str, Any]) -> Any:
        made = base.producer(conf)
        init = made.init_transactions

        def recorded(timeout: float = 0) -> None:
            calls.append("init")
            init(timeout)

        made.init_transactions = recorded
        return made

    clients = MirrorClients(producer, consumer, base.sync_producer)
    specs = [RangeSpec(TOPIC, p, TARGET_TOPIC, 10 * p, 10 * p) for p in range(4)]
    pool = ClientPool()
    everything = [(TARGET_TOPIC, p) for p in range(4)]
    for expected in (["init", everything], [everything]):  # fresh, then reused
        calls.clear()
        results = ShardRun(rt, "mm.A.B.g1.s0", specs, pool=pool, clients=clients).run()
        assert calls == expected
        assert {k[1]: r.position for k, r in results.items()} == {p: 10 * p for p in range(4)}


def test_a_position_reset_below_a_cached_producer_is_followed_on_apache_kafka() -> None:
    """On Apache Kafka an acknowledged commit stays, so a lower position under a
    worker's cached producer is an operator's reset (kafka-consumer-groups.sh
    --reset-offsets, as the mirror's refusals advise): the producer is replaced and
    the partition is mirrored from the reset position, what the operator asked for."""
    source, target = _source(40), FakeCluster("B")
    rt = runtime(max_records_per_txn=5)
    clients = fake_clients(source, target, TARGET)
    pool, log = ClientPool(), Log()
    mirror_one(rt, RangeSpec(TOPIC, 0, TARGET_TOPIC, 0, 40), clients=clients, pool=pool)
    target.offsets[rt.state_group][(TARGET_TOPIC, 0)] = (30, "")  # the operator's reset
    result = mirror_one(
        rt, RangeSpec(TOPIC, 0, TARGET_TOPIC, 40, 80), log=log, clients=clients, pool=pool
    )
    assert log.named("state is out of date") and not log.named("below one this worker")
    assert result.resumed_from == 30 and result.position == 80
    # (a record every second source offset) v0-v19 were below 40; from 30 on: v15-v39
    values = [r.value for _, r in target.log(TARGET_TOPIC, 0).committed()]
    assert values == [f"v{i}".encode() for i in (*range(20), *range(15, 40))]


@pytest.mark.parametrize(("profile", "consumers"), [(KAFKA, 0), (EMBEDDED, 1)])
def test_end_probes_keep_a_consumer_only_where_list_offsets_is_not_exact(
    monkeypatch: pytest.MonkeyPatch, profile: BrokerProfile, consumers: int
) -> None:
    """A worker's pooled end probe: on Apache Kafka two batched ListOffsets, no
    consumer created for a tail fetch it never makes; one per profile and cluster."""
    import mm_client.kafka.clients as kafka_clients

    import mm.kafka.watermarks as wm
    from mm.source import task

    made: list[str] = []
    monkeypatch.setattr(kafka_clients, "new_admin", lambda conf: made.append("admin") or "A")
    monkeypatch.setattr(kafka_clients, "new_consumer", lambda conf: made.append("consumer") or "C")
    seen: list[tuple[Any, Any, str]] = []

    def fake_watermarks(conf: Any, keys: Any, **kw: Any) -> dict[Any, tuple[int, int]]:
        seen.append((kw["admin"], kw["consumer"], kw["profile"].name))
        return {k: (0, 7) for k in keys}

    monkeypatch.setattr(wm, "watermarks", fake_watermarks)
    monkeypatch.setattr(task, "_END_PROBES", {})
    rt = runtime(source_profile=profile)
    for _ in range(3):
        assert task.source_ends(rt, [(TOPIC, 0)]) == {(TOPIC, 0): 7}
    assert made.count("admin") == 1 and made.count("consumer") == consumers
    assert seen == [("A", "C" if consumers else None, profile.name)] * 3
