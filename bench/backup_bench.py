"""Backup throughput: `mm backup --once` against a plain consume-and-write-Parquet loop.

One embedded Tansu cluster (A), or BENCH_A_BOOTSTRAP, gets N records spread evenly
over P partitions: keys from a set of 10,000 (``user-1234``), values of S bytes of
hex text of random bytes (half the entropy of binary data: it compresses about 2x,
like much real text), two headers each. Then, in the same run, on the same data:

  (a) baseline: ONE plain Python process, confluent-kafka (assign, read_committed,
      end-of-partition events; bench/mirror_bench.py's baseline consumer settings)
      writing each partition to Parquet with pyarrow: the segments' schema, codec
      (backup.compression) and row-group size, one file per partition, nothing
      else (no gaps, no footer metadata, no catalog, no aborted-record filter);
  (b) `mm backup --once` (:func:`mm.backup.job.run_backup_once`) to a fresh local
      directory, Spark start-up excluded as bench/mirror_bench.py does it (the
      SparkSession and a warm-up pass over a tiny topic, which starts the Python
      workers, are timed on their own) and included.

No figure is printed unless both hold every record: the baseline counts what it read,
the backup's report must cover every partition to its end with no failure.

Prints records/s and MB/s (MB: 10^6 bytes of key + value + header bytes, the records'
raw size) for both, the ratio backup/baseline (of records/s), and for both stores the
compression ratio (raw bytes / bytes on disk, segment files only) and bytes per record
on disk. The committed filter is backup.committed.filter (auto: raw on this PLAINTEXT
cluster, which reads every range twice; --committed-filter broker to compare).

    python bench/backup_bench.py                      # 1,000,000 x 200 B, 8 partitions
    python bench/backup_bench.py --records 20000      # a quick check that it works
    python bench/backup_bench.py --committed-filter broker --compression snappy
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from mirror_bench import BASELINE_CONSUMER

from mm.backup.segment import ROWS_PER_GROUP, SCHEMA
from mm.backup.settings import COMPRESSIONS, DEFAULT_COMPRESSION, DEFAULT_SEGMENT_RECORDS
from mm.config import load_config
from mm.embedded import EmbeddedClusters
from mm.logs import configure_logging

TOPIC = "backup-bench"
WARMUP_TOPIC = "backup-bench-warmup"
KEYS = 10_000


def fill(bootstrap: str, topic: str, records: int, partitions: int, value_bytes: int) -> int:
    """Produces the records (record i to partition i % P); their raw bytes."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            "enable.idempotence": True,
        }
    )
    raw = 0
    for i in range(records):
        key = f"user-{i % KEYS}".encode()
        value = os.urandom((value_bytes + 1) // 2).hex().encode()[:value_bytes]
        headers = [("source", b"backup-bench"), ("seq", str(i).encode())]
        raw += len(key) + len(value) + sum(len(k) + len(v) for k, v in headers)
        while True:
            try:
                p.produce(topic, value, key, i % partitions, headers=headers)
                break
            except BufferError:
                p.poll(0.05)
    if p.flush(300):
        raise RuntimeError(f"records of {topic} not delivered")
    return raw


class _PartitionFile:
    """One partition's Parquet file, written a row group at a time."""

    def __init__(self, path: Path, compression: str) -> None:
        self.writer = pq.ParquetWriter(str(path), SCHEMA, compression=compression)
        self.cols: dict[str, list[Any]] = {f.name: [] for f in SCHEMA}

    def add(self, m: Any) -> None:
        ts_type, ts = m.timestamp()
        c = self.cols
        c["offset"].append(m.offset())
        c["timestamp"].append(ts if ts_type in (1, 2) else -1)
        c["timestamp_type"].append(ts_type if ts_type in (1, 2) else 0)
        c["key"].append(m.key())
        c["value"].append(m.value())
        c["headers"].append([{"key": k, "value": v} for k, v in m.headers() or ()])
        if len(c["offset"]) >= ROWS_PER_GROUP:
            self.flush()

    def flush(self) -> None:
        if self.cols["offset"]:
            self.writer.write_batch(pa.RecordBatch.from_pydict(self.cols, schema=SCHEMA))
            self.cols = {f.name: [] for f in SCHEMA}

    def close(self) -> None:
        self.flush()
        self.writer.close()


def baseline(bootstrap: str, partitions: int, out: Path, compression: str) -> tuple[float, int]:
    """The plain loop; (seconds, records read)."""
    out.mkdir(parents=True)
    c = Consumer({"bootstrap.servers": bootstrap, **BASELINE_CONSUMER})
    started = time.perf_counter()
    files = {p: _PartitionFile(out / f"{p}.parquet", compression) for p in range(partitions)}
    c.assign([TopicPartition(TOPIC, p, 0) for p in range(partitions)])
    read = 0
    eof: set[int] = set()
    while len(eof) < partitions:
        for m in c.consume(5000, 1.0):
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                    continue
                raise RuntimeError(str(err))
            files[m.partition()].add(m)
            read += 1
    for f in files.values():
        f.close()
    elapsed = time.perf_counter() - started
    c.close()
    return elapsed, read


def parquet_bytes(root: Path) -> int:
    return sum(f.stat().st_size for f in root.rglob("*.parquet"))


def write_config(
    path: Path, bootstrap: str, topic: str, store: Path, args: argparse.Namespace
) -> Path:
    path.write_text(
        "\n".join(
            [
                "clusters = A",
                f"A.bootstrap.servers = {bootstrap}",
                "backup.cluster = A",
                f"backup.path = {store}",
                f"backup.topics = {topic}",
                f"backup.compression = {args.compression}",
                f"backup.committed.filter = {args.committed_filter}",
                f"backup.segment.records = {args.segment_records}",
                f"mm.state.dir = {path.parent / 'state'}",
                f"spark.master = {args.spark_master}",
            ]
        )
        + "\n"
    )
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000, help="records (default 1,000,000)")
    ap.add_argument("--partitions", type=int, default=8, help="partitions (default 8)")
    ap.add_argument("--value-bytes", type=int, default=200, help="value bytes (default 200)")
    ap.add_argument(
        "--compression",
        choices=COMPRESSIONS,
        default=DEFAULT_COMPRESSION,
        help=f"backup.compression, for both (default {DEFAULT_COMPRESSION})",
    )
    ap.add_argument(
        "--committed-filter",
        choices=("auto", "raw", "broker"),
        default="auto",
        help="backup.committed.filter (default auto: raw on the embedded cluster)",
    )
    ap.add_argument(
        "--segment-records",
        type=int,
        default=DEFAULT_SEGMENT_RECORDS,
        help=f"backup.segment.records (default {DEFAULT_SEGMENT_RECORDS:,})",
    )
    ap.add_argument("--spark-master", default="local[*]", help="spark.master (default local[*])")
    ap.add_argument("--keep", action="store_true", help="keep the run directory")
    args = ap.parse_args()
    if args.records < args.partitions or args.partitions < 1 or args.value_bytes < 1:
        ap.error("need --partitions >= 1, --records >= --partitions, --value-bytes >= 1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("MM_LOG_LEVEL", "WARNING")
    configure_logging()  # the in-process backup's and brokers' events at that level

    run_dir = Path(tempfile.mkdtemp(prefix="mm-backup-bench-"))
    ok = False
    try:
        with EmbeddedClusters(run_dir / "brokers", jvm_flags=()) as ec:
            a = os.environ.get("BENCH_A_BOOTSTRAP") or ec.start(("A",))["A"].bootstrap_servers
            ok = measure(args, a, run_dir)
    finally:
        if ok and not args.keep:
            shutil.rmtree(run_dir, ignore_errors=True)
        else:
            print(f"run directory: {run_dir}", file=sys.stderr)
    return 0 if ok else 1


def measure(args: argparse.Namespace, a: str, run_dir: Path) -> bool:
    from mm.backup.job import run_backup_once
    from mm.spark_session import build_spark

    t = time.perf_counter()
    raw = fill(a, TOPIC, args.records, args.partitions, args.value_bytes)
    fill_s = time.perf_counter() - t
    print(
        f"filled {args.records:,} records ({args.value_bytes} B values, keys, 2 headers; "
        f"{raw / 1e6:,.1f} MB raw) into {args.partitions} partitions in {fill_s:.1f}s"
    )

    base_dir = run_dir / "baseline"
    base_s, base_read = baseline(a, args.partitions, base_dir, args.compression)
    if base_read != args.records:
        print(f"ERROR: the baseline read {base_read:,} records, expected {args.records:,}")
        return False
    base_disk = parquet_bytes(base_dir)

    # start-up, timed on its own: the SparkSession, then a pass over a tiny topic
    # (starts the Python workers), as a long-running backup has done before a backlog
    cfg = load_config(write_config(run_dir / "mm.properties", a, TOPIC, run_dir / "store", args))
    t = time.perf_counter()
    spark = build_spark("mm-backup", cfg.spark)
    try:
        fill(a, WARMUP_TOPIC, 10 * args.partitions, args.partitions, args.value_bytes)
        warm = load_config(
            write_config(run_dir / "warm.properties", a, WARMUP_TOPIC, run_dir / "warm", args)
        )
        warm_report = run_backup_once(warm, spark_factory=lambda: spark)
        startup_s = time.perf_counter() - t
        if not warm_report.ok:
            print(f"ERROR: the warm-up pass failed: {warm_report.to_json()}")
            return False
        t = time.perf_counter()
        report = run_backup_once(cfg, spark_factory=lambda: spark)
        backup_s = time.perf_counter() - t
    finally:
        spark.stop()
    totals = report.totals()
    incomplete = [r.to_json() for r in report.rows if r.error or r.reached != r.plan.end]
    if not report.ok or incomplete or totals["records"] != args.records:
        print(
            f"ERROR: the backup holds {totals['records']:,} records, expected "
            f"{args.records:,}; not at their end: {incomplete}"
        )
        return False
    backup_disk = parquet_bytes(run_dir / "store")

    n = args.records

    def line(name: str, secs: float) -> str:
        return (
            f"{name:<38} {secs:8.2f} s {n / secs:12,.0f} rec/s {raw / 1e6 / secs:8.1f} MB/s"
            f"   {base_s / secs:5.2f}x"
        )

    def disk(name: str, size: int) -> str:
        return f"{name:<38} {size / 1e6:10,.1f} MB {raw / size:10.2f}x {size / n:10.1f}"

    print()
    print(f"{'':<38} {'time':>10} {'records/s':>18} {'MB/s':>13}   vs (a)")
    print(line("(a) plain consume + pyarrow loop", base_s))
    print(line("(b) mm backup --once, excl. start-up", backup_s))
    print(line("    mm backup --once, incl. start-up", backup_s + startup_s))
    print(
        f"ratio backup/baseline (records/s, excl. start-up): {base_s / backup_s:.2f}; Spark "
        f"start-up and warm-up {startup_s:.1f}s; {report.spark_tasks} Spark tasks, "
        f"{totals['segments']} segments, committed filter {report.committed_filter}, "
        f"spark.master {args.spark_master}"
    )
    print()
    print(f"{'':<38} {'on disk':>13} {'raw/disk':>11} {'B/record':>10}")
    print(disk(f"(a) baseline Parquet ({args.compression})", base_disk))
    print(disk(f"(b) backup segments ({args.compression})", backup_disk))
    print(f"raw key + value + header bytes: {raw / 1e6:,.1f} MB ({raw / n:,.1f} B/record)")
    return True


if __name__ == "__main__":
    sys.exit(main())
