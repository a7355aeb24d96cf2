"""The Kafka reads behind `mm status`: log bounds, newest records, committed offsets.

Every consumer here is ``assign()``-only with a throwaway ``group.id``: it never
joins a group and never commits. Log ends come from
:func:`mm.kafka.watermarks.watermarks` with the cluster's broker profile. Reads are
``read_committed``, so the tail of a transactionally written topic (the mirror's
targets end with a commit marker) is found by stepping back from the end.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from confluent_kafka import (
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from mm_client.kafka import group_offsets as committed_offsets
from mm_client.kafka import new_admin, new_consumer, reader_conf, throwaway_group, wrap

from mm.errors import KafkaOperationError
from mm.kafka.profile import KAFKA, BrokerProfile
from mm.kafka.watermarks import watermarks

Key = tuple[str, int]


@dataclass(frozen=True)
class Rec:
    """A consumed record: offset, timestamp (ms, None if the record has none), payload."""

    offset: int
    timestamp: int | None
    key: bytes | None
    value: bytes | None


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def _consumer(conf: Mapping[str, Any]) -> Consumer:
    return new_consumer(
        reader_conf(
            conf,
            {"auto.offset.reset": "earliest", "fetch.wait.max.ms": 10},
            group=throwaway_group("__mm-status"),
            drop=("group.instance.id", "transactional.id"),
        )
    )


def topic_partitions(admin_conf: Mapping[str, Any], where: str, timeout: float) -> dict[str, int]:
    """Partition count of every topic on the cluster (errored topics left out)."""
    admin = new_admin(admin_conf)
    try:
        md = admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise wrap(exc, f"list topics on {where}") from exc
    return {name: len(t.partitions) for name, t in md.topics.items() if t.error is None}


def bounds(
    consumer_conf: Mapping[str, Any],
    keys: Iterable[Key],
    timeout: float,
    profile: BrokerProfile = KAFKA,
) -> dict[Key, tuple[int, int]]:
    """(log start, log end) per partition, read_committed (see :mod:`mm.kafka.watermarks`)."""
    conf = {k: str(v) for k, v in consumer_conf.items()}
    return watermarks(conf, list(keys), timeout, profile=profile)


def _read(
    consumer_conf: Mapping[str, Any],
    starts: Mapping[Key, int],
    ends: Mapping[Key, int],
    keep: Literal["first", "last", "all"],
    timeout: float,
    cluster: str = "",
) -> dict[Key, list[Rec]]:
    """Records of each partition from ``starts`` until EOF or ``ends`` (exclusive).

    ``keep``: the first record only, the last one before the end, or all.
    """
    out: dict[Key, list[Rec]] = {k: [] for k in starts}
    pending = {k for k in starts if starts[k] < ends.get(k, starts[k] + 1)}
    if not pending:
        return out
    deadline = time.monotonic() + timeout
    consumer = _consumer(consumer_conf)
    try:
        consumer.assign([TopicPartition(t, p, starts[(t, p)]) for t, p in pending])
        while pending:
            if time.monotonic() > deadline:
                names = ", ".join(f"{t}[{p}]" for t, p in sorted(pending))
                raise KafkaOperationError(
                    f"reading {names} did not finish within {timeout:.0f}s",
                    code="_TIMED_OUT",
                    retriable=True,
                )
            finished: list[Key] = []
            for m in consumer.consume(1000, 0.1):
                k = (str(m.topic()), int(m.partition() or 0))
                if k not in pending:
                    continue
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        finished.append(k)
                        pending.discard(k)
                        continue
                    on = f" on cluster {cluster}" if cluster else ""
                    raise wrap(KafkaException(err), f"fetch {k[0]}[{k[1]}]{on}")
                off = int(m.offset() or 0)
                ts_type, ts = m.timestamp()
                rec = Rec(
                    off, None if ts_type == TIMESTAMP_NOT_AVAILABLE else ts, m.key(), m.value()
                )
                if keep == "all":
                    out[k].append(rec)
                elif keep == "last":
                    out[k] = [rec]
                elif not out[k]:
                    out[k] = [rec]
                if (keep == "first" and out[k]) or off >= ends[k] - 1:
                    finished.append(k)
                    pending.discard(k)
            if finished:
                consumer.pause([TopicPartition(t, p) for t, p in finished])
        return out
    finally:
        consumer.close()


def newest_records(
    consumer_conf: Mapping[str, Any],
    bounds_: Mapping[Key, tuple[int, int]],
    timeout: float,
    cluster: str = "",
) -> dict[Key, Rec | None]:
    """The last (committed) record of each partition, None when it holds none.

    Reads a window before the end, widened (x16) while it holds only control
    records (transaction markers) or aborted data.
    """
    result: dict[Key, Rec | None] = dict.fromkeys(bounds_)
    window = dict.fromkeys(bounds_, 2)
    pending = {k for k, (lo, hi) in bounds_.items() if hi > lo}
    deadline = time.monotonic() + timeout
    while pending:
        starts = {k: max(bounds_[k][0], bounds_[k][1] - window[k]) for k in pending}
        got = _read(
            consumer_conf,
            starts,
            {k: bounds_[k][1] for k in pending},
            "last",
            max(0.5, deadline - time.monotonic()),
            cluster,
        )
        for k in list(pending):
            if got[k]:
                result[k] = got[k][-1]
                pending.discard(k)
            elif starts[k] <= bounds_[k][0]:
                pending.discard(k)
            else:
                window[k] *= 16
    return result


def first_records(
    consumer_conf: Mapping[str, Any],
    starts: Mapping[Key, int],
    ends: Mapping[Key, int],
    timeout: float,
    cluster: str = "",
) -> dict[Key, Rec | None]:
    """The first (committed) record at or after ``starts[k]`` and before ``ends[k]``."""
    got = _read(consumer_conf, starts, ends, "first", timeout, cluster)
    return {k: (v[0] if v and v[0].offset < ends[k] else None) for k, v in got.items()}


def all_records(
    consumer_conf: Mapping[str, Any],
    key: Key,
    start: int,
    end: int,
    timeout: float,
    cluster: str = "",
) -> list[Rec]:
    return _read(consumer_conf, {key: start}, {key: end}, "all", timeout, cluster)[key]


def group_offsets(
    admin_conf: Mapping[str, Any], groups: Iterable[str], where: str, timeout: float
) -> dict[str, dict[Key, int]]:
    """Committed offsets of ``groups`` (a group without any is left out)."""
    out: dict[str, dict[Key, int]] = {}
    admin = new_admin(admin_conf)
    try:
        read = committed_offsets(admin, groups, timeout, where)
    except Exception as exc:
        # librdkafka 2.16 aborts the process (assertion eonce->refcnt > 0) when a client
        # whose group-offsets request timed out is still alive when the broker answers
        # again (reproduced: a broker paused, then resumed); the frames of the error and
        # of its causes would keep it alive until the cyclic GC runs: release them, and
        # the client is destroyed now
        _release_frames(exc)
        raise
    finally:
        del admin
    for g, tps in read.items():
        offsets = {
            (tp.topic, tp.partition): tp.offset
            for tp in tps
            if tp.error is None and tp.offset is not None and tp.offset >= 0
        }
        if offsets:
            out[g] = offsets
    return out


def _release_frames(exc: BaseException | None) -> None:
    """Clear the locals of the finished frames behind ``exc`` and its causes."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        traceback.clear_frames(exc.__traceback__)
        exc = exc.__cause__ or exc.__context__
