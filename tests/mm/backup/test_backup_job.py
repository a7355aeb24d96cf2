"""`mm backup --once` and `mm backup ls` on a real broker, real Spark, the real CLI.

A two-partition topic holds plain records (headers in order with duplicate keys
and a null value, a null key, a tombstone, explicit timestamps) and a
transactional producer's records: committed transactions and one aborted
transaction whose records reached the broker before the abort (Tansu serves
those to read_committed consumers; Apache Kafka does not). The backup must
hold exactly what Apache Kafka's read_committed consumer sees, judged by the
raw log under Kafka's rule (:func:`mm.kafka.rawlog.committed_view`), with the
markers and aborted records as gaps.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from support.backup import (
    assert_backup_equals_source,
    backup_config,
    produce_numbered,
    stored_records,
)
from support.clusters import KafkaCluster
from support.groups import commit_admin, run_mm
from support.mirror import MirrorRun, create_topic, delete_topic

from mm.backup.catalog_store import FsCatalogStore
from mm.backup.groups import decode_group_offsets
from mm.backup.layout import PartitionRef
from mm.backup.ranges import compute_gaps
from mm.backup.rebuild import rebuild_catalog
from mm.backup.segment import read_segment
from mm.kafka.profile import EMBEDDED
from mm.kafka.rawlog import committed_view, read_log
from mm.kafka.watermarks import watermarks

pytestmark = pytest.mark.integration

FS = pafs.LocalFileSystem()
PARTITIONS = 2
TIMEOUT = 300.0
TS = 1_600_000_000_000


def run_backup(config: Path, *args: str) -> MirrorRun:
    """`mm backup -c config ARGS` in a subprocess (the suite's runner: own session, output
    kept next to the config)."""
    return run_mm(config, "backup", *args, timeout=TIMEOUT)


def produce_plain(bootstrap: str, topic: str, tag: str) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for part in range(PARTITIONS):
        records: list[dict[str, Any]] = [
            {
                "key": b"k1",
                "value": f"{tag}a{part}".encode(),
                "timestamp": TS + 5,
                "headers": [("h", b"1"), ("x", None), ("h", b"2"), ("", b"")],
            },
            {"key": None, "value": f"{tag}b{part}".encode(), "timestamp": TS + 1},
            {"key": b"k1", "value": None, "timestamp": TS + 9},  # a tombstone
            {"key": b"", "value": b"", "timestamp": TS},
        ]
        for r in records:
            p.produce(topic, partition=part, **r)
        assert p.flush(30) == 0


def produce_transactions(bootstrap: str, topic: str) -> set[bytes]:
    """Two committed transactions around an aborted one; the aborted values."""
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bk-{uuid.uuid4().hex}"})
    p.init_transactions(30)
    aborted: set[bytes] = set()
    for round_ in range(3):
        p.begin_transaction()
        for part in range(PARTITIONS):
            for i in range(2):
                value = f"txn{round_}-{part}-{i}".encode()
                p.produce(
                    topic,
                    value,
                    b"k-t",
                    partition=part,
                    timestamp=TS + 100 * round_ + i,
                    headers=[("txn", str(round_).encode()), ("txn", b"again")],
                )
                if round_ == 1:
                    aborted.add(value)
        assert p.flush(30) == 0  # on the broker before the commit or abort
        if round_ == 1:
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
    return aborted


def record_tuple(r: Any) -> tuple[Any, ...]:
    return (r.offset, r.key, r.value, tuple(r.headers or ()), r.timestamp, r.timestamp_type)


def expected_partition(bootstrap: str, topic: str, partition: int) -> tuple[list[Any], set[int]]:
    """Kafka's read_committed records, and the offsets that hold no such record
    (transaction markers and aborted records), from the raw log."""
    log = read_log(bootstrap, topic, partition)
    committed = [record_tuple(r) for r in committed_view(log).records]
    kept = {r[0] for r in committed}
    no_record = set()
    for b in log.batches:
        if b.control:
            no_record.update(range(b.base_offset, b.last_offset + 1))
        else:
            no_record.update(r.offset for r in b.records if r.offset not in kept)
    return committed, no_record


def backed_up(prefix: Path, region: str, topic: str, partition: int) -> Any:
    ref = PartitionRef(str(prefix), region, topic, partition)
    _version, catalog = FsCatalogStore(FS).load(ref)
    segments = [read_segment(FS, f"{prefix}/{e.key}") for e in catalog.visible()]
    return ref, catalog, segments


def test_backup_once_holds_exactly_the_committed_records(
    cluster_a: KafkaCluster, unique_topic: Any, unique_group: Any, tmp_path: Path
) -> None:
    bootstrap = cluster_a.bootstrap_servers
    topic = unique_topic("bk")
    group = unique_group("bk")
    create_topic(bootstrap, topic, PARTITIONS)
    produce_plain(bootstrap, topic, "p1-")
    aborted = produce_transactions(bootstrap, topic)
    produce_plain(bootstrap, topic, "p2-")
    commit_admin(bootstrap, group, topic, {0: 3, 1: 1})

    prefix = tmp_path / "bk"
    config = tmp_path / "mm.properties"
    config.write_text(
        "\n".join(
            [
                "clusters = A",
                f"A.bootstrap.servers = {bootstrap}",
                "backup.cluster = A",
                "backup.path = bk",  # relative: to the working directory
                f"backup.topics = {topic}",
                f"backup.groups = {group}",
                "backup.region = east",
                f"mm.state.dir = {tmp_path / 'state'}",
                "spark.master = local[2]",
            ]
        )
        + "\n"
    )

    first = run_backup(config, "--once")
    assert first.returncode == 0, first.describe()
    assert "topic" in first.stdout and "segments" in first.stdout, first.describe()
    # backup.* keys are known to the loader
    assert "unknown config key" not in first.stderr, first.describe()
    assert "unknown backup" not in first.stderr, first.describe()

    keys = [(topic, p) for p in range(PARTITIONS)]
    ends = watermarks({"bootstrap.servers": bootstrap}, keys, profile=EMBEDDED)
    first_ends: dict[int, int] = {}
    for p in range(PARTITIONS):
        expected, no_record = expected_partition(bootstrap, topic, p)
        assert len(expected) == 4 + 4 + 4, expected  # plain x2, two committed transactions
        assert len(no_record) >= 2 + 3  # the aborted records and three markers
        ref, catalog, segments = backed_up(prefix, "east", topic, p)
        got = [record_tuple(r) for _m, rs in segments for r in rs]
        assert got == expected, f"partition {p}"
        assert not {r[2] for r in got} & aborted
        ((meta, _records),) = segments
        log_start, end = ends[(topic, p)]
        assert (meta.start, meta.end) == (log_start, end - 1)
        assert catalog.next_offset == end
        gaps = {o for a, b in meta.gaps for o in range(a, b + 1)}
        assert gaps == no_record, f"partition {p}: gaps {meta.gaps}"
        assert meta.gaps == compute_gaps([r[0] for r in got], meta.start, meta.end)
        assert meta.lost_before is None and catalog.lost_count == 0
        assert rebuild_catalog(FS, ref).catalog == catalog
        first_ends[p] = end

    (groups_file,) = (prefix / "_groups" / "east").iterdir()
    saved = decode_group_offsets(groups_file.read_bytes())
    assert [(g.group, g.topic, g.partition, g.offset) for g in saved] == [
        (group, topic, 0, 3),
        (group, topic, 1, 1),
    ]

    # three new records on partition 0: exactly one new segment, right after the first
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(3):
        p.produce(topic, f"new-{i}".encode(), b"k-new", partition=0, timestamp=TS + 1000 + i)
    assert p.flush(30) == 0
    second = run_backup(config, "--once")
    assert second.returncode == 0, second.describe()
    end0 = watermarks({"bootstrap.servers": bootstrap}, [(topic, 0)], profile=EMBEDDED)[(topic, 0)][
        1
    ]
    ref, catalog, segments = backed_up(prefix, "east", topic, 0)
    assert [(e.start, e.end) for e in catalog.visible()] == [
        (ends[(topic, 0)][0], first_ends[0] - 1),
        (first_ends[0], end0 - 1),
    ]
    new_meta, new_records = segments[1]
    assert [r.value for r in new_records] == [b"new-0", b"new-1", b"new-2"]
    assert new_meta.gaps == () and catalog.next_offset == end0
    assert rebuild_catalog(FS, ref).catalog == catalog
    expected, _ = expected_partition(bootstrap, topic, 0)
    assert [record_tuple(r) for _m, rs in segments for r in rs] == expected
    _ref1, catalog1, _ = backed_up(prefix, "east", topic, 1)
    assert len(catalog1.visible()) == 1 and catalog1.next_offset == first_ends[1]

    listed = run_backup(config, "ls", "--json")
    assert listed.returncode == 0, listed.describe()
    doc = json.loads(listed.stdout)
    rows = {(r["topic"], r["partition"]): r for r in doc["partitions"]}
    assert set(rows) == set(keys)
    assert (rows[(topic, 0)]["first_offset"], rows[(topic, 0)]["last_offset"]) == (
        ends[(topic, 0)][0],
        end0 - 1,
    )
    assert rows[(topic, 0)]["segments"] == 2 and rows[(topic, 0)]["records"] == 15
    assert rows[(topic, 1)]["last_offset"] == first_ends[1] - 1
    assert rows[(topic, 1)]["records"] == 12 and rows[(topic, 1)]["lost"] == 0
    assert rows[(topic, 0)]["levels"] == [0]
    assert rows[(topic, 0)]["min_timestamp"] == TS

    # --json is the --once report's: a continuous run refuses it before starting
    refused = run_backup(config, "--json")
    assert refused.returncode == 2 and "--json goes with --once" in refused.stderr, (
        refused.describe()
    )


def test_recreated_topic_backed_up_once_its_old_backup_is_moved_aside(
    cluster_a: KafkaCluster, unique_topic: Any, tmp_path: Path
) -> None:
    """An operator's way out followed: a topic deleted and recreated shorter under an
    existing backup is refused, naming the directories of the old backup; both moved to
    the same relative places under another path, the next run backs up the new topic
    exactly, and the old backup is whole where it was moved."""
    bootstrap = cluster_a.bootstrap_servers
    topic = unique_topic("bkre")
    prefix, aside = tmp_path / "bk", tmp_path / "bk-old"
    config = backup_config(tmp_path, bootstrap, topic, prefix=prefix)
    create_topic(bootstrap, topic, 1)
    produce_numbered(bootstrap, topic, 1, 30, "old")
    first = run_backup(config, "--once")
    assert first.returncode == 0, first.describe()
    old = stored_records(FS, str(prefix), "east", topic, 0)
    assert len(old) == 30

    delete_topic(bootstrap, topic)
    create_topic(bootstrap, topic, 1)
    produce_numbered(bootstrap, topic, 1, 10, "new")
    refused = run_backup(config, "--once")
    assert refused.returncode == 1, refused.describe()
    segments, catalogs = f"{prefix}/east/{topic}", f"{prefix}/_catalog/east/{topic}"
    assert (
        f"failed: {topic}[0]: the log ends at 10, below the backup's next offset 30: "
        f"the topic was recreated or truncated; nothing backed up (move the topic's old "
        f"backup aside: {segments} and {catalogs}, both to the same relative places under "
        "another path"
    ) in refused.stdout, refused.describe()
    assert stored_records(FS, str(prefix), "east", topic, 0) == old

    for d in (segments, catalogs):  # as `mv` (or `aws s3 mv --recursive`) would
        moved = aside / Path(d).relative_to(prefix)
        moved.parent.mkdir(parents=True, exist_ok=True)
        Path(d).rename(moved)
    again = run_backup(config, "--once")
    assert again.returncode == 0, again.describe()
    assert assert_backup_equals_source(FS, str(prefix), "east", bootstrap, topic, 1) == 10
    assert stored_records(FS, str(aside), "east", topic, 0) == old


def _wait_listed_end(bootstrap: str, topic: str, partition: int, timeout: float = 30.0) -> None:
    """Until ListOffsets (read_uncommitted) lists ``topic[partition]`` as holding
    records."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bk-listed-end",
            # as the backup's probe lists it (read_committed: 0 while a transaction is
            # open, Tansu's last stable offset)
            "isolation.level": "read_uncommitted",
        }
    )
    try:
        deadline = time.monotonic() + timeout
        while True:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), 10)
            if high > low:
                return
            assert time.monotonic() < deadline, f"{topic}[{partition}] still listed empty"
            time.sleep(0.1)
    finally:
        consumer.close()


def test_open_transaction_refused_then_backed_up_once_it_ended(
    durable_cluster: Any, unique_topic: Any, tmp_path: Path
) -> None:
    """An operator's way out followed, on the embedded broker Tansu: the only broker it
    arises on (Apache Kafka's read_committed end, the last stable offset, stops before
    every open transaction, so a backup never plans one). Its end includes a transaction
    still open: the backup refuses to write the records it cannot judge; the
    transaction committed, the backup run again holds exactly the committed records."""
    bootstrap = durable_cluster().bootstrap_servers
    topic = unique_topic("bkopen")
    create_topic(bootstrap, topic, 1)
    plain = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(3):
        plain.produce(topic, f"plain-{i}".encode(), partition=0, timestamp=TS + i)
    assert plain.flush(30) == 0
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bk-{uuid.uuid4().hex}"})
    txn.init_transactions(30)
    txn.begin_transaction()
    for i in range(2):
        txn.produce(topic, f"txn-{i}".encode(), b"k-t", partition=0, timestamp=TS + 10 + i)
    assert txn.flush(30) == 0  # on the broker, still open
    # Tansu's S3 storage acknowledged the writes before its ListOffsets saw them (a CI
    # run's backup listed the partition as empty): the scenario starts once it does
    _wait_listed_end(bootstrap, topic, 0)

    prefix = tmp_path / "bk"
    config = backup_config(tmp_path, bootstrap, topic, prefix=prefix)
    refused = run_backup(config, "--once")
    assert refused.returncode == 1, refused.describe()
    assert (
        f"failed: {topic}[0]: BackupReadError: {topic}[0]: 2 records of a transaction still "
        "open below "
        in refused.stdout
        and "run again once the transaction ended" in refused.stdout
    ), refused.describe()
    _ref, catalog, _segments = backed_up(prefix, "east", topic, 0)
    assert catalog.next_offset in (None, 0), catalog  # nothing it could not judge written

    txn.commit_transaction(30)
    again = run_backup(config, "--once")
    assert again.returncode == 0, again.describe()
    expected, _no_record = expected_partition(bootstrap, topic, 0)
    assert [r[2] for r in expected] == [b"plain-0", b"plain-1", b"plain-2", b"txn-0", b"txn-1"]
    _ref, catalog, segments = backed_up(prefix, "east", topic, 0)
    assert [record_tuple(r) for _m, rs in segments for r in rs] == expected
