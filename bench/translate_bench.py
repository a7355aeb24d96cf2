"""Bulk offset translation benchmark: `translate_all` against a plain read of the topic.

Writes GROUPS x TOPICS x PARTITIONS checkpoints (default 1,000 x 10 x 5 = 50,000
records) to ``A.checkpoints.internal`` on a local cluster (embedded Tansu
unless BENCH_BOOTSTRAP is set), then times, in the same run and alternating:

(a) the floor: a plain confluent-kafka consumer reading the topic from the
    beginning to the end (assign, consume until end-of-partition, close), no
    decoding;
(b) ``mm_client.translate_all`` (every group, ".*"), end to end;
(c) ``mm_client.translate_offsets`` for one group (same read, one group kept);
(d) for reference, the same read decoding every record with
    ``Checkpoint.from_bytes`` (the straightforward implementation).

Prints best and median of --repeat runs and each one's ratio to the floor.
Target: translate_all under 2 s for 50,000 checkpoints.

    python bench/translate_bench.py [--groups 1000] [--topics 10] [--partitions 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from mm_client import Checkpoint, translate_all, translate_offsets
from mm_client import TopicPartition as TP

from mm.embedded import EmbeddedClusters

ALIAS = "A"
TOPIC = f"{ALIAS}.checkpoints.internal"


def fill(bootstrap: str, groups: int, topics: int, partitions: int) -> dict[str, dict[TP, int]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1, config={"cleanup.policy": "compact"})])[
        TOPIC
    ].result(30)
    time.sleep(0.5)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    expected: dict[str, dict[TP, int]] = {}
    for g in range(groups):
        group = f"group-{g:04d}"
        mine = expected[group] = {}
        for t in range(topics):
            topic = f"{ALIAS}.topic-{t}"
            for p in range(partitions):
                upstream = 1_000 + g * 7 + t * 3 + p
                cp = Checkpoint(group, topic, p, upstream, upstream - 100, "")
                mine[TP(topic, p)] = cp.downstream_offset
                while True:
                    try:
                        producer.produce(TOPIC, cp.value_bytes(), cp.key_bytes(), partition=0)
                        break
                    except BufferError:
                        producer.poll(0.05)
    if producer.flush(60):
        raise RuntimeError("checkpoints not acknowledged")
    return expected


def plain_read(bootstrap: str, decode: bool = False) -> int:
    """The floor: read the whole topic with assign() until end of partition."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-floor-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,  # no per-message offset bookkeeping
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 100,
            "max.partition.fetch.bytes": 10_485_760,
        }
    )
    count = 0
    latest: dict[tuple[str, str, int], int] = {}
    try:
        # metadata first: without it the first fetch waits for leader discovery
        consumer.list_topics(TOPIC, timeout=10)
        consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
        done = False
        while not done:
            for msg in consumer.consume(10_000, 0.02):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        done = True
                        continue
                    raise RuntimeError(err.str())
                count += 1
                if decode:
                    cp = Checkpoint.from_bytes(msg.key(), msg.value())
                    latest[(cp.consumer_group, cp.topic, cp.partition)] = cp.downstream_offset
    finally:
        consumer.close()
    return count


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    started = time.perf_counter()
    out = fn()
    return time.perf_counter() - started, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--groups", type=int, default=1000)
    ap.add_argument("--topics", type=int, default=10)
    ap.add_argument("--partitions", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    records = args.groups * args.topics * args.partitions

    with EmbeddedClusters(jvm_flags=()) as ec:
        bootstrap = os.environ.get("BENCH_BOOTSTRAP") or ec.add("B").bootstrap_servers
        conf = {"bootstrap.servers": bootstrap}
        t, expected = timed(lambda: fill(bootstrap, args.groups, args.topics, args.partitions))
        print(f"wrote {records:,} checkpoints ({args.groups} groups) in {t:.1f}s")

        # warm-up, and correctness: every group, every partition, the right offset
        result = translate_all(conf, ALIAS)
        if result != expected:
            print("ERROR: translate_all result differs from what was written")
            return 1
        one = "group-0500"
        if translate_offsets(conf, ALIAS, one) != expected[one]:
            print("ERROR: translate_offsets result differs from what was written")
            return 1
        if plain_read(bootstrap) != records:
            print("ERROR: the plain read did not see every record")
            return 1

        runs: dict[str, list[float]] = {k: [] for k in ("floor", "all", "one", "naive")}
        for _ in range(args.repeat):
            runs["floor"].append(timed(lambda: plain_read(bootstrap))[0])
            runs["all"].append(timed(lambda: translate_all(conf, ALIAS))[0])
            runs["one"].append(timed(lambda: translate_offsets(conf, ALIAS, one))[0])
            runs["naive"].append(timed(lambda: plain_read(bootstrap, decode=True))[0])

    floor = min(runs["floor"])
    labels = {
        "floor": "(a) plain consumer read (floor)",
        "all": "(b) translate_all('.*')",
        "one": "(c) translate_offsets(1 group)",
        "naive": "(d) read + Checkpoint.from_bytes each",
    }
    print()
    print(f"{records:,} checkpoint records, {args.repeat} runs each (alternating)")
    print(f"{'':<40} {'best':>8} {'median':>8} {'rec/s (best)':>14} {'x floor':>8}")
    for key, label in labels.items():
        best, median = min(runs[key]), statistics.median(runs[key])
        print(
            f"{label:<40} {best:7.3f}s {median:7.3f}s {records / best:14,.0f} {best / floor:8.2f}"
        )
    verdict = "OK" if min(runs["all"]) < 2.0 else "MISSED"
    print(f"target translate_all < 2 s: {verdict} ({min(runs['all']):.3f}s best)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
