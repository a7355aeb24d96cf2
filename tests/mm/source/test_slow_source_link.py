"""The mirror in the sink region reading a backlog across a slow link (Apache Kafka).

A fetch response of up to ``max.partition.fetch.bytes`` (10 MiB by default) takes
seconds to cross a slow link, and a transaction that began with the first fetch's
records would stay open across the next ones. The coordinator on B aborts any
transaction older than the producer's ``transaction.timeout.ms``; before the
mirror bounded its transactions in time, such a backlog was aborted, copied again
and aborted again, forever. Here A sits behind a 4 MB/s link and B's transactions
time out after 1.5 s (its coordinator looks every 0.5 s): the backlog of 22 MiB in
one partition (three fetches) goes through in transactions closed by the time
bound, exactly once.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Producer
from support.apache_kafka import KRaftBroker
from support.mirror import create_topic, mirror_properties, read_partition, run_mirror_once
from support.slow_link import SlowLink

from mm.kafka.rawlog import committed_view, read_log

RATE = 4_000_000  # bytes/s from A to the mirror
RECORDS = 176
VALUE_BYTES = 128 << 10  # 22 MiB in all


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_a_backlog_over_a_slow_link_commits_within_the_transaction_timeout(
    own_kafka: Callable[..., KRaftBroker],
    unique_topic: Callable[..., str],
    tmp_path: Path,
) -> None:
    link = SlowLink(RATE)
    try:
        a = own_kafka(wait=False, extra={"advertised.listeners": f"PLAINTEXT://{link.address}"})
        link.upstream = lambda: a.port
        b = own_kafka(
            wait=False,
            extra={"transaction.abort.timed.out.transaction.cleanup.interval.ms": 500},
        )
        a.wait_ready()
        b.wait_ready()
        topic = unique_topic("far")
        create_topic(link.address, topic, 1)
        rng = random.Random(7)
        values = [rng.randbytes(VALUE_BYTES) for _ in range(RECORDS)]
        producer = Producer({"bootstrap.servers": link.address, "linger.ms": 5})
        for i, value in enumerate(values):
            producer.produce(topic, value, f"k{i}".encode(), 0)
        assert producer.flush(60) == 0
        before = link.relayed
        cfg = mirror_properties(
            tmp_path / "mm.properties",
            link.address,
            b.bootstrap,
            [topic],
            state_dir=tmp_path / "state",
            extra={
                "B.producer.transaction.timeout.ms": "1500",
                # an aborted transaction is retried: a failure shows within this, not
                # after the default 300 s
                "mm.mirror.retry.timeout.seconds": "30",
            },
        )
        mirror = run_mirror_once(cfg, timeout=240)
        crossed = link.relayed - before
    finally:
        link.close()
    assert mirror.returncode == 0, mirror.describe()
    # the backlog did cross the slow link: seconds of fetching, not one fetch
    assert crossed >= RECORDS * VALUE_BYTES, crossed
    assert crossed / RATE >= 5.0
    target = f"A.{topic}"
    got = read_partition(b.bootstrap, target, 0)
    assert [r.value for r in got] == values
    assert [r.key for r in got] == [f"k{i}".encode() for i in range(RECORDS)]
    view = committed_view(read_log(b.bootstrap, target, 0))
    # every transaction committed, none aborted by the coordinator, and more than one:
    # the time bound (a quarter of 1.5 s) closed them while fetches were on their way
    print(
        f"{crossed} bytes over the link ({crossed / RATE:.1f}s at its rate); "
        f"{view.committed_txns} transactions committed, {view.aborted_txns} aborted"
    )
    assert view.aborted_txns == 0 and view.aborted_records == 0, view
    assert view.committed_txns >= 3, view.committed_txns
    assert len(view.records) == RECORDS
