"""mm against its peers: MirrorMaker 2 at least once and exactly once, on Apache Kafka.

Each contestant mirrors the same shape, one after the other and never at once: a
one-node Apache Kafka 4.3.1 cluster A (the source, from the jars ``./dev``
fetches: ``MM_KAFKA_JARS``) for all of them, and for each its own fresh source
topics on A (``<key>-peer-NNN``, ``--topics`` x ``--partitions``, a topic filter
selecting only those) and its own fresh target cluster, stopped with it, so none
sees another's topics. The contestants, in the order they run:

- MM2 at-least-once: MirrorMaker 2 in dedicated mode, ``tasks.max`` = ``--tasks``;
- MM2 exactly-once: the same with ``exactly.once.source.support = enabled``
  (bench/burst_bench.py's two MirrorMaker 2 set-ups);
- mm (exactly once): ``mm run`` with its defaults (all its jobs).

For each:

1. start to first records mirrored: one stamped probe record per partition is
   written to A, then the mirror is launched; the seconds from the launch until
   the first of them, and until the last (all partitions), is readable on the
   target;
2. latency at a steady rate: one producer writes ``--rate`` records/s for
   ``--seconds`` s round-robin over the partitions, each value carrying its
   produce() wall-clock time; a read_committed consumer thread on the target
   takes, for every record, the time it became readable minus that time
   (bench/scale_bench.py's latency measurement): p50 / p99 / max;
3. a warm burst: with every steady record on the target, ``--burst`` records
   written as fast as one producer can; the seconds from just before its first
   produce() until the target holds, on every partition, what A holds
   (bench/burst_bench.py's measurement);
4. memory: the RSS of the mirror's whole process tree (MM2's JVM; ``mm run``
   with its JVMs and Python workers), sampled every ``--rss-interval`` s from the
   launch to the stop: its maximum, and its value when the steady phase began
   and ended (``--seconds 600`` at 1,000 partitions is the "memory flat over 10
   minutes" run).

No figure is printed for a contestant unless its run was valid, counted, not
guessed: A holds exactly what was written; every steady record was read on the
target; a read_committed count of every target partition (from the beginning,
after the burst) equals its source partition's for the exactly-once contestants
and no steady record was read twice there, and is at least it for MM2 at least
once (its extra copies are then reported).

    MM_KAFKA_JARS=~/.cache/mm/kafka-4.3.1 .venv/bin/python bench/peer_bench.py \\
        [--topics 24] [--partitions 4] [--rate 1000] [--seconds 60] [--burst 288000] \\
        [--only mm,mm2-eos,mm2-alo]

The default is 24 topics x 4 partitions = 96 partitions at 1,000 records/s;
``--topics 250 --rate 2000`` is the 1,000-partition shape. Prints a Markdown
table, a column per contestant.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from burst_bench import Burst, Counter, Mirror, check_burst, start, warm_burst
from confluent_kafka import KafkaException
from scale_bench import (
    STAMP,
    Receiver,
    StampedWriter,
    TreeRss,
    create_topics,
    partitions_of,
    percentile,
    spread,
)
from startup_bench import KRaftBroker

CONTESTANTS = {  # --only name: (burst_bench's key, column, exactly once); the order they run
    "mm2-alo": ("mm2alo", "MM2 at-least-once", False),
    "mm2-eos": ("mm2eos", "MM2 exactly-once", True),
    "mm": ("mm", "mm (exactly once)", True),
}
MIB = 2**20


@dataclass
class Figures:
    """A valid run's figures."""

    latencies: list[float]  # ms, sorted: one a steady record
    first: float  # s from the launch to the first probe record on the target
    every: float  # ... to the last one (every partition)
    burst: float  # s from the burst's t0 to all of it on the target
    rss: list[int]  # the process tree's RSS samples, bytes
    steady: tuple[int, int]  # the samples' indexes when the steady phase began, ended
    duplicates: int  # extra copies on the target (MM2 at least once only)


class Contestant:
    """One mirror on its own topics of A and its own target cluster (module docstring)."""

    def __init__(self, name: str, root: Path, a: str, args: argparse.Namespace) -> None:
        self.key, self.label, self.exact = CONTESTANTS[name]
        self.dir = root / name
        self.dir.mkdir(parents=True)
        self.a, self.args = a, args
        self.topics = [f"{self.key}-peer-{i:03d}" for i in range(args.topics)]
        self.tps = partitions_of(self.topics, args.partitions)
        self.renamed = [(f"A.{t}", p) for t, p in self.tps]
        self.total = int(args.rate * args.seconds)

    def run(self) -> Figures:
        create_topics(self.a, self.topics, self.args.partitions)
        writer = StampedWriter(self.a, self.args.size, self.args.linger_ms)
        writer.probes(self.tps)
        target = KRaftBroker(self.dir / "target")
        try:
            return self.measure(target.bootstrap, writer)
        finally:
            target.stop()

    def measure(self, target: str, writer: StampedWriter) -> Figures:
        receiver = Receiver(target, self.renamed, self.args.fetch_wait_ms)
        launched = time.time()
        mirror = start(self.key, self.dir, self.a, target, f"{self.key}-peer-.*", self.args.tasks)
        assert mirror.proc is not None
        rss = TreeRss(mirror.proc.pid, self.args.rss_interval)
        rss.start()
        counter: Counter | None = None
        try:
            steady = self.steady(receiver, mirror, writer, rss)
            receiver.stop_evt.set()
            receiver.join(10)
            counter = Counter(target, self.renamed)
            warm = {tp: 1 + n for tp, n in spread(self.total, self.tps).items()}
            sizes = (self.args.burst, self.args.size)
            got = warm_burst(counter, mirror, self.a, self.tps, warm, sizes, self.args.limit)
        finally:
            receiver.stop_evt.set()
            if counter is not None:
                counter.close()
            mirror.stop()
            rss.stop()
        receiver.join(10)
        return self.figures(receiver, writer, launched, got, [s[0] for s in rss.samples], steady)

    def steady(
        self, receiver: Receiver, mirror: Mirror, writer: StampedWriter, rss: TreeRss
    ) -> tuple[int, int]:
        """Await the probe records, then the steady phase and every record of it on the
        target; the RSS samples' indexes when it began and ended."""

        def check() -> None:
            receiver.raise_error()
            if not mirror.alive():
                raise RuntimeError(f"the mirror exited\n{mirror.describe()}")

        receiver.alive = mirror.alive
        receiver.start()
        receiver.await_probes(len(self.tps), self.args.startup_timeout, check)
        begin = len(rss.samples)
        writer.steady(self.tps, self.args.rate, self.total, check)
        receiver.drain(writer, self.args.drain_timeout, check)
        return begin, len(rss.samples)

    def figures(
        self,
        receiver: Receiver,
        writer: StampedWriter,
        launched: float,
        got: Burst,
        rss: list[int],
        steady: tuple[int, int],
    ) -> Figures:
        """The figures, once the run is checked valid (module docstring), else raise."""
        check_burst(self.a, self.topics, self.args.partitions, got, self.exact)
        if writer.failed or writer.delivered != self.total:
            raise RuntimeError(
                f"steady: {writer.delivered:,} of {self.total:,} records written to A "
                f"({len(writer.failed)} failed: {writer.failed[:1]})"
            )
        missing = writer.delivered - len(receiver.seen)
        if missing:
            raise RuntimeError(f"steady: {missing:,} records never readable on the target")
        if self.exact and receiver.duplicates:
            raise RuntimeError(f"steady: {receiver.duplicates:,} records read twice on the target")
        if not (receiver.first_probe_at and receiver.last_probe_at and rss):
            raise RuntimeError("no start-up time or no RSS sample")
        return Figures(
            latencies=sorted(receiver.latencies_ms),
            first=receiver.first_probe_at - launched,
            every=receiver.last_probe_at - launched,
            burst=got.seconds,
            rss=rss,
            steady=steady,
            duplicates=sum(got.counts.values()) - sum(got.expected.values()),
        )


def rows(args: argparse.Namespace) -> list[str]:
    return [
        "p50 / p99 / max latency",
        "start to first records mirrored (all partitions)",
        f"warm burst ({args.burst:,} records) seconds",
        "mirror RSS max (process tree)",
        "RSS when the steady phase began -> ended",
        "records on the target",
    ]


def cells(f: Figures) -> list[str]:
    lat, rss = f.latencies, f.rss
    begin, end = min(f.steady[0], len(rss) - 1), max(0, f.steady[1] - 1)
    return [
        f"{percentile(lat, 50):,.0f} / {percentile(lat, 99):,.0f} / {lat[-1]:,.0f} ms",
        f"{f.first:.1f} s ({f.every:.1f} s)",
        f"{f.burst:.2f} s",
        f"{max(rss) / MIB:,.0f} MiB",
        f"{rss[begin] / MIB:,.0f} -> {rss[end] / MIB:,.0f} MiB",
        "each once" if f.duplicates == 0 else f"{f.duplicates:,} extra copies",
    ]


def table(results: dict[str, Figures | str], args: argparse.Namespace) -> None:
    labels = [CONTESTANTS[name][1] for name in results]
    columns = [cells(r) if isinstance(r, Figures) else ["no figure"] * 6 for r in results.values()]
    print("\n| | " + " | ".join(labels) + " |")
    print("|---" * (len(labels) + 1) + "|")
    for i, row in enumerate(rows(args)):
        print(f"| {row} | " + " | ".join(c[i] for c in columns) + " |")
    for name, r in results.items():
        if isinstance(r, str):
            print(f"{CONTESTANTS[name][1]}: no figure: {first_line(r)}")


def contest(root: Path, args: argparse.Namespace) -> dict[str, Figures | str]:
    """Every contestant of ``--only``, one after the other: its figures or why none."""
    source = KRaftBroker(root / "A")
    results: dict[str, Figures | str] = {}
    try:
        for name in args.only:
            print(f"{CONTESTANTS[name][1]} ...", flush=True)
            try:
                results[name] = Contestant(name, root, source.bootstrap, args).run()
            except (RuntimeError, KafkaException) as exc:
                results[name] = first_line(exc)
                print(f"{CONTESTANTS[name][1]}: {exc}", file=sys.stderr, flush=True)
    finally:
        source.stop()
    return results


def first_line(what: object) -> str:
    lines = str(what).strip().splitlines()
    return lines[0] if lines else repr(what)


def only(value: str) -> list[str]:
    names = {n.strip() for n in value.split(",") if n.strip()}
    unknown = names - set(CONTESTANTS)
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"choose among {', '.join(CONTESTANTS)}")
    return [n for n in CONTESTANTS if n in names]


OPTIONS: list[tuple[str, type, object, str]] = [  # flag, type, default, help
    ("--topics", int, 24, "source topics per contestant"),
    ("--partitions", int, 4, "per topic"),
    ("--rate", float, 1000.0, "steady records/s"),
    ("--seconds", float, 60.0, "of the steady phase"),
    ("--burst", int, 288_000, "records of the warm burst"),
    ("--size", int, 300, "value bytes"),
    ("--tasks", int, 2, "MM2 tasks.max"),
    ("--linger-ms", float, 5.0, "the steady producer's linger.ms"),
    ("--fetch-wait-ms", int, 10, "the target consumer's fetch.wait.max.ms"),
    ("--rss-interval", float, 2.0, "seconds between RSS samples"),
    ("--startup-timeout", float, 300.0, "seconds to the last probe record, at most"),
    ("--drain-timeout", float, 120.0, "seconds to the last steady record, at most"),
    ("--limit", float, 600.0, "seconds per burst phase, at most"),
]


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    for flag, kind, default, what in OPTIONS:
        ap.add_argument(flag, type=kind, default=default, help=f"{what} (default {default})")
    ap.add_argument(
        "--only", type=only, default=list(CONTESTANTS), help="e.g. mm,mm2-eos (default all)"
    )
    ap.add_argument("--keep", action="store_true", help="keep the brokers' data and logs")
    args = ap.parse_args()
    if min(args.topics, args.partitions, args.burst) < 1 or args.size < STAMP.size:
        ap.error(f"need --topics, --partitions, --burst >= 1 and --size >= {STAMP.size}")
    if args.rate <= 0 or args.seconds <= 0:
        ap.error("need --rate > 0 and --seconds > 0")
    return args


def _terminate(_signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt  # run the clean-up paths, as Ctrl-C does


def main() -> int:
    args = parse_args()
    signal.signal(signal.SIGTERM, _terminate)
    root = Path(tempfile.mkdtemp(prefix="mm-peer-bench-"))
    print(
        f"peer: {args.topics} topics x {args.partitions} partitions = "
        f"{args.topics * args.partitions} partitions; {args.rate:,.0f} records/s x {args.size} B"
        f" for {args.seconds:.0f} s, then a warm burst of {args.burst:,} records; "
        f"MM2 tasks.max={args.tasks}",
        flush=True,
    )
    keep = args.keep
    try:
        results = contest(root, args)
        table(results, args)
        failed = [CONTESTANTS[n][1] for n, r in results.items() if isinstance(r, str)]
        keep = keep or bool(failed)
        if keep:
            print(f"(logs and data: {root})")
        if failed:
            print(f"peer_bench: no figures for {', '.join(failed)}", file=sys.stderr)
            return 1
        return 0
    except KeyboardInterrupt:
        print("peer_bench: interrupted; everything started was stopped", file=sys.stderr)
        return 130
    except (RuntimeError, KafkaException, OSError) as exc:
        keep = True
        print(f"peer_bench: {first_line(exc)} (logs: {root})", file=sys.stderr)
        return 1
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
