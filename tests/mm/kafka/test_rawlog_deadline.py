"""The raw log reader never waits forever: a broker that freezes or dies while a
request is in flight is a RawLogError naming the broker, within the connection's
timeout, and the reader works again once the broker is back (Apache Kafka).

A suite run once hung 900 s in the reader's ``recv`` after a source broker's
restart; every read now has the connection's deadline.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Producer
from support.mirror import create_topic

from mm.kafka.rawlog import Connection, RawLogError, committed_view, fetch, read_log

pytestmark = pytest.mark.integration


def test_a_frozen_then_killed_broker_is_an_error_within_the_timeout(
    own_kafka: Callable[..., Any], unique_topic: Callable[..., str]
) -> None:
    """Frozen (SIGSTOP) under a request: RawLogError naming the broker after the 2 s
    timeout. Killed while a Fetch waits in it (at the log end, 20 s of max wait): the
    read fails at once, not after the wait. Restarted: a new connection reads the
    records again."""
    broker = own_kafka()
    topic = unique_topic("frozen")
    create_topic(broker.bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(3):
        producer.produce(topic, f"v{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    del producer

    with Connection(broker.bootstrap, 2.0) as conn:
        assert fetch(conn, topic, 0, 0, 1 << 20, wait_ms=0).error == 0
        broker.freeze()
        try:
            started = time.monotonic()
            with pytest.raises(RawLogError) as frozen:
                fetch(conn, topic, 0, 0, 1 << 20, wait_ms=0)
            seconds = time.monotonic() - started
        finally:
            broker.thaw()
    assert str(frozen.value).startswith(f"{broker.bootstrap}: no answer to request 1 (v4)")
    assert "within 2s" in str(frozen.value)
    assert 2.0 <= seconds < 6.0, seconds

    killer = threading.Timer(1.0, broker.kill)
    with Connection(broker.bootstrap, 30.0) as conn:
        started = time.monotonic()
        killer.start()
        try:
            with pytest.raises(RawLogError) as killed:
                fetch(conn, topic, 0, 3, 1 << 20, wait_ms=20_000)
        finally:
            killer.join()
        seconds = time.monotonic() - started
    assert str(killed.value).startswith(f"{broker.bootstrap}: "), killed.value
    assert 1.0 <= seconds < 15.0, seconds

    broker.restart()
    with Connection(broker.bootstrap, 10.0) as conn:
        assert fetch(conn, topic, 0, 0, 1 << 20, wait_ms=0).error == 0
    records = committed_view(read_log(broker.bootstrap, topic, 0)).records
    assert [r.value for r in records] == [b"v0", b"v1", b"v2"]
