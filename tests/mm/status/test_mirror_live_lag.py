"""A running mirror's lag metric between its micro-batches (mm.source.live), on Apache
Kafka: a first batch that continues for minutes still shows every partition's lag,
as the target's committed positions and the source's ends say."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from status_support import scrape_until, value
from support.clusters import KafkaCluster
from support.mirror import (
    create_topic,
    mirror_properties,
    produce_batch,
    read_topic,
    running_job,
    wait_for_records,
)

from mm.embedded import procs


@pytest.mark.integration
def test_the_lag_metric_is_fresh_while_the_first_batch_still_runs(
    cluster_a: KafkaCluster, cluster_b: KafkaCluster, tmp_path: Path
) -> None:
    a, b = cluster_a.bootstrap_servers, cluster_b.bootstrap_servers
    topic = f"live-lag-{uuid.uuid4().hex[:8]}"
    create_topic(a, topic, 2)
    for p in range(2):
        produce_batch(a, topic, p, 20, f"p{p}")
    port = procs.free_port()
    props = mirror_properties(
        tmp_path / "mm.properties",
        a,
        b,
        [topic],
        state_dir=tmp_path / "state",
        extra={
            "mm.mirror.task.continue.seconds": "600",  # the first batch outlives the test
            "mm.metrics.port": str(port),
            "mm.metrics.bind.address": "127.0.0.1",
        },
    )
    flow = {"flow": "A->B", "source": "A", "target": "B"}
    parts = [{**flow, "topic": topic, "partition": str(p)} for p in range(2)]
    with running_job(props, tmp_path) as mirror:
        wait_for_records(b, f"A.{topic}", 2, read_topic(a, topic, 2), 180)
        caught_up = scrape_until(
            f"http://127.0.0.1:{port}/metrics",
            lambda s: all(value(s, "mm_mirror_partition_lag", **p) == 0 for p in parts),
            60,
            mirror.output,
        )
        assert (value(caught_up, "mm_mirror_batches_total", **flow) or 0) == 0  # still batch 0
