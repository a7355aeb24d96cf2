"""Mirror throughput benchmark: `mm mirror --once` against a plain consume/produce loop.

Both run in the same process run, on the same data, between the same two local
clusters (embedded Tansu unless BENCH_A_BOOTSTRAP / BENCH_B_BOOTSTRAP are set):

(a) baseline: one Python process, confluent-kafka, consume A -> produce B
    (same partition, key, value, headers, timestamp), non-transactional;
(b) the mirror: Spark (local[*]) with start-up excluded (the SparkSession and a
    warm-up run over a tiny topic, which starts Spark's Python workers, are timed
    on their own) and included.

Prints records/s, MB/s, the ratio mirror/baseline, and peak RSS of the Spark
driver (JVM + Python driver) and executors (Python workers), sampled from /proc.

    python bench/mirror_bench.py [--records 1000000] [--size 200] [--partitions 4]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mm.config import load_config
from mm.embedded import EmbeddedClusters

TOPIC = "bench"

# The baseline loop's client settings (bench/scale_bench.py uses them too).
BASELINE_CONSUMER: dict[str, object] = {
    "group.id": "bench-baseline",
    "enable.auto.commit": False,
    "enable.partition.eof": True,
    "isolation.level": "read_committed",
    # the same fetch tuning the mirror's tasks use: a fair baseline
    "fetch.max.bytes": 52_428_800,
    "max.partition.fetch.bytes": 10_485_760,
    "queued.min.messages": 200_000,
}
BASELINE_PRODUCER: dict[str, object] = {
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "queue.buffering.max.messages": 500_000,
    "queue.buffering.max.kbytes": 1_048_576,
    "enable.idempotence": True,
}


def fill(bootstrap: str, records: int, size: int, partitions: int, topic: str = TOPIC) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    payload = os.urandom(size // 2).hex().encode()[:size]
    for i in range(records):
        while True:
            try:
                p.produce(topic, payload, str(i).encode(), i % partitions)
                break
            except BufferError:
                p.poll(0.05)
    p.flush(120)


def baseline(a: str, b: str, records: int, partitions: int) -> float:
    """Plain single-process loop; returns seconds."""
    target = "plain-copy"
    admin = AdminClient({"bootstrap.servers": b})
    admin.create_topics([NewTopic(target, partitions, 1)])[target].result(30)
    c = Consumer({"bootstrap.servers": a, **BASELINE_CONSUMER})
    p = Producer({"bootstrap.servers": b, **BASELINE_PRODUCER})
    c.assign([TopicPartition(TOPIC, i, 0) for i in range(partitions)])
    started = time.perf_counter()
    done = 0
    eof: set[int] = set()
    while len(eof) < partitions:
        for m in c.consume(5000, 1.0):
            err, partition = m.error(), m.partition()
            if err is not None and err.code() != KafkaError._PARTITION_EOF:
                raise RuntimeError(str(err))
            assert partition is not None  # a record's, or an end of partition's
            if err is not None:
                eof.add(partition)
                continue
            while True:
                try:
                    p.produce(
                        target,
                        m.value(),
                        m.key(),
                        partition,
                        timestamp=m.timestamp()[1],
                        headers=m.headers(),
                    )
                    break
                except BufferError:
                    p.poll(0.05)
            done += 1
        p.poll(0)
    p.flush(120)
    elapsed = time.perf_counter() - started
    c.close()
    if done != records:
        raise RuntimeError(f"baseline copied {done} records, expected {records}")
    return elapsed


def committed_positions(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """The mirror's committed position (next source offset) per target partition."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "__mm.mirror.A.B"})
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        c.close()


class RssSampler(threading.Thread):
    """Peak RSS of the driver (this process + JVM) and of Python workers, from /proc."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak_driver = 0
        self.peak_workers = 0
        self._stop_evt = threading.Event()

    @staticmethod
    def _children(pid: int) -> list[int]:
        out: list[int] = []
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    out += [int(x) for x in f.read().split()]
        except OSError:
            pass
        return out

    @staticmethod
    def _rss(pid: int) -> int:
        try:
            with open(f"/proc/{pid}/statm") as f:
                return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:
            return 0

    @staticmethod
    def _cmd(pid: int) -> str:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                return f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            return ""

    def run(self) -> None:
        me = os.getpid()
        while not self._stop_evt.wait(0.2):
            driver = self._rss(me)
            workers = 0
            stack = self._children(me)
            while stack:
                pid = stack.pop()
                cmd = self._cmd(pid)
                if "java" in cmd.split(" ")[0]:
                    driver += self._rss(pid)
                elif "pyspark" in cmd or "python" in cmd.split(" ")[0]:
                    workers += self._rss(pid)
                stack += self._children(pid)
            self.peak_driver = max(self.peak_driver, driver)
            self.peak_workers = max(self.peak_workers, workers)

    def stop(self) -> None:
        self._stop_evt.set()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=200)
    ap.add_argument("--partitions", type=int, default=4)
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("MM_LOG_LEVEL", "WARNING")

    with (
        tempfile.TemporaryDirectory(prefix="mm-bench-") as tmp,
        EmbeddedClusters(jvm_flags=()) as ec,
    ):
        a = os.environ.get("BENCH_A_BOOTSTRAP")
        b = os.environ.get("BENCH_B_BOOTSTRAP")
        if not (a and b):
            infos = ec.start(("A", "B"))
            a, b = infos["A"].bootstrap_servers, infos["B"].bootstrap_servers
        t = time.perf_counter()
        fill(a, args.records, args.size, args.partitions)
        fill_s = time.perf_counter() - t
        print(
            f"filled {args.records} x {args.size} B into {args.partitions} partitions "
            f"in {fill_s:.1f}s ({args.records / fill_s:,.0f} rec/s)"
        )

        base_s = baseline(a, b, args.records, args.partitions)

        cfg_path = Path(tmp) / "mm.properties"
        cfg_path.write_text(
            f"clusters = A, B\nA.bootstrap.servers = {a}\nB.bootstrap.servers = {b}\n"
            f"A->B.enabled = true\nA->B.topics = {TOPIC}\nmm.state.dir = {tmp}/state\n"
            "mm.mirror.max.records.per.partition.per.batch = 100000000\n"
        )
        cfg = load_config(cfg_path)
        from mm.source.job import run_mirror
        from mm.spark_session import build_spark

        sampler = RssSampler()
        sampler.start()
        # Start-up: the SparkSession, then a --once run over a tiny warm-up topic, which
        # starts the Python workers and registers the data source, as any long-running
        # mirror has done before it mirrors a backlog.
        t = time.perf_counter()
        build_spark("mm-mirror", cfg.spark)
        fill(a, 100, args.size, args.partitions, topic="warmup")
        warm_path = Path(tmp) / "warmup.properties"
        warm_path.write_text(
            cfg_path.read_text()
            .replace(f"A->B.topics = {TOPIC}", "A->B.topics = warmup")
            .replace(f"mm.state.dir = {tmp}/state", f"mm.state.dir = {tmp}/warm-state")
        )
        run_mirror(load_config(warm_path), once=True, trigger_seconds=1)
        startup_s = time.perf_counter() - t
        t = time.perf_counter()
        stats = run_mirror(load_config(cfg_path), once=True, trigger_seconds=1)
        mirror_s = time.perf_counter() - t
        sampler.stop()
        st = stats["A->B"]
        for d in st.durations:
            print("micro-batch durationMs:", d)
        # completeness from the target itself: the mirror's committed position per
        # partition (next source offset) must be each source partition's end
        positions = committed_positions(b, f"A.{TOPIC}", args.partitions)
        expected = {p: args.records // args.partitions for p in range(args.partitions)}
        for p in range(args.records % args.partitions):
            expected[p] += 1
        if positions != expected:
            print(f"ERROR: target positions {positions}, expected {expected}; stats {st}")
            return 1
        if st.records != args.records:
            # e.g. a failed micro-batch was restarted: its committed part is on the
            # target (checked above) but not in the batch summaries
            print(f"note: batch summaries count {st.records} records; restarts: {st.restarts}")

    mb = args.records * args.size / 1e6

    def line(name: str, secs: float) -> str:
        return (
            f"{name:<34} {secs:8.2f} s {args.records / secs:12,.0f} rec/s "
            f"{mb / secs:8.1f} MB/s   {base_s / secs:5.2f}x"
        )

    print()
    print(f"{'':<34} {'time':>10} {'records/s':>18} {'MB/s':>13}   ratio")
    print(line("(a) plain confluent-kafka loop", base_s))
    print(line("(b) mm mirror --once, excl. start-up", mirror_s))
    print(line("    mm mirror --once, incl. start-up", mirror_s + startup_s))
    print(
        f"Spark start-up {startup_s:.1f}s; peak RSS driver (python + JVM) "
        f"{sampler.peak_driver / 2**20:,.0f} MiB, executors (python workers) "
        f"{sampler.peak_workers / 2**20:,.0f} MiB"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
