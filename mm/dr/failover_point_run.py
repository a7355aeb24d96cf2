"""Reading and recording the failover point on the target.

Reads the mirror's committed positions (its state group), the newest source ends a
job published (``mm-mirror-ends.<source>.internal``), and the timestamp of the
newest record of each target partition (a read_committed consumer on the
partition's tail); records the point in ``mm-failover-points.<source>.internal``
(kept forever). The source is asked only for its end offsets, and only if it
answers within :data:`mm.dr.failover_proof.ANSWER_SECONDS`: then the loss is exact.
Consumers and offset listings only: this works with any ``security.protocol``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import OFFSET_INVALID, Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as TP
from mm_client.kafka import (
    AcknowledgedProducer,
    ensure_topic,
    latest_wins_producer_conf,
    new_admin,
    new_consumer,
    new_producer,
    reader_conf,
    throwaway_group,
)
from mm_client.kafka.errors import wrap

from mm.config import FlowConfig, MirrorConfig
from mm.dr.failover_point import (
    SEEN_AT_FAILOVER,
    FailoverPoint,
    failover_point,
    failover_points_topic,
)
from mm.dr.failover_proof import ANSWER_SECONDS
from mm.errors import KafkaOperationError, MirrorError
from mm.logs import get_logger
from mm.source.ends import (
    MIRROR,
    STATUS,
    SeenEnds,
    decode_ends,
    ends_key,
    ends_topic,
    newest_seen,
)
from mm.source.runtime import state_group
from mm.verify.reads import mirror_positions

Key = tuple[str, int]
_TAIL = 200  # offsets read back from a target partition's end for its newest record


def reader(conf: Mapping[str, Any]) -> Consumer:
    # the tails read are on the broker already: at librdkafka's 500 ms fetch wait,
    # reading one per mirrored partition made a failover wait ~1 s per partition
    overrides = {"auto.offset.reset": "earliest", "fetch.wait.max.ms": 10}
    return new_consumer(reader_conf(conf, overrides, group=throwaway_group("__mm-failover")))


def tail(consumer: Consumer, topic: str, partition: int, timeout: float) -> list[Any]:
    """The records of the last ``_TAIL`` offsets of a partition (read to its end), with
    ``consumer`` a :func:`reader`."""
    tp = TP(topic, partition)
    try:
        lo, hi = consumer.get_watermark_offsets(tp, timeout=timeout)
    except KafkaException as exc:
        raise wrap(exc, f"end offsets of {topic}[{partition}]") from exc
    if hi <= lo or hi == OFFSET_INVALID:
        return []
    consumer.assign([TP(topic, partition, max(lo, hi - _TAIL))])
    out: list[Any] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            for m in consumer.consume(1000, 0.05):  # returns at its timeout unless full
                err = m.error()
                if err is None:
                    out.append(m)
                elif err.code() == KafkaError._PARTITION_EOF:
                    return out
                else:
                    raise wrap(KafkaException(err), f"read {topic}[{partition}]")
    finally:
        consumer.unassign()
    raise KafkaOperationError(f"no end of {topic}[{partition}] within {timeout:.0f}s")


def newest_point(conf: Mapping[str, Any], flow: FlowConfig, timeout: float) -> FailoverPoint | None:
    """The newest failover point recorded for ``flow`` (None: none, or no topic)."""
    topic = failover_points_topic(flow.source)
    consumer = reader(conf)
    try:
        meta = consumer.list_topics(topic, timeout=timeout).topics.get(topic)
        if meta is None or meta.error is not None:
            return None
        mine = [m for m in tail(consumer, topic, 0, timeout) if m.key() == flow.name.encode()]
        if not mine:
            return None
        # only the newest counts: a corrupt older one was superseded by the point
        # recorded again after it, as the refusal below asks
        newest = mine[-1]
        try:
            return FailoverPoint.decode(newest.value())
        except ValueError as exc:
            # an older point is another failover's: never fall back to it
            raise MirrorError(
                f"the newest failover point of {flow.name} in {topic}[0] at offset "
                f"{newest.offset()} on {flow.target} is corrupt ({exc}); expected the JSON "
                "record `mm failover` writes. Record the point again with `mm failover` "
                "(it reads the mirror's position on the target), then retry"
            ) from None
    except KafkaException as exc:
        raise wrap(exc, f"read {topic}") from exc
    finally:
        consumer.close()


def newest_ends(conf: Mapping[str, Any], flow: FlowConfig, timeout: float) -> SeenEnds | None:
    """The newest source ends a job (the mirror, `mm status`) published for ``flow``
    (None: none, or no topic)."""
    topic = ends_topic(flow.source)
    consumer = reader(conf)
    try:
        md = consumer.list_topics(topic, timeout=timeout)
        meta = md.topics.get(topic)
        if meta is None or meta.error is not None:
            return None
        keys = {ends_key(flow.name, by): by for by in (MIRROR, STATUS)}
        newest: dict[str, SeenEnds | None] = {}
        for m in tail(consumer, topic, 0, timeout):
            by = keys.get(m.key() or b"")
            if by is None:
                continue
            try:
                newest[by] = decode_ends(m.value())
            except ValueError as exc:
                # an older publication of that job would under-state the loss: none of
                # its is used unless a valid one follows
                newest[by] = None
                get_logger("mm.failover", flow=flow.name).error(
                    "corrupt mirror-ends record skipped: the loss is unknown unless a "
                    "newer valid record follows",
                    topic=topic,
                    partition=0,
                    offset=m.offset(),
                    error=str(exc),
                    expected='JSON {"flow", "time_ms", "ends"} as the mirror writes it',
                )
        return newest_seen(newest)
    except KafkaException as exc:
        raise wrap(exc, f"read {topic}") from exc
    finally:
        consumer.close()


def source_ends(
    cfg: MirrorConfig, flow: FlowConfig, keys: Sequence[Key], timeout: float
) -> tuple[SeenEnds | None, str | None]:
    """The source's ends of ``keys`` now (read_committed): (ends, None), or (None, why
    not). All or nothing: a partial read would mix an exact figure with a published one."""
    from mm_client.kafka.clients import new_admin

    from mm.kafka.watermarks import watermarks

    src = cfg.cluster(flow.source)
    started = time.time()
    missing: set[Key] = set()
    try:
        marks = watermarks(
            src.librdkafka("consumer"),
            list(keys),
            timeout,
            admin=new_admin(src.librdkafka("admin")),
            profile=src.profile,
            missing=missing,
        )
    except Exception as exc:  # the source answered, then failed: the published ends stand
        return None, f"the end offsets of cluster {flow.source} could not be read: {exc}"
    if missing:
        names = ", ".join(f"{t}[{p}]" for t, p in sorted(missing)[:5])
        return None, f"cluster {flow.source} no longer has {names}"
    ends = {k: hi for k, (_lo, hi) in marks.items()}
    return SeenEnds(flow.name, int(started * 1000), ends, SEEN_AT_FAILOVER), None


def source_down(cfg: MirrorConfig, flow: FlowConfig, timeout: float) -> str | None:
    """Why the source does not answer within :data:`ANSWER_SECONDS` (None: it does)."""
    from mm.reach import unreachable

    return unreachable(cfg, [flow.source], min(timeout, ANSWER_SECONDS)).get(flow.source)


def read_failover_point(
    cfg: MirrorConfig, flow: FlowConfig, timeout: float, *, down: str | None = None
) -> FailoverPoint:
    """The point, from the target; with the source answering (``down`` None, see
    :func:`source_down`) its ends are read too: then the loss is exact, otherwise a
    lower bound against the newest ends a job published."""
    target = cfg.cluster(flow.target)
    policy = flow.policy()
    where = f"cluster {flow.target}"
    committed = mirror_positions(target.librdkafka("admin"), state_group(flow), where, timeout)
    positions = {(policy.upstream_topic(tt) or tt, p): pos for (tt, p), pos in committed.items()}
    conf = target.librdkafka("consumer")
    seen = newest_ends(conf, flow, timeout)
    keys = {k for k in set(positions) | set(seen.ends if seen else {}) if flow.topic_filter(k[0])}
    unread = down
    if down is None and keys:
        now, unread = source_ends(cfg, flow, sorted(keys), timeout)
        seen = now or seen
    newest: dict[Key, int | None] = {}
    consumer = reader(conf)
    try:
        for t, p in sorted(keys):
            last = tail(consumer, policy.format_remote_topic(flow.source, t), p, timeout)
            newest[(t, p)] = last[-1].timestamp()[1] if last else None
    finally:
        consumer.close()
    return failover_point(
        flow.name,
        flow.source,
        flow.target,
        int(time.time() * 1000),
        positions,
        seen.ends if seen else None,
        seen.time_ms if seen else None,
        newest,
        lambda t: policy.format_remote_topic(flow.source, t),
        flow.topic_filter,
        ends_seen_by=seen.by if seen else None,
        source_unread=unread,
    )


def record_failover_point(
    cfg: MirrorConfig, flow: FlowConfig, point: FailoverPoint, timeout: float
) -> str:
    """Write ``point`` durably (acks=all) on the target; returns the topic."""
    target = cfg.cluster(flow.target)
    topic = failover_points_topic(flow.source)
    admin_conf: dict[str, Any] = target.librdkafka("admin")
    ensure_topic(
        new_admin(admin_conf),
        topic,
        f"cluster {flow.target}",
        flow.offset_syncs_topic_replication_factor,
        config={"cleanup.policy": "delete", "retention.ms": "-1"},
    )
    producer = AcknowledgedProducer(
        new_producer(latest_wins_producer_conf(target.librdkafka("producer")))
    )
    key, value = point.encode()
    producer.produce(topic, value, key)
    producer.flush(timeout, f"recording the failover point in {topic} on {flow.target} failed")
    return topic
