"""The offset-syncs topic as a Spark Python streaming data source.

An offset is a flat dict ``{"<offset-syncs topic>:<partition>": <end offset>}``;
each micro-batch becomes one input partition per offset-syncs partition with
new data, and ``read`` (stateless, runs in a Python worker, builds its own
consumer) yields one row per record: the decoded sync, or, for a record that
does not decode, a row whose ``error`` says why (the driver counts and logs it;
the job keeps running). ``txn_first`` is the mirror's ``mm.txn.first`` header
(the sync starts a mirror transaction), ``writer`` its ``mm.sync`` header (the
mirror transaction's id; null for syncs mm did not write: see
:mod:`mm_client.translation`); rows carry the record's offset so the driver can
see gaps in the topic.

End offsets come from :func:`mm.kafka.watermarks.watermarks` with the cluster's
broker profile (``broker.profile``): an end read short would leave the newest
syncs unread until more arrive.

Options: ``mm.secret.consumer`` (the cluster's librdkafka consumer settings as
JSON; Spark redacts option names containing "secret"), ``broker.profile`` (the
name of the cluster's :class:`~mm.kafka.profile.BrokerProfile`), ``topic``,
``start.offsets`` (JSON offset where reading starts, from the job's snapshot;
partitions not named start at their log start), ``max.syncs.per.batch``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    SupportsTriggerAvailableNow,
)

OPTION_CONSUMER = "mm.secret.consumer"
OPTION_TOPIC = "topic"
OPTION_START = "start.offsets"
OPTION_MAX_PER_BATCH = "max.syncs.per.batch"
OPTION_PROFILE = "broker.profile"
OPTION_CLUSTER = "cluster"  # the alias of the cluster holding the topic, for messages

SYNC_ROW_SCHEMA = (
    "topic string, partition int, upstream long, downstream long, offset long, error string, "
    "syncs_partition int, txn_first boolean, writer string"
)

SyncRow = tuple[
    str | None, int | None, int | None, int | None, int, str | None, int, bool | None, str | None
]


def offset_key(topic: str, partition: int) -> str:
    return f"{topic}:{partition}"


def split_key(key: str) -> tuple[str, int]:
    topic, _, p = key.rpartition(":")
    return topic, int(p)


def gaps_are_holes(on_target: bool, cleanup_policy: str | None) -> bool:
    """Whether an offset gap in the offset-syncs topic means missing syncs.

    On the source the syncs are written by an idempotent, non-transactional
    producer: contiguous offsets, so any gap is compaction or retention. On the
    target they are written inside the mirror's transactions, whose markers leave
    gaps too: there a gap is a hole only when the topic may be compacted
    (``cleanup_policy`` with compact, or None: not known), where markers and
    compacted records cannot be told apart (conservative).
    """
    if not on_target:
        return True
    return cleanup_policy is None or "compact" in cleanup_policy


def decode_row(
    syncs_partition: int,
    offset: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]] | None = None,
) -> SyncRow:
    """One offset-syncs record as a row; a record that does not decode gets ``error``."""
    from mm_client.errors import RecordDecodeError
    from mm_client.records import OffsetSync, sync_flags

    try:
        s = OffsetSync.from_bytes(key, value)
    except RecordDecodeError as exc:
        return (None, None, None, None, offset, str(exc), syncs_partition, None, None)
    first, writer = sync_flags(headers)
    return (
        s.topic,
        s.partition,
        s.upstream_offset,
        s.downstream_offset,
        offset,
        None,
        syncs_partition,
        first,
        writer,
    )


@dataclass(frozen=True)
class SyncsRange(InputPartition):
    """Read offsets ``[start, end)`` of ``topic[partition]``."""

    topic: str
    partition: int
    start: int
    end: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", None)


class OffsetSyncsDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "mm_offset_syncs"

    def schema(self) -> str:
        return SYNC_ROW_SCHEMA

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return OffsetSyncsStreamReader(dict(self.options))


class OffsetSyncsStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: dict[str, str]) -> None:
        self.consumer_conf: dict[str, Any] = json.loads(options[OPTION_CONSUMER])
        self.topic = options[OPTION_TOPIC]
        self.profile_name = options.get(OPTION_PROFILE, "kafka")
        self.cluster = options.get(OPTION_CLUSTER, "")
        self._start: dict[str, int] = {
            str(k): int(v) for k, v in json.loads(options.get(OPTION_START) or "{}").items()
        }
        self._max_per_batch = int(options.get(OPTION_MAX_PER_BATCH, "200000"))
        self._target: dict[str, int] | None = None
        self._log_starts: dict[str, int] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {"consumer_conf": self.consumer_conf, "topic": self.topic, "cluster": self.cluster}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.consumer_conf = state["consumer_conf"]
        self.topic = state["topic"]
        self.cluster = state.get("cluster", "")

    # --- planning (driver side) ---------------------------------------------------
    def _partitions(self) -> list[int]:
        from confluent_kafka import KafkaException
        from mm_client.kafka.clients import closing_consumer
        from mm_client.kafka.errors import wrap

        from mm.kafka.watermarks import probe_consumer_conf

        with closing_consumer(probe_consumer_conf(self.consumer_conf)) as c:
            try:
                md = c.list_topics(self.topic, timeout=30)
            except KafkaException as exc:
                raise wrap(exc, f"metadata of {self.topic}") from exc
        t = md.topics.get(self.topic)
        if t is None or t.error is not None:
            return []  # not created yet: the mirror creates it with its first run
        return sorted(t.partitions)

    def _current_ends(self) -> dict[str, int]:
        from mm.kafka.watermarks import watermarks

        tps = [(self.topic, p) for p in self._partitions()]
        ends: dict[str, int] = {}
        from mm.kafka.profile import broker_profile

        profile = broker_profile(self.profile_name)
        for (t, p), (lo, hi) in watermarks(self.consumer_conf, tps, profile=profile).items():
            k = offset_key(t, p)
            self._log_starts[k] = lo
            ends[k] = hi
        return ends

    def initialOffset(self) -> dict[str, int]:
        return dict(self._start)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._current_ends()

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadAllAvailable()

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        ends = dict(self._target) if self._target is not None else self._current_ends()
        out = dict(start)
        for k, end in ends.items():
            begin = start.get(k, self._log_starts.get(k, 0))
            out[k] = min(end, begin + self._max_per_batch) if end > begin else begin
        return out

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        specs: list[InputPartition] = []
        for k, e in sorted(end.items()):
            topic, p = split_key(k)
            s = start.get(k, self._log_starts.get(k, 0))
            if e > s:
                specs.append(SyncsRange(topic, p, s, e))
        return specs

    def commit(self, end: dict[str, int]) -> None:
        pass

    # --- reading (executor) ---------------------------------------------------------
    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        from confluent_kafka import KafkaError, KafkaException, TopicPartition
        from mm_client.kafka.clients import new_consumer, reader_conf, throwaway_group
        from mm_client.kafka.errors import wrap

        from mm.errors import KafkaOperationError

        assert isinstance(partition, SyncsRange)
        conf = reader_conf(
            self.consumer_conf,
            {
                # the range's syncs are on the broker already: no reason to wait for
                # more, unless the cluster's consumer properties say otherwise
                "fetch.wait.max.ms": self.consumer_conf.get("fetch.wait.max.ms", 10),
                "auto.offset.reset": "earliest",
            },
            group=throwaway_group("__mm-probe"),
        )
        consumer = new_consumer(conf)
        idle_since = time.monotonic()
        try:
            consumer.assign([TopicPartition(partition.topic, partition.partition, partition.start)])
            while True:
                # consume() waits out its timeout unless it has all 5000: short, or the
                # last records of every read waited 0.5 s
                msgs = consumer.consume(5000, 0.05)
                if not msgs:
                    if time.monotonic() - idle_since > 60:
                        raise KafkaOperationError(
                            f"no data from {partition.topic}[{partition.partition}] at "
                            f"{partition.start}.. for 60s although its end is {partition.end}",
                            code="_TIMED_OUT",
                            retriable=True,
                        )
                    continue
                idle_since = time.monotonic()
                for m in msgs:
                    err = m.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            return  # the rest of the range is transaction markers
                        on = f" on cluster {self.cluster}" if self.cluster else ""
                        raise wrap(KafkaException(err), f"fetch {partition.topic}{on}")
                    off: int = m.offset()  # type: ignore[assignment]  # set on fetched messages
                    if off >= partition.end:
                        return
                    yield decode_row(
                        partition.partition,
                        off,
                        m.key(),
                        m.value(),
                        m.headers(),  # type: ignore[arg-type]  # list of (str, bytes) pairs
                    )
                    if off == partition.end - 1:
                        return
        finally:
            consumer.close()
