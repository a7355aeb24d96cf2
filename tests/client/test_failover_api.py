"""The failover API's shape, without a broker: imports, types, input checks."""

from __future__ import annotations

import subprocess
import sys

import pytest
from mm_client import FailoverPlan, TopicPartition
from mm_client.consumers import consumer_kind
from mm_client.fallback import ApproximateOffset

pytestmark = pytest.mark.unit


def test_mm_client_imports_neither_spark_nor_mm_nor_kafka_python() -> None:
    code = (
        "import sys, mm_client, mm_client.failover, mm_client.fallback, mm_client.remote,"
        " mm_client.consumers, mm_client.checkpoints_reader\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'mm', 'kafka'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == ""


def test_topic_partition_is_a_plain_tuple() -> None:
    tp = TopicPartition("A.orders", 3)
    assert tp == ("A.orders", 3) and hash(tp) == hash(("A.orders", 3))
    assert {tp: 1}[("A.orders", 3)] == 1  # type: ignore[index]
    assert str(tp) == "A.orders[3]"


def test_plan_offsets_mix_approximate_only_on_request() -> None:
    exact = {TopicPartition("A.t", 0): 5}
    approx = {
        TopicPartition("A.t", 1): ApproximateOffset(
            7, TopicPartition("t", 1), 9, 1_000, "timestamp"
        ),
        # an exact offset always wins over an estimate for the same partition
        TopicPartition("A.t", 0): ApproximateOffset(1, TopicPartition("t", 0), 2, None, "end"),
    }
    plan = FailoverPlan("g", exact, approx)
    assert plan.offsets() == {TopicPartition("A.t", 0): 5}
    assert plan.offsets(include_approximate=True) == {
        TopicPartition("A.t", 0): 5,
        TopicPartition("A.t", 1): 7,
    }
    assert not plan.complete
    assert FailoverPlan("g", exact).complete


def test_consumer_kind_rejects_other_objects() -> None:
    with pytest.raises(TypeError, match="Consumer or a"):
        consumer_kind(object())
