"""Where a mirror task starts when its committed position cannot be taken as is.

The mirror's position (next source offset per target partition) lives in the
flow's state group on the target. Two cases must never be guessed:

* **No position, but the target partition holds data.** The state was lost: a
  new state directory *and* a state group without offsets (Apache Kafka expires
  a member-less group's offsets after ``offsets.retention.minutes``). Starting
  from the source log start would mirror everything again. The offset syncs and
  the target's own log are a recovery record: the newest sync ``(u, d)`` of the
  partition names a source record and its copy; every committed target record
  after ``d`` must then equal, in order, the committed source records after
  ``u`` (the last transaction's syncs may not have been written). When they do,
  the position is one past the last of them (:func:`recovered_position`);
  otherwise the partition is refused, the target untouched, with the way out.
* **A position past the source log end.** The topic was deleted and recreated
  (or truncated) on the source; falling back to the log start would append the
  new topic to the old one's copy. The partition is refused.

Record contents are compared by key, value and headers (not timestamps: a
target topic may use LogAppendTime).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Generator, Sequence
from contextlib import closing
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, KafkaError, KafkaException, TopicPartition
from mm_client.errors import RecordDecodeError
from mm_client.kafka.clients import reader_conf
from mm_client.kafka.errors import error_code, wrap
from mm_client.records import OffsetSync

from mm.errors import KafkaOperationError
from mm.kafka.watermarks import watermarks
from mm.source.clients import MirrorClients
from mm.source.spec import FlowRuntime, RangeSpec

# more committed target records after the newest sync than this are not compared
# (one transaction's worth is expected: only the last transaction's syncs can be missing)
MAX_RECOVERY_RECORDS = 1_000_000
_READ_TIMEOUT_S = 60.0
# what a read of a partition whose topic was deleted answers
_TOPIC_GONE = frozenset({"_UNKNOWN_PARTITION", "UNKNOWN_TOPIC_OR_PART", "_UNKNOWN_TOPIC"})


@dataclass(frozen=True, slots=True)
class LogRecord:
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()

    def content(self) -> tuple[Any, ...]:
        return (self.key, self.value, self.headers)


def recovered_position(
    sync: tuple[int, int] | None,
    source: Sequence[LogRecord],
    target: Sequence[LogRecord],
) -> int | str:
    """The next source offset to mirror, or why it cannot be proven (pure).

    ``sync`` is the partition's newest offset sync (upstream, downstream);
    ``source`` the committed source records from ``upstream`` on, ``target`` the
    committed target records from ``downstream`` on (both in offset order).
    """
    if sync is None:
        return "no offset sync names a mirrored record of this partition"
    u, d = sync
    if not target or target[0].offset != d:
        return f"the newest offset sync ({u} -> {d}) names target offset {d}, which holds no record"
    if not source or source[0].offset != u:
        return (
            f"the newest offset sync ({u} -> {d}) names source offset {u}, which holds no record "
            "any more (deleted by retention?)"
        )
    if len(target) > len(source):
        return (
            f"the target holds {len(target) - 1} records after offset {d} but the source only "
            f"{len(source) - 1} after offset {u}"
        )
    for t, s in zip(target, source, strict=False):
        if t.content() != s.content():
            return (
                f"target record at offset {t.offset} differs from source record at offset "
                f"{s.offset}, which it should be a copy of"
            )
    return source[len(target) - 1].offset + 1


class Probes:
    """The watermark probes of new partitions' ranges, one consumer per cluster for
    every range of a shard's prepare (a consumer per range and cluster cost 50-80 ms
    each, most of a first batch's prepare at 96 partitions). Safe for the prepare's
    threads: one call at a time per consumer (each is one ListOffsets round trip).
    Close it when the prepare ends."""

    def __init__(self, rt: FlowRuntime, clients: MirrorClients) -> None:
        self.rt, self.clients = rt, clients
        self._lock = threading.Lock()
        self._consumers: dict[str, Any] = {}
        # (side, topic, partition) -> (low, high) listed by prefetch, used once
        self._listed: dict[tuple[str, str, int], tuple[int, int]] = {}

    def _consumer(self, side: str) -> Any:
        consumer = self._consumers.get(side)
        if consumer is None:
            base = self.rt.source_consumer if side == "source" else self.rt.target_consumer
            consumer = self.clients.consumer(_read_conf(base, self.rt.state_group))
            self._consumers[side] = consumer
        return consumer

    def prefetch(self, side: str, tps: Sequence[TopicPartition]) -> None:
        """List the watermarks of all ``tps`` on ``side`` at once: two ListOffsets
        requests (log starts, ends) of the same consumer, with the same isolation
        level, instead of two round trips per partition one after another (0.6-0.8 s
        of a new 24-96-partition shard's prepare). :meth:`watermarks` answers each
        partition from them once. A partition the listing did not answer (say its
        topic was deleted) is left to :meth:`watermarks`' own request, which
        reports its error as before."""
        if not tps:
            return
        with self._lock:
            consumer = self._consumer(side)
            try:
                lows = consumer.offsets_for_times(
                    [TopicPartition(tp.topic, tp.partition, OFFSET_BEGINNING) for tp in tps],
                    timeout=30,
                )
                highs = consumer.offsets_for_times(
                    [TopicPartition(tp.topic, tp.partition, OFFSET_END) for tp in tps],
                    timeout=30,
                )
            except KafkaException:
                return  # each partition's own request below reports what failed
            for lo, hi in zip(lows, highs, strict=True):
                if lo.error is None and hi.error is None and lo.offset >= 0 and hi.offset >= 0:
                    self._listed[(side, lo.topic, lo.partition)] = (lo.offset, hi.offset)

    def watermarks(self, side: str, tp: TopicPartition) -> tuple[int, int]:
        """(low, high) of ``tp`` on ``side`` (``source`` or ``target``), as a
        read_committed consumer of the flow's state group lists them."""
        with self._lock:
            listed = self._listed.pop((side, tp.topic, tp.partition), None)
            if listed is not None:
                return listed
            low, high = self._consumer(side).get_watermark_offsets(tp, timeout=30)
        return int(low), int(high)

    def close(self) -> None:
        with self._lock:
            consumers, self._consumers = list(self._consumers.values()), {}
        for consumer in consumers:
            consumer.close()


def _watermarks(
    rt: FlowRuntime, clients: MirrorClients, probes: Probes | None, side: str, tp: TopicPartition
) -> tuple[int, int]:
    if probes is not None:
        return probes.watermarks(side, tp)
    base = rt.source_consumer if side == "source" else rt.target_consumer
    with closing(clients.consumer(_read_conf(base, rt.state_group))) as probe:
        low, high = probe.get_watermark_offsets(tp, timeout=30)
    return int(low), int(high)


def start_without_state(
    rt: FlowRuntime,
    spec: RangeSpec,
    clients: MirrorClients,
    log: Callable[..., None] | None = None,
    probes: Probes | None = None,
) -> int:
    """The start of a range whose target partition has no committed position
    (``probes``: the shard's shared probe consumers; None: one of its own each)."""
    from mm.source.task import PartitionStoppedError

    target_tp = TopicPartition(spec.target_topic, spec.partition)
    try:
        _, high = _watermarks(rt, clients, probes, "target", target_tp)
    except KafkaException as exc:
        if error_code(exc) in _TOPIC_GONE:
            # deleted under the running mirror (to mirror it again): skipped for
            # this batch; the planner's next topic refresh re-creates it
            raise PartitionStoppedError(
                f"target topic {spec.target_topic} on {rt.target} does not exist (deleted "
                "while the mirror runs?): the mirror re-creates it at its next topic "
                f"refresh and copies {spec.topic} into it from the source log start"
            ) from None
        raise wrap(exc, f"end offset of {spec.target_topic}[{spec.partition}]") from exc
    if high <= 0 or not _holds_committed_records(rt, spec, clients):
        # nothing was ever committed there: a new partition, or one whose only records
        # are a killed worker's transaction that never committed (aborted or still
        # open: they count in the log end, no read_committed reader sees them).
        # Mirrored from the source log start even if Spark planned past it (an
        # earlier range may have stopped before its position could be committed,
        # e.g. at a record too large)
        return min(spec.start, _source_log_start(rt, spec, clients, probes))
    sync = newest_sync(rt, spec, clients)
    target: list[LogRecord] = []
    source: list[LogRecord] = []
    if sync is not None:
        target = read_records(
            clients, rt.target_consumer, rt.state_group, spec.target_topic, spec.partition, sync[1]
        )
        if len(target) <= MAX_RECOVERY_RECORDS:
            source = read_records(
                clients,
                rt.source_consumer,
                rt.state_group,
                spec.topic,
                spec.partition,
                sync[0],
                limit=len(target),
            )
    verdict = recovered_position(sync, source, target)
    if isinstance(verdict, int):
        if log is not None:
            log(
                "mirror position recovered from the offset syncs and the target log",
                target_topic=spec.target_topic,
                position=verdict,
                sync=list(sync) if sync else None,
                records_after_sync=max(0, len(target) - 1),
            )
        return verdict
    raise PartitionStoppedError(
        f"the mirror's position for {spec.target_topic}[{spec.partition}] is gone (no offset "
        f"committed in group {rt.state_group} on {rt.target}: its state was lost, or Apache "
        f"Kafka expired it after offsets.retention.minutes) and the target partition already "
        f"holds records, so mirroring from the source start would duplicate them. It could "
        f"not be recovered: {verdict}. Nothing was written to "
        f"{spec.target_topic}[{spec.partition}]. "
        f"Way out: set the next source offset N to mirror for the partition with "
        f"`mm position -c <config> --flow {rt.source}->{rt.target} --topic {spec.topic} --set "
        f"{spec.partition}=N` (not kafka-consumer-groups.sh --reset-offsets: it would keep N "
        f"inside {spec.target_topic}'s own offsets), or delete topic {spec.target_topic} on "
        f"{rt.target} to mirror {spec.topic} again from its start."
    )


def _holds_committed_records(rt: FlowRuntime, spec: RangeSpec, clients: MirrorClients) -> bool:
    """Whether a read_committed reader finds any record in the target partition."""
    first = read_records(
        clients,
        rt.target_consumer,
        rt.state_group,
        spec.target_topic,
        spec.partition,
        OFFSET_BEGINNING,
        limit=1,
    )
    return bool(first)


def _source_log_start(
    rt: FlowRuntime, spec: RangeSpec, clients: MirrorClients, probes: Probes | None = None
) -> int:
    tp = TopicPartition(spec.topic, spec.partition)
    try:
        low, _ = _watermarks(rt, clients, probes, "source", tp)
    except KafkaException as exc:
        raise wrap(exc, f"log start of {spec.topic}[{spec.partition}]") from exc
    return low


def check_not_past_source_end(
    rt: FlowRuntime,
    spec: RangeSpec,
    committed: int,
    clients: MirrorClients,
    result: Any,
) -> None:
    """Refuse the partition when the committed position is past the source log end."""
    from mm.source.task import PartitionStoppedError

    key = (spec.topic, spec.partition)
    _, end = watermarks(
        rt.source_consumer, [key], consumer_factory=clients.consumer, profile=rt.source_profile
    )[key]
    if committed <= end:
        return
    raise PartitionStoppedError(past_source_end_message(rt, spec, committed, end), result)


def past_source_end_message(rt: FlowRuntime, spec: RangeSpec, position: int, end: int) -> str:
    """The refusal of a partition whose position is past the source log end: checked
    before a range (:func:`check_not_past_source_end`) and seen at fetch time (the
    consumer's offset reset, :mod:`mm.source.task`)."""
    return (
        f"the mirror's position {position} for {spec.topic}[{spec.partition}] is past the "
        f"source log end {end}: the topic was deleted and recreated (or truncated) on "
        f"{rt.source}, and {spec.target_topic}[{spec.partition}] on {rt.target} holds the old "
        f"topic's records. Nothing is mirrored for this partition. To mirror the new topic from "
        f"its start, delete the mirror's positions for it (kafka-consumer-groups.sh --group "
        f"{rt.state_group} --topic {spec.target_topic} --delete-offsets --bootstrap-server "
        f"<{rt.target}>), then topic {spec.target_topic} on {rt.target}, then run the mirror "
        "again."
    )


def _read_conf(base: dict[str, Any], group: str) -> dict[str, Any]:
    # the state group is named but never joined nor committed to: assign() only
    return reader_conf(base, {"auto.offset.reset": "error"}, group=group)


def newest_sync(rt: FlowRuntime, spec: RangeSpec, clients: MirrorClients) -> tuple[int, int] | None:
    """The newest (upstream, downstream) offset sync of the range's partition, if any."""
    base = rt.target_consumer if rt.offset_syncs_on_target else rt.source_consumer
    newest: tuple[int, int] | None = None
    for m in _read(clients, base, rt.state_group, rt.offset_syncs_topic, 0, OFFSET_BEGINNING):
        try:
            s = OffsetSync.from_bytes(m.key(), m.value())
        except RecordDecodeError:
            continue  # not ours to judge here; the checkpoint job counts and reports them
        if s.topic == spec.topic and s.partition == spec.partition:
            newest = (s.upstream_offset, s.downstream_offset)
    return newest


def read_records(
    clients: MirrorClients,
    base: dict[str, Any],
    group: str,
    topic: str,
    partition: int,
    start: int,
    limit: int = MAX_RECOVERY_RECORDS + 1,
) -> list[LogRecord]:
    """Committed records of ``topic[partition]`` from ``start`` to the end (at most ``limit``)."""
    out: list[LogRecord] = []
    with closing(_read(clients, base, group, topic, partition, start)) as messages:
        for m in messages:
            headers = tuple((k, v) for k, v in (m.headers() or []))
            out.append(LogRecord(m.offset(), m.key(), m.value(), headers))
            if len(out) >= limit:
                break
    return out


def _read(
    clients: MirrorClients,
    base: dict[str, Any],
    group: str,
    topic: str,
    partition: int,
    start: int,
) -> Generator[Any, None, None]:
    consumer = clients.consumer(_read_conf(base, group))
    where = f"{topic}[{partition}]"
    try:
        try:
            consumer.assign([TopicPartition(topic, partition, start)])
        except KafkaException as exc:
            raise wrap(exc, f"read {where}") from exc
        deadline = time.monotonic() + _READ_TIMEOUT_S
        while True:
            msgs = consumer.consume(1000, 0.1)
            if not msgs and time.monotonic() > deadline:
                raise KafkaOperationError(
                    f"no end of {where} reached within {_READ_TIMEOUT_S:.0f}s",
                    code="_TIMED_OUT",
                    retriable=True,
                )
            for m in msgs:
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        return
                    if err.code() == KafkaError._AUTO_OFFSET_RESET:
                        return  # start is past the end (or gone): nothing to read there
                    raise wrap(KafkaException(err), f"read {where}")
                deadline = time.monotonic() + _READ_TIMEOUT_S
                yield m
    finally:
        consumer.close()
