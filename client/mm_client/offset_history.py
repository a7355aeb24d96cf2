"""The checkpoint job's translation history, published on the target for readers
that cannot reach the source.

Offset syncs live on the source by default (MirrorMaker 2's
``offset-syncs.topic.location = source``): when the source is down, the target
holds only checkpoints, which cover consumer groups, not offsets kept elsewhere.
So after each round the checkpoint job writes its whole history (every kept sync
with its trust flags, the mirror's position and its last transaction's syncs) as
one record to ``mm-offset-history.<source>.internal`` on the target (compacted,
key: the flow; value: ``MAGIC`` + zlib-compressed JSON). :func:`read_offset_history`
reads the newest one; :func:`translate_source_offsets` translates a list of source
offsets with it (:mod:`mm_client.source_offsets`). A history is never ahead of
the target: its positions were read from the mirror's committed state there.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from mm_client.cluster_errors import OffsetHistoryUnavailableError
from mm_client.connection import (
    Deadline,
    ErrorTrail,
    bootstrap_of,
    prepare,
    throwaway_consumer_conf,
)
from mm_client.kafka.clients import closing_consumer
from mm_client.kafka.errors import describe_exception, error_code
from mm_client.policy import ReplicationPolicy
from mm_client.source_offsets import SourceOffset, SourceOffsetTranslation, translate_with
from mm_client.sync_store import OffsetSyncStore

__all__ = [
    "OffsetHistory",
    "decode_history",
    "encode_history",
    "offset_history_topic",
    "read_offset_history",
    "translate_source_offsets",
]

HISTORY_TOPIC = "mm-offset-history.{source}.internal"
MAGIC = b"MMH1"
VERSION = 1
#: the topic's max.message.bytes (and the largest history published): 8 MiB, what
#: managed services commonly allow; delta-encoded and compressed that is millions of syncs
MAX_BYTES = 8 * 1024 * 1024
TOPIC_CONFIG = {"cleanup.policy": "compact", "max.message.bytes": str(MAX_BYTES)}


def offset_history_topic(source_alias: str) -> str:
    return HISTORY_TOPIC.format(source=source_alias)


@dataclass(frozen=True)
class OffsetHistory:
    """A published history: the flow, when it was published (ms), the store."""

    flow: str
    time_ms: int
    store: OffsetSyncStore
    topic: str = ""
    bootstrap_servers: str = ""


def encode_history(
    flow: str, time_ms: int, store: OffsetSyncStore, *, data: list[dict[str, Any]] | None = None
) -> tuple[bytes, bytes]:
    """(key, value) of the record that publishes ``store`` (``data``: its
    ``to_json(pending=True)``, when the caller has it already)."""
    doc = {
        "version": VERSION,
        "flow": flow,
        "time_ms": time_ms,
        "partitions": store.to_json(pending=True) if data is None else data,
    }
    body = json.dumps(doc, separators=(",", ":")).encode()
    return flow.encode(), MAGIC + zlib.compress(body, 6)


def decode_history(value: bytes | None) -> OffsetHistory:
    """Raises ValueError naming what is wrong."""
    if not value or not value.startswith(MAGIC):
        head = (value or b"")[:8]
        raise ValueError(f"not an offset-history record (expected {MAGIC!r}...): {head!r}")
    try:
        doc = json.loads(zlib.decompress(value[len(MAGIC) :]))
        if doc.get("version") != VERSION:
            raise ValueError(f"unknown version {doc.get('version')!r} (this reader: {VERSION})")
        store = OffsetSyncStore.from_json(doc["partitions"])
        return OffsetHistory(str(doc["flow"]), int(doc["time_ms"]), store)
    except (zlib.error, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"malformed offset-history record: {exc!r}") from None


def read_offset_history(
    config: Mapping[str, Any],
    source_alias: str,
    timeout: float = 30.0,
) -> OffsetHistory:
    """The newest history published for ``source_alias`` on the cluster ``config``
    names (the target). Raises :class:`OffsetHistoryUnavailableError` within
    ``timeout`` seconds when it cannot be read, or there is none."""
    conf, _ = prepare(config)
    topic = offset_history_topic(source_alias)
    bootstrap = bootstrap_of(conf)
    deadline = Deadline(timeout)
    trail = ErrorTrail.install(conf)
    consumer_conf = throwaway_consumer_conf(conf, "offset-history")
    consumer_conf.update(
        {
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100,
            "fetch.max.bytes": MAX_BYTES * 2,
        }
    )
    consumer_conf["max.partition.fetch.bytes"] = MAX_BYTES + 1024 * 1024

    def unavailable(
        why: str, reason: Any, code: str | None = None
    ) -> OffsetHistoryUnavailableError:
        return OffsetHistoryUnavailableError(
            f"cannot read the offset history {topic} on cluster {bootstrap}: {why}",
            bootstrap_servers=bootstrap,
            topic=topic,
            reason=reason,
            code=code,
            retriable=reason in ("unreachable", "incomplete"),
        )

    newest: bytes | None = None
    with closing_consumer(consumer_conf) as consumer:
        try:
            md = consumer.list_topics(topic, timeout=deadline.remaining(0.001))
        except KafkaException as exc:
            raise unavailable(
                f"the cluster did not answer within {timeout:g}s ({describe_exception(exc)})"
                f"{trail.describe(consumer)}",
                "unreachable",
                error_code(exc),
            ) from exc
        found = md.topics.get(topic)
        if found is None or found.error is not None or not found.partitions:
            raise unavailable(
                "the topic does not exist: the checkpoint job (`mm checkpoint`, or `mm run`) "
                f"of the flow {source_alias}->... publishes it there after each round",
                "missing",
                "UNKNOWN_TOPIC_OR_PART",
            )
        parts = sorted(found.partitions)
        consumer.assign([KafkaTopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        pending = set(parts)
        while pending:
            if deadline.expired():
                raise unavailable(
                    f"its end was not reached within {timeout:g}s{trail.describe(consumer)}",
                    "incomplete",
                    "_TIMED_OUT",
                )
            # consume() returns at its timeout unless it has all 100: a short one
            for msg in consumer.consume(100, min(0.05, deadline.remaining(0.001))):
                err = msg.error()
                if err is None:
                    if msg.value() is not None:
                        newest = msg.value()
                elif err.code() == KafkaError._PARTITION_EOF:
                    pending.discard(msg.partition())
                elif err.fatal() or not err.retriable():
                    raise unavailable(err.str(), "error", err.name())
    if newest is None:
        raise unavailable(
            "it holds no history yet (the checkpoint job publishes one after its first round)",
            "missing",
        )
    try:
        got = decode_history(newest)
    except ValueError as exc:
        raise unavailable(str(exc), "error") from None
    return OffsetHistory(got.flow, got.time_ms, got.store, topic, bootstrap)


def translate_source_offsets(
    config: Mapping[str, Any],
    source_alias: str,
    offsets: Iterable[SourceOffset],
    timeout: float = 30.0,
    *,
    replication_policy: ReplicationPolicy | None = None,
) -> list[SourceOffsetTranslation]:
    """Source offsets ``(topic, partition, offset)`` kept outside Kafka groups,
    translated to the target from the history the checkpoint job published there:
    works with the source down. Exact where the offset syncs prove it (``exact``),
    never ahead; past the mirror's position, the end of what was mirrored and
    ``not_mirrored`` source offsets; no answer (``target_offset`` None, ``problem``)
    before the oldest history kept. ``config``: the target's librdkafka (or
    kafka-python) settings."""
    conf, policy = prepare(config, replication_policy)
    history = read_offset_history(conf, source_alias, timeout)
    return translate_with(
        history.store, offsets, lambda t: policy.format_remote_topic(source_alias, t)
    )
