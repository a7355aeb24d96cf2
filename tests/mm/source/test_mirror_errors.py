"""Records too large for the target: the partition stops with a clear error, or, with
errors.tolerance=all and a dead-letter topic, they go there with Connect's headers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.support.mirror import (
    create_topic,
    mirror_properties,
    read_partition,
    run_mirror_once,
)

pytestmark = pytest.mark.integration

LIMIT = 2000


def _produce(bootstrap: str, topic: str) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        value = b"x" * (5000 if i == 4 else 100)
        p.produce(topic, value, f"k{i}".encode(), 0)
    p.flush(30)


@pytest.mark.parametrize("tolerate", [False, True], ids=["stop", "dead-letter"])
def test_record_too_large_for_target(
    tmp_path: Path, cluster_a: Any, cluster_b: Any, unique_topic: Any, tolerate: bool
) -> None:
    topic = unique_topic("big")
    dlq = unique_topic("dlq")
    create_topic(cluster_a.bootstrap_servers, topic, 1)
    # the target topic exists with a small limit: the mirror must respect it
    create_topic(cluster_b.bootstrap_servers, f"A.{topic}", 1, {"max.message.bytes": str(LIMIT)})
    _produce(cluster_a.bootstrap_servers, topic)
    # the target's configs are the operator's: with the sync on, the source's default
    # would replace the target's own limit (MM2 deletes such overrides too), as Apache
    # Kafka shows (the embedded broker labels every setting a default)
    extra = {"sync.topic.configs.enabled": "false"}
    dead_letter = {"errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq}

    def config(extra: dict[str, str]) -> Path:
        return mirror_properties(
            tmp_path / "mm.properties",
            cluster_a.bootstrap_servers,
            cluster_b.bootstrap_servers,
            [topic],
            state_dir=tmp_path / "state",
            extra=extra,
        )

    run = run_mirror_once(config(extra | dead_letter if tolerate else extra))
    target = read_partition(cluster_b.bootstrap_servers, f"A.{topic}", 0)
    if not tolerate:
        assert run.returncode == 1, run.describe()
        assert f"{topic}[0]@4 is 5" in run.stdout, run.describe()
        assert f"at most {LIMIT}" in run.stdout
        assert "set errors.tolerance=all and errors.deadletterqueue.topic.name" in run.stdout
        # everything before the record is mirrored, nothing from it on
        assert [r.key for r in target] == [f"k{i}".encode() for i in range(4)]
        # the way out, as printed: both settings, then the mirror again
        run = run_mirror_once(config(extra | dead_letter))
        target = read_partition(cluster_b.bootstrap_servers, f"A.{topic}", 0)
    assert run.returncode == 0, run.describe()
    assert [r.key for r in target] == [f"k{i}".encode() for i in range(10) if i != 4]
    dead = read_partition(cluster_b.bootstrap_servers, dlq, 0)
    assert len(dead) == 1
    assert dead[0].key == b"k4" and dead[0].value == b"x" * 5000
    headers = dict(dead[0].headers or ())
    assert headers["__connect.errors.topic"] == topic.encode()
    assert headers["__connect.errors.partition"] == b"0"
    assert headers["__connect.errors.offset"] == b"4"
    assert b"max.message.bytes" in (headers["__connect.errors.exception.message"] or b"")
