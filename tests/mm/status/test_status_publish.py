"""`mm status --watch` / `--serve` publishes the source ends each round read (no Kafka)."""

from __future__ import annotations

from typing import Any

import pytest

from mm.config import build_config
from mm.source.ends import STATUS, decode_ends
from mm.status.model import FlowStatus, PartitionStatus, StatusReport, Thresholds
from mm.status.publish import StatusEnds, seen_ends

pytestmark = pytest.mark.unit

CFG = build_config(
    {
        "clusters": "A, B",
        "A.bootstrap.servers": "a:9092",
        "B.bootstrap.servers": "b:9092",
        "A->B.enabled": "true",
    }
)


class Producer:
    def __init__(self, conf: Any) -> None:
        self.conf = conf
        self.sent: list[tuple[str, bytes, bytes]] = []

    def produce(self, topic: str, value: bytes, key: bytes, on_delivery: Any) -> None:
        self.sent.append((topic, key, value))

    def poll(self, _timeout: float) -> int:
        return 0

    def flush(self, _timeout: float) -> int:
        return 0


def _flow(at_ms: int, ends: dict[int, int], error: str | None = None) -> FlowStatus:
    st = FlowStatus("A->B", "A", "B", at_ms, error=error)
    st.partitions = [
        PartitionStatus("t", p, "A.t", 0, end, None, end) for p, end in sorted(ends.items())
    ]
    return st


def _report(*flows: FlowStatus) -> StatusReport:
    return StatusReport(0, Thresholds(1, 1, 1), list(flows))


def test_each_round_publishes_what_it_read_stamped_when_it_started() -> None:
    producers: list[Producer] = []
    logged: list[tuple[Any, ...]] = []
    exists = {"answer": False}

    def new(conf: Any) -> Producer:
        producers.append(Producer(conf))
        return producers[-1]

    ends = StatusEnds(
        CFG,
        lambda *a, **kw: logged.append((a, kw)),
        producer_factory=new,
        topic_exists=lambda cluster, topic: exists["answer"],
    )
    # the mirror has not created the topic yet: nothing written, said once
    ends.publish(_report(_flow(1_000, {0: 5})))
    ends.publish(_report(_flow(3_000, {0: 6})))
    assert not producers and len(logged) == 1
    assert "the topic is missing" in logged[0][0][0]
    assert logged[0][1]["topic"] == "mm-mirror-ends.A.internal"
    exists["answer"] = True
    ends.publish(_report(_flow(5_000, {0: 7, 1: 2})))
    # a failed round (the source did not answer) has nothing to say
    ends.publish(_report(_flow(7_000, {}, error="source cluster A did not answer")))
    [producer] = producers
    assert producer.conf["bootstrap.servers"] == "b:9092"
    [(topic, key, value)] = producer.sent
    assert (topic, key) == ("mm-mirror-ends.A.internal", b"A->B@status")
    seen = decode_ends(value)
    assert (seen.by, seen.time_ms, seen.ends) == (STATUS, 5_000, {("t", 0): 7, ("t", 1): 2})
    ends.close()


def test_seen_ends_of_a_failed_round_are_none() -> None:
    assert seen_ends(_flow(1, {0: 3}, error="boom")) is None
    assert seen_ends(_flow(1, {})) is None
    assert seen_ends(_flow(1, {0: 3})) == {("t", 0): 3}
