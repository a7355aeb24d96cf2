"""Admin reads and writes the jobs share: topics created once, groups read leniently.

Each takes an AdminClient the caller owns. Group requests are all sent before
any answer is awaited (librdkafka takes one group per offsets request).
Per-group helpers return the error as the group's value, so a caller that
reports groups one by one is not stopped by one of them; the strict
:func:`group_offsets` raises the first.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Final

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mm_client.errors import KafkaOperationError
from mm_client.kafka.errors import error_code, wrap

__all__ = [
    "COMPACTED",
    "GroupState",
    "await_topic_visible",
    "describe_groups",
    "ensure_topic",
    "group_offsets",
    "group_offsets_or_errors",
    "stable_group_offsets",
    "topic_created",
]

# MM2's internal topics (checkpoints, heartbeats) are compacted
COMPACTED: Final[Mapping[str, str]] = {"cleanup.policy": "compact"}
# seconds a future is awaited beyond the request's own timeout (which librdkafka enforces)
_GRACE = 5.0
# a group's offset a transaction sent and has not completed yet (stable reads)
UNSTABLE_OFFSET_COMMIT: Final = "UNSTABLE_OFFSET_COMMIT"


def topic_created(future: Future[Any], timeout: float) -> bool:
    """Await one ``create_topics`` future: True when created, False when the topic
    already existed (another creator got there first). Other errors raise."""
    try:
        future.result(timeout)
    except KafkaException as exc:
        if error_code(exc) == "TOPIC_ALREADY_EXISTS":
            return False
        raise
    return True


def ensure_topic(
    admin: AdminClient,
    topic: str,
    where: str,
    replication_factor: int,
    *,
    config: Mapping[str, str] = COMPACTED,
    partitions: int = 1,
    timeout: float = 30.0,
) -> bool:
    """Create ``topic`` when it is missing; an existing topic is left as it is.

    True when created; a created topic is returned only once the cluster lists it
    with a leader for each partition (see :func:`await_topic_visible`). Raises
    KafkaOperationError naming ``where`` (``"cluster B"``).
    """
    try:
        md = admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise wrap(exc, f"list topics on {where}") from exc
    if topic in md.topics and md.topics[topic].error is None:
        return False
    new = NewTopic(topic, partitions, replication_factor, config=dict(config))
    future = admin.create_topics([new], request_timeout=timeout)[topic]
    try:
        created = topic_created(future, timeout)
    except KafkaException as exc:
        raise wrap(exc, f"create {topic} on {where}") from exc
    await_topic_visible(admin, topic, where, timeout)
    return created


def await_topic_visible(admin: AdminClient, topic: str, where: str, timeout: float) -> None:
    """Wait until ``topic``'s metadata names a leader for each of its partitions.

    On a KRaft cluster CreateTopics returns once the controller committed the
    topic; the brokers learn of it a moment later, and a reader asking them in
    that moment is told UNKNOWN_TOPIC_OR_PART. Readers of topics a job creates
    (the checkpoint job reading its own checkpoints topic) would take that for
    a missing topic. Raises KafkaOperationError when ``timeout`` passes first.
    """
    deadline = time.monotonic() + timeout
    backoff = 0.02
    while True:
        try:
            md = admin.list_topics(topic, timeout=max(0.001, deadline - time.monotonic()))
        except KafkaException as exc:
            raise wrap(exc, f"read the metadata of {topic} on {where}") from exc
        found = md.topics.get(topic)
        if (
            found is not None
            and found.error is None
            and found.partitions
            and all(p.leader >= 0 for p in found.partitions.values())
        ):
            return
        if time.monotonic() >= deadline:
            err = found.error if found is not None else None
            raise KafkaOperationError(
                f"{topic} on {where} was created but has no leader for every partition "
                f"after {timeout:g}s" + (f" ({err.str()})" if err is not None else ""),
                code=err.name() if err is not None else None,
                retriable=True,
            )
        time.sleep(backoff)
        backoff = min(backoff * 2, 0.5)


def _on(where: str | None) -> str:
    return f" on {where}" if where else ""


def group_offsets_or_errors(
    admin: AdminClient, groups: Iterable[str], timeout: float, where: str | None = None
) -> dict[str, list[TopicPartition] | Exception]:
    """Each group's committed offsets, or the error reading them.

    A group that does not exist (GROUP_ID_NOT_FOUND: never committed, or deleted)
    has none: ``[]``. Errors are KafkaOperationError (``"committed offsets of group
    G[ on <where>]: ..."``) or TimeoutError when the answer did not come in time.
    """
    futures = {
        g: admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(g)], request_timeout=timeout
        )[g]
        for g in groups
    }
    # handled here, not through _offsets_answer: a caller releases the frames of a
    # timed-out read's error to destroy its client (mm.status.reads; librdkafka 2.16
    # aborts otherwise), and with the handling in a helper this frame, holding the
    # futures, was not among them (tests/mm/status/test_status_paused_broker.py)
    out: dict[str, list[TopicPartition] | Exception] = {}
    for g, future in futures.items():
        what = f"committed offsets of group {g}{_on(where)}"
        try:
            out[g] = list(future.result(timeout + _GRACE).topic_partitions or [])
        except KafkaException as exc:
            if error_code(exc) == "GROUP_ID_NOT_FOUND":
                out[g] = []
            else:
                error = wrap(exc, what)
                error.__cause__ = exc
                out[g] = error
        except TimeoutError:
            out[g] = TimeoutError(f"{what}: no answer within {timeout:g}s")
    return out


def _offsets_answer(
    future: Future[Any], what: str, timeout: float
) -> list[TopicPartition] | Exception:
    """One group's ``list_consumer_group_offsets`` answer, or the error (as above)."""
    try:
        return list(future.result(timeout + _GRACE).topic_partitions or [])
    except KafkaException as exc:
        if error_code(exc) == "GROUP_ID_NOT_FOUND":
            return []
        error = wrap(exc, what)
        error.__cause__ = exc
        return error
    except TimeoutError:
        return TimeoutError(f"{what}: no answer within {timeout:g}s")


def stable_group_offsets(
    admin: AdminClient,
    group: str,
    partitions: Iterable[tuple[str, int]],
    timeout: float,
    where: str | None = None,
) -> dict[tuple[str, int], int] | Exception:
    """The offsets ``group`` committed for ``partitions`` (topic, partition), those
    with none left out, or the error reading them (as :func:`group_offsets_or_errors`).

    Read stable (``require_stable``): an offset a transaction sent is invisible
    until its commit markers reach the group's coordinator, which happens after the
    producer's commit returned; a plain read then answers the offset before it.
    Such a partition (UNSTABLE_OFFSET_COMMIT) is asked again until it settles;
    still pending after ``timeout`` (a transaction left open): KafkaOperationError
    with that code. The partitions are named in the request because a partition
    whose only offset is pending is left out of a whole-group answer.
    """
    what = f"committed offsets of group {group}{_on(where)}"
    pending = sorted(set(partitions))
    out: dict[tuple[str, int], int] = {}
    deadline = time.monotonic() + timeout
    backoff = 0.05
    while pending:
        left = max(deadline - time.monotonic(), 0.1)
        request = ConsumerGroupTopicPartitions(group, [TopicPartition(t, p) for t, p in pending])
        future = admin.list_consumer_group_offsets(
            [request], require_stable=True, request_timeout=left
        )[group]
        answer = _offsets_answer(future, what, left)
        if isinstance(answer, Exception):
            return answer
        pending = []
        for tp in answer:
            err = tp.error
            if err is not None and err.name() == UNSTABLE_OFFSET_COMMIT:
                pending.append((tp.topic, tp.partition))
            elif err is not None:
                return KafkaOperationError(
                    f"{what}: {tp.topic}[{tp.partition}]: {err.str()}", code=err.name()
                )
            elif tp.offset >= 0:
                out[(tp.topic, tp.partition)] = tp.offset
        if not pending:
            break
        left = deadline - time.monotonic()
        if left <= 0:
            return KafkaOperationError(
                f"{what}: {len(pending)} partition(s) still held by a transaction not "
                f"complete after {timeout:g}s ({pending[0][0]}[{pending[0][1]}] first)",
                code=UNSTABLE_OFFSET_COMMIT,
                retriable=True,
            )
        time.sleep(min(backoff, left))
        backoff = min(backoff * 2, 0.5)
    return out


def group_offsets(
    admin: AdminClient, groups: Iterable[str], timeout: float, where: str | None = None
) -> dict[str, list[TopicPartition]]:
    """:func:`group_offsets_or_errors`, raising the first error."""
    out: dict[str, list[TopicPartition]] = {}
    for g, result in group_offsets_or_errors(admin, groups, timeout, where).items():
        if isinstance(result, Exception):
            raise result
        out[g] = result
    return out


@dataclass(frozen=True)
class GroupState:
    """A consumer group as described: state name (``"STABLE"``, ``"EMPTY"``,
    ``"DEAD"``...) and how many members it lists."""

    state: str
    members: int


def describe_groups(
    admin: AdminClient, groups: list[str], timeout: float
) -> dict[str, GroupState | Exception]:
    """Each group's state, or the error describing it.

    A group that does not exist (GROUP_ID_NOT_FOUND) is ``DEAD`` with no member,
    as Kafka describes a group that has none. Errors are KafkaOperationError
    (``"describe group G: ..."``) or TimeoutError.
    """
    futures = admin.describe_consumer_groups(groups, request_timeout=timeout)
    out: dict[str, GroupState | Exception] = {}
    for g in groups:
        try:
            d = futures[g].result(timeout + _GRACE)
        except KafkaException as exc:
            if error_code(exc) == "GROUP_ID_NOT_FOUND":
                out[g] = GroupState("DEAD", 0)
            else:
                error = wrap(exc, f"describe group {g}")
                error.__cause__ = exc
                out[g] = error
            continue
        except TimeoutError:
            out[g] = TimeoutError(f"describe group {g}: no answer within {timeout:g}s")
            continue
        out[g] = GroupState(getattr(d.state, "name", str(d.state)), len(d.members or []))
    return out
