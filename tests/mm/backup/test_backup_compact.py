"""`mm backup compact` on a real broker's backup, real Spark, the real CLI.

Two backup passes with small segments leave five level-0 segments; compaction
(two segments at least, eight records at most per merged segment) merges them
into two level-1 segments (3 + 3 + 1 records, then 3 + 2). The visible segments
must hold every record exactly once, equal to what the backup held before, with
the level-0 files gone and the catalog what the files alone rebuild.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import pytest
from confluent_kafka import Producer
from support.clusters import KafkaCluster
from support.groups import run_mm
from support.mirror import MirrorRun, create_topic

from mm.backup.catalog import DELETED
from mm.backup.catalog_store import FsCatalogStore
from mm.backup.layout import PartitionRef
from mm.backup.rebuild import rebuild_catalog
from mm.backup.segment import read_segment

pytestmark = pytest.mark.integration

FS = pafs.LocalFileSystem()
TIMEOUT = 300.0
TS = 1_600_000_000_000


def mm_backup(config: Path, *args: str) -> MirrorRun:
    return run_mm(config, "backup", *args, timeout=TIMEOUT)


def produce(bootstrap: str, topic: str, first: int, count: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(first, first + count):
        p.produce(
            topic,
            None if i % 4 == 3 else f"v{i}".encode(),  # some tombstones
            None if i % 5 == 4 else f"k{i}".encode(),
            partition=0,
            timestamp=TS + 10 * i,
            headers=[("n", str(i).encode()), ("n", None)] if i % 2 else None,
        )
    assert p.flush(30) == 0


def held(prefix: Path, ref: PartitionRef) -> tuple[Any, list[tuple[Any, ...]]]:
    """The catalog and the records of its visible segments, in offset order."""
    _version, catalog = FsCatalogStore(FS).load(ref)
    records = [
        (r.offset, r.key, r.value, r.headers, r.timestamp, r.timestamp_type)
        for e in catalog.visible()
        for r in read_segment(FS, f"{prefix}/{e.key}")[1]
    ]
    return catalog, records


def test_compact_merges_level_0_into_level_1_record_for_record(
    cluster_a: KafkaCluster, unique_topic: Any, tmp_path: Path
) -> None:
    bootstrap = cluster_a.bootstrap_servers
    topic = unique_topic("bkc")
    create_topic(bootstrap, topic, 1)
    prefix = tmp_path / "bk"
    config = tmp_path / "mm.properties"
    config.write_text(
        "\n".join(
            [
                "clusters = A",
                f"A.bootstrap.servers = {bootstrap}",
                "backup.cluster = A",
                f"backup.path = {prefix}",
                f"backup.topics = {topic}",
                "backup.groups = none",
                "backup.region = east",
                "backup.segment.records = 3",
                "backup.compact.min.segments = 2",
                "backup.compact.max.records = 8",
                f"mm.state.dir = {tmp_path / 'state'}",
                "spark.master = local[1]",
            ]
        )
        + "\n"
    )
    produce(bootstrap, topic, 0, 7)
    first = mm_backup(config, "--once")
    assert first.returncode == 0, first.describe()
    produce(bootstrap, topic, 7, 5)
    second = mm_backup(config, "--once")
    assert second.returncode == 0, second.describe()

    ref = PartitionRef(str(prefix), "east", topic, 0)
    before, records = held(prefix, ref)
    assert [(e.level, e.end - e.start + 1) for e in before.visible()] == [
        (0, 3),
        (0, 3),
        (0, 1),
        (0, 3),
        (0, 2),
    ]
    assert [r[0] for r in records] == list(range(12))

    dry = mm_backup(config, "compact", "--dry-run", "--json")
    assert dry.returncode == 0, dry.describe()
    planned = json.loads(dry.stdout)
    assert planned["dry_run"] and planned["spark_tasks"] == 0
    assert [m["segments"] for m in planned["partitions"][0]["merges"]] == [3, 2]
    assert FsCatalogStore(FS).load(ref)[1] == before

    compacted = mm_backup(config, "compact")
    assert compacted.returncode == 0, compacted.describe()
    assert "5 segments merged into 2 (12 records)" in compacted.stdout, compacted.describe()

    after, after_records = held(prefix, ref)
    assert [(e.level, e.start, e.end) for e in after.visible()] == [(1, 0, 6), (1, 7, 11)]
    assert after_records == records  # every offset once: key, value, headers, timestamps
    assert {e.key for e in after.in_state(DELETED)} == {e.key for e in before.visible()}
    assert list((prefix / "east" / topic / "partition=0" / "level=0").glob("*.parquet")) == []
    assert rebuild_catalog(FS, ref).catalog == after.forget_deleted()

    listed = mm_backup(config, "ls", "--json")
    assert listed.returncode == 0, listed.describe()
    (row,) = json.loads(listed.stdout)["partitions"]
    assert (row["levels"], row["segments"], row["records"]) == ([1], 2, 12)
    assert (row["first_offset"], row["last_offset"], row["lost"]) == (0, 11, 0)
