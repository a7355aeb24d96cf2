"""The floor per-partition transactions put under a copy, measured on the broker alone.

Fencing each target partition with its own transactional producer (what mm did before
shards, docs/shards.md) makes every
partition with new data cost at least one transaction (AddPartitionsToTxn, Produce,
AddOffsetsToTxn, TxnOffsetCommit, EndTxn) per commit. This script measures what that
costs on one embedded cluster with no Spark, no source reads and producers already
initialised: T x P partitions, one transaction of N records each, on W threads, several
rounds; and, in the same run, one plain
idempotent producer writing the same records (the produce half of the plain copy loop
bench/scale_bench.py compares with). It also times the partitions' init_transactions,
which a fresh worker (every `mm mirror --once`) pays first.

The ratio plain/transactions bounds what any copy loop with a transaction per
partition can reach against the plain loop at that shape on this machine.

    python bench/txn_floor_bench.py                       # 24 x 4 partitions, 31 records each
    python bench/txn_floor_bench.py --topics 250          # 1,000 partitions
"""

from __future__ import annotations

import argparse
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mm.embedded import EmbeddedClusters


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topics", type=int, default=24)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--records", type=int, default=31, help="records per transaction")
    ap.add_argument("--size", type=int, default=300, help="value bytes")
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    tps = [(f"floor-{i}", p) for i in range(args.topics) for p in range(args.partitions)]
    n = len(tps)
    value = b"v" * args.size
    with tempfile.TemporaryDirectory() as tmp, EmbeddedClusters(Path(tmp), jvm_flags=()) as ec:
        bs = ec.add("B").bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        for f in admin.create_topics(
            [NewTopic(f"floor-{i}", args.partitions, 1) for i in range(args.topics)]
        ).values():
            f.result()
        group = Consumer({"bootstrap.servers": bs, "group.id": "floor-state"})
        meta = group.consumer_group_metadata()

        def init(tp: tuple[str, int]) -> tuple[tuple[str, int], Producer]:
            # the mirror's settings for its producers (mm.source.task._quick)
            pr = Producer(
                {
                    "bootstrap.servers": bs,
                    "transactional.id": f"floor-{tp[0]}-{tp[1]}",
                    "reconnect.backoff.ms": 10,
                }
            )
            pr.list_topics(tp[0], timeout=30)  # as the mirror does before initialising
            pr.init_transactions(60)
            return tp, pr

        with ThreadPoolExecutor(args.threads) as pool:
            t0 = time.monotonic()
            producers = dict(pool.map(init, tps))
            init_s = time.monotonic() - t0
        position = dict.fromkeys(tps, 0)

        def transaction(tp: tuple[str, int]) -> None:
            pr = producers[tp]
            pr.begin_transaction()
            for _ in range(args.records):
                pr.produce(tp[0], value, None, tp[1])
            pr.flush(60)
            position[tp] += args.records
            pr.send_offsets_to_transaction([TopicPartition(*tp, position[tp])], meta, 60)
            pr.commit_transaction(60)

        rounds = []
        with ThreadPoolExecutor(args.threads) as pool:
            for _ in range(args.rounds):
                t0 = time.monotonic()
                list(pool.map(transaction, tps))
                rounds.append(time.monotonic() - t0)
        plain = Producer({"bootstrap.servers": bs, "enable.idempotence": True})
        t0 = time.monotonic()
        for tp in tps:
            for _ in range(args.records):
                plain.produce(tp[0], value, None, tp[1])
        if plain.flush(60):
            raise RuntimeError("plain records not delivered")
        plain_s = time.monotonic() - t0
        # destroyed while the broker still runs (no connection errors printed)
        while producers:
            producers.popitem()[1].flush(5)
        del plain
        group.close()
    total = n * args.records
    best = min(rounds)
    print(
        f"shape: {args.topics} x {args.partitions} = {n} partitions, {args.records} records "
        f"of {args.size} B each ({total:,} in all), {args.threads} threads"
    )
    print(f"init_transactions of {n} producers: {init_s:.2f} s")
    print(
        "one transaction per partition, per round: "
        + ", ".join(f"{r:.2f} s" for r in rounds)
        + f" (best {n / best:,.0f} transactions/s)"
    )
    print(f"plain idempotent producer, same records: {plain_s:.2f} s")
    print(
        f"ratio plain/transactions (best round): {plain_s / best:.2f}x: the most a copy loop "
        "with a transaction per partition can reach against a plain loop at this shape here"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
