"""Failback, first step: find the divergence on the old primary and quarantine it.

Reads the newest failover point of the flow from the target (B), the source's (A)
end offsets now, and every committed record of A from the failover point to that
end, with the raw log reader and Kafka's read_committed rule (PLAINTEXT only, as
`mm verify`). Unless it is a dry run, the records are written to Parquet files
before anything else happens: one file per partition under the quarantine
directory, columns ``topic, partition, offset, timestamp, key, value, headers``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from mm.config import FlowConfig, MirrorConfig
from mm.dr.divergence import DivergenceReport, PartitionDivergence, plan_divergence
from mm.dr.failover_point_run import newest_point
from mm.errors import MirrorError
from mm.kafka.rawlog import Connection, ScanStats, scan_committed
from mm.verify import reads

_ROW_GROUP = 10_000


def quarantine_dir(cfg: MirrorConfig, flow: FlowConfig) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return Path(cfg.state_dir) / "failback" / f"{flow.source}-{flow.target}" / stamp


def find_divergence(
    cfg: MirrorConfig,
    flow: FlowConfig,
    *,
    dry_run: bool,
    timeout: float,
    out_dir: Path | None = None,
) -> DivergenceReport:
    """The divergence per partition; records written under ``out_dir`` unless ``dry_run``.

    Raises MirrorError when no failover point was recorded for ``flow``.
    """
    source, target = cfg.cluster(flow.source), cfg.cluster(flow.target)
    reads.require_plaintext(source)
    point = newest_point(target.librdkafka("consumer"), flow, timeout)
    if point is None:
        raise MirrorError(
            f"no failover point of {flow.name} is recorded on {flow.target}: `mm failover` "
            "records one when consumers move; without it the divergence cannot be told"
        )
    keys = [(p.topic, p.partition) for p in point.partitions]
    bounds = reads.log_bounds(source.librdkafka("consumer"), keys, timeout)
    report = plan_divergence(point, {k: hi for k, (_lo, hi) in bounds.items()}, dry_run)
    meta = reads.cluster_meta(source.librdkafka("admin"), f"cluster {flow.source}", timeout)
    writer = None if dry_run else _Quarantine(out_dir or quarantine_dir(cfg, flow))
    try:
        for row in report.partitions:
            if row.start >= row.end_now:
                continue
            address = meta.leader(row.topic, row.partition, f"cluster {flow.source}")
            _read(address, row, timeout, writer)
    finally:
        if writer is not None:
            writer.close()
    if writer is not None:
        report.quarantine = str(writer.root)
    return report


def _read(
    address: str, row: PartitionDivergence, timeout: float, writer: _Quarantine | None
) -> None:
    stats = ScanStats()
    with Connection(address, timeout, client_id="mm-failback") as conn:
        for r in scan_committed(
            conn, row.topic, row.partition, row.start, row.end_now, stats, timeout=timeout
        ):
            row.add(r.offset, r.timestamp)
            if writer is not None:
                writer.add(row.topic, row.partition, r)


class _Quarantine:
    """Parquet files, one per partition, written in row groups."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._writers: dict[tuple[str, int], Any] = {}
        self._rows: dict[tuple[str, int], list[dict[str, Any]]] = {}

    def add(self, topic: str, partition: int, r: Any) -> None:
        rows = self._rows.setdefault((topic, partition), [])
        rows.append(
            {
                "topic": topic,
                "partition": partition,
                "offset": r.offset,
                "timestamp": r.timestamp,
                "key": r.key,
                "value": r.value,
                "headers": [{"key": k, "value": v} for k, v in r.headers],
            }
        )
        if len(rows) >= _ROW_GROUP:
            self._flush(topic, partition)

    def _flush(self, topic: str, partition: int) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        rows = self._rows.pop((topic, partition), [])
        if not rows:
            return
        table = pa.Table.from_pylist(rows, schema=_schema())
        writer = self._writers.get((topic, partition))
        if writer is None:
            self.root.mkdir(parents=True, exist_ok=True)
            path = self.root / f"{topic}-{partition}.parquet"
            writer = self._writers[(topic, partition)] = pq.ParquetWriter(path, table.schema)
        writer.write_table(table)

    def close(self) -> None:
        for topic, partition in list(self._rows):
            self._flush(topic, partition)
        for w in self._writers.values():
            w.close()


def _schema() -> Any:
    import pyarrow as pa

    header = pa.struct([("key", pa.string()), ("value", pa.binary())])
    return pa.schema(
        [
            ("topic", pa.string()),
            ("partition", pa.int32()),
            ("offset", pa.int64()),
            ("timestamp", pa.int64()),
            ("key", pa.binary()),
            ("value", pa.binary()),
            ("headers", pa.list_(header)),
        ]
    )
