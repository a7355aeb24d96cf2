"""The mirror plan handed to the Spark source: same decisions as the config, no pydantic."""

from __future__ import annotations

import base64
import pickle
import subprocess
import sys

import pytest

from mm.config import build_config
from mm.source.plan import MirrorPlan, NameFilter
from mm.source.runtime import flow_runtime, mirror_plan

pytestmark = pytest.mark.unit

PROPS = {
    "clusters": "A, B",
    "A.bootstrap.servers": "a:9092",
    "B.bootstrap.servers": "b:9092",
    "A->B.enabled": "true",
    "A->B.topics": "orders.*, payments",
    "A->B.topics.exclude": "orders-tmp.*",
    "A->B.config.properties.exclude": "retention\\..*, segment.bytes",
    "A->B.refresh.topics.interval.seconds": "7",
    "A.security.protocol": "SASL_PLAINTEXT",
    "A.sasl.mechanism": "PLAIN",
    "A.sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="u" password="pw";',
}


def test_plan_filters_decide_as_the_config() -> None:
    cfg = build_config(PROPS)
    flow = cfg.flow("A", "B")
    plan = mirror_plan(cfg, flow)
    topics = plan.planner["topic_filter"]
    configs = plan.planner["config_filter"]
    for name in ["orders", "orders-eu", "orders-tmp1", "payments", "payments2", "x", ""]:
        assert topics(name) == flow.topic_filter(name), name
    for prop in [
        "retention.ms",
        "retention.bytes",
        "segment.bytes",
        "segment.ms",
        "cleanup.policy",
    ]:
        assert configs(prop) == flow.config_property_filter(prop), prop
    assert plan.refresh_topics_interval_seconds == 7
    assert plan.runtime == flow_runtime(cfg, flow)
    assert plan.planner["policy"].format_remote_topic("A", "orders") == "A.orders"


def test_plan_round_trips_through_its_option_text() -> None:
    cfg = build_config(PROPS)
    plan = mirror_plan(cfg, cfg.flow("A", "B"))
    back = MirrorPlan.decode(plan.encode())
    assert back.runtime == plan.runtime
    assert back.runtime.source_consumer["sasl.password"] == "pw"  # credentials reach the tasks
    assert back.planner["topic_filter"] == plan.planner["topic_filter"]
    with pytest.raises(TypeError, match="expected a MirrorPlan"):
        MirrorPlan.decode(base64.b64encode(pickle.dumps(NameFilter((".*",)))).decode())


def test_decoding_a_plan_imports_no_config_models() -> None:
    """Spark plans each query in a fresh Python process: keep pydantic out of it."""
    cfg = build_config(PROPS)
    text = mirror_plan(cfg, cfg.flow("A", "B")).encode()
    code = (
        "import sys\n"
        "from mm.source.plan import MirrorPlan\n"
        f"plan = MirrorPlan.decode({text!r})\n"
        "import mm.source.topics\n"
        "bad = sorted(m for m in sys.modules if m.startswith(('pydantic', 'mm.config')))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "", out.stdout


def test_plan_carries_the_drivers_refresh_while_it_is_fresh() -> None:
    from types import SimpleNamespace

    from mm.source.topics import MirroredTopic

    cfg = build_config(PROPS)
    flow = cfg.flow("A", "B")
    known = {"orders": MirroredTopic("orders", "A.orders", 3, 1_048_588)}
    failed = {"payments": "target topic A.payments has 1 partitions but ..."}
    refused = {"refunds": "target topic refunds on B would receive ..."}
    planner = SimpleNamespace(known=known, failed=failed, refused=refused)
    plan = MirrorPlan.decode(mirror_plan(cfg, flow, planner).encode())  # type: ignore[arg-type]
    assert plan.topics == known and plan.failed == failed
    # refused across flows whatever the age of the refresh: the source's own planner
    # cannot find such a collision again
    assert plan.planner["refused"] == refused
    assert mirror_plan(cfg, flow).planner["refused"] == {}
    # fresh for one refresh interval (7 s here), then the source refreshes itself
    assert plan.fresh_topics(plan.refreshed_at + 1)
    assert not plan.fresh_topics(plan.refreshed_at + 7)
    # without a driver refresh there is nothing to start from
    assert not mirror_plan(cfg, flow).fresh_topics(plan.refreshed_at)
