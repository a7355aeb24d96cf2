"""Put translated offsets into a consumer: assign at them, seek to them, commit them.

Each helper takes either a confluent-kafka ``Consumer`` (or a subclass such as
``DeserializingConsumer``) or a kafka-python ``KafkaConsumer``, and ``offsets``
as returned by the translate functions: ``{(target topic, partition): offset}``
(:class:`~mm_client.topic_partition.TopicPartition` keys, or plain tuples).
kafka-python is optional and never imported by this module unless the caller
already did (a ``KafkaConsumer`` cannot exist otherwise).

Typical failover, consumer on the target cluster::

    offsets = translate_offsets(target_conf, "A", "my-group")
    consumer = Consumer({**target_conf, "group.id": "my-group"})
    assign_translated(consumer, offsets)          # assign() users
    # or, for subscribe() users, before the group starts consuming on B:
    commit_translated(consumer, offsets)          # or commit_group_offsets(...)

Committing needs a ``group.id``/``group_id``, and Kafka accepts commits from a
consumer that is not a member only while the group has no active members on
the target (as MM2's offset sync requires).
"""

from __future__ import annotations

import importlib
import inspect
import logging
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from confluent_kafka import (
    OFFSET_INVALID,
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
)
from mm_client.errors import KafkaOperationError
from mm_client.guards import (
    misnamed_topics,
    refuse_rewinds,
    require_offsets,
    reset_outcome,
    rewinds,
    without_checkpoint,
)
from mm_client.kafka.errors import describe_exception, error_code, kafka_error, wrap
from mm_client.policy import DefaultReplicationPolicy
from mm_client.target_view import TargetView, admin_view, target_view
from mm_client.topic_partition import TopicPartition
from mm_client.translated import TranslatedOffsets

__all__ = [
    "Applied",
    "assign_translated",
    "commit_group_offsets",
    "commit_translated",
    "consumer_kind",
    "seek_to_translated",
]

logger = logging.getLogger("mm_client.consumers")

ConsumerKind = Literal["confluent", "kafka-python"]
# Mapping is invariant in its key type, so both spellings are listed
Offsets = Mapping[TopicPartition, int] | Mapping[tuple[str, int], int]


def consumer_kind(consumer: object) -> ConsumerKind:
    """``"confluent"`` or ``"kafka-python"``; TypeError for anything else."""
    if isinstance(consumer, Consumer):
        return "confluent"
    # A KafkaConsumer exists only if kafka-python was imported: never import it here
    kafka = sys.modules.get("kafka")
    if kafka is not None and isinstance(consumer, getattr(kafka, "KafkaConsumer", ())):
        return "kafka-python"
    raise TypeError(
        "expected a confluent_kafka.Consumer or a kafka.KafkaConsumer, "
        f"got {type(consumer).__module__}.{type(consumer).__qualname__}"
    )


def _checked(offsets: Offsets) -> dict[TopicPartition, int]:
    out: dict[TopicPartition, int] = {}
    for key, offset in offsets.items():
        topic, partition = key
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise ValueError(f"offset for {topic}[{partition}] must be an int >= 0: {offset!r}")
        out[TopicPartition(topic, partition)] = offset
    return dict(sorted(out.items()))


def _wanted(offsets: Offsets) -> dict[TopicPartition, int]:
    """The offsets checked, or :class:`NoCheckpointsError` when there are none."""
    require_offsets(offsets)  # type: ignore[arg-type]
    return _checked(offsets)


def _topic_partition_of(item: Any) -> TopicPartition:
    """(topic, partition) of a confluent/kafka-python TopicPartition or a tuple."""
    if isinstance(item, KafkaTopicPartition):
        return TopicPartition(item.topic, item.partition)
    topic, partition = item[0], item[1]
    return TopicPartition(topic, partition)


@dataclass(frozen=True)
class Applied:
    """What a commit helper did: the offsets committed for ``group`` and what it saw.

    * ``without_checkpoint``: partitions of the same topics that got no offset, and
      ``outcome``, what they do when the group's consumer starts;
    * ``rewound``: partitions moved backwards (only with ``allow_rewind=True``):
      partition -> (committed before, committed now).
    """

    group: str | None
    offsets: dict[TopicPartition, int]
    without_checkpoint: tuple[TopicPartition, ...] = ()
    outcome: str = ""
    rewound: dict[TopicPartition, tuple[int, int]] = field(default_factory=dict)


def _judge(
    view: TargetView,
    wanted: dict[TopicPartition, int],
    offsets: Offsets,
    allow_rewind: bool,
) -> Applied:
    """Refuse a misnamed topic or a backward move; name the partitions left uncovered."""
    source_alias = offsets.source_alias if isinstance(offsets, TranslatedOffsets) else None
    if view.group is None and isinstance(offsets, TranslatedOffsets):
        view = replace(view, group=offsets.group)
    misnamed_topics(
        {tp.topic for tp in wanted},
        view.topics,
        DefaultReplicationPolicy(),
        source_alias,
        view.cluster,
    )
    moves = rewinds(wanted, view.committed)
    if not allow_rewind:
        refuse_rewinds(view.group, moves, view.cluster)
    uncovered = without_checkpoint(wanted, view.partition_counts)
    outcome = reset_outcome(view.reset)
    if uncovered:
        logger.warning(
            "group %s: %d partition(s) have no translated offset and will %s: %s",
            view.group,
            len(uncovered),
            outcome,
            ", ".join(map(str, uncovered)),
        )
    if moves:
        logger.warning(
            "group %s moved backwards on %s (allow_rewind=True): %s",
            view.group,
            view.cluster,
            ", ".join(f"{tp} {a} -> {b}" for tp, (a, b) in moves.items()),
        )
    return Applied(view.group, wanted, tuple(uncovered), outcome if uncovered else "", moves)


def assign_translated(
    consumer: Any,
    offsets: Offsets,
    partitions: Iterable[Any] | None = None,
    *,
    allow_rewind: bool = False,
    timeout: float = 30.0,
) -> list[TopicPartition]:
    """Assign partitions with consumption starting at the translated offsets.

    By default assigns exactly the partitions in ``offsets``. With
    ``partitions`` (e.g. the list a confluent ``on_assign`` callback receives),
    assigns those instead: the ones in ``offsets`` start at their translated
    offset, the others where they would anyway (committed offset or reset
    policy; a confluent partition's own offset is kept). Replaces the current
    assignment. Returns the partitions that got a translated offset.

    Refuses (:class:`~mm_client.errors.FailoverRefusedError`, nothing assigned)
    empty ``offsets`` (a group without checkpoints), a topic the cluster does not
    have (the source name instead of the remote one), and, unless
    ``allow_rewind``, an offset behind what the consumer's group has already
    committed there. Partitions of the same topics without an offset are named
    in a warning with what they will do.
    """
    kind = consumer_kind(consumer)
    wanted = _wanted(offsets)
    if partitions is None:
        chosen: list[tuple[TopicPartition, Any]] = [(tp, None) for tp in wanted]
    else:
        chosen = [(_topic_partition_of(item), item) for item in partitions]
    translated = [tp for tp, _ in chosen if tp in wanted]
    _judge(target_view(consumer, kind, wanted, timeout), wanted, offsets, allow_rewind)
    if kind == "confluent":
        assignment = []
        for tp, item in chosen:
            if tp in wanted:
                offset = wanted[tp]
            elif isinstance(item, KafkaTopicPartition):
                offset = item.offset
            else:
                offset = OFFSET_INVALID
            assignment.append(KafkaTopicPartition(tp.topic, tp.partition, offset))
        try:
            consumer.assign(assignment)
        except KafkaException as exc:
            raise wrap(exc, "assign translated offsets") from exc
    else:
        kafka = importlib.import_module("kafka")
        consumer.assign([kafka.TopicPartition(tp.topic, tp.partition) for tp, _ in chosen])
        for tp in translated:
            consumer.seek(kafka.TopicPartition(tp.topic, tp.partition), wanted[tp])
    return translated


def seek_to_translated(
    consumer: Any, offsets: Offsets, *, timeout: float = 10.0, allow_rewind: bool = False
) -> list[TopicPartition]:
    """Seek the consumer's *assigned* partitions to their translated offsets.

    Partitions in ``offsets`` that are not currently assigned are left alone (a
    group member owns only some partitions); the ones sought are returned. For a
    confluent consumer a partition that was just assigned may not accept a seek
    for a few milliseconds (``_STATE``); the seek is retried for up to
    ``timeout`` seconds. Inside a confluent ``on_assign`` callback use
    :func:`assign_translated` with the callback's partitions instead.

    Refuses empty ``offsets`` and, unless ``allow_rewind``, a seek behind the
    group's committed offset, as :func:`assign_translated` does.
    """
    kind = consumer_kind(consumer)
    wanted = _wanted(offsets)
    assigned = {_topic_partition_of(ktp) for ktp in consumer.assignment()}
    mine = {tp: o for tp, o in wanted.items() if tp in assigned}
    if mine:
        view = target_view(consumer, kind, mine, timeout)
        _judge(view, mine, offsets, allow_rewind)
    if kind == "confluent":
        deadline = Deadline(timeout)
        for tp, offset in mine.items():
            _confluent_seek(consumer, KafkaTopicPartition(*tp, offset), deadline)
    else:
        kafka = importlib.import_module("kafka")
        for tp, offset in mine.items():
            consumer.seek(kafka.TopicPartition(tp.topic, tp.partition), offset)
    ignored = len(wanted) - len(mine)
    if ignored:
        logger.debug("%d translated partition(s) not assigned to this consumer", ignored)
    return list(mine)


def _confluent_seek(consumer: Consumer, target: KafkaTopicPartition, deadline: Deadline) -> None:
    while True:
        try:
            consumer.seek(target)
            return
        except KafkaException as exc:
            err = kafka_error(exc)
            if not (err is not None and err.code() == KafkaError._STATE):
                raise wrap(exc, f"seek {target.topic}[{target.partition}]") from exc
            if deadline.expired():
                raise wrap(
                    exc,
                    f"seek {target.topic}[{target.partition}] to {target.offset}: partition "
                    f"not ready within {deadline.timeout:g}s",
                ) from exc
            time.sleep(0.01)


def commit_translated(
    consumer: Any, offsets: Offsets, *, timeout: float = 30.0, allow_rewind: bool = False
) -> Applied:
    """Commit the translated offsets for the consumer's group (synchronously).

    For a service that ``subscribe()``s: commit before it joins the group on the
    target, and the group starts there. Refuses what would skip or re-read
    silently, as :func:`assign_translated` does (nothing committed then). Raises
    :class:`~mm_client.errors.KafkaOperationError` naming the partitions the
    broker refused (e.g. the group has active members on the target).
    """
    kind = consumer_kind(consumer)
    wanted = _wanted(offsets)
    applied = _judge(target_view(consumer, kind, wanted, timeout), wanted, offsets, allow_rewind)
    if kind == "confluent":
        _confluent_commit(consumer, wanted)
    else:
        _kafka_python_commit(consumer, wanted, timeout)
    return applied


def _confluent_commit(consumer: Consumer, wanted: dict[TopicPartition, int]) -> None:
    try:
        answer = consumer.commit(
            offsets=[KafkaTopicPartition(t, p, o) for (t, p), o in wanted.items()],
            asynchronous=False,
        )
    except KafkaException as exc:
        raise wrap(exc, "commit translated offsets") from exc
    failed = [ktp for ktp in answer or () if ktp.error is not None]
    if failed:
        first = failed[0].error
        raise KafkaOperationError(
            "commit translated offsets refused for "
            + ", ".join(f"{k.topic}[{k.partition}]: {k.error}" for k in failed),
            code=first.name() if isinstance(first, KafkaError) else None,
        )


def _kafka_python_commit(consumer: Any, wanted: dict[TopicPartition, int], timeout: float) -> None:
    kafka = importlib.import_module("kafka")
    structs = importlib.import_module("kafka.structs")
    errors = importlib.import_module("kafka.errors")
    oam = structs.OffsetAndMetadata
    # kafka-python >= 2.1 added leader_epoch to OffsetAndMetadata
    extra: tuple[Any, ...] = (-1,) if len(oam._fields) >= 3 else ()
    payload = {
        kafka.TopicPartition(t, p): oam(offset, "", *extra) for (t, p), offset in wanted.items()
    }
    kwargs: dict[str, Any] = {}
    if "timeout_ms" in inspect.signature(consumer.commit).parameters:
        kwargs["timeout_ms"] = int(timeout * 1000)
    try:
        consumer.commit(offsets=payload, **kwargs)
    except errors.KafkaError as exc:
        raise KafkaOperationError(
            f"commit translated offsets: {exc}",
            code=type(exc).__name__,
            retriable=bool(getattr(exc, "retriable", False)),
        ) from exc


def commit_group_offsets(
    config: Mapping[str, Any],
    group: str,
    offsets: Offsets,
    timeout: float = 30.0,
    *,
    allow_rewind: bool = False,
) -> Applied:
    """Set ``group``'s committed offsets on a cluster without a consumer (AdminClient).

    The same as MM2's ``sync.group.offsets`` does: the group must have no active
    members there. Refuses what would skip or re-read silently, as
    :func:`assign_translated` does (nothing committed then). Raises
    :class:`ClusterUnavailableError` if the cluster does not answer within
    ``timeout``, :class:`KafkaOperationError` if it refuses.
    """
    wanted = _wanted(offsets)
    conf, _ = prepare(config)
    bootstrap = bootstrap_of(conf)
    trail = ErrorTrail.install(conf)
    deadline = Deadline(timeout)
    admin = admin_client(conf)
    try:
        view = admin_view(admin, bootstrap, group, wanted, deadline)
        applied = _judge(view, wanted, offsets, allow_rewind)
        request = ConsumerGroupTopicPartitions(
            group, [KafkaTopicPartition(t, p, o) for (t, p), o in wanted.items()]
        )
        future = admin.alter_consumer_group_offsets(
            [request], request_timeout=deadline.remaining(0.001)
        )[group]
        answer = future.result(timeout=deadline.remaining(0.001) + 1.0)
    except KafkaException as exc:
        if error_code(exc) in UNREACHABLE_CODES:
            raise ClusterUnavailableError(
                f"cluster {bootstrap} did not accept offsets for group {group} within "
                f"{timeout:g}s: {describe_exception(exc)}{trail.describe(admin)}",
                bootstrap_servers=bootstrap,
                code=error_code(exc),
            ) from exc
        raise wrap(exc, f"commit offsets of group {group} on {bootstrap}") from exc
    except TimeoutError as exc:
        raise ClusterUnavailableError(
            f"cluster {bootstrap} did not accept offsets for group {group} within {timeout:g}s"
            f"{trail.describe(admin)}",
            bootstrap_servers=bootstrap,
            code="_TIMED_OUT",
        ) from exc
    failed = [ktp for ktp in answer.topic_partitions or () if ktp.error is not None]
    if failed:
        raise KafkaOperationError(
            f"commit offsets of group {group} on {bootstrap} refused for "
            + ", ".join(f"{k.topic}[{k.partition}]: {k.error}" for k in failed),
            code=failed[0].error.name() if isinstance(failed[0].error, KafkaError) else None,
        )
    return applied
