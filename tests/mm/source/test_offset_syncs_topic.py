"""The offset-syncs topic is created with cleanup.policy=delete and a retention (unit)."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any, ClassVar

import pytest
from support.props import TWO_CLUSTERS

from mm.config import build_config
from mm.errors import ConfigError
from mm.source import job

pytestmark = pytest.mark.unit

BASE = TWO_CLUSTERS


class _Metadata:
    def __init__(self, topics: dict[str, Any]) -> None:
        self.topics = topics


class _Partition:
    leader = 1


class _Topic:
    error = None
    partitions: ClassVar[dict[int, Any]] = {0: _Partition()}


class FakeAdmin:
    created: ClassVar[list[Any]] = []

    def __init__(self, conf: dict[str, Any]) -> None:
        self.conf = conf

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> _Metadata:
        # a created topic is listed with a leader (ensure_topic waits for that)
        return _Metadata({t.topic: _Topic() for _where, t in FakeAdmin.created})

    def create_topics(self, topics: list[Any], request_timeout: float) -> dict[str, Future[None]]:
        FakeAdmin.created += [(self.conf["bootstrap.servers"], t) for t in topics]
        out: dict[str, Future[None]] = {}
        for t in topics:
            f: Future[None] = Future()
            f.set_result(None)
            out[t.topic] = f
        return out


@pytest.mark.parametrize(
    ("props", "cluster", "topic", "retention"),
    [
        ({}, "a:9092", "mm2-offset-syncs.B.internal", "604800000"),
        (
            {"mm.offset.syncs.retention.ms": "-1", "A->B.offset-syncs.topic.location": "target"},
            "b:9092",
            "mm2-offset-syncs.A.internal",
            "-1",
        ),
        ({"mm.offset.syncs.retention.ms": "86400000"}, "a:9092", None, "86400000"),
    ],
)
def test_offset_syncs_topic_created_with_delete_and_retention(
    monkeypatch: pytest.MonkeyPatch,
    props: dict[str, str],
    cluster: str,
    topic: str | None,
    retention: str,
) -> None:
    monkeypatch.setattr(job, "new_admin", FakeAdmin)
    FakeAdmin.created = []
    cfg = build_config({**BASE, **props})
    job.ensure_offset_syncs_topic(cfg, cfg.enabled_flows()[0])
    [(where, new)] = FakeAdmin.created
    assert where == cluster
    if topic is not None:
        assert new.topic == topic
    assert new.config == {"cleanup.policy": "delete", "retention.ms": retention}


@pytest.mark.parametrize("bad", ["0", "-2", "soon", "1.5"])
def test_offset_syncs_retention_must_be_valid(bad: str) -> None:
    # refused when the file is loaded, before any job starts
    with pytest.raises(ConfigError, match=r"offset\.syncs\.retention\.ms"):
        build_config({**BASE, "mm.offset.syncs.retention.ms": bad})
