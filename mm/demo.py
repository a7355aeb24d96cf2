"""A self-contained mirror demo on two embedded clusters (what `./dev demo` runs).

Starts clusters A and B, writes a realistic topic on A (headers, null keys,
tombstones, committed transactions that leave offset gaps), mirrors it with the
real Spark job (``--once``), then checks the target record by record and checks
that every mirrored offset translates exactly through the offset syncs.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, TopicPartition
from confluent_kafka.admin import NewTopic
from mm_client.kafka import new_admin, new_consumer, new_producer
from mm_client.records import OffsetSync, sync_flags
from mm_client.translation import translate_offset

from mm.config import load_config
from mm.embedded import EmbeddedClusters
from mm.embedded.clusters import BROKER_NAMES
from mm.logs import get_logger

TOPIC = "orders"
PARTITIONS = 3


@dataclass
class PartitionCheck:
    partition: int
    source: int
    target: int
    equal: bool
    translated_exactly: int
    translation_errors: int


def read_partition(bootstrap: str, topic: str, partition: int) -> list[Any]:
    """Every readable record of one partition (read_committed), in order."""
    c = new_consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "mm-demo-reader",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )
    try:
        c.assign([TopicPartition(topic, partition, 0)])
        out = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is None:
                continue
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    break
                raise RuntimeError(f"read {topic}[{partition}]: {err}")
            out.append(m)
        return out
    finally:
        c.close()


def produce_demo_data(bootstrap: str, records: int) -> None:
    admin = new_admin({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
    plain = new_producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    txn = new_producer({"bootstrap.servers": bootstrap, "transactional.id": "mm-demo"})
    txn.init_transactions(30)
    for i in range(records):
        p = i % PARTITIONS
        key = None if i % 17 == 0 else f"customer-{i % 101}".encode()
        value = None if i % 23 == 0 else f'{{"order": {i}, "amount": {i % 997}}}'.encode()
        headers: list[tuple[str, str | bytes | None]] = [
            ("source", b"demo"),
            ("trace", str(i).encode()),
            ("trace", b"dup"),
        ]
        if i % 1000 < 100:
            # every tenth stretch is written transactionally: markers leave offset gaps
            if i % 1000 == 0:
                txn.begin_transaction()
            txn.produce(TOPIC, value, key, p, headers=headers)
            if i % 1000 == 99:
                txn.commit_transaction(30)
        else:
            plain.produce(TOPIC, value, key, p, headers=headers)
            if i % 5000 == 0:
                plain.poll(0)
    if records % 1000 and records % 1000 < 100:
        txn.commit_transaction(30)
    plain.flush(30)


def _syncs(bootstrap: str, topic: str) -> dict[int, list[tuple[int, int, bool, str | None]]]:
    """Per partition: (upstream, downstream, first of a transaction, writer), upstream-sorted
    (a sync written again after a restart counts once)."""
    by_partition: dict[int, dict[int, tuple[int, int, bool, str | None]]] = {}
    for m in read_partition(bootstrap, topic, 0):
        s = OffsetSync.from_bytes(m.key(), m.value())
        if s.topic == TOPIC:
            first, writer = sync_flags(m.headers())
            by_partition.setdefault(s.partition, {})[s.upstream_offset] = (
                s.upstream_offset,
                s.downstream_offset,
                first,
                writer,
            )
    return {p: sorted(v.values()) for p, v in by_partition.items()}


def check(a: str, b: str, syncs_topic: str) -> Iterator[PartitionCheck]:
    syncs = _syncs(a, syncs_topic)
    for p in range(PARTITIONS):
        src = read_partition(a, TOPIC, p)
        dst = read_partition(b, f"A.{TOPIC}", p)

        def fields(m: Any) -> tuple[Any, ...]:
            return (m.key(), m.value(), m.headers(), m.timestamp())

        equal = [fields(m) for m in src] == [fields(m) for m in dst]
        table = syncs.get(p, [])
        ups, downs = [t[0] for t in table], [t[1] for t in table]
        firsts, writers = [t[2] for t in table], [t[3] for t in table]
        exact = wrong = 0
        for s, d in zip(src, dst, strict=False):
            if translate_offset(ups, downs, s.offset(), firsts, writers) == d.offset():
                exact += 1
            else:
                wrong += 1
        yield PartitionCheck(p, len(src), len(dst), equal, exact, wrong)


def _stop_spark() -> None:
    """Stop the mirror's Spark session now, not at exit: its Python workers keep pooled
    Kafka clients, which would log connection errors once the clusters are stopped."""
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    if session is not None:
        session.stop()


def run_demo(records: int = 30_000, keep: bool = False, broker: str = "auto") -> int:
    log = get_logger("mm.demo")
    with (
        tempfile.TemporaryDirectory(prefix="mm-demo-") as tmp,
        EmbeddedClusters(Path(tmp) / "brokers", broker=broker) as clusters,
    ):
        infos = clusters.start(("A", "B"))
        a, b = infos["A"].bootstrap_servers, infos["B"].bootstrap_servers
        print(f"cluster A  {a}\ncluster B  {b}  ({BROKER_NAMES[clusters.broker]})")
        produce_demo_data(a, records)
        print(
            f"wrote {records} records to {TOPIC} on A ({PARTITIONS} partitions, headers, "
            "null keys, tombstones, transactions)"
        )
        cfg_path = Path(tmp) / "mm.properties"
        cfg_path.write_text(
            "# MirrorMaker 2 format, read unchanged\n"
            "clusters = A, B\n"
            f"A.bootstrap.servers = {a}\n"
            f"B.bootstrap.servers = {b}\n"
            f"mm.broker.profile = {infos['A'].profile}\n"
            "A->B.enabled = true\n"
            f"A->B.topics = {TOPIC}\n"
            f"mm.state.dir = {tmp}/state\n"
        )
        from mm.source.job import run_mirror

        cfg = load_config(cfg_path)
        started = time.monotonic()
        stats = run_mirror(cfg, once=True, trigger_seconds=1.0)
        elapsed = time.monotonic() - started
        _stop_spark()  # its Python workers keep Kafka clients, which outlive nothing here
        st = stats["A->B"]
        print(
            f"mirrored {st.records} records ({st.bytes} bytes) in {st.transactions} "
            f"transactions, {st.syncs} offset syncs, {elapsed:.1f}s including Spark start-up"
        )
        ok = True
        print("\npartition  source  target  identical  offsets translated exactly")
        for c in check(a, b, "mm2-offset-syncs.B.internal"):
            ok = ok and c.equal and c.translation_errors == 0 and c.source == c.target
            print(
                f"{c.partition:>9}  {c.source:>6}  {c.target:>6}  {'yes' if c.equal else 'NO':>9}"
                f"  {c.translated_exactly}/{c.source}"
            )
        log.info("demo finished", ok=ok)
        print("\nOK: A.orders on B is an exact copy" if ok else "\nFAILED: see the table above")
        if keep:
            print("clusters kept running; press Ctrl-C to stop")
            try:
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                pass
        return 0 if ok else 1
