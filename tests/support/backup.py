"""Backups in end-to-end tests: produce numbered records, read back every visible
segment of a partition, compare with the source partition record for record."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
from confluent_kafka import Producer

from mm.backup.catalog_store import FsCatalogStore
from mm.backup.layout import PartitionRef
from mm.backup.segment import read_segment
from support.mirror import Rec, read_topic

TS = 1_700_000_000_000


def produce_numbered(bootstrap: str, topic: str, partitions: int, count: int, tag: str) -> None:
    """``count`` records per partition, each with its own key, value, headers, timestamp."""
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(count):
        for part in range(partitions):
            p.produce(
                topic,
                f"{tag}-{part}-{i}".encode() * 3,
                f"k{i % 7}".encode() if i % 5 else None,
                partition=part,
                timestamp=TS + i,
                headers=[("n", str(i).encode()), ("n", None)] if i % 3 == 0 else None,
            )
        if i % 1000 == 999:
            p.poll(0)
    assert p.flush(60) == 0


def rec_tuple(r: Rec) -> tuple[Any, ...]:
    return (r.offset, r.key, r.value, tuple(r.headers or ()), r.timestamp_type, r.timestamp)


def stored_tuple(r: Any) -> tuple[Any, ...]:
    return (r.offset, r.key, r.value, tuple(r.headers), r.timestamp_type, r.timestamp)


def stored_records(
    fs: pafs.FileSystem, prefix: str, region: str, topic: str, partition: int
) -> list[tuple[Any, ...]]:
    """The records of the partition's visible segments, in catalog order (each file read
    and checked against its footer by :func:`read_segment`)."""
    ref = PartitionRef(prefix, region, topic, partition)
    _version, catalog = FsCatalogStore(fs).load(ref)
    out: list[tuple[Any, ...]] = []
    for e in catalog.visible():
        _meta, records = read_segment(fs, f"{prefix}/{e.key}")
        out += [stored_tuple(r) for r in records]
    return out


def assert_backup_equals_source(
    fs: pafs.FileSystem, prefix: str, region: str, bootstrap: str, topic: str, partitions: int
) -> int:
    """Every source record stored exactly once, equal; returns the number of records."""
    source = read_topic(bootstrap, topic, partitions)
    total = 0
    for p in range(partitions):
        want = [rec_tuple(r) for r in source[p]]
        got = stored_records(fs, prefix, region, topic, p)
        offsets = [r[0] for r in got]
        assert len(offsets) == len(set(offsets)), f"partition {p}: an offset stored twice"
        assert offsets == [r[0] for r in want], (
            f"partition {p}: stored offsets differ from the source's: "
            f"missing {sorted(set(r[0] for r in want) - set(offsets))[:20]}, "
            f"extra {sorted(set(offsets) - set(r[0] for r in want))[:20]}"
        )
        assert got == want, f"partition {p}: stored records differ from the source's"
        total += len(got)
    return total


def write_config(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def backup_config(
    tmp_path: Path,
    bootstrap: str,
    topic: str,
    *extra: str,
    region: str = "east",
    prefix: Path | None = None,
    spark_master: str = "local[1]",
) -> Path:
    """``tmp_path/mm.properties`` backing up ``topic`` of cluster A to ``prefix``
    (default ``tmp_path/bk``) in ``region``; ``extra``: more lines."""
    return write_config(
        tmp_path / "mm.properties",
        [
            "clusters = A",
            f"A.bootstrap.servers = {bootstrap}",
            "backup.cluster = A",
            f"backup.path = {prefix or tmp_path / 'bk'}",
            f"backup.topics = {topic}",
            f"backup.region = {region}",
            *extra,
            f"mm.state.dir = {tmp_path / 'state'}",
            f"spark.master = {spark_master}",
        ],
    )
