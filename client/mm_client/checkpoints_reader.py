"""Read ``<source>.checkpoints.internal`` from beginning to end in one pass.

What the read means (MM2's ``RemoteClusterUtils.translateOffsets``): every
partition of the checkpoints topic is read from its beginning to its end, and
for each (group, target topic, partition) the *newest* checkpoint wins, by
position in the log. Records that fail to decode are skipped and counted.

"The end" is the high watermark reported by Fetch responses (the
``enable.partition.eof`` event carries it), never ListOffsets(latest) alone:
Apache Kafka answers both the same, but on some brokers (the embedded test
broker) ListOffsets(latest) under-reports the log end, and a reader that
stopped there would miss the newest checkpoints. Under ``read_committed``
(librdkafka's default) the end is the last stable offset. Nothing returns until
every partition has reached its end: a partial read would silently hand out
stale offsets, so it is an error
(:class:`~mm_client.cluster_errors.CheckpointsUnavailableError`, reason
``"incomplete"``).

The consumer uses ``assign()`` (no group join), a throwaway ``group.id`` and
never commits.

Speed (all groups of a big deployment in one read): keys are parsed once per
distinct key and the group name is matched once per distinct group; values of
groups that do not match are never looked at; a well-formed version-0 value is
validated with a few byte comparisons and stored as the bytes the client
already holds, and only the surviving (newest) values are decoded at the end.
Anything unusual (a newer version, non-empty metadata, a malformed value) goes
through :meth:`Checkpoint.from_bytes`, which stays the single definition of a
valid checkpoint: a record is kept exactly when ``Checkpoint.from_bytes``
accepts it (tested against it on random and mutated records).

Two choices where MM2 has none:

* a tombstone (null value) with a valid key deletes that key's checkpoint, as
  compaction eventually would (MM2 never writes them; its reader fails on one);
* ``skipped`` counts the undecodable records that could have mattered: records
  whose key cannot be read, and records of the selected groups whose value
  cannot be read. A record of another group is not decoded, so not counted.
  ``skipped_at`` names the first :data:`SKIPPED_NAMED` of them (partition,
  offset, why), and the warning logged names them too. An undecodable record
  never replaces the key's previous valid checkpoint: that one stays the newest.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from typing import Any, Final, NamedTuple

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from mm_client.cluster_errors import CheckpointsUnavailableError
from mm_client.connection import (
    Deadline,
    ErrorTrail,
    bootstrap_of,
    prepare,
    throwaway_consumer_conf,
)
from mm_client.errors import RecordDecodeError
from mm_client.kafka.clients import closing_consumer
from mm_client.kafka.errors import describe_exception, error_code
from mm_client.policy import ReplicationPolicy
from mm_client.records import Checkpoint
from mm_client.topic_partition import TopicPartition
from mm_client.wire import INT16, INT32, INT64

__all__ = [
    "CheckpointSnapshot",
    "GroupSelector",
    "SkippedRecord",
    "group_matcher",
    "read_checkpoints",
]

logger = logging.getLogger("mm_client.checkpoints")

GroupSelector = str | re.Pattern[str] | Callable[[str], bool]

BATCH: Final = 10_000
# skipped records named by partition and offset (the rest are only counted)
SKIPPED_NAMED: Final = 10
# consume() waits until BATCH messages or this long: it is the delay after the last
# batch (end-of-partition events do not end the wait), so keep it short
POLL_WAIT: Final = 0.02
# Version-0 value with empty metadata: INT16 version + 2 x INT64 + INT16 length.
_V0_EMPTY_LEN: Final = 20
_DOWNSTREAM_AT: Final = 10  # byte offset of the downstream INT64 in a value
_UPSTREAM_AT: Final = 2
_METADATA_LEN_AT: Final = 18

# Broker answers that will not go away by waiting: stop and say so.
_FATAL_READ_CODES: Final = frozenset(
    {
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError._UNKNOWN_TOPIC,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError._AUTO_OFFSET_RESET,
    }
)

_MISS: Final = object()  # key not parsed yet
_BAD: Final = object()  # key does not decode


class SkippedRecord(NamedTuple):
    """An undecodable record of the checkpoints topic: where it is and why."""

    partition: int
    offset: int
    reason: str

    def __str__(self) -> str:
        return f"[{self.partition}]@{self.offset}: {self.reason}"


def group_matcher(groups: GroupSelector) -> Callable[[str], bool]:
    """A predicate from a regex (full match, as MM2's ``groups``) or a callable."""
    if isinstance(groups, str):
        pattern = re.compile(groups)
        return lambda g: pattern.fullmatch(g) is not None
    if isinstance(groups, re.Pattern):
        compiled = groups
        return lambda g: compiled.fullmatch(g) is not None
    if callable(groups):
        return groups
    raise TypeError(f"groups must be a regex string, a compiled pattern or a callable: {groups!r}")


class CheckpointSnapshot:
    """The newest checkpoint per (group, target partition), as read from one topic.

    ``records`` records were read, ``skipped`` of them could not be decoded;
    ``end_offsets`` is, per partition of the checkpoints topic, the offset the
    read stopped at (its end at the time). Offsets are looked up lazily from the
    stored record values.
    """

    __slots__ = (
        "_latest",
        "bootstrap_servers",
        "end_offsets",
        "other_groups",
        "records",
        "skipped",
        "skipped_at",
        "topic",
    )

    def __init__(
        self,
        topic: str,
        bootstrap_servers: str,
        latest: dict[str, dict[TopicPartition, bytes]],
        *,
        records: int,
        skipped: int,
        end_offsets: Mapping[int, int],
        skipped_at: list[SkippedRecord] | None = None,
        other_groups: set[str] | None = None,
    ) -> None:
        self.topic = topic
        self.bootstrap_servers = bootstrap_servers
        self._latest = {g: v for g, v in latest.items() if v}
        self.records = records
        self.skipped = skipped
        self.skipped_at = list(skipped_at or ())
        self.end_offsets = dict(end_offsets)
        # groups whose keys were seen but not selected (their checkpoints not kept)
        self.other_groups = frozenset(other_groups or ())

    def __repr__(self) -> str:
        return (
            f"CheckpointSnapshot(topic={self.topic!r}, groups={len(self._latest)}, "
            f"records={self.records}, skipped={self.skipped})"
        )

    @property
    def groups(self) -> list[str]:
        """Groups with at least one checkpoint, sorted."""
        return sorted(self._latest)

    def offsets(self, group: str) -> dict[TopicPartition, int]:
        """Target topic-partition -> translated (downstream) offset; {} if none."""
        unpack = INT64.unpack_from
        return {
            tp: unpack(value, _DOWNSTREAM_AT)[0]
            for tp, value in self._latest.get(group, {}).items()
        }

    def all_offsets(self) -> dict[str, dict[TopicPartition, int]]:
        """Every group's offsets (as :meth:`offsets`)."""
        unpack = INT64.unpack_from
        return {
            group: {tp: unpack(value, _DOWNSTREAM_AT)[0] for tp, value in slot.items()}
            for group, slot in self._latest.items()
        }

    def checkpoints(self, group: str) -> dict[TopicPartition, Checkpoint]:
        """The full newest checkpoints of ``group`` (upstream offset, metadata too)."""
        out: dict[TopicPartition, Checkpoint] = {}
        for tp, value in self._latest.get(group, {}).items():
            upstream = INT64.unpack_from(value, _UPSTREAM_AT)[0]
            downstream = INT64.unpack_from(value, _DOWNSTREAM_AT)[0]
            length = INT16.unpack_from(value, _METADATA_LEN_AT)[0]
            end = _METADATA_LEN_AT + 2 + length
            metadata = bytes(value[_METADATA_LEN_AT + 2 : end]).decode("utf-8")
            out[tp] = Checkpoint(group, tp.topic, tp.partition, upstream, downstream, metadata)
        return out


def read_checkpoints(
    config: Mapping[str, Any],
    source_alias: str,
    groups: GroupSelector = ".*",
    timeout: float = 30.0,
    *,
    replication_policy: ReplicationPolicy | None = None,
) -> CheckpointSnapshot:
    """Read ``<source_alias>.checkpoints.internal`` (named by the policy) to its end.

    ``config``: librdkafka properties of the cluster holding the checkpoints (the
    failover target). ``groups``: which groups to keep, a regex that must match
    the whole group name, a compiled pattern, or a predicate.

    Raises :class:`CheckpointsUnavailableError` (within ``timeout`` seconds) if
    the cluster does not answer, the topic does not exist, or its end is not
    reached in time.
    """
    conf, policy = prepare(config, replication_policy)
    topic = policy.checkpoints_topic(source_alias)
    match = group_matcher(groups)
    deadline = Deadline(timeout)
    bootstrap = bootstrap_of(conf)
    trail = ErrorTrail.install(conf)
    consumer_conf = throwaway_consumer_conf(conf, "checkpoints")
    consumer_conf.setdefault("fetch.wait.max.ms", 100)
    consumer_conf.setdefault("max.partition.fetch.bytes", 10_485_760)
    consumer_conf["auto.offset.reset"] = "earliest"
    with closing_consumer(consumer_conf) as consumer:
        partitions = _partitions(consumer, topic, bootstrap, deadline, trail)
        reader = _Reader(match)
        ends = reader.read(consumer, topic, partitions, deadline, bootstrap, trail)
    if reader.skipped:
        logger.warning(
            "skipped %d undecodable record(s) of %d in %s on %s (expected MM2 Checkpoint "
            "records; each key keeps its previous valid checkpoint): %s%s",
            reader.skipped,
            reader.records,
            topic,
            bootstrap,
            "; ".join(f"{topic}{s}" for s in reader.skipped_at),
            "" if reader.skipped <= len(reader.skipped_at) else "; ...",
        )
    return CheckpointSnapshot(
        topic,
        bootstrap,
        reader.latest,
        records=reader.records,
        skipped=reader.skipped,
        end_offsets=ends,
        skipped_at=reader.skipped_at,
        other_groups=reader.other_groups,
    )


def _partitions(
    consumer: Consumer, topic: str, bootstrap: str, deadline: Deadline, trail: ErrorTrail
) -> list[int]:
    """Partition ids of ``topic``; raises CheckpointsUnavailableError if there are none."""
    last_error: KafkaError | None = None
    while True:
        try:
            metadata = consumer.list_topics(topic, timeout=deadline.remaining(0.001))
        except KafkaException as exc:
            raise CheckpointsUnavailableError(
                f"cannot read checkpoints topic {topic}: cluster {bootstrap} did not answer "
                f"within {deadline.timeout:g}s ({describe_exception(exc)})"
                f"{trail.describe(consumer)}",
                bootstrap_servers=bootstrap,
                topic=topic,
                reason="unreachable",
                code=error_code(exc),
                retriable=True,
            ) from exc
        found = metadata.topics.get(topic)
        err = found.error if found is not None else None
        if found is None or (err is not None and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
            raise CheckpointsUnavailableError(
                f"checkpoints topic {topic} does not exist on cluster {bootstrap} "
                "(is this the target cluster, and is the source alias right?)",
                bootstrap_servers=bootstrap,
                topic=topic,
                reason="missing",
                code="UNKNOWN_TOPIC_OR_PART",
            )
        if err is not None and not err.retriable():
            raise CheckpointsUnavailableError(
                f"cannot read checkpoints topic {topic} on cluster {bootstrap}: {err.str()}",
                bootstrap_servers=bootstrap,
                topic=topic,
                reason="error",
                code=err.name(),
            )
        if err is None and found.partitions:
            return sorted(found.partitions)
        last_error = err
        if deadline.expired():
            why = f": {last_error.str()}" if last_error is not None else ""
            raise CheckpointsUnavailableError(
                f"checkpoints topic {topic} on cluster {bootstrap} has no available "
                f"partitions after {deadline.timeout:g}s{why}",
                bootstrap_servers=bootstrap,
                topic=topic,
                reason="unreachable",
                code=last_error.name() if last_error is not None else None,
                retriable=True,
            )
        consumer.poll(min(0.1, deadline.remaining(0.001)))  # back off; serves callbacks


def _parse_topic_partition(data: bytes) -> object:
    """TopicPartition from a key's topic STRING + partition INT32 (nothing after)."""
    size = len(data)
    if size < 2 or data[0] & 0x80:
        return _BAD
    topic_end = 2 + ((data[0] << 8) | data[1])
    if topic_end == 2 or size != topic_end + 4:
        return _BAD
    try:
        topic = data[2:topic_end].decode("utf-8")
    except UnicodeDecodeError:
        return _BAD
    partition = INT32.unpack_from(data, topic_end)[0]
    if partition < 0:
        return _BAD
    return TopicPartition(topic, partition)


class _Reader:
    """One pass over the topic; keeps raw values of the newest checkpoint per key."""

    __slots__ = (
        "_group_slots",
        "_keys",
        "_match",
        "_suffixes",
        "latest",
        "other_groups",
        "records",
        "skipped",
        "skipped_at",
    )

    def __init__(self, match: Callable[[str], bool]) -> None:
        self._match = match
        self.latest: dict[str, dict[TopicPartition, bytes]] = {}
        # key bytes -> (slot, TopicPartition) | None (other group) | _BAD
        self._keys: dict[bytes | None, object] = {}
        # group bytes -> slot dict | None (other group) | _BAD
        self._group_slots: dict[bytes, object] = {}
        # topic STRING + partition INT32 bytes -> TopicPartition | _BAD
        self._suffixes: dict[bytes, object] = {}
        # groups seen but not selected (named when a selected group has no checkpoint)
        self.other_groups: set[str] = set()
        self.records = 0
        self.skipped = 0
        self.skipped_at: list[SkippedRecord] = []

    def _parse_key(self, key: bytes | None) -> object:
        """Same acceptance as Checkpoint.from_bytes for the key half, and the group filter.

        Called once per distinct key. The group part and the (topic, partition)
        part are each parsed once per distinct value too: a topic's partitions
        recur in every group's keys.
        """
        if key is None:
            return _BAD
        size = len(key)
        if size < 2:
            return _BAD
        group_end = 2 + ((key[0] << 8) | key[1])
        # empty group: the Checkpoint constructor rejects it; top bit: negative length
        if group_end == 2 or key[0] & 0x80 or size < group_end:
            return _BAD
        group_bytes = key[2:group_end]
        slot = self._group_slots.get(group_bytes, _MISS)
        if slot is _MISS:
            slot = self._group_slots[group_bytes] = self._parse_group(group_bytes)
        if slot is None or slot is _BAD:
            return slot
        suffix = key[group_end:]
        tp = self._suffixes.get(suffix, _MISS)
        if tp is _MISS:
            tp = self._suffixes[suffix] = _parse_topic_partition(suffix)
        if tp is _BAD:
            return _BAD
        return (slot, tp)

    def _parse_group(self, group_bytes: bytes) -> object:
        try:
            group = group_bytes.decode("utf-8")
        except UnicodeDecodeError:
            return _BAD
        if self._match(group):
            return self.latest.setdefault(group, {})
        self.other_groups.add(group)
        return None

    def read(
        self,
        consumer: Consumer,
        topic: str,
        partitions: list[int],
        deadline: Deadline,
        bootstrap: str,
        trail: ErrorTrail,
    ) -> dict[int, int]:
        consumer.assign([KafkaTopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        pending = set(partitions)
        ends: dict[int, int] = {}
        keys = self._keys
        keys_get = keys.get
        parse_key = self._parse_key
        from_bytes = Checkpoint.from_bytes
        records = skipped = 0
        eof = KafkaError._PARTITION_EOF
        slot: dict[TopicPartition, bytes]
        tp: TopicPartition
        try:
            while pending:
                remaining = deadline.remaining()
                if remaining <= 0:
                    raise self._incomplete(topic, pending, bootstrap, deadline, trail, records)
                for msg in consumer.consume(BATCH, min(remaining, POLL_WAIT)):
                    err = msg.error()
                    if err is not None:
                        if err.code() == eof:
                            part = msg.partition()
                            offset = msg.offset()
                            if part is not None and offset is not None:
                                ends[part] = offset
                                pending.discard(part)
                            continue
                        self._on_error(err, topic, bootstrap)
                        continue
                    records += 1
                    key = msg.key()
                    info = keys_get(key, _MISS)
                    if info is _MISS:
                        info = keys[key] = parse_key(key)
                    if info is None:
                        continue  # another group: its value is never read
                    if info is _BAD:
                        skipped += 1
                        self._name_skipped(msg, key)
                        continue
                    slot, tp = info  # type: ignore[misc]
                    value = msg.value()
                    if value is None:
                        slot.pop(tp, None)  # tombstone: the key is deleted
                    elif (
                        len(value) == _V0_EMPTY_LEN
                        # version 0, non-negative offsets, empty metadata
                        and not value[0]
                        and not value[1]
                        and value[2] < 0x80
                        and value[10] < 0x80
                        and not value[18]
                        and not value[19]
                    ):
                        slot[tp] = value
                    else:
                        try:
                            from_bytes(key, value)
                        except RecordDecodeError as exc:
                            skipped += 1
                            self._name_skipped(msg, key, exc)
                        else:
                            slot[tp] = value
        finally:
            self.records += records
            self.skipped += skipped
        return ends

    def _name_skipped(
        self, msg: Any, key: bytes | None, exc: RecordDecodeError | None = None
    ) -> None:
        """Remember where a skipped record is (the first few only; rare path)."""
        if len(self.skipped_at) >= SKIPPED_NAMED:
            return
        if exc is None:
            try:  # the key did not parse: let the decoder say why
                Checkpoint.from_bytes(key, msg.value())
                reason = "Checkpoint key: not a valid checkpoint key"
            except RecordDecodeError as e:
                reason = str(e)
        else:
            reason = str(exc)
        self.skipped_at.append(SkippedRecord(msg.partition(), msg.offset(), reason))

    def _on_error(self, err: KafkaError, topic: str, bootstrap: str) -> None:
        if err.fatal() or err.code() in _FATAL_READ_CODES:
            raise CheckpointsUnavailableError(
                f"cannot read checkpoints topic {topic} on cluster {bootstrap}: {err.str()}",
                bootstrap_servers=bootstrap,
                topic=topic,
                reason="error",
                code=err.name(),
            )
        logger.debug("transient error reading %s on %s: %s", topic, bootstrap, err.str())

    @staticmethod
    def _incomplete(
        topic: str,
        pending: set[int],
        bootstrap: str,
        deadline: Deadline,
        trail: ErrorTrail,
        records: int,
    ) -> CheckpointsUnavailableError:
        parts = ", ".join(str(p) for p in sorted(pending))
        return CheckpointsUnavailableError(
            f"did not reach the end of checkpoints topic {topic} (partition(s) {parts}) on "
            f"cluster {bootstrap} within {deadline.timeout:g}s after {records} record(s)"
            f"{trail.describe()}",
            bootstrap_servers=bootstrap,
            topic=topic,
            reason="incomplete",
            code="_TIMED_OUT",
            retriable=True,
        )
