"""One range mirrored as a shard of its own (mm.source.shard_run), for tests that
drive the copy of a single partition: the shard's id is the partition's own, and a
partition that stopped raises its stop, as the mirror's task reports it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from confluent_kafka import Producer
from mm_client.kafka.pool import ClientPool

from mm.source.clients import DEFAULT_CLIENTS, MirrorClients
from mm.source.shard_map import legacy_transactional_id
from mm.source.shard_run import ShardRun
from mm.source.spec import FlowRuntime, RangeSpec
from mm.source.task import RangeResult


def mirror_one(
    rt: FlowRuntime,
    spec: RangeSpec,
    log: Callable[..., Any] | None = None,
    clients: MirrorClients = DEFAULT_CLIENTS,
    pool: ClientPool | None = None,
    routine_log: Callable[..., Any] | None = None,
) -> RangeResult:
    """Mirror ``spec`` through a shard holding only its partition; raises the
    partition's PartitionStoppedError (RecordTooLargeError) when it stopped."""
    own = pool is None
    used = ClientPool() if pool is None else pool
    try:
        run = ShardRun(
            rt,
            legacy_transactional_id(rt.transactional_id_prefix, spec.target_topic, spec.partition),
            [spec],
            pool=used,
            clients=clients,
            log=log,
            routine_log=routine_log,
        )
        results = run.run()
    finally:
        if own:
            used.clear()
    stop = run.stops.get((spec.topic, spec.partition))
    if stop is not None:
        raise stop
    return results[(spec.topic, spec.partition)]


def runtime_on(a: Any, b: Any, name: str, **kw: Any) -> FlowRuntime:
    """Flow A->B's runtime between the test clusters ``a`` and ``b``, its names (offset
    syncs topic, state group, transactional-id prefix) made from ``name``."""
    return FlowRuntime(
        source="A",
        target="B",
        source_consumer={"bootstrap.servers": a.bootstrap_servers},
        source_producer={"bootstrap.servers": a.bootstrap_servers},
        target_producer={"bootstrap.servers": b.bootstrap_servers},
        target_consumer={"bootstrap.servers": b.bootstrap_servers},
        offset_syncs_topic=f"syncs-{name}",
        offset_syncs_on_target=False,
        state_group=f"__mm.mirror.{name}",
        transactional_id_prefix=f"mm.{name}",
        source_profile=a.profile,
        target_profile=b.profile,
        **kw,
    )


def fill(bootstrap: str, topic: str, partitions: int, count: int, tag: str) -> None:
    """``count`` records ``<tag>-<i>`` round-robin over the topic's partitions."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        p.produce(topic, f"{tag}-{i}".encode(), f"k{i % 5}".encode(), i % partitions)
    assert p.flush(30) == 0
