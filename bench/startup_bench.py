"""Start to first record: `mm run` against MirrorMaker 2, on Apache Kafka.

An operator starts the mirror (after a deploy, a crash, a failover back): how long
until records flow again? Three one-node Apache Kafka 4.3.1 clusters from the jars
``./dev`` fetches (``MM_KAFKA_JARS``): A (source, one topic of ``--partitions``
partitions, a producer writing ``--rate`` records/s throughout), B (mm's target)
and C (MirrorMaker 2's target, so neither sees the other's topics). The two
mirrors start one after the other, each alone on the machine, exactly once both
(mm always; MM2 with ``exactly.once.source.support = enabled``, tasks.max =
``--tasks``). For each, from the moment its process is started:

- first record: the first record of the mirrored topic a read_committed consumer
  of the target sees;
- all partitions: every partition of the mirrored topic has shown a record;
- caught up: the target holds, on every partition, what A held when the mirror
  started.

    MM_KAFKA_JARS=~/.cache/mm/kafka-4.3.1 python bench/startup_bench.py [--partitions 96]

(``./dev test`` fills that cache once.) The writer keeps writing while the first
mirror runs, so the second mirror starts with a longer backlog: the records each
had to catch up are printed beside its times.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import support.apache_kafka
from support.apache_kafka import KRaftBroker, MirrorMaker2, write_properties

# brokers and MirrorMaker 2 as users run them (the JVM's defaults), not the tests'
# lean flags (every bench importing this module measures on such JVMs)
support.apache_kafka.JVM_FLAGS = ()

TOPIC = "events"


class Writer:
    """Writes ``rate`` records/s round-robin over the topic's partitions until stopped."""

    def __init__(self, bootstrap: str, partitions: int, rate: int) -> None:
        self.bootstrap, self.partitions, self.rate = bootstrap, partitions, rate
        self.stop = threading.Event()
        self.sent = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5})
        started = time.monotonic()
        while not self.stop.is_set():
            due = int((time.monotonic() - started) * self.rate)
            while self.sent < due:
                producer.produce(TOPIC, b"x" * 100, partition=self.sent % self.partitions)
                self.sent += 1
            producer.poll(0)
            time.sleep(0.01)
        producer.flush(30)


def ends(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-ends"})
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        }
    finally:
        consumer.close()


def watch(
    bootstrap: str, topic: str, partitions: int, started: float, goal: dict[int, int], limit: float
) -> dict[str, float]:
    """Seconds from ``started`` to the first record, every partition, and caught up
    (plus ``backlog``: the records of ``goal``)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-watch",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 500,
        }
    )
    admin = AdminClient({"bootstrap.servers": bootstrap})
    out: dict[str, float] = {"backlog": float(sum(goal.values()))}
    seen: dict[int, int] = {}
    try:
        while topic not in admin.list_topics(timeout=10).topics:
            if time.monotonic() - started > limit:
                return out
            time.sleep(0.1)
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        while time.monotonic() - started < limit:
            for msg in consumer.consume(10_000, 0.2):
                offset, partition = msg.offset(), msg.partition()
                if msg.error() or offset is None or partition is None:
                    continue
                now = time.monotonic() - started
                out.setdefault("first record", now)
                seen[partition] = offset + 1
                if len(seen) == partitions:
                    out.setdefault("all partitions", now)
                if all(seen.get(p, 0) >= end for p, end in goal.items()):
                    out.setdefault("caught up", now)
                    return out
        return out
    finally:
        consumer.close()


def run_mm(root: Path, a: str, b: str, partitions: int, limit: float) -> dict[str, float]:
    props = {
        "clusters": "A, B",
        "A.bootstrap.servers": a,
        "B.bootstrap.servers": b,
        "A->B.enabled": "true",
        "A->B.topics": TOPIC,
        "replication.factor": 1,
        "checkpoints.topic.replication.factor": 1,
        "heartbeats.topic.replication.factor": 1,
        "offset-syncs.topic.replication.factor": 1,
        "mm.state.dir": root / "mm-state",
    }
    config = write_properties(root / "mm.properties", props)
    goal = ends(a, TOPIC, partitions)
    started = time.monotonic()
    log = open(root / "mm-run.err", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "mm", "run", "-c", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=log,
        start_new_session=True,
    )
    try:
        return watch(b, f"A.{TOPIC}", partitions, started, goal, limit)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def run_mm2(
    root: Path, a: str, c: str, partitions: int, tasks: int, limit: float
) -> dict[str, float]:
    goal = ends(a, TOPIC, partitions)
    started = time.monotonic()
    mm2 = MirrorMaker2(
        root / "mm2", a, c, topics=TOPIC, groups="none", tasks_max=tasks, exactly_once=True
    )
    try:
        return watch(c, f"A.{TOPIC}", partitions, started, goal, limit)
    finally:
        mm2.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=96)
    parser.add_argument("--rate", type=int, default=2000, help="records/s written to A")
    parser.add_argument("--backlog", type=float, default=10.0, help="seconds written before")
    parser.add_argument("--tasks", type=int, default=2, help="MM2 tasks.max")
    parser.add_argument("--limit", type=float, default=300.0, help="seconds per mirror, at most")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="mm-startup-bench-"))
    brokers = {n: KRaftBroker(root / n, wait=False) for n in ("A", "B", "C")}
    try:
        for broker in brokers.values():
            broker.wait_ready()
        a = brokers["A"].bootstrap
        admin = AdminClient({"bootstrap.servers": a})
        admin.create_topics([NewTopic(TOPIC, args.partitions, 1)])[TOPIC].result(30)
        del admin  # no client left retrying the brokers once they stop
        writer = Writer(a, args.partitions, args.rate)
        writer.thread.start()
        time.sleep(args.backlog)
        print(
            f"A: {TOPIC}, {args.partitions} partitions, {args.rate} records/s "
            f"({args.backlog:.0f} s written before each mirror starts)",
            flush=True,
        )
        results = {
            "mm run": run_mm(root, a, brokers["B"].bootstrap, args.partitions, args.limit),
        }
        results[f"MirrorMaker 2 (tasks.max={args.tasks})"] = run_mm2(
            root, a, brokers["C"].bootstrap, args.partitions, args.tasks, args.limit
        )
        writer.stop.set()
        writer.thread.join(60)
        print(
            f"{'seconds from start':<32}{'first record':>14}{'all partitions':>16}"
            f"{'caught up':>11}{'backlog':>10}"
        )
        for name, got in results.items():
            cells = [got.get(k) for k in ("first record", "all partitions", "caught up")]
            print(
                f"{name:<32}"
                + "".join(
                    f"{f'{c:.1f}' if c is not None else 'n/a':>{w}}"
                    for c, w in zip(cells, (14, 16, 11), strict=True)
                )
                + f"{got['backlog']:>10,.0f}"
            )
        print(f"(logs and data: {root})")
    finally:
        for broker in brokers.values():
            broker.stop()


if __name__ == "__main__":
    main()
