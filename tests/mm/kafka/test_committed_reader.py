"""The committed-records reader (mm.kafka.committed) on Apache Kafka: its
read_committed consumer and the raw reader return the same records on every range
of a log with plain records, committed, aborted and open transactions; a start that
retention deleted is an error on both, never a jump to the log start.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from support.clusters import KafkaCluster
from support.mirror import create_topic

from mm.kafka.committed import TO_THE_END, LogReader
from mm.kafka.profile import EMBEDDED, KAFKA
from mm.kafka.rawlog import RawLogError, ScanStats

pytestmark = pytest.mark.integration


def _txn_producer(bootstrap: str) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"cr-{uuid.uuid4().hex}"})
    p.init_transactions(30)
    return p


def _write(bootstrap: str, topic: str) -> tuple[Producer, int]:
    """Plain records, a committed and an aborted transaction (flushed before the
    abort), another committed one; then an open transaction at the end. Returns its
    producer (to end it) and the offset where it starts."""
    plain = Producer({"bootstrap.servers": bootstrap})
    for i in range(5):
        plain.produce(topic, f"p{i}".encode(), None if i == 2 else b"k", partition=0)
    plain.produce(topic, b"h", b"k", partition=0, headers=[("a", b"1"), ("b", None)])
    assert plain.flush(30) == 0
    txn = _txn_producer(bootstrap)
    for outcome in ("commit", "abort", "commit"):
        txn.begin_transaction()
        for i in range(3):
            txn.produce(topic, f"{outcome}-{i}".encode(), b"k", partition=0)
        txn.flush(30)
        getattr(txn, f"{outcome}_transaction")(30)
    plain.produce(topic, b"after", b"k", partition=0)
    assert plain.flush(30) == 0
    _low, high = _bounds(bootstrap, topic)
    opened = _txn_producer(bootstrap)
    opened.begin_transaction()
    opened.produce(topic, b"open", b"k", partition=0)
    opened.flush(30)
    return opened, high


def _bounds(bootstrap: str, topic: str) -> tuple[int, int]:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "cr-bounds"})
    try:
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        return int(lo), int(hi)
    finally:
        c.close()


def test_consumer_and_raw_reader_agree_on_apache_kafka(cluster_a: KafkaCluster) -> None:
    bootstrap = cluster_a.bootstrap_servers
    topic = f"committed-read-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    opened, open_at = _write(bootstrap, topic)
    conf = {"bootstrap.servers": bootstrap}
    consumer, raw = LogReader("A", conf, KAFKA), LogReader("A", conf, EMBEDDED)
    assert not consumer.raw and raw.raw

    def read(reader: LogReader, start: int, end: int) -> tuple[list[tuple], ScanStats]:
        stats = ScanStats()
        found = reader.scan(bootstrap, topic, 0, start, end, stats, timeout=30)
        return [tuple(r) for r in found], stats

    try:
        whole, stats = read(consumer, 0, TO_THE_END)
        values = [r[2] for r in whole]
        # read_committed: the aborted transaction's records and the open one are left out
        assert values == [
            *(f"p{i}".encode() for i in range(5)),
            b"h",
            *(f"commit-{i}".encode() for i in range(3)),
            *(f"commit-{i}".encode() for i in range(3)),
            b"after",
        ]
        assert whole[2][1] is None and whole[5][3] == (("a", b"1"), ("b", None))
        assert all(r[5] == 1 for r in whole)  # CreateTime, as a consumer numbers it
        # 3 markers and 3 aborted records below the open transaction, which is past
        # the stable end (a "to the end" read does not count it as open)
        assert (stats.gap_offsets, stats.read_to) == (6, open_at)
        # ranges starting and ending on plain records, inside transactions, on markers
        points = sorted({*range(0, open_at, 3), 6, 10, 13, open_at - 1, open_at, open_at + 1})
        for start in points[:-1]:
            for end in (e for e in points if e >= start):
                got, st = read(consumer, start, end)
                want, _ = read(raw, start, end)
                assert got == want, (start, end)
                assert st.open_offsets == max(0, end - open_at), (start, end)
        # scans stopped after their first record (as a switchover's), then a whole read
        for start in (5, 0, 9):
            first = next(iter(consumer.scan(None, topic, 0, start, TO_THE_END, ScanStats())))
            assert tuple(first) == whole[[r[0] for r in whole].index(first.offset)]
            assert read(consumer, 0, open_at)[0] == whole
    finally:
        opened.abort_transaction(30)

    # retention took the first records: a read from below the log start is an error
    admin = AdminClient(conf)
    done = admin.delete_records([TopicPartition(topic, 0, 3)], request_timeout=30)
    for f in done.values():
        f.result(30)
    for reader in (consumer, raw):
        with pytest.raises(RawLogError):
            list(reader.scan(bootstrap, topic, 0, 1, 5, ScanStats(), timeout=30))
