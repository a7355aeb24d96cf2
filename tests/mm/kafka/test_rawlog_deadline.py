"""The raw log reader never waits forever: a broker that freezes or dies while a
request is in flight is a RawLogError naming the broker, within the connection's
timeout, and the reader works again once the broker is back (Apache Kafka).

A suite run once hung 900 s in the reader's ``recv`` after a source broker's
restart; every read now has the connection's deadline.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from support.mirror import create_topic

from mm.kafka.rawlog import Connection, RawLogError, committed_view, fetch, read_log

pytestmark = pytest.mark.integration


def _wait_stopped(pid: int, timeout: float = 10.0) -> None:
    """Until every thread of ``pid`` is stopped: SIGSTOP is delivered asynchronously,
    and a broker still running for a moment answers the request sent next."""
    deadline = time.monotonic() + timeout
    while True:
        states = set()
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                stat = (task / "stat").read_text()
            except FileNotFoundError:  # a thread that ended meanwhile
                continue
            states.add(stat[stat.rindex(")") + 2])
        if states <= {"T", "t"}:
            return
        assert time.monotonic() < deadline, f"broker {pid} not stopped: thread states {states}"
        time.sleep(0.05)


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
        os.killpg(broker.proc.pid, signal.SIGSTOP)
        try:
            _wait_stopped(broker.proc.pid)
            started = time.monotonic()
            with pytest.raises(RawLogError) as frozen:
                fetch(conn, topic, 0, 0, 1 << 20, wait_ms=0)
            seconds = time.monotonic() - started
        finally:
            os.killpg(broker.proc.pid, signal.SIGCONT)
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
