"""Read-only source mode: ``offset-syncs.topic.location = target`` and
``emit.heartbeats.enabled = false`` leave nothing for the jobs to write on the source.

Every write the mirror, checkpoint, heartbeat and failover jobs make goes through
a topic creation (``ensure_topic``), a producer or a group offset change; these
tests check where each goes in that mode. docs/security.md lists what each job
needs on A and B.
"""

from __future__ import annotations

from typing import Any

import pytest
from mm_client.kafka import clients as client_factory

from mm.config import MirrorConfig, build_config

pytestmark = pytest.mark.unit

READ_ONLY = {
    "clusters": "A, B",
    "A.bootstrap.servers": "a:9092",
    "B.bootstrap.servers": "b:9092",
    "A->B.enabled": "true",
    "A->B.offset-syncs.topic.location": "target",
    "A->B.emit.heartbeats.enabled": "false",
}


@pytest.fixture
def cfg(tmp_path: Any) -> MirrorConfig:
    return build_config({**READ_ONLY, "mm.state.dir": str(tmp_path)})


@pytest.fixture
def no_clients(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(conf: dict[str, Any]) -> Any:
        raise AssertionError(f"a client was built for {conf['bootstrap.servers']}")

    for name in ("Producer", "Consumer", "AdminClient"):
        monkeypatch.setattr(client_factory, name, refuse)


def test_mirror_creates_its_topics_on_the_target_only(
    cfg: MirrorConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mm.source import job

    created: list[tuple[str, str]] = []
    monkeypatch.setattr(job, "_admin", lambda _cfg, cluster: cluster)
    monkeypatch.setattr(
        job, "ensure_topic", lambda admin, topic, *_a, **_k: created.append((admin, topic))
    )
    flow = cfg.flow("A", "B")
    job.ensure_offset_syncs_topic(cfg, flow)
    job.ensure_ends_topic(cfg, flow)
    job.ensure_shards_topic(cfg, flow)
    assert created == [
        ("B", "mm2-offset-syncs.A.internal"),
        ("B", "mm-mirror-ends.A.internal"),
        ("B", "mm-mirror-shards.A.internal"),
    ]


def test_mirror_tasks_write_offset_syncs_in_the_target_transactions(cfg: MirrorConfig) -> None:
    from mm.source.runtime import flow_runtime, offset_syncs_topic

    rt = flow_runtime(cfg, cfg.flow("A", "B"))
    # mm.source.task: no _SourceSyncWriter (the only producer to the source) when set
    assert rt.offset_syncs_on_target
    assert rt.offset_syncs_topic == offset_syncs_topic(cfg.flow("A", "B"))


@pytest.mark.usefixtures("no_clients")
def test_heartbeat_job_builds_no_client(cfg: MirrorConfig) -> None:
    from mm.heartbeat.job import run_heartbeat

    assert run_heartbeat(cfg, once=True) == {}


def test_checkpoint_job_reads_syncs_and_writes_on_the_target(cfg: MirrorConfig) -> None:
    from mm.checkpoint.emitter import FlowCheckpointer

    cp = FlowCheckpointer(cfg, cfg.flow("A", "B"))
    assert cp.syncs_consumer_conf["bootstrap.servers"] == "b:9092"
    assert cp._target_producer_conf["bootstrap.servers"] == "b:9092"
    assert cp._target_admin_conf["bootstrap.servers"] == "b:9092"


def test_default_location_writes_syncs_to_the_source() -> None:
    """The contrast: MM2's default puts offset syncs on the source."""
    from mm.source.runtime import flow_runtime

    cfg = build_config({k: v for k, v in READ_ONLY.items() if "offset-syncs" not in k})
    assert not flow_runtime(cfg, cfg.flow("A", "B")).offset_syncs_on_target
