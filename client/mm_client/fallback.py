"""Approximate translation by timestamp, for partitions that have no checkpoint.

When a group's partition has no checkpoint (the checkpoint job never ran for
it, or the topic was added after the last checkpoint), offsets can still be
estimated from record timestamps, as CDAP's failover guide and MM2's own
documentation suggest:

1. on the source, the group's committed offset ``C`` (AdminClient
   ``list_consumer_group_offsets``) names the next record it would read; read
   that record (the first record at or after ``C``: offset gaps are skipped)
   and take its timestamp ``T``. If ``C`` is at the log end, there is no such
   record: the group had read everything, so the answer is the end of the
   target partition (basis ``"end"``);
2. on the target, in the remote topic (``A.orders`` for ``orders``, via the
   replication policy) and the same partition number, find the first record
   whose timestamp is ``>= T`` (basis ``"timestamp"``), or the end of the
   partition if there is none.

Step 2 asks the broker (``offsets_for_times``, ListOffsets by timestamp) for a
starting point, then confirms it by reading forward from there to the first
record whose timestamp is ``>= T``. On Apache Kafka the broker's answer is
already that record, so the confirmation reads one record; on brokers that
answer coarsely (the embedded test broker answers the log start) the scan
makes the answer the same, at the cost of reading the partition up to it.

Why the result is only approximate (and kept apart from exact results):

* timestamps are not unique: several records can share ``T``, and the first of
  them on the target may precede the copy of the record at ``C``; those records
  are delivered again (duplicates, never a skip);
* timestamps are not monotonic (producers set CreateTime): a record written
  before the copy of ``C`` but stamped ``>= T`` makes the answer earlier still,
  re-delivering everything in between;
* it relies on the mirror keeping the producer's timestamps (CreateTime), the
  partition number and the order. A target topic with
  ``message.timestamp.type=LogAppendTime`` stamps records when they were
  mirrored, which makes the answer meaningless;
* the record at ``C`` may not have been mirrored yet (the mirror lagged): the
  answer is then the target end, and the missing records are not on the target;
* a committed offset beyond the source log end (topic re-created, unclean
  leader election) cannot be translated and is reported as unresolved.
"""

from __future__ import annotations

import concurrent.futures
import logging
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
)
from confluent_kafka import TopicPartition as KafkaTopicPartition

from mm_client.cluster_errors import ClusterUnavailableError
from mm_client.connection import (
    UNREACHABLE_CODES,
    Deadline,
    ErrorTrail,
    admin_client,
    bootstrap_of,
    prepare,
    throwaway_consumer_conf,
)
from mm_client.kafka.clients import new_consumer
from mm_client.kafka.errors import describe_exception, error_code, wrap
from mm_client.policy import ReplicationPolicy
from mm_client.topic_partition import TopicPartition

__all__ = [
    "ApproximateOffset",
    "TimestampTranslation",
    "committed_offsets",
    "translate_by_timestamp",
]

logger = logging.getLogger("mm_client.fallback")

Basis = Literal["timestamp", "end"]


@dataclass(frozen=True, slots=True)
class ApproximateOffset:
    """A target offset estimated from timestamps: close, but not exact.

    ``offset`` is where to resume on the target. ``source``/``source_offset``
    are the group's committed position on the source; ``timestamp`` is that of
    the record at ``source_offset`` (``None`` when the group was at the log end).
    ``basis`` says how ``offset`` was found: ``"timestamp"`` (first target record
    with timestamp >= ``timestamp``, or the target end if none) or ``"end"``
    (the source position was the log end, so the target end).
    """

    offset: int
    source: TopicPartition
    source_offset: int
    timestamp: int | None
    basis: Basis


@dataclass(frozen=True)
class TimestampTranslation:
    """Result of :func:`translate_by_timestamp`; every offset in it is approximate.

    ``approximate`` is keyed by *target* partition (``A.orders``/0), like exact
    results; ``unresolved`` by *source* partition, with the reason.
    """

    group: str
    approximate: dict[TopicPartition, ApproximateOffset] = field(default_factory=dict)
    unresolved: dict[TopicPartition, str] = field(default_factory=dict)

    def offsets(self) -> dict[TopicPartition, int]:
        """Target partition -> approximate offset (for the seek/commit helpers)."""
        return {tp: a.offset for tp, a in self.approximate.items()}


def translate_by_timestamp(
    source_config: Mapping[str, Any],
    target_config: Mapping[str, Any],
    source_alias: str,
    group: str,
    partitions: Iterable[tuple[str, int]] | None = None,
    timeout: float = 30.0,
    *,
    replication_policy: ReplicationPolicy | None = None,
) -> TimestampTranslation:
    """Estimate ``group``'s target offsets from record timestamps (see the module doc).

    ``partitions``: *source* partitions to translate (``("orders", 0)``); by
    default every partition the group has committed offsets for on the source.
    Checkpoints are not consulted: use :func:`mm_client.plan_failover` to take
    exact checkpoints first and fall back only where there are none.

    Raises :class:`ClusterUnavailableError` if the source does not return the
    group's offsets, or the target its topics, within ``timeout``; partitions
    that cannot be finished in time are reported in ``unresolved``.
    """
    deadline = Deadline(timeout)
    source_conf, _ = prepare(source_config)
    target_conf, policy = prepare(target_config, replication_policy)
    return by_timestamp(source_conf, target_conf, policy, source_alias, group, partitions, deadline)


def by_timestamp(
    source_conf: dict[str, Any],
    target_conf: dict[str, Any],
    policy: ReplicationPolicy,
    source_alias: str,
    group: str,
    partitions: Iterable[tuple[str, int]] | None,
    deadline: Deadline,
    skip_targets: Collection[tuple[str, int]] = (),
) -> TimestampTranslation:
    """:func:`translate_by_timestamp` on prepared configs, skipping ``skip_targets``."""
    wanted = None if partitions is None else [TopicPartition(t, p) for t, p in partitions]
    result = TimestampTranslation(group)
    committed = committed_offsets(source_conf, group, wanted, deadline)
    for tp in wanted or ():
        if tp not in committed:
            result.unresolved[tp] = f"group {group} has no committed offset on the source"
    targets: dict[TopicPartition, TopicPartition] = {}
    for tp in sorted(committed):
        target = TopicPartition(policy.format_remote_topic(source_alias, tp.topic), tp.partition)
        if target not in skip_targets:
            targets[tp] = target
    if not targets:
        return result
    positions = _source_positions(
        source_conf, {tp: committed[tp] for tp in targets}, deadline, result.unresolved
    )
    _target_offsets(target_conf, targets, positions, deadline, result)
    return result


def committed_offsets(
    conf: Mapping[str, Any],
    group: str,
    partitions: list[TopicPartition] | None,
    deadline: Deadline,
) -> dict[TopicPartition, int]:
    """The group's committed offsets on a cluster (partitions without one left out)."""
    bootstrap = bootstrap_of(conf)
    conf = dict(conf)
    trail = ErrorTrail.install(conf)
    admin = admin_client(conf)
    request = ConsumerGroupTopicPartitions(
        group,
        [KafkaTopicPartition(t, p) for t, p in partitions] if partitions is not None else None,
    )
    try:
        future = admin.list_consumer_group_offsets(
            [request], request_timeout=deadline.remaining(0.001)
        )[group]
        answer = future.result(timeout=deadline.remaining(0.001) + 1.0)
    except concurrent.futures.TimeoutError as exc:
        raise ClusterUnavailableError(
            f"cluster {bootstrap} did not return the offsets of group {group} within "
            f"{deadline.timeout:g}s{trail.describe(admin)}",
            bootstrap_servers=bootstrap,
            code="_TIMED_OUT",
        ) from exc
    except KafkaException as exc:
        code = error_code(exc)
        if code in UNREACHABLE_CODES:
            raise ClusterUnavailableError(
                f"cluster {bootstrap} did not return the offsets of group {group} within "
                f"{deadline.timeout:g}s: {describe_exception(exc)}{trail.describe(admin)}",
                bootstrap_servers=bootstrap,
                code=code,
            ) from exc
        raise wrap(exc, f"list offsets of group {group} on {bootstrap}") from exc
    out: dict[TopicPartition, int] = {}
    for ktp in answer.topic_partitions or ():
        if ktp.error is None and ktp.offset >= 0:
            out[TopicPartition(ktp.topic, ktp.partition)] = ktp.offset
    return out


@dataclass(frozen=True, slots=True)
class _Position:
    """Where the group stands on the source: a record's timestamp, or the log end."""

    committed: int
    timestamp: int | None  # None: at the log end


def _source_positions(
    conf: Mapping[str, Any],
    committed: dict[TopicPartition, int],
    deadline: Deadline,
    unresolved: dict[TopicPartition, str],
) -> dict[TopicPartition, _Position]:
    """Timestamp of the record at each committed offset (first event per partition)."""
    consumer_conf = throwaway_consumer_conf(conf, "timestamps")
    ErrorTrail.install(consumer_conf)
    # below the log start: the first record there is the next one the group reads
    # (and a reset above the end is detected below, by an offset lower than C)
    consumer_conf["auto.offset.reset"] = "earliest"
    consumer_conf.setdefault("fetch.wait.max.ms", 100)
    consumer_conf.setdefault("max.partition.fetch.bytes", 65_536)
    consumer = new_consumer(consumer_conf)
    found: dict[TopicPartition, _Position] = {}
    pending = dict(committed)
    try:
        consumer.assign([KafkaTopicPartition(t, p, c) for (t, p), c in committed.items()])
        while pending and not deadline.expired():
            for msg in consumer.consume(1000, min(0.02, deadline.remaining(0.001))):
                topic, part = msg.topic(), msg.partition()
                if topic is None or part is None:
                    continue
                tp = TopicPartition(topic, part)
                c = pending.get(tp)
                if c is None:
                    continue  # resolved already
                err = msg.error()
                offset = msg.offset()
                if err is not None and err.code() != KafkaError._PARTITION_EOF:
                    if err.fatal() or not err.retriable():
                        del pending[tp]
                        unresolved[tp] = f"cannot read the source partition: {err.str()}"
                    continue
                del pending[tp]
                consumer.pause([KafkaTopicPartition(topic, part)])
                if offset is not None and offset < c:
                    unresolved[tp] = f"committed offset {c} is beyond the source log end ({offset})"
                elif err is not None:  # end of partition: the group had read everything
                    found[tp] = _Position(c, None)
                else:
                    ts_type, ts = msg.timestamp()
                    if ts_type == TIMESTAMP_NOT_AVAILABLE or ts < 0:
                        unresolved[tp] = f"source record at offset {offset} has no timestamp"
                    else:
                        found[tp] = _Position(c, ts)
    finally:
        consumer.close()
    for tp, c in pending.items():
        unresolved[tp] = (
            f"timed out reading the source record at committed offset {c} "
            f"within {deadline.timeout:g}s"
        )
    return found


def _target_offsets(
    conf: Mapping[str, Any],
    targets: dict[TopicPartition, TopicPartition],
    positions: dict[TopicPartition, _Position],
    deadline: Deadline,
    result: TimestampTranslation,
) -> None:
    """First target record with timestamp >= T (or the end), per source partition."""
    bootstrap = bootstrap_of(conf)
    consumer_conf = throwaway_consumer_conf(conf, "timestamps")
    trail = ErrorTrail.install(consumer_conf)
    consumer_conf["auto.offset.reset"] = "earliest"
    consumer_conf.setdefault("fetch.wait.max.ms", 100)
    consumer = new_consumer(consumer_conf)
    try:
        try:
            metadata = consumer.list_topics(timeout=deadline.remaining(0.001))
        except KafkaException as exc:
            raise ClusterUnavailableError(
                f"cluster {bootstrap} did not return topic metadata within "
                f"{deadline.timeout:g}s: {describe_exception(exc)}{trail.describe(consumer)}",
                bootstrap_servers=bootstrap,
                code=error_code(exc),
            ) from exc
        # target partition -> (source partition, position)
        work: dict[TopicPartition, tuple[TopicPartition, _Position]] = {}
        for source, position in positions.items():
            target = targets[source]
            found = metadata.topics.get(target.topic)
            if found is None or found.error is not None:
                why = found.error.str() if found is not None and found.error else "missing"
                result.unresolved[source] = (
                    f"target topic {target.topic} is not available on {bootstrap} ({why})"
                )
            elif target.partition not in found.partitions:
                result.unresolved[source] = (
                    f"target topic {target.topic} has no partition {target.partition}"
                )
            else:
                work[target] = (source, position)
        if not work:
            return
        starts = _scan_starts(consumer, work, deadline)
        consumer.assign([KafkaTopicPartition(t, p, starts[TopicPartition(t, p)]) for t, p in work])
        pending = dict(work)
        while pending and not deadline.expired():
            for msg in consumer.consume(1000, min(0.02, deadline.remaining(0.001))):
                topic, part = msg.topic(), msg.partition()
                if topic is None or part is None:
                    continue
                target = TopicPartition(topic, part)
                entry = pending.get(target)
                if entry is None:
                    continue
                source, position = entry
                err = msg.error()
                offset = msg.offset()
                if err is not None and err.code() != KafkaError._PARTITION_EOF:
                    if err.fatal() or not err.retriable():
                        del pending[target]
                        result.unresolved[source] = f"cannot read {target}: {err.str()}"
                    continue
                if offset is None:
                    continue
                if err is None:
                    if position.timestamp is None or msg.timestamp()[1] < position.timestamp:
                        continue  # "end" waits for EOF; earlier records are scanned past
                del pending[target]
                consumer.pause([KafkaTopicPartition(topic, part)])
                result.approximate[target] = ApproximateOffset(
                    offset,
                    source,
                    position.committed,
                    position.timestamp,
                    "end" if position.timestamp is None else "timestamp",
                )
        for target, (source, _) in pending.items():
            result.unresolved[source] = (
                f"timed out looking up {target} by timestamp within {deadline.timeout:g}s"
            )
    finally:
        consumer.close()


def _scan_starts(
    consumer: Consumer,
    work: dict[TopicPartition, tuple[TopicPartition, _Position]],
    deadline: Deadline,
) -> dict[TopicPartition, int]:
    """Where to start reading each target partition: the broker's timestamp lookup.

    A start is only a lower bound to read forward from: a broker that answers
    coarsely cannot make the result wrong, only slower. ``OFFSET_END`` when the
    broker says no record is that recent (or the source was at its end).
    """
    starts: dict[TopicPartition, int] = {}
    lookups = []
    for target, (_, position) in work.items():
        if position.timestamp is None:
            starts[target] = OFFSET_END
        else:
            starts[target] = OFFSET_BEGINNING
            lookups.append(KafkaTopicPartition(*target, position.timestamp))
    if not lookups:
        return starts
    try:
        answers = consumer.offsets_for_times(lookups, timeout=deadline.remaining(0.001))
    except KafkaException as exc:
        logger.warning("offsets_for_times failed (%s); scanning from the log start", exc)
        return starts
    for answer in answers:
        if answer.error is None and answer.topic is not None:
            target = TopicPartition(answer.topic, answer.partition)
            if answer.offset >= 0:
                starts[target] = answer.offset
            elif answer.offset == OFFSET_END:
                starts[target] = OFFSET_END  # no record with a timestamp >= T
    return starts
