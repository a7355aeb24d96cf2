"""Restore throughput: `mm restore` against a plain read-Parquet-and-produce loop.

Two embedded Tansu clusters, A and B (or BENCH_A_BOOTSTRAP / BENCH_B_BOOTSTRAP). A
gets N records over P partitions (bench/backup_bench.py's records: keys from a set
of 10,000, values of S bytes of hex text, two headers each) and is backed up once
(`mm backup --once`, not timed). Then, in the same run, from the same segment files
into B:

  (a) baseline: ONE plain Python process reading each segment file with pyarrow and
      producing every record (key, value, headers, timestamp, same partition) with
      one idempotent confluent-kafka producer (linger.ms 5, batch.size 1 MB), then
      flush: no transactions, no position, no offset mapping;
  (b) `mm restore` (:func:`mm.restore.job.run_restore`) into a fresh topic, Spark
      start-up excluded (the SparkSession and a warm-up restore of a tiny topic are
      timed on their own) and included.

No figure is printed unless both wrote every record (B's end offsets for the
baseline; the restore's report for (b)). Prints records/s and MB/s (MB: 10^6 bytes
of key + value + header bytes) for both and the ratio restore/baseline.

    python bench/restore_bench.py                    # 1,000,000 x 200 B, 8 partitions
    python bench/restore_bench.py --records 20000    # a quick check that it works
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.fs as pafs
import pyarrow.parquet as pq
from backup_bench import fill
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from mm.backup.catalog_store import FsCatalogStore
from mm.backup.layout import PartitionRef
from mm.config import load_config
from mm.embedded import EmbeddedClusters
from mm.kafka.watermarks import watermarks
from mm.logs import configure_logging

TOPIC = "restore-bench"
WARMUP_TOPIC = "restore-bench-warmup"


def write_config(path: Path, a: str, b: str, topics: str, store: Path, master: str) -> Path:
    path.write_text(
        "\n".join(
            [
                "clusters = A, B",
                f"A.bootstrap.servers = {a}",
                f"B.bootstrap.servers = {b}",
                "backup.cluster = A",
                f"backup.path = {store}",
                f"backup.topics = {topics}",
                "backup.region = bench",
                f"mm.state.dir = {path.parent / 'state'}",
                f"spark.master = {master}",
            ]
        )
        + "\n"
    )
    return path


def segment_files(store: Path, topic: str, partitions: int) -> dict[int, list[str]]:
    fs = pafs.LocalFileSystem()
    out = {}
    for p in range(partitions):
        _v, catalog = FsCatalogStore(fs).load(PartitionRef(str(store), "bench", topic, p))
        out[p] = [f"{store}/{e.key}" for e in catalog.visible()]
    return out


def baseline(b: str, files: dict[int, list[str]], topic: str) -> float:
    """The plain loop into ``topic`` on B; its seconds."""
    admin = AdminClient({"bootstrap.servers": b})
    admin.create_topics([NewTopic(topic, len(files), 1)])[topic].result(30)
    producer = Producer(
        {
            "bootstrap.servers": b,
            "enable.idempotence": True,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 500_000,
        }
    )
    started = time.perf_counter()
    for p, paths in files.items():
        for path in paths:
            for batch in pq.ParquetFile(path).iter_batches():
                for row in batch.to_pylist():
                    headers = [(h["key"], h["value"]) for h in row["headers"]] or None
                    while True:
                        try:
                            producer.produce(
                                topic,
                                row["value"],
                                row["key"],
                                partition=p,
                                timestamp=max(row["timestamp"], 0),
                                headers=headers,
                            )
                            break
                        except BufferError:
                            producer.poll(0.05)
                producer.poll(0)
    left = producer.flush(120)
    seconds = time.perf_counter() - started
    if left:
        raise SystemExit(f"ERROR: the baseline left {left} records unacknowledged")
    return seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000, help="records (default 1,000,000)")
    ap.add_argument("--partitions", type=int, default=8, help="partitions (default 8)")
    ap.add_argument("--value-bytes", type=int, default=200, help="value bytes (default 200)")
    ap.add_argument("--spark-master", default="local[*]", help="spark.master (default local[*])")
    ap.add_argument("--keep", action="store_true", help="keep the run directory")
    args = ap.parse_args()
    if args.records < args.partitions or args.partitions < 1 or args.value_bytes < 1:
        ap.error("need --partitions >= 1, --records >= --partitions, --value-bytes >= 1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("MM_LOG_LEVEL", "WARNING")
    configure_logging()
    run_dir = Path(tempfile.mkdtemp(prefix="mm-restore-bench-"))
    ok = False
    try:
        with EmbeddedClusters(run_dir / "brokers", jvm_flags=()) as ec:
            started = ec.start(("A", "B"))
            a = os.environ.get("BENCH_A_BOOTSTRAP") or started["A"].bootstrap_servers
            b = os.environ.get("BENCH_B_BOOTSTRAP") or started["B"].bootstrap_servers
            ok = measure(args, a, b, run_dir)
    finally:
        if ok and not args.keep:
            shutil.rmtree(run_dir, ignore_errors=True)
        else:
            print(f"run directory: {run_dir}", file=sys.stderr)
    return 0 if ok else 1


def measure(args: argparse.Namespace, a: str, b: str, run_dir: Path) -> bool:
    from mm.backup.job import run_backup_once
    from mm.restore.job import RestoreOptions, run_restore
    from mm.spark_session import build_spark

    raw = fill(a, TOPIC, args.records, args.partitions, args.value_bytes)
    fill(a, WARMUP_TOPIC, 10 * args.partitions, args.partitions, args.value_bytes)
    store = run_dir / "store"
    cfg = load_config(
        write_config(
            run_dir / "mm.properties", a, b, f"{TOPIC},{WARMUP_TOPIC}", store, args.spark_master
        )
    )
    n = args.records
    t = time.perf_counter()
    spark = build_spark("mm-restore-bench", cfg.spark)
    spark_s = time.perf_counter() - t
    try:
        backed = run_backup_once(cfg, spark_factory=lambda: spark)
        if not backed.ok or backed.totals()["records"] != n + 10 * args.partitions:
            print(f"ERROR: the backup failed or is incomplete: {backed.to_json()}")
            return False
        print(
            f"filled and backed up {n:,} records ({args.value_bytes} B values, keys, 2 headers; "
            f"{raw / 1e6:,.1f} MB raw) in {args.partitions} partitions"
        )
        base_s = baseline(b, segment_files(store, TOPIC, args.partitions), f"plain.{TOPIC}")
        keys = [(f"plain.{TOPIC}", p) for p in range(args.partitions)]
        written = sum(end for _s, end in watermarks({"bootstrap.servers": b}, keys).values())
        if written != n:
            print(f"ERROR: the baseline wrote {written:,} records, expected {n:,}")
            return False
        t = time.perf_counter()
        warm = run_restore(
            cfg,
            RestoreOptions(to="B", topics=WARMUP_TOPIC, topic_prefix="warm."),
            spark_factory=lambda: spark,
        )
        warm_s = time.perf_counter() - t
        if not warm.ok:
            print("ERROR: the warm-up restore failed")
            return False
        t = time.perf_counter()
        report = run_restore(
            cfg,
            RestoreOptions(to="B", topics=TOPIC, topic_prefix="r."),
            spark_factory=lambda: spark,
        )
        restore_s = time.perf_counter() - t
    finally:
        spark.stop()
    restored = sum(r.summary.records for r in report.rows if r.summary)
    if not report.ok or restored != n:
        print(f"ERROR: the restore wrote {restored:,} records, expected {n:,}")
        return False
    startup_s = spark_s + warm_s

    def line(name: str, secs: float) -> str:
        return (
            f"{name:<40} {secs:8.2f} s {n / secs:12,.0f} rec/s {raw / 1e6 / secs:8.1f} MB/s"
            f"   {base_s / secs:5.2f}x"
        )

    print()
    print(f"{'':<40} {'time':>10} {'records/s':>18} {'MB/s':>13}   vs (a)")
    print(line("(a) plain read-Parquet + produce loop", base_s))
    print(line("(b) mm restore, excl. start-up", restore_s))
    print(line("    mm restore, incl. start-up", restore_s + startup_s))
    txns = sum(r.summary.transactions for r in report.rows if r.summary)
    print(
        f"ratio restore/baseline (records/s, excl. start-up): {base_s / restore_s:.2f}; Spark "
        f"start-up and warm-up {startup_s:.1f}s; {len(report.rows)} Spark tasks, {txns} "
        f"transactions, spark.master {args.spark_master}"
    )
    return True


if __name__ == "__main__":
    sys.exit(main())
