"""Reading a restore's offset mapping back from the target (its one-partition topic
:func:`mm.restore.plan.mapping_topic`), under Kafka's read_committed rule.

The mapping is written in the same transaction as the records it maps, so what it
holds committed is exactly what the target holds: the driver translates groups
through it, and a task takes its partition's position from it (a broker that lost
an acknowledged offset commit, or applied an aborted one, cannot move it).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from mm_client.kafka.clients import new_consumer
from mm_client.kafka.errors import wrap

from mm.backup.groups import OffsetRun
from mm.errors import MirrorError
from mm.kafka.profile import BrokerProfile
from mm.kafka.watermarks import watermarks
from mm.restore.plan import decode_mapping, mapping_topic, merge_runs, state_group

Key = tuple[str, int]


def read_mapping_runs(
    admin_conf: dict[str, str],
    consumer_conf: dict[str, str],
    region: str,
    keys: set[Key],
    timeout: float,
    where: str,
    profile: BrokerProfile,
) -> dict[Key, tuple[OffsetRun, ...]]:
    """The offset mapping of ``keys`` (target topic, partition), read back from the
    mapping topic to its end under Kafka's read_committed rule.

    Every partition's transactions write to the mapping topic's one partition, so
    their transactions overlap there. On Apache Kafka (``profile``:
    ``read_committed_exact``), over any listener, a read_committed consumer reads
    it. On a broker whose last stable offset lags behind such overlapping
    transactions (the embedded broker: a consumer there stops below records whose
    markers all say COMMIT) or that serves aborted records, the stored log is read
    and the rule applied to its markers (:mod:`mm.kafka.rawlog`; PLAINTEXT only,
    which the restore checks before it starts).
    """
    topic = mapping_topic(region)
    if profile.read_committed_exact:
        values = _mapping_values_consumer(consumer_conf, region, topic, timeout)
    else:
        values = _mapping_values_raw(admin_conf, topic, timeout, where)
    found: dict[Key, list[OffsetRun]] = defaultdict(list)
    for offset, value in values:
        try:
            rec = decode_mapping(value, f"{topic}@{offset}")
        except ValueError as exc:
            raise MirrorError(str(exc)) from None
        if (rec.topic, rec.partition) in keys:
            found[(rec.topic, rec.partition)].append(rec.run)
    return {k: merge_runs(v) for k, v in found.items()}


def _mapping_values_raw(
    admin_conf: dict[str, str], topic: str, timeout: float, where: str
) -> Iterator[tuple[int, bytes | None]]:
    from mm.kafka.rawlog import Connection, ScanStats, scan_committed
    from mm.verify.reads import cluster_meta

    address = cluster_meta(admin_conf, where, timeout).leaders.get((topic, 0))
    if address is None:
        return  # no mapping topic: nothing was restored yet
    with Connection(address, timeout, client_id="mm-restore") as conn:
        # the end is unknown up front: scan to the high watermark
        for r in scan_committed(conn, topic, 0, 0, 1 << 62, ScanStats(), timeout=timeout):
            yield r.offset, r.value


def _mapping_values_consumer(
    consumer_conf: dict[str, str], region: str, topic: str, timeout: float
) -> Iterator[tuple[int, bytes | None]]:
    (_low, end) = watermarks(consumer_conf, [(topic, 0)], timeout)[(topic, 0)]
    if end <= 0:
        return
    consumer = new_consumer(
        {
            **consumer_conf,
            "group.id": state_group(region),
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + timeout
        position = 0
        while position < end:
            if time.monotonic() > deadline:
                raise MirrorError(f"read {topic}: at offset {position} of {end} after {timeout:g}s")
            for m in consumer.consume(1000, 0.05):  # returns at its timeout unless full
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        position = max(position, m.offset() or 0)
                        continue
                    raise wrap(KafkaException(err), f"read {topic}")
                position = (m.offset() or 0) + 1
                yield m.offset() or 0, m.value()
    finally:
        consumer.close()
