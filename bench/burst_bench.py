"""A warm burst: how fast `mm run` and MirrorMaker 2 move it, on Apache Kafka.

A mirror that is already running (warm) gets a sudden burst of records: how long
until the target holds all of it? One-node Apache Kafka 4.3.1 clusters from the
jars ``./dev`` fetches (``MM_KAFKA_JARS``): A (source), B (mm's target), C
(MirrorMaker 2's target) and, with ``--mm2-alo``, D (MM2 at least once's target),
so no mirror sees another's topics. Each mirror gets its own fresh source topics
on A (``<mirror>-burst-NNN``, ``--topics`` x ``--partitions``) and a topic filter
selecting only those, and runs alone on the machine, one after the other:
``mm run`` (exactly once, its defaults), MirrorMaker 2 in dedicated mode with
``exactly.once.source.support = enabled`` (``tasks.max`` = ``--tasks``) and,
with ``--mm2-alo``, MirrorMaker 2 at least once (the same without exactly once).
For each:

1. warm: ``--warmup`` records per partition are written to A, the mirror is
   started and every one of them is awaited on the target;
2. burst: one confluent-kafka producer (linger 5 ms, big batches, idempotent)
   writes ``--records`` values of ``--size`` bytes round-robin over the
   partitions as fast as it can; t0 is taken just before its first produce();
3. measured: from t0 until the target holds, on every partition, every record
   A holds; then the mirror is stopped.

The target is watched by a read_committed consumer that reads every target
partition from the beginning and counts its records, in a thread, polling every
0.2 s; the time is taken when the last partition's count reaches A's. Counting
is exact where end offsets are not: on the target, transactional commit markers
take offsets too, so an end offset (watermark or last stable offset) is larger
than the number of records and is not comparable with A's. A is written by a
plain idempotent producer, so its end offsets are its record counts, and they
are checked against what was written. No figure is printed unless, at that time,
every target partition's count equals its source partition's (a duplicate makes
it unequal) and A holds exactly what was written.

    MM_KAFKA_JARS=~/.cache/mm/kafka-4.3.1 python bench/burst_bench.py \\
        [--topics 24] [--partitions 4] [--records 288000] [--size 300] [--tasks 4] [--mm2-alo]

(``./dev test`` fills that cache once.) Prints, per mirror, the seconds from t0
to all records on the target, records/s (burst records over those seconds) and
the producer's own time, and how many times faster mm is than MirrorMaker 2.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from mirror_bench import BASELINE_PRODUCER
from scale_bench import (
    TP,
    check_counts,
    create_topics,
    fill_spread,
    partitions_of,
    spread,
    stop_mirror,
    subprocess_env,
    tp_of,
    wait_topics,
)
from startup_bench import KRaftBroker, MirrorMaker2, ends, write_properties

from mm.embedded import procs

LABELS = {  # the mirrors, in the order they run; each has its own target (B, C, D)
    "mm": "mm run",
    "mm2eos": "MM2 exactly once (tasks.max={tasks})",
    "mm2alo": "MM2 at least once (tasks.max={tasks})",
}


class MmRun:
    """`mm run` (all its jobs, as an operator starts it) for flow A->B, in its own session."""

    def __init__(self, workdir: Path, a: str, b: str, topics: str) -> None:
        props = {
            "clusters": "A, B",
            "A.bootstrap.servers": a,
            "B.bootstrap.servers": b,
            "A->B.enabled": "true",
            "A->B.topics": topics,
            "replication.factor": 1,
            "checkpoints.topic.replication.factor": 1,
            "heartbeats.topic.replication.factor": 1,
            "offset-syncs.topic.replication.factor": 1,
            "mm.state.dir": workdir / "mm-state",
        }
        config = write_properties(workdir / "mm.properties", props)
        self.log = workdir / "mm-run.log"
        argv = [sys.executable, "-m", "mm", "run", "-c", str(config)]
        self.proc = procs.spawn(argv, log_path=self.log, env=subprocess_env())

    def alive(self) -> bool:
        return self.proc.poll() is None

    def describe(self) -> str:
        lines = self.log.read_text(errors="replace").splitlines() if self.log.exists() else []
        return f"mm run (exit {self.proc.poll()}), {self.log}:\n" + "\n".join(lines[-20:])

    def stop(self) -> None:
        stop_mirror(self.proc, 60.0)  # SIGTERM to mm only, then whatever is left of its group


Mirror: TypeAlias = MmRun | MirrorMaker2


class Counter:
    """Counts, in a thread, the records a read_committed consumer reads from ``tps``
    (from the beginning); :attr:`reached` is set, and :attr:`done_at` taken, once
    every partition's count is at least the goal given to :meth:`expect`."""

    def __init__(self, bootstrap: str, tps: Sequence[TP]) -> None:
        self.bootstrap, self.tps = bootstrap, list(tps)
        self.counts: dict[TP, int] = dict.fromkeys(tps, 0)
        self.goal: dict[TP, int] = {}
        self.short: set[TP] = set()
        self.done_at: float | None = None
        self.error: str | None = None
        self.reached, self.stopping = threading.Event(), threading.Event()
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def expect(self, goal: dict[TP, int]) -> None:
        with self.lock:
            self.goal, self.done_at = goal, None
            self.short = {tp for tp, n in goal.items() if self.counts[tp] < n}
            self.reached.clear()
            self._check()

    def _check(self) -> None:
        if self.goal and not self.short and not self.reached.is_set():
            self.done_at = time.monotonic()
            self.reached.set()

    def _run(self) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "burst-bench-count",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "fetch.wait.max.ms": 100,
            }
        )
        try:
            consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in self.tps])
            while not self.stopping.is_set():
                msgs = consumer.consume(10_000, 0.2)
                with self.lock:
                    for m in msgs:
                        if m.error() is not None:
                            self.error = str(m.error())
                            continue
                        tp = tp_of(m)
                        self.counts[tp] += 1
                        if tp in self.short and self.counts[tp] >= self.goal[tp]:
                            self.short.discard(tp)
                    self._check()
        finally:
            consumer.close()

    def wait(self, mirror: Mirror, limit: float, what: str) -> None:
        deadline = time.monotonic() + limit
        while not self.reached.wait(0.5):
            if not mirror.alive():
                raise RuntimeError(f"{what}: the mirror exited\n{mirror.describe()}")
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{what}: {len(self.short)} target partitions short after {limit:.0f} s "
                    f"(last consumer error: {self.error})"
                )

    def close(self) -> None:
        self.stopping.set()
        self.thread.join(30)


def burst(bootstrap: str, tps: Sequence[TP], records: int, size: int) -> tuple[float, float]:
    """``records`` values round-robin over ``tps`` as fast as one producer can:
    (t0 just before the first produce(), the time flush() returned)."""
    producer = Producer({"bootstrap.servers": bootstrap, **BASELINE_PRODUCER})
    payload = os.urandom(size // 2 + 1).hex().encode()[:size]
    failed: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(str(err))

    n = len(tps)
    t0 = time.monotonic()
    for i in range(records):
        topic, partition = tps[i % n]
        while True:
            try:
                producer.produce(topic, payload, partition=partition, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
    left = producer.flush(300)
    flushed = time.monotonic()
    if left or failed:
        raise RuntimeError(f"burst: {left} records undelivered, {len(failed)} failed {failed[:1]}")
    return t0, flushed


def start(key: str, root: Path, a: str, target: str, topics: str, tasks: int) -> Mirror:
    if key == "mm":
        return MmRun(root, a, target, topics)
    return MirrorMaker2(
        root / key, a, target, topics=topics, groups="none", tasks_max=tasks,
        exactly_once=key == "mm2eos",
    )  # fmt: skip


@dataclass
class Burst:
    """A warm burst's figures: seconds from t0 to all on the target, the producer's own
    seconds, and the target's counts with what it should hold (per source partition)."""

    seconds: float
    produce: float
    counts: dict[TP, int]
    expected: dict[TP, int]


def warm_burst(
    counter: Counter,
    mirror: Mirror,
    a: str,
    tps: Sequence[TP],
    warm: dict[TP, int],
    sizes: tuple[int, int],
    limit: float,
) -> Burst:
    """Await ``warm`` records per source partition of ``tps`` on the target (``A.<topic>``),
    then burst ``sizes`` = (records, value bytes) to A and await all of it."""
    counter.expect({(f"A.{t}", p): n for (t, p), n in warm.items()})
    counter.wait(mirror, limit, "warm-up")
    expected = {tp: warm[tp] + n for tp, n in spread(sizes[0], tps).items()}
    counter.expect({(f"A.{t}", p): n for (t, p), n in expected.items()})
    t0, flushed = burst(a, tps, *sizes)
    counter.wait(mirror, limit, "burst")
    with counter.lock:
        done_at, counts = counter.done_at, dict(counter.counts)
    if done_at is None:
        raise RuntimeError("burst: incomplete (no completion time)")
    return Burst(done_at - t0, flushed - t0, counts, expected)


def check_burst(a: str, topics: Sequence[str], partitions: int, got: Burst, exact: bool) -> None:
    """Raise unless A holds exactly ``got.expected`` and the target (``A.<topic>``) holds
    it too (``exact``) or at least it (duplicates allowed)."""
    on_a = {(t, p): n for t in topics for p, n in ends(a, t, partitions).items()}
    wrong = check_counts("target", got.counts, got.expected, lambda t: f"A.{t}", exact)
    wrong += check_counts("A", on_a, got.expected, lambda t: t)
    if wrong:
        raise RuntimeError(f"incomplete ({len(wrong)} partitions wrong): {wrong[:3]}")


def run_one(
    key: str, root: Path, a: str, target: str, args: argparse.Namespace
) -> dict[str, float]:
    """Warm the mirror on its own topics, burst, measure (module docstring); stop it."""
    topics = [f"{key}-burst-{i:03d}" for i in range(args.topics)]
    tps = partitions_of(topics, args.partitions)
    create_topics(a, topics, args.partitions)
    fill_spread(a, tps, args.warmup * len(tps), args.size)
    renamed = [f"A.{t}" for t in topics]
    mirror = start(key, root, a, target, f"{key}-burst-.*", args.tasks)
    counter: Counter | None = None
    try:
        wait_topics(target, renamed, args.partitions, args.limit, mirror.alive)
        counter = Counter(target, partitions_of(renamed, args.partitions))
        warm = dict.fromkeys(tps, args.warmup)
        got = warm_burst(counter, mirror, a, tps, warm, (args.records, args.size), args.limit)
    finally:
        if counter is not None:
            counter.close()
        mirror.stop()
    check_burst(a, topics, args.partitions, got, exact=True)
    return {"seconds": got.seconds, "produce": got.produce}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=24)
    parser.add_argument("--partitions", type=int, default=4, help="per topic")
    parser.add_argument("--records", type=int, default=288_000, help="records of the burst")
    parser.add_argument("--size", type=int, default=300, help="value bytes")
    parser.add_argument("--warmup", type=int, default=3, help="warm-up records per partition")
    parser.add_argument("--tasks", type=int, default=4, help="MM2 tasks.max")
    parser.add_argument("--mm2-alo", action="store_true", help="also MM2 at least once")
    parser.add_argument("--limit", type=float, default=600.0, help="seconds per phase, at most")
    parser.add_argument("--keep", action="store_true", help="keep the brokers' data and logs")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="mm-burst-bench-"))
    names = ("A", "B", "C", "D") if args.mm2_alo else ("A", "B", "C")
    brokers: dict[str, KRaftBroker] = {}
    try:
        for n in names:
            brokers[n] = KRaftBroker(root / n, wait=False)
        for broker in brokers.values():
            broker.wait_ready()
        a = brokers["A"].bootstrap
        mirrors = ["mm", "mm2eos", "mm2alo"] if args.mm2_alo else ["mm", "mm2eos"]
        print(
            f"burst: {args.records:,} records of {args.size} B over {args.topics} topics x "
            f"{args.partitions} partitions, after {args.warmup} warm-up records per partition",
            flush=True,
        )
        results: dict[str, dict[str, float] | str] = {}
        for key, cluster in zip(mirrors, "BCD", strict=False):
            label = LABELS[key].format(tasks=args.tasks)
            try:
                results[label] = run_one(key, root, a, brokers[cluster].bootstrap, args)
            except RuntimeError as exc:
                results[label] = str(exc)
                print(f"{label}: {exc}", file=sys.stderr, flush=True)
        print(f"{'':<34}{'t0 to all on target':>21}{'records/s':>12}{'producer':>10}")
        for label, got in results.items():
            if isinstance(got, str):
                print(f"{label:<34}{'n/a (' + got.splitlines()[0][:40] + ')':>43}")
                continue
            rate = args.records / got["seconds"]
            print(f"{label:<34}{got['seconds']:>19.2f} s{rate:>12,.0f}{got['produce']:>8.2f} s")
        ours = results["mm run"]
        for label, got in list(results.items())[1:]:
            if isinstance(ours, dict) and isinstance(got, dict):
                print(f"mm / {label}: {got['seconds'] / ours['seconds']:.2f}x as fast")
        if args.keep:
            print(f"(logs and data: {root})")
    finally:
        for broker in brokers.values():
            broker.stop()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
