"""Digests computed in Spark Python tasks, one task per offset range of a partition.

Each task reads its range's committed records with its cluster's
:class:`mm.kafka.committed.LogReader` (a read_committed consumer on Apache Kafka,
any listener; the raw reader where the broker profile needs it) and
returns ``(offset, digest)`` pairs packed in two byte strings. Record payloads
stay in the Python worker; the JVM and the driver only move digests.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mm.kafka.committed import LogReader
from mm.kafka.rawlog import ScanStats
from mm.verify.digest import DigestSeq, record_digest

SOURCE = "source"
TARGET = "target"


@dataclass(frozen=True)
class RangeTask:
    flow: str  # the flow's name: flows may share a source topic
    side: str  # SOURCE or TARGET
    reader: LogReader  # how the side's cluster is read
    address: str  # the partition leader, host:port
    topic: str
    partition: int
    start: int
    end: int
    timeout: float
    page_bytes: int


@dataclass(frozen=True)
class RangeDigests:
    task: RangeTask
    offsets: bytes  # array('q') bytes
    digests: bytes  # 16 bytes per record
    committed_txns: int
    aborted_txns: int
    aborted_records: int
    open_records: int
    gap_offsets: int  # read by a consumer: offsets with no committed record
    open_offsets: int  # read by a consumer: offsets past the last stable offset

    def seq(self) -> DigestSeq:
        offsets = array("q")
        offsets.frombytes(self.offsets)
        return DigestSeq(offsets, bytearray(self.digests))


def digest_range(task: RangeTask) -> RangeDigests:
    """Read ``task``'s range and digest every committed record (runs in a worker)."""
    offsets = array("q")
    digests = bytearray()
    stats = ScanStats()
    for r in task.reader.scan(
        task.address,
        task.topic,
        task.partition,
        task.start,
        task.end,
        stats,
        page_bytes=task.page_bytes,
        timeout=task.timeout,
    ):
        offsets.append(r.offset)
        digests += record_digest(r.key, r.value, r.headers, r.timestamp)
    return RangeDigests(
        task,
        offsets.tobytes(),
        bytes(digests),
        stats.committed_txns,
        stats.aborted_txns,
        stats.aborted_records,
        stats.open_records,
        stats.gap_offsets,
        stats.open_offsets,
    )


def digest_ranges(spark: Any, tasks: Sequence[RangeTask]) -> list[RangeDigests]:
    """Every task's digests, computed in parallel on the Spark executors."""
    if not tasks:
        return []
    sc = spark.sparkContext
    fn: Callable[[RangeTask], RangeDigests] = digest_range
    try:
        result: list[RangeDigests] = sc.parallelize(list(tasks), len(tasks)).map(fn).collect()
    except Exception as exc:  # a task's error (a refused read, say), in its own words
        from mm.errors import MirrorError
        from mm.spark_errors import without_class, worker_error_line

        raise MirrorError(
            f"reading the records failed: {without_class(worker_error_line(exc))}"
        ) from exc
    return result
