"""Mirror at scale: many topics and partitions, the shape most MirrorMaker 2 deployments have.

Each mode starts two embedded Tansu clusters (A, B) on free ports and stops everything
it started at the end, also on Ctrl-C, SIGTERM or an error.

throughput (default): T topics x P partitions (default 24 x 4 = 96 partitions) holding
N records of S bytes in total (default 3,000 x 300 B, spread evenly over the
partitions), then, in the same run:
  (a) baseline: ONE plain confluent-kafka process copying A -> B (consume, produce to
      the same partition with key, value, headers and timestamp), with the client
      settings of bench/mirror_bench.py's baseline and its loop, tuned for a copy
      of a few thousand records over many partitions: metadata fetched before
      assign(), consume() timeout 10 ms, fetch.wait.max.ms 10 (at the defaults
      these waits, not copying, were ~0.9 s of its ~1.05 s at the default shape);
  (b) `mm mirror --once`, Spark start-up excluded exactly as bench/mirror_bench.py
      does it (in this process: the SparkSession and a warm-up --once over a tiny
      topic first, timed on their own);
  (c) a second --once with nothing new: the fixed per-run overhead of a warm mirror;
      the ratio "fixed cost subtracted" is (a) / ((b) - (c)), and the micro-batches'
      own time (Spark's triggerExecution) gives a second, stricter figure;
  (d) `mm mirror --once` with nothing new in a subprocess: what a cron-style run costs
      end to end, JVM start included (--no-cold skips it).
  No figure is printed unless the target is complete: records counted per target
  partition (read_committed) must equal what was written to each source partition,
  for the baseline's copy and the mirror's alike, and the mirror's committed
  positions must be each source partition's end.

latency: continuous `mm mirror` (subprocess, default trigger) on T x P partitions while
a producer writes R records/s for D seconds, each value carrying its produce()
wall-clock time; a consumer on B computes the end-to-end latency of every record
(produce() on A -> readable on B) and prints p50/p90/p99/max and received vs produced.
One record per partition is written before the mirror starts: the time from launching
`mm mirror` to the first (and to the last) of them being readable on B is the Spark
start-up to first record mirrored. The steady producer starts once all of them are
through. Micro-batch timing is read from the mirror's log. --rss samples the mirror
process tree's RSS (mm driver + JVM + Python workers) every --rss-interval seconds
from the first mirrored record on and prints min/max/last, e.g. the 10-minute
memory-flatness run:

    python bench/scale_bench.py latency --duration 600 --rss

MM_BENCH_MIRROR_LOG_LEVEL=DEBUG (with --keep) leaves every range's timing in the
run directory's mirror.log.

Examples:
    python bench/scale_bench.py                            # throughput, 24 x 4, 3,000 x 300 B
    python bench/scale_bench.py latency                    # 24 x 4, 1,000 rec/s for 60 s
    python bench/scale_bench.py latency --topics 250       # 250 x 4 = 1,000 partitions
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from mirror_bench import (
    BASELINE_CONSUMER,
    BASELINE_PRODUCER,
    RssSampler,
    committed_positions,
    fill,
)

from mm.config import load_config
from mm.embedded import EmbeddedClusters, procs
from mm.logs import configure_logging

PREFIX = "scale-"
PLAIN_PREFIX = "plain-copy."
TP = tuple[str, int]


# --- shared helpers ----------------------------------------------------------------------


def topic_names(n: int) -> list[str]:
    return [f"{PREFIX}{i:03d}" for i in range(n)]


def partitions_of(topics: Sequence[str], partitions: int) -> list[TP]:
    return [(t, p) for t in topics for p in range(partitions)]


def create_topics(bootstrap: str, topics: Sequence[str], partitions: int) -> None:
    """Create ``topics`` and wait until the broker shows each with ``partitions``."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(t, partitions, 1) for t in topics], request_timeout=60)
    for fut in futures.values():
        fut.result(60)
    wait_topics(bootstrap, topics, partitions, 60.0)


def wait_topics(
    bootstrap: str,
    topics: Sequence[str],
    partitions: int,
    timeout: float,
    alive: Callable[[], bool] = lambda: True,
) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while True:
        md = admin.list_topics(timeout=30)
        missing = [
            t
            for t in topics
            if t not in md.topics
            or md.topics[t].error is not None
            or len(md.topics[t].partitions) != partitions
        ]
        if not missing:
            return
        if time.monotonic() > deadline or not alive():
            raise RuntimeError(
                f"{len(missing)} topics not on {bootstrap} with {partitions} partitions "
                f"(e.g. {missing[0]})"
            )
        time.sleep(0.2)


def tp_of(m: Any) -> TP:
    return str(m.topic()), int(m.partition())


def spread(records: int, tps: Sequence[TP]) -> dict[TP, int]:
    """Records per partition when record i goes to ``tps[i % len(tps)]``."""
    n = len(tps)
    return {tp: records // n + (1 if i < records % n else 0) for i, tp in enumerate(tps)}


def fill_spread(bootstrap: str, tps: Sequence[TP], records: int, size: int) -> None:
    """``records`` values of ``size`` bytes, round-robin over ``tps`` (record i -> tps[i % n])."""
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    payload = os.urandom(size // 2 + 1).hex().encode()[:size]
    failed: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(str(err))

    for i in range(records):
        topic, partition = tps[i % len(tps)]
        while True:
            try:
                p.produce(topic, payload, str(i).encode(), partition, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.05)
    if p.flush(120) or failed:
        raise RuntimeError(f"fill: {len(failed)} records failed ({failed[:1]})")


def count_per_partition(bootstrap: str, tps: Sequence[TP], timeout: float = 300.0) -> dict[TP, int]:
    """Records a read_committed consumer reads from each partition, to its end."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "scale-bench-count",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )
    counts = dict.fromkeys(tps, 0)
    eof: set[TP] = set()
    deadline = time.monotonic() + timeout
    try:
        c.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in tps])
        while len(eof) < len(tps):
            if time.monotonic() > deadline:
                raise RuntimeError(f"count: {len(tps) - len(eof)} partitions not read to the end")
            for m in c.consume(10_000, 1.0):
                key = tp_of(m)
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        eof.add(key)
                        continue
                    raise RuntimeError(f"count {key}: {err}")
                counts[key] += 1
    finally:
        c.close()
    return counts


def check_counts(
    name: str,
    counts: dict[TP, int],
    expected: dict[TP, int],
    rename: Callable[[str], str],
    exact: bool = True,
) -> list[str]:
    """Mismatches between ``counts`` (target partitions) and ``expected`` (source ones);
    not ``exact``: only counts below the source's (duplicates allowed)."""
    out = []
    for (topic, p), want in expected.items():
        got = counts.get((rename(topic), p))
        if got is None or (got != want if exact else got < want):
            out.append(f"{name}: {rename(topic)}[{p}] has {got} records, source {want}")
    return out


def subprocess_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env["MM_LOG_FORMAT"] = "json"
    # at least INFO: the "mirror starting" and "micro-batch mirrored" events are read
    env["MM_LOG_LEVEL"] = os.environ.get("MM_BENCH_MIRROR_LOG_LEVEL", "INFO")
    return env


def mirror_argv(cfg_path: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "mm", "mirror", "-c", str(cfg_path), *extra]


def spawn_mirror(cfg_path: Path, log_path: Path, *extra: str) -> subprocess.Popen[bytes]:
    """`mm mirror` in its own session (the whole group is killed at the end); it also
    dies with this process (PR_SET_PDEATHSIG; its JVM exits when its driver does)."""
    return procs.spawn(mirror_argv(cfg_path, *extra), log_path=log_path, env=subprocess_env())


def stop_mirror(proc: subprocess.Popen[bytes], grace: float = 30.0) -> int | None:
    """SIGTERM the CLI (it stops its queries), then SIGKILL whatever is left of its group."""
    rc: int | None = None
    try:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        rc = proc.wait(grace)
    except subprocess.TimeoutExpired:
        pass
    finally:
        procs.stop_child(proc, grace=1.0)  # kills the group even if the leader has exited
    return rc


def log_events(path: Path) -> list[dict[str, Any]]:
    """The JSON log events of a `mm mirror` log (other lines skipped)."""
    out: list[dict[str, Any]] = []
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return out
    for line in lines:
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


def event_time(event: dict[str, Any]) -> float | None:
    ts = event.get("timestamp")
    if not isinstance(ts, str):
        return None
    try:
        return datetime.fromisoformat(ts).timestamp()
    except ValueError:
        return None


def mirror_config(
    path: Path, a: str, b: str, topics: str, state_dir: Path, extra: str = ""
) -> Path:
    path.write_text(
        f"clusters = A, B\nA.bootstrap.servers = {a}\nB.bootstrap.servers = {b}\n"
        f"A->B.enabled = true\nA->B.topics = {topics}\nmm.state.dir = {state_dir}\n{extra}"
    )
    return path


def extra_props(args: argparse.Namespace) -> str:
    """The --set KEY=VALUE lines for the mirror's properties file."""
    return "".join(f"{kv}\n" for kv in args.set)


def fmt_s(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds:.2f}s"


# --- throughput --------------------------------------------------------------------------


def plain_copy(a: str, b: str, tps: Sequence[TP]) -> tuple[float, int]:
    """ONE plain process copying every partition A -> B (to ``plain-copy.<topic>``).

    Returns (seconds, records copied). Same loop and client settings as
    bench/mirror_bench.py's baseline, over many partitions."""
    # fetch.wait.max.ms: the loop ends at end-of-partition, which the last partitions
    # report one fetch later; at the default (500 ms) that wait was half the copy
    c = Consumer({"bootstrap.servers": a, **BASELINE_CONSUMER, "fetch.wait.max.ms": 10})
    p = Producer({"bootstrap.servers": b, **BASELINE_PRODUCER})
    failed: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(str(err))

    started = time.perf_counter()
    # metadata first, as the mirror's tasks do: a fetch assigned before the partition
    # leaders are known waits ~0.5 s for them (half the copy time at this size), and
    # the producer learns the target topics once rather than topic by topic
    c.list_topics(timeout=30)
    p.list_topics(timeout=30)
    c.assign([TopicPartition(t, part, 0) for t, part in tps])
    done = 0
    eof: set[TP] = set()
    while len(eof) < len(tps):
        # A batch consume returns when it has 5000 messages or its timeout expired:
        # mirror_bench.py's 1 s timeout would add ~1 s of waiting to a copy of a few
        # thousand records, so the timeout here is short.
        for m in c.consume(5000, 0.01):
            topic, partition = tp_of(m)
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    eof.add((topic, partition))
                    continue
                raise RuntimeError(str(err))
            while True:
                try:
                    p.produce(
                        PLAIN_PREFIX + topic,
                        m.value(),
                        m.key(),
                        partition,
                        timestamp=m.timestamp()[1],
                        headers=m.headers(),
                        on_delivery=on_delivery,
                    )
                    break
                except BufferError:
                    p.poll(0.05)
            done += 1
        p.poll(0)
    left = p.flush(120)
    elapsed = time.perf_counter() - started
    c.close()
    if left or failed:
        raise RuntimeError(f"baseline: {left} records undelivered, {len(failed)} failed")
    return elapsed, done


def cold_once(cfg_path: Path, log_path: Path, timeout: float = 600.0) -> tuple[float, float | None]:
    """`mm mirror --once` in a subprocess: (wall seconds, seconds to its query start)."""
    launched = time.time()
    started = time.perf_counter()
    proc = spawn_mirror(cfg_path, log_path, "--once")
    try:
        rc = proc.wait(timeout)
    finally:
        procs.stop_child(proc, grace=1.0)
    elapsed = time.perf_counter() - started
    if rc != 0:
        raise RuntimeError(
            f"mm mirror --once exited {rc} (log {log_path}):\n{procs.log_tail(log_path)}"
        )
    starts = [event_time(e) for e in log_events(log_path) if e.get("event") == "mirror starting"]
    first = starts[0] if starts and starts[0] is not None else None
    return elapsed, (first - launched if first is not None else None)


def throughput(args: argparse.Namespace, a: str, b: str, run_dir: Path) -> int:
    from mm.source.job import run_mirror
    from mm.spark_session import build_spark

    topics = topic_names(args.topics)
    tps = partitions_of(topics, args.partitions)
    expected = spread(args.records, tps)
    n = len(tps)
    print(
        f"shape: {args.topics} topics x {args.partitions} partitions = {n} partitions; "
        f"{args.records:,} records x {args.size} B in total "
        f"({min(expected.values())}-{max(expected.values())} per partition)"
    )
    create_topics(a, topics, args.partitions)
    create_topics(b, [PLAIN_PREFIX + t for t in topics], args.partitions)
    t = time.perf_counter()
    fill_spread(a, tps, args.records, args.size)
    print(f"filled A in {time.perf_counter() - t:.1f}s")

    base_s, copied = plain_copy(a, b, tps)

    state = run_dir / "state"
    cfg_path = mirror_config(
        run_dir / "mm.properties",
        a,
        b,
        f"{PREFIX}.*",
        state,
        "mm.mirror.max.records.per.partition.per.batch = 100000000\n" + extra_props(args),
    )
    warm_path = mirror_config(
        run_dir / "warmup.properties",
        a,
        b,
        "warmup",
        run_dir / "warm-state",
        "mm.mirror.max.records.per.partition.per.batch = 100000000\n" + extra_props(args),
    )
    cfg = load_config(cfg_path)
    sampler = RssSampler()
    sampler.start()
    # Start-up as bench/mirror_bench.py measures it: the SparkSession, then a --once run
    # over a tiny warm-up topic (starts the Python workers, registers the data source).
    t = time.perf_counter()
    spark = build_spark("mm-mirror", cfg.spark)
    try:
        fill(a, 100, args.size, args.partitions, topic="warmup")
        run_mirror(load_config(warm_path), once=True, trigger_seconds=1)
        startup_s = time.perf_counter() - t

        t = time.perf_counter()
        stats = run_mirror(load_config(cfg_path), once=True, trigger_seconds=1)["A->B"]
        mirror_s = time.perf_counter() - t
        t = time.perf_counter()
        again = run_mirror(load_config(cfg_path), once=True, trigger_seconds=1)["A->B"]
        again_s = time.perf_counter() - t
    finally:
        sampler.stop()
        spark.stop()

    # completeness, from the targets themselves
    errors: list[str] = []
    if copied != args.records:
        errors.append(f"baseline copied {copied} records, expected {args.records}")
    plain_counts = count_per_partition(b, [(PLAIN_PREFIX + t, p) for t, p in tps])
    errors += check_counts("baseline", plain_counts, expected, lambda t: PLAIN_PREFIX + t)
    mirror_counts = count_per_partition(b, [(f"A.{t}", p) for t, p in tps])
    errors += check_counts("mirror", mirror_counts, expected, lambda t: f"A.{t}")
    for topic in topics:
        positions = committed_positions(b, f"A.{topic}", args.partitions)
        for p in range(args.partitions):
            if positions.get(p) != expected[(topic, p)]:
                errors.append(
                    f"mirror: committed position of {topic}[{p}] is {positions.get(p)}, "
                    f"source end {expected[(topic, p)]}"
                )
    if again.records:
        errors.append(f"second --once mirrored {again.records} records, expected none")
    if errors:
        print(f"ERROR: target incomplete or wrong ({len(errors)} problems), no figures:")
        for e in errors[:20]:
            print("  " + e)
        return 1
    print(
        f"completeness: all {n} target partitions hold exactly the source's records "
        f"(baseline and mirror); mirror positions = source ends"
    )
    if stats.records != args.records:
        print(f"note: batch summaries count {stats.records} records; restarts: {stats.restarts}")
    for d in stats.durations:
        print("  --once micro-batch durationMs:", d)
    for d in again.durations:
        print("  second --once (nothing new) durationMs:", d)

    cold: tuple[float, float | None] | None = None
    if not args.no_cold:
        cold = cold_once(cfg_path, run_dir / "cold-once.log")

    mb = args.records * args.size / 1e6

    def line(name: str, secs: float) -> str:
        return (
            f"{name:<40} {secs:8.2f} s {args.records / secs:12,.0f} rec/s "
            f"{mb / secs:8.2f} MB/s   {base_s / secs:6.3f}x"
        )

    print()
    print(f"{'':<40} {'time':>10} {'records/s':>18} {'MB/s':>13}   mirror/plain")
    print(line("(a) plain confluent-kafka process", base_s))
    print(line("(b) mm mirror --once, excl. start-up", mirror_s))
    print(line("    mm mirror --once, incl. start-up", mirror_s + startup_s))
    print(f"{'(c) second --once, nothing new':<40} {again_s:8.2f} s   (fixed per-run overhead)")
    if cold is not None:
        print(
            f"{'(d) --once in a subprocess, nothing new':<40} {cold[0]:8.2f} s   "
            f"(JVM start incl.; {fmt_s(cold[1])} from launch to its query start)"
        )
    # (c) is what every --once pays with nothing to copy (query start, planning, the
    # shard map's round, the query's end); (b) less (c) is the copy's own time
    work_s = mirror_s - again_s
    batches_s = sum(d.get("triggerExecution", 0) for d in stats.durations) / 1000
    print(
        f"fixed cost subtracted: (a) / ((b) - (c)) = {base_s / work_s:.3f}x"
        if work_s > 0
        else "fixed cost subtracted: (b) - (c) <= 0, no ratio"
    )
    if batches_s > 0:
        print(
            f"micro-batches alone (triggerExecution {batches_s:.2f} s): {base_s / batches_s:.3f}x"
        )
    print(
        f"ratio mirror/plain (records/s): {base_s / mirror_s:.3f}; Spark start-up "
        f"(session + warm-up run) {startup_s:.1f}s; peak RSS driver (python + JVM) "
        f"{sampler.peak_driver / 2**20:,.0f} MiB, executors (python workers) "
        f"{sampler.peak_workers / 2**20:,.0f} MiB"
    )
    return 0


# --- latency -----------------------------------------------------------------------------

STAMP = struct.Struct(">qq")  # (sequence number, produce() wall-clock ns); -1 = probe


class StampedWriter:
    """One idempotent producer (acks=all) writing STAMP-ed values to A: (sequence number,
    produce() wall-clock ns), padded to ``size`` bytes; counts what was delivered."""

    def __init__(self, bootstrap: str, size: int, linger_ms: float) -> None:
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "linger.ms": linger_ms,
                "acks": "all",
                "enable.idempotence": True,
            }
        )
        self.pad = b"x" * max(0, size - STAMP.size)
        self.failed: list[str] = []
        self.delivered = 0

    def _on_delivery(self, err: Any, _msg: Any) -> None:
        if err is not None:
            self.failed.append(str(err))
        else:
            self.delivered += 1

    def probes(self, tps: Sequence[TP]) -> None:
        """One probe record (sequence -1) per partition, flushed (not counted)."""
        for topic, p in tps:
            self.producer.produce(topic, STAMP.pack(-1, time.time_ns()) + self.pad, None, p)
        if self.producer.flush(60):
            raise RuntimeError("probe records not delivered")

    def steady(
        self, tps: Sequence[TP], rate: float, total: int, check: Callable[[], None]
    ) -> tuple[float, float]:
        """``total`` records, record i to ``tps[i % n]`` due at start + i / ``rate``, then
        flushed; ``check()`` between sends. Returns (wall-clock start, seconds)."""
        n = len(tps)
        start = time.monotonic()
        produce_started = time.time()
        sent = 0
        while sent < total:
            due = min(total, int((time.monotonic() - start) * rate) + 1)
            while sent < due:
                self._send(tps[sent % n], sent)
                sent += 1
            self.producer.poll(0)
            check()
            time.sleep(max(0.0, start + sent / rate - time.monotonic()))
        self.producer.flush(60)
        return produce_started, time.time() - produce_started

    def _send(self, tp: TP, seq: int) -> None:
        topic, p = tp
        value = STAMP.pack(seq, time.time_ns()) + self.pad
        while True:
            try:
                self.producer.produce(
                    topic, value, str(seq).encode(), p, on_delivery=self._on_delivery
                )
                return
            except BufferError:
                self.producer.poll(0.01)


class Receiver(threading.Thread):
    """Reads every target partition of B from the beginning; latency per record."""

    def __init__(self, bootstrap: str, tps: Sequence[TP], fetch_wait_ms: int) -> None:
        super().__init__(daemon=True, name="receiver")
        self.bootstrap = bootstrap
        self.tps = list(tps)
        self.fetch_wait_ms = fetch_wait_ms
        self.latencies_ms: list[float] = []
        self.seen: set[int] = set()
        self.duplicates = 0
        self.probes = 0
        self.first_probe_at: float | None = None
        self.last_probe_at: float | None = None
        self.error: BaseException | None = None
        self.stop_evt = threading.Event()
        self.alive: Callable[[], bool] = lambda: True
        # MMBENCH_LATENCY_DUMP=FILE: one line per record (produced at, latency ms,
        # topic, partition), to see when in a run the slow records were written
        dump = os.environ.get("MMBENCH_LATENCY_DUMP")
        self.dump = open(dump, "w") if dump else None  # closed with the reader

    def raise_error(self) -> None:
        if self.error is not None:
            raise RuntimeError(f"receiver failed: {self.error!r}")

    def await_probes(
        self, n: int, timeout: float, check: Callable[[], None], where: str = ""
    ) -> None:
        """Until ``n`` probe records were read (``check()`` meanwhile), at most ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while self.probes < n:
            check()
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{self.probes}/{n} probe records on B after {timeout:.0f}s{where}"
                )
            time.sleep(0.05)

    def drain(self, writer: StampedWriter, timeout: float, check: Callable[[], None]) -> None:
        """Until every record ``writer`` delivered to A was read, at most ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while len(self.seen) < writer.delivered and time.monotonic() < deadline:
            check()
            time.sleep(0.1)

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:
            self.error = exc

    def _run(self) -> None:
        targets = sorted({t for t, _ in self.tps})
        parts = 1 + max(p for _, p in self.tps)
        # the mirror creates the target topics when it starts
        while not self.stop_evt.is_set():
            try:
                wait_topics(self.bootstrap, targets, parts, 2.0, self.alive)
                break
            except RuntimeError:
                if not self.alive():
                    raise
        c = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "scale-bench-latency",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "fetch.wait.max.ms": self.fetch_wait_ms,
            }
        )
        try:
            c.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in self.tps])
            while not self.stop_evt.is_set():
                # poll(), not consume(n, timeout): a batch consume waits for n records
                # or the timeout, which would add up to the timeout to every latency
                m = c.poll(0.1)
                if m is None:
                    continue
                now_ns = time.time_ns()
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise RuntimeError(f"receiver: {err}")
                value = m.value()
                if value is None:
                    raise RuntimeError("receiver: a record without a value")
                seq, produced_ns = STAMP.unpack_from(value)
                if seq < 0:
                    self.probes += 1
                    self.first_probe_at = self.first_probe_at or now_ns / 1e9
                    self.last_probe_at = now_ns / 1e9
                elif seq in self.seen:
                    self.duplicates += 1
                else:
                    self.seen.add(seq)
                    self.latencies_ms.append((now_ns - produced_ns) / 1e6)
                    if self.dump is not None:
                        self.dump.write(
                            f"{produced_ns / 1e9:.3f} {(now_ns - produced_ns) / 1e6:.1f} "
                            f"{m.topic()} {m.partition()}\n"
                        )
        finally:
            c.close()
            if self.dump is not None:
                self.dump.close()


class TreeRss(threading.Thread):
    """RSS of a process and all its descendants every ``interval`` s (total, JVM part)."""

    def __init__(self, root: int, interval: float) -> None:
        super().__init__(daemon=True, name="rss")
        self.root = root
        self.interval = interval
        self.samples: list[tuple[int, int]] = []
        self._stop_evt = threading.Event()

    def sample(self) -> tuple[int, int]:
        total = jvm = 0
        stack = [self.root]
        while stack:
            pid = stack.pop()
            rss = RssSampler._rss(pid)
            total += rss
            if "java" in RssSampler._cmd(pid).split(" ")[0]:
                jvm += rss
            stack += RssSampler._children(pid)
        return total, jvm

    def run(self) -> None:
        while True:
            total, jvm = self.sample()
            if total:
                self.samples.append((total, jvm))
            if self._stop_evt.wait(self.interval):
                return

    def stop(self) -> None:
        self._stop_evt.set()


def percentile(ordered: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of sorted values."""
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[min(len(ordered), int(rank)) - 1]


def latency(args: argparse.Namespace, a: str, b: str, run_dir: Path) -> int:
    topics = topic_names(args.topics)
    tps = partitions_of(topics, args.partitions)
    n = len(tps)
    total = int(args.rate * args.duration)
    print(
        f"shape: {args.topics} topics x {args.partitions} partitions = {n} partitions; "
        f"{args.rate:,.0f} records/s x {args.size} B for {args.duration:.0f}s "
        f"({total:,} records, producer linger.ms {args.linger_ms:g}), mirror trigger: its default"
    )
    create_topics(a, topics, args.partitions)
    writer = StampedWriter(a, args.size, args.linger_ms)
    writer.probes(tps)  # one probe record per partition, written before the mirror starts

    cfg_path = mirror_config(
        run_dir / "mm.properties", a, b, f"{PREFIX}.*", run_dir / "state", extra_props(args)
    )
    log_path = run_dir / "mirror.log"
    receiver = Receiver(b, [(f"A.{t}", p) for t, p in tps], args.fetch_wait_ms)
    launched = time.time()
    mirror = spawn_mirror(cfg_path, log_path)
    rss: TreeRss | None = None
    rc: int | None = None
    try:

        def alive() -> bool:
            return mirror.poll() is None

        def check() -> None:
            receiver.raise_error()
            if not alive():
                raise RuntimeError(
                    f"mm mirror exited {mirror.returncode} (log {log_path}):\n"
                    f"{procs.log_tail(log_path)}"
                )

        receiver.alive = alive
        receiver.start()
        receiver.await_probes(n, args.startup_timeout, check, f" (log {log_path})")
        if args.rss:
            rss = TreeRss(mirror.pid, args.rss_interval)
            rss.start()
        produce_started, produce_s = writer.steady(tps, args.rate, total, check)
        receiver.drain(writer, args.drain_timeout, check)
    finally:
        receiver.stop_evt.set()
        if rss is not None:
            rss.stop()
        rc = stop_mirror(mirror)
        receiver.join(10)

    # the mirror's own account of its micro-batches
    delivered = writer.delivered
    events = log_events(log_path)
    starting = [event_time(e) for e in events if e.get("event") == "mirror starting"]
    batches = [e for e in events if e.get("event") == "micro-batch mirrored"]
    steady = [
        e for e in batches if (event_time(e) or 0) >= produce_started and e.get("records", 0) > 0
    ]
    problems = [e for e in events if e.get("level") in ("error", "critical")]

    lat = sorted(receiver.latencies_ms)
    received = len(receiver.seen)
    missing = delivered - received
    query_start = starting[0] - launched if starting and starting[0] is not None else None
    first = receiver.first_probe_at - launched if receiver.first_probe_at else None
    last = receiver.last_probe_at - launched if receiver.last_probe_at else None
    print()
    print(
        f"start-up: mm mirror launched -> query started (log) {fmt_s(query_start)} -> "
        f"first record readable on B {fmt_s(first)} -> all {n} probe records {fmt_s(last)}"
    )
    print(
        f"produced {delivered:,} in {produce_s:.1f}s ({delivered / produce_s:,.0f}/s; "
        f"{len(writer.failed)} failed), received {received:,} (missing {missing:,}, "
        f"duplicates {receiver.duplicates:,})"
    )
    if lat:
        print(
            "end-to-end latency (produce() on A -> readable on B), ms: "
            f"p50 {percentile(lat, 50):,.0f}  p90 {percentile(lat, 90):,.0f}  "
            f"p99 {percentile(lat, 99):,.0f}  max {lat[-1]:,.0f}  min {lat[0]:,.0f}  "
            f"(n={len(lat):,}; consumer fetch.wait.max.ms={args.fetch_wait_ms})"
        )
    if steady:
        times = [event_time(e) or 0.0 for e in steady]
        gaps = sorted(y - x for x, y in itertools.pairwise(times))
        handling = sorted(float(e.get("seconds", 0.0)) for e in steady)
        recs = sorted(int(e.get("records", 0)) for e in steady)
        print(
            f"mirror log: {len(batches)} micro-batches in all, {len(steady)} with records "
            f"during the produce phase; median interval "
            f"{fmt_s(gaps[len(gaps) // 2] if gaps else None)}, median records/batch "
            f"{recs[len(recs) // 2]:,}, foreachBatch handling median "
            f"{handling[len(handling) // 2]:.3f}s max {handling[-1]:.3f}s"
        )
    if problems:
        print(f"mirror log: {len(problems)} error events, first: {problems[0]}")
    if rss is not None and rss.samples:
        totals = [s[0] / 2**20 for s in rss.samples]
        print(
            f"mirror process tree RSS ({len(totals)} samples every {args.rss_interval:g}s from "
            f"the first mirrored record): min {min(totals):,.0f} MiB, max {max(totals):,.0f} MiB, "
            f"first {totals[0]:,.0f} MiB, last {totals[-1]:,.0f} MiB "
            f"(JVM last {rss.samples[-1][1] / 2**20:,.0f} MiB)"
        )
    print(f"mirror exit code after SIGTERM: {rc if rc is not None else 'killed'}")
    if missing or writer.failed or not lat:
        print(f"ERROR: {missing:,} records produced on A never became readable on B")
        return 1
    return 0


# --- main --------------------------------------------------------------------------------


def _terminate(_signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt  # run the clean-up paths, as Ctrl-C does


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "mode",
        nargs="?",
        choices=("throughput", "latency"),
        default="throughput",
        help="what to measure (default throughput)",
    )
    ap.add_argument("--topics", type=int, default=24, help="source topics (default 24)")
    ap.add_argument("--partitions", type=int, default=4, help="partitions per topic (default 4)")
    ap.add_argument("--size", type=int, default=300, help="value bytes (default 300)")
    g = ap.add_argument_group("throughput")
    g.add_argument(
        "--records",
        type=int,
        default=3000,
        help="records in total, spread evenly over all partitions (default 3000)",
    )
    g.add_argument(
        "--no-cold",
        action="store_true",
        help="skip (d), the subprocess `mm mirror --once` with nothing new",
    )
    g = ap.add_argument_group("latency")
    g.add_argument("--rate", type=float, default=1000.0, help="records/s produced (default 1000)")
    g.add_argument(
        "--duration", type=float, default=60.0, help="seconds of production (default 60)"
    )
    g.add_argument(
        "--drain-timeout",
        type=float,
        default=60.0,
        help="seconds to wait for the last records on B (default 60)",
    )
    g.add_argument(
        "--startup-timeout",
        type=float,
        default=300.0,
        help="seconds allowed for the first micro-batch to mirror every partition (default 300)",
    )
    g.add_argument(
        "--fetch-wait-ms",
        type=int,
        default=10,
        help="the B consumer's fetch.wait.max.ms, the measurement's resolution (default 10)",
    )
    g.add_argument(
        "--linger-ms",
        type=float,
        default=1.0,
        help="the workload producer's linger.ms (default 1, as in earlier figures; at 1 it "
        "sends ~900 produce requests/s for 1,000 records/s at 96 partitions, a large part "
        "of the source broker's load on 2 cores; librdkafka's own default is 5)",
    )
    g.add_argument("--rss", action="store_true", help="sample the mirror process tree's RSS")
    g.add_argument("--rss-interval", type=float, default=5.0, help="seconds between samples")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an extra line for the mirror's properties file (repeatable), "
        "e.g. --set mm.mirror.pool.max.clients=900",
    )
    ap.add_argument(
        "--keep", action="store_true", help="keep the run directory (configs, logs, state)"
    )
    args = ap.parse_args()
    if args.topics < 1 or args.partitions < 1 or args.size < STAMP.size:
        ap.error(f"need --topics >= 1, --partitions >= 1, --size >= {STAMP.size}")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("MM_LOG_LEVEL", "WARNING")
    configure_logging()  # the in-process mirror's events (throughput mode) at that level
    signal.signal(signal.SIGTERM, _terminate)

    run_dir = Path(tempfile.mkdtemp(prefix="mm-scale-bench-"))
    ok = False
    try:
        with EmbeddedClusters(run_dir / "brokers", jvm_flags=()) as ec:
            infos = ec.start(("A", "B"))
            a, b = infos["A"].bootstrap_servers, infos["B"].bootstrap_servers
            if args.mode == "throughput":
                rc = throughput(args, a, b, run_dir)
            else:
                rc = latency(args, a, b, run_dir)
            ok = rc == 0
            return rc
    except KeyboardInterrupt:
        print("interrupted; everything started was stopped", file=sys.stderr)
        return 130
    finally:
        if ok and not args.keep:
            shutil.rmtree(run_dir, ignore_errors=True)
        else:
            print(f"run directory (configs, logs, state): {run_dir}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
