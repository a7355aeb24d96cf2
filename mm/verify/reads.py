"""What `mm verify` reads on the driver: topics and leaders, log bounds, the mirror's
position, offset syncs and checkpoints. Record payloads are read in Spark tasks
(:mod:`mm.verify.spark`), never here (except the two records of a first content
difference, to name the fields that differ).

Log ends come from :func:`mm.kafka.watermarks.watermarks` with the cluster's broker
profile, read_committed: the last stable offset, where the mirror itself stops.
The offset syncs are read raw with Kafka's read_committed rule applied
(:mod:`mm.kafka.rawlog`): with ``offset-syncs.topic.location=target`` they are
written in the mirror's transactions, and some brokers serve aborted ones to
consumers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaException
from mm_client.errors import RecordDecodeError
from mm_client.kafka.clients import new_admin
from mm_client.kafka.errors import wrap
from mm_client.records import OffsetSync, sync_flags

from mm.config import ClusterConfig
from mm.errors import KafkaOperationError
from mm.kafka.committed import TO_THE_END, LogReader, reader_of
from mm.kafka.profile import KAFKA, BrokerProfile
from mm.kafka.rawlog import LogRecord, RawLogError, ScanStats
from mm.kafka.watermarks import watermarks
from mm.verify.compare import CheckpointIn, Sync

Key = tuple[str, int]


def require_readable(cluster: ClusterConfig, command: str = "mm verify") -> None:
    """ConfigError up front, before anything is read, when ``cluster``'s logs cannot be
    read (its broker profile needs the raw reader, which speaks plain TCP only, and
    the listener is TLS or SASL): see :meth:`mm.kafka.committed.LogReader.check`.

    ``command`` names the command in the message."""
    reader_of(cluster).check(command)


@dataclass
class ClusterMeta:
    """Partition counts and partition leaders (``host:port``) of a cluster's topics."""

    partitions: dict[str, int]
    leaders: dict[Key, str]

    def leader(self, topic: str, partition: int, where: str) -> str:
        try:
            return self.leaders[(topic, partition)]
        except KeyError:
            raise KafkaOperationError(
                f"{topic}[{partition}] on {where} has no leader (offline partition?)"
            ) from None


def cluster_meta(admin_conf: Mapping[str, Any], where: str, timeout: float) -> ClusterMeta:
    admin = new_admin(admin_conf)
    try:
        md = admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise wrap(exc, f"list topics on {where}") from exc
    brokers = {b.id: f"{b.host}:{b.port}" for b in md.brokers.values()}
    partitions: dict[str, int] = {}
    leaders: dict[Key, str] = {}
    for name, t in md.topics.items():
        if t.error is not None:
            continue
        partitions[name] = len(t.partitions)
        for p, pm in t.partitions.items():
            if pm.leader in brokers:
                leaders[(name, p)] = brokers[pm.leader]
    return ClusterMeta(partitions, leaders)


def log_bounds(
    consumer_conf: Mapping[str, Any],
    keys: Iterable[Key],
    timeout: float,
    profile: BrokerProfile = KAFKA,
) -> dict[Key, tuple[int, int]]:
    """(log start, read_committed end) per partition."""
    conf = {k: str(v) for k, v in consumer_conf.items()}
    return watermarks(conf, list(keys), timeout, profile=profile)


def log_ends(
    consumer_conf: Mapping[str, Any], keys: Iterable[Key], timeout: float
) -> dict[Key, int]:
    """The log end (read_uncommitted: the high watermark) per partition: above the
    read_committed end while a transaction is open there (Apache Kafka)."""
    from mm_client.kafka.clients import new_consumer, reader_conf, throwaway_group

    conf = reader_conf(
        consumer_conf, group=throwaway_group("__mm-probe"), isolation="read_uncommitted"
    )
    consumer = new_consumer(conf)
    try:
        return {
            k: hi
            for k, (_lo, hi) in watermarks(conf, list(keys), timeout, consumer=consumer).items()
        }
    finally:
        consumer.close()


@dataclass
class SyncRead:
    syncs: dict[Key, list[Sync]] = field(default_factory=dict)
    records: int = 0
    undecodable: int = 0
    exists: bool = True


def read_syncs(
    reader: LogReader,
    address: str | None,
    topic: str,
    topics: set[str],
    timeout: float,
    page_bytes: int,
    gaps_are_holes: bool = True,
) -> SyncRead:
    """The offset syncs of ``topics`` in the one-partition ``topic`` (read_committed rule).

    ``reader`` reads the cluster holding ``topic``; ``address``: the leader of its
    partition 0, None when the topic does not exist.
    ``gaps_are_holes``: an offset gap in ``topic`` means syncs may be missing
    (:func:`syncs_gaps_are_holes`); then each partition's next sync after one says so
    (``Sync.hole_before``).
    """
    out = SyncRead()
    if address is None:
        out.exists = False
        return out
    stats = ScanStats()
    holes = 0  # offset gaps (and undecodable records) seen so far
    seen_holes: dict[Key, int] = {}  # per partition: `holes` at its last sync
    expected: int | None = None
    for r in reader.scan(
        address, topic, 0, 0, TO_THE_END, stats, page_bytes=page_bytes, timeout=timeout
    ):
        out.records += 1
        if gaps_are_holes and expected is not None and r.offset > expected:
            holes += 1  # compaction or retention: a sync of any partition may be gone
        expected = r.offset + 1
        try:
            s = OffsetSync.from_bytes(r.key, r.value)
        except RecordDecodeError:
            out.undecodable += 1
            holes += 1
            continue
        if s.topic not in topics:
            continue
        key = (s.topic, s.partition)
        first, writer = sync_flags(r.headers)
        hole = key in seen_holes and seen_holes[key] != holes
        seen_holes[key] = holes
        out.syncs.setdefault(key, []).append(
            Sync(s.upstream_offset, s.downstream_offset, first, writer, hole)
        )
    return out


def syncs_gaps_are_holes(
    admin_conf: Mapping[str, Any], topic: str, on_target: bool, timeout: float
) -> bool:
    """:func:`mm.checkpoint.reader.gaps_are_holes` for ``topic``, its cleanup.policy
    read from the cluster when it lives on the target (unknown when it cannot be read:
    gaps then count as holes, never ahead)."""
    from mm.checkpoint.reader import gaps_are_holes

    if not on_target:
        return gaps_are_holes(False, None)
    from confluent_kafka.admin import ConfigResource

    admin = new_admin(dict(admin_conf))
    try:
        entries = next(
            iter(admin.describe_configs([ConfigResource("topic", topic)]).values())
        ).result(timeout)
    except KafkaException:
        return gaps_are_holes(True, None)
    entry = entries.get("cleanup.policy")
    return gaps_are_holes(True, (entry.value if entry is not None else None) or "delete")


def mirror_positions(
    admin_conf: Mapping[str, Any], group: str, where: str, timeout: float
) -> dict[Key, int]:
    """The state group's committed offsets (next source offset to mirror) per target
    partition; {} when the group has none."""
    from mm.status.reads import group_offsets

    return group_offsets(admin_conf, [group], where, timeout).get(group, {})


@dataclass
class CheckpointRead:
    # target (topic, partition) -> checkpoints of every group there
    checkpoints: dict[Key, list[CheckpointIn]] = field(default_factory=dict)
    topic: str = ""
    missing: bool = False
    skipped: int = 0


def read_all_checkpoints(
    consumer_conf: Mapping[str, Any], source_alias: str, policy: Any, timeout: float
) -> CheckpointRead:
    """Every group's newest checkpoints, as the failover client reads them."""
    from mm_client import read_checkpoints
    from mm_client.cluster_errors import CheckpointsUnavailableError

    try:
        snap = read_checkpoints(
            consumer_conf, source_alias, ".*", timeout, replication_policy=policy
        )
    except CheckpointsUnavailableError as exc:
        if exc.reason == "missing":
            return CheckpointRead(topic=exc.topic, missing=True)
        raise
    out = CheckpointRead(topic=snap.topic, skipped=snap.skipped)
    for group in snap.groups:
        for tp, cp in snap.checkpoints(group).items():
            out.checkpoints.setdefault((tp.topic, tp.partition), []).append(
                CheckpointIn(group, cp.upstream_offset, cp.downstream_offset)
            )
    return out


def read_record(
    reader: LogReader, address: str, topic: str, partition: int, offset: int, timeout: float
) -> LogRecord | None:
    """The committed record at ``offset``, or None (to name the fields that differ)."""
    try:
        for r in reader.scan(
            address, topic, partition, offset, offset + 1, ScanStats(), timeout=timeout
        ):
            return r
    except (RawLogError, OSError):
        return None
    return None


def committed_offsets(
    cluster: ClusterConfig,
    topic: str,
    partition: int,
    start: int,
    end: int,
    timeout: float,
    client_id: str = "mm",
) -> list[int]:
    """Offsets of the committed records of ``topic[partition]`` in ``[start, end)``
    (read_committed; ``end`` :data:`mm.kafka.committed.TO_THE_END` reads to the end)."""
    reader = reader_of(cluster, client_id)
    address = None
    if reader.raw:
        meta = cluster_meta(cluster.librdkafka("admin"), f"cluster {cluster.alias}", timeout)
        address = meta.leader(topic, partition, f"cluster {cluster.alias}")
    found = reader.scan(address, topic, partition, start, end, ScanStats(), timeout=timeout)
    return [r.offset for r in found]
