"""Partition ends: what ListOffsets answers, checked by a fetch where the broker
profile says ListOffsets may under-report.

On Apache Kafka (profile ``kafka``) ListOffsets is exact: read_committed, it
answers the last stable offset, the end a read_committed reader (every mirror
task) can reach, for hundreds of partitions in two batched requests. A broker
whose profile has ``list_offsets_exact = False`` (see :mod:`mm.kafka.profile`)
may answer less; there the listing is followed by one fetch per partition from
its listed end - 1: the response is at most the tail batch, and librdkafka caches
the partition's high watermark, which is returned when it is higher. (That is
why Apache Kafka's ends are never read this way: its high watermark includes
the records of a transaction still open, which no read_committed reader gets
until the transaction ends.)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from confluent_kafka import OFFSET_INVALID, KafkaException, TopicPartition
from mm_client.kafka.clients import new_consumer, reader_conf, throwaway_group
from mm_client.kafka.errors import wrap

from mm.errors import KafkaOperationError
from mm.kafka.profile import KAFKA, BrokerProfile


def probe_consumer_conf(base: Mapping[str, Any]) -> dict[str, Any]:
    """An assign-only reader that lists offsets and fetches a partition's tail: no
    end-of-partition events, and fetches answered without waiting for more data."""
    return reader_conf(
        base, {"fetch.wait.max.ms": 10}, group=throwaway_group("__mm-probe"), eof=False
    )


def watermarks(
    consumer_conf: Mapping[str, str],
    partitions: Iterable[tuple[str, int]],
    timeout: float = 30.0,
    consumer_factory: Callable[[dict[str, Any]], Any] = new_consumer,
    admin: Any = None,
    consumer: Any = None,
    profile: BrokerProfile = KAFKA,
    missing: set[tuple[str, int]] | None = None,
) -> dict[tuple[str, int], tuple[int, int]]:
    """(log start, end) per partition. With ``profile.list_offsets_exact`` (Apache
    Kafka) the end is the last stable offset, from ListOffsets; otherwise it comes
    from a real fetch, as follows.

    ``consumer`` (built from :func:`probe_consumer_conf`) is used and left open
    instead of a new one, for callers that probe often. It is unassigned at the end:
    an assigned consumer fetches every ``fetch.wait.max.ms`` (measured at 96
    partitions: 110 fetches/s, each re-reading every new record, for as long as the
    mirror ran, idle or not). Its answer for a partition is taken from a fetch of
    this probe when one returns a record of it (assigned at the listed end - 1, the
    fetch returns that record at once); otherwise, after a short wait, from its
    previous fetch's watermark (at worst one probe late, never high).

    With ``admin`` (an AdminClient of the same cluster), the listing is two batched
    ListOffsets requests instead of two per partition (what a planner of hundreds
    of partitions does every micro-batch). Raises KafkaOperationError naming the
    partitions that did not answer in time. With ``admin`` and a ``missing`` set,
    partitions the cluster does not know (their topic deleted since it was listed)
    are added to it and left out of the answer instead of failing the listing.
    """
    tps = list(partitions)
    if not tps:
        return {}
    deadline = time.monotonic() + timeout
    if profile.list_offsets_exact and admin is not None:
        return _list_batched(admin, tps, deadline, missing)
    owned = consumer is None
    if consumer is None:
        consumer = consumer_factory(probe_consumer_conf(consumer_conf))
    try:
        if admin is not None:
            listed = _list_batched(admin, tps, deadline, missing)
        else:
            listed = _list_one_by_one(consumer, tps, deadline)
        if profile.list_offsets_exact:
            return listed
        consumer.assign(
            [TopicPartition(t, p, max(lo, hi - 1)) for (t, p), (lo, hi) in listed.items()]
        )
        result: dict[tuple[str, int], tuple[int, int]] = {}
        pending = set(listed)
        # A fresh consumer's cached watermark must come from this fetch, not from an
        # under-reported listing: its first wait is long enough for the fetch to
        # answer. A kept consumer answers as soon as this probe's fetch returned a
        # record of the partition, or after ``kept_wait`` from its previous fetch.
        wait = 0.05 if owned else 0.005
        kept_wait = time.monotonic() + 0.05
        fresh: set[tuple[str, int]] = set()
        while pending:
            for m in consumer.consume(num_messages=1000, timeout=wait):
                if m.error() is None:
                    fresh.add((m.topic(), m.partition()))
            for key in list(pending):
                hi = OFFSET_INVALID
                if owned or key in fresh or time.monotonic() >= kept_wait:
                    _lo, hi = consumer.get_watermark_offsets(TopicPartition(*key), cached=True)
                if hi != OFFSET_INVALID and hi >= 0:
                    result[key] = (listed[key][0], max(hi, listed[key][1]))
                    pending.discard(key)
                elif listed[key][1] <= listed[key][0]:
                    # empty partition: nothing to fetch, ListOffsets is enough
                    result[key] = listed[key]
                    pending.discard(key)
            if pending and time.monotonic() > deadline:
                names = ", ".join(f"{t}[{p}]" for t, p in sorted(pending))
                raise KafkaOperationError(
                    f"no fetch response within {timeout:.0f}s for {names}",
                    code="_TIMED_OUT",
                    retriable=True,
                )
        return result
    finally:
        if owned:
            consumer.close()
        else:
            consumer.unassign()


def _list_one_by_one(
    consumer: Any, tps: list[tuple[str, int]], deadline: float
) -> dict[tuple[str, int], tuple[int, int]]:
    listed: dict[tuple[str, int], tuple[int, int]] = {}
    for t, p in tps:
        try:
            lo, hi = consumer.get_watermark_offsets(
                TopicPartition(t, p), timeout=max(0.1, deadline - time.monotonic())
            )
        except KafkaException as exc:
            raise wrap(exc, f"list offsets of {t}[{p}]") from exc
        listed[(t, p)] = (lo, hi)
    return listed


def _list_batched(
    admin: Any,
    tps: list[tuple[str, int]],
    deadline: float,
    missing: set[tuple[str, int]] | None = None,
) -> dict[tuple[str, int], tuple[int, int]]:
    from confluent_kafka import IsolationLevel
    from confluent_kafka.admin import OffsetSpec

    out: dict[tuple[str, int], list[int]] = {tp: [0, 0] for tp in tps}
    for i, spec in enumerate((OffsetSpec.earliest(), OffsetSpec.latest())):
        futures = admin.list_offsets(
            {TopicPartition(t, p): spec for t, p in tps},
            isolation_level=IsolationLevel.READ_COMMITTED,
            request_timeout=max(0.1, deadline - time.monotonic()),
        )
        for tp, future in futures.items():
            key = (tp.topic, tp.partition)
            try:
                out[key][i] = future.result().offset
            except KafkaException as exc:
                err = wrap(exc, f"list offsets of {tp.topic}[{tp.partition}]")
                if missing is None or err.code != "UNKNOWN_TOPIC_OR_PART":
                    raise err from exc
                missing.add(key)
        if missing:
            tps = [tp for tp in tps if tp not in missing]
            if not tps:
                break
    return {tp: (lo, hi) for tp, (lo, hi) in out.items() if tp not in (missing or ())}
