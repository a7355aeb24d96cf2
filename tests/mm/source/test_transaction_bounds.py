"""A mirror transaction closes on records, bytes and time (fakes modelling Apache
Kafka), so a backlog of large records or records trickling in from a distant source
never keeps one open until the coordinator aborts it at transaction.timeout.ms; and
each bound leaves the target exactly once."""

from __future__ import annotations

import dataclasses
import time
import uuid
from typing import Any

import pytest
from support.props import TWO_CLUSTERS

from mm.config import build_config
from mm.source.runtime import flow_runtime, transaction_seconds
from mm.source.spec import RangeSpec
from mm.source.state import encode_state
from tests.support.fake_kafka import (
    TARGET,
    TARGET_TOPIC,
    TOPIC,
    FakeCluster,
    FakeConsumer,
    Rec,
    build_source,
    fake_clients,
    runtime,
)
from tests.support.shard_runs import mirror_one

pytestmark = pytest.mark.unit


def _source(values: list[bytes], batch: int) -> FakeCluster:
    return build_source(
        [Rec(b"k", v, (), 1_700_000_000_000 + i) for i, v in enumerate(values)], 0, [batch]
    )


def _positions(target: FakeCluster, group: str) -> list[int]:
    """The partition's committed mirror positions, in commit order (one per transaction)."""
    return [off for g, t, p, off, _ in target.commits if (g, t, p) == (group, TARGET_TOPIC, 0)]


def _committed_values(target: FakeCluster) -> list[bytes | None]:
    return [r.value for _, r in target.log(TARGET_TOPIC, 0).committed()]


def test_a_transaction_closes_at_its_byte_bound() -> None:
    values = [bytes([65 + i % 26]) * 99 for i in range(20)]  # 100 bytes with the key
    source, target = _source(values, 5000), FakeCluster("B")
    rt = runtime(max_bytes_per_txn=350)
    result = mirror_one(
        rt, RangeSpec(TOPIC, 0, TARGET_TOPIC, 0, 20), clients=fake_clients(source, target, TARGET)
    )
    # 4 records reach 400 >= 350 bytes: 5 transactions of 4, each under the bound plus a record
    assert _positions(target, rt.state_group) == [4, 8, 12, 16, 20]
    assert result.transactions == 5 and result.records == 20 and result.bytes == 2000
    assert _committed_values(target) == values


def test_records_and_bytes_bounds_both_hold() -> None:
    values = [b"v" * 9 for _ in range(30)]  # 10 bytes with the key
    source, target = _source(values, 7), FakeCluster("B")
    rt = runtime(max_records_per_txn=6, max_bytes_per_txn=45)
    mirror_one(
        rt, RangeSpec(TOPIC, 0, TARGET_TOPIC, 0, 30), clients=fake_clients(source, target, TARGET)
    )
    # 45 bytes close a transaction after 5 records, before the 6-record bound
    assert _positions(target, rt.state_group) == [5, 10, 15, 20, 25, 30]
    assert _committed_values(target) == values


class _Trickle(FakeConsumer):
    """A source far away: every fetch brings one record and takes ``delay`` seconds."""

    delay = 0.03

    def consume(self, num_messages: int = 1, timeout: float = 0) -> list[Any]:
        time.sleep(self.delay)
        return super().consume(num_messages, timeout)


def test_a_transaction_closes_at_its_time_bound_while_records_trickle_in() -> None:
    values = [f"v{i}".encode() for i in range(12)]
    source, target = _source(values, 1), FakeCluster("B")
    rt = runtime(max_seconds_per_txn=0.1)  # records, bytes: far from their bounds
    clients = dataclasses.replace(
        fake_clients(source, target, TARGET),
        consumer=lambda conf: _Trickle(source, conf),
    )
    started = time.monotonic()
    result = mirror_one(rt, RangeSpec(TOPIC, 0, TARGET_TOPIC, 0, 12), clients=clients)
    took = time.monotonic() - started
    positions = _positions(target, rt.state_group)
    # 12 fetches of >= 0.03 s: at least 0.36 s, so at least 3 transactions of <= ~0.13 s
    assert took >= 12 * _Trickle.delay
    assert len(positions) >= 3, positions
    assert positions == sorted(positions) and positions[-1] == 12
    assert result.transactions == len(positions)
    assert _committed_values(target) == values


def test_without_a_time_bound_reached_one_transaction_holds_the_range() -> None:
    """The contrast: the same trickle under the default bounds commits once."""
    values = [f"v{i}".encode() for i in range(6)]
    source, target = _source(values, 1), FakeCluster("B")
    rt = runtime()
    clients = dataclasses.replace(
        fake_clients(source, target, TARGET),
        consumer=lambda conf: _Trickle(source, conf),
    )
    mirror_one(rt, RangeSpec(TOPIC, 0, TARGET_TOPIC, 0, 6), clients=clients)
    assert _positions(target, rt.state_group) == [6]


@pytest.mark.parametrize(
    ("setting", "producer", "expected"),
    [
        (10.0, {}, 10.0),  # the mirror's 120 s timeout: a quarter is 30 s
        (60.0, {}, 30.0),
        (10.0, {"transaction.timeout.ms": "10000"}, 2.5),  # as the drill sets it
        (10.0, {"transaction.timeout.ms": 900_000}, 10.0),
        (1.5, {"transaction.timeout.ms": "8000"}, 1.5),
    ],
)
def test_the_time_bound_stays_within_a_quarter_of_the_transaction_timeout(
    setting: float, producer: dict[str, Any], expected: float
) -> None:
    assert transaction_seconds(setting, producer) == expected


def test_the_flow_runtime_carries_the_bounds_from_the_config() -> None:
    cfg = build_config(
        {
            **TWO_CLUSTERS,
            "mm.mirror.max.bytes.per.transaction": "1048576",
            "mm.mirror.max.seconds.per.transaction": "4",
            "B.producer.transaction.timeout.ms": "10000",
        }
    )
    rt = flow_runtime(cfg, cfg.flow("A", "B"))
    assert rt.max_bytes_per_txn == 1 << 20
    assert rt.max_seconds_per_txn == 2.5  # a quarter of B's producers' 10 s
    default = build_config(TWO_CLUSTERS)
    rt = flow_runtime(default, default.flow("A", "B"))
    assert (rt.max_bytes_per_txn, rt.max_seconds_per_txn) == (64 << 20, 10.0)


def test_a_transactions_sync_points_fit_the_commit_metadata_limit_in_the_worst_case() -> None:
    """A partition's offset syncs ride in its committed offset's metadata, which Apache
    Kafka refuses beyond offset.metadata.max.bytes (4096 by default). The worst case
    any log can give: every upstream and downstream offset of the 96 points 19 digits
    apart (more than a 63-bit offset allows)."""
    points = runtime().max_sync_points_per_txn
    step = 10**18
    syncs = [(step * (i + 1) + i, step * (i + 1)) for i in range(points)]
    metadata = encode_state(uuid.uuid4().hex[:12], syncs)
    assert len(metadata.encode()) < 4096, len(metadata)
