"""Offset syncs make translation exact for every mirrored record, gaps included.

For each ``offset-syncs.topic.location`` (source: ``mm2-offset-syncs.B.internal``
on A; target: ``mm2-offset-syncs.A.internal`` on B) one `mm mirror --once` run
mirrors a topic with transactional gaps; every sync is decoded with
``OffsetSync.from_bytes`` and, for every mirrored record, translating its source
offset must give its target offset.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest
from support.clusters import KafkaCluster
from support.mirror import (
    MirrorRun,
    Rec,
    assert_same_records,
    assert_translation_exact,
    create_topic,
    describe_log,
    mirror_properties,
    partition_count,
    produce_batch,
    produce_mixed,
    read_offset_syncs,
    read_topic,
    read_topic_committed,
    run_mirror_once,
)

pytestmark = pytest.mark.integration

PARTITIONS = 3
SYNCS_TOPIC = {"source": "mm2-offset-syncs.B.internal", "target": "mm2-offset-syncs.A.internal"}


@dataclass
class SyncsRun:
    location: str
    topic: str
    run: MirrorRun
    source: dict[int, list[Rec]]
    target: dict[int, list[Rec]]
    syncs_bootstrap: str
    other_bootstrap: str
    target_bootstrap: str

    def evidence(self) -> str:
        """For a failure message: the stored logs (markers included) and the run's log."""
        logs = [describe_log(self.target_bootstrap, f"A.{self.topic}", p) for p in self.target]
        logs.append(describe_log(self.syncs_bootstrap, SYNCS_TOPIC[self.location], 0))
        return "\n".join(logs) + "\n" + self.run.describe()


@pytest.fixture(scope="module", params=["source", "target"])
def syncs_run(
    request: pytest.FixtureRequest,
    cluster_a: KafkaCluster,
    cluster_b: KafkaCluster,
    tmp_path_factory: pytest.TempPathFactory,
) -> SyncsRun:
    location: str = request.param
    a, b = cluster_a.bootstrap_servers, cluster_b.bootstrap_servers
    topic = f"msync-{location}-{uuid.uuid4().hex[:8]}"
    create_topic(a, topic, PARTITIONS)
    produce_mixed(a, topic, PARTITIONS, tag="one-")
    produce_batch(a, topic, 1, 1200, "long-run")  # one long run between gaps
    produce_mixed(a, topic, PARTITIONS, tag="two-")
    tmp = tmp_path_factory.mktemp(f"mirror-syncs-{location}")
    props = mirror_properties(
        tmp / "mm.properties",
        a,
        b,
        [topic],
        state_dir=tmp / "state",
        extra={
            "offset-syncs.topic.location": location,
            # several micro-batches (each one a new target transaction) per partition
            "mm.mirror.max.records.per.partition.per.batch": "500",
        },
    )
    run = run_mirror_once(props)
    target_partitions = partition_count(b, f"A.{topic}") or 0
    return SyncsRun(
        location,
        topic,
        run,
        read_topic(a, topic, PARTITIONS),
        # as Kafka serves it: Tansu's last stable offset can stall on the target when
        # transactions of several partitions overlap on the offset-syncs topic
        read_topic_committed(b, f"A.{topic}", target_partitions),
        a if location == "source" else b,
        b if location == "source" else a,
        b,
    )


def test_mirror_run_complete(syncs_run: SyncsRun) -> None:
    assert syncs_run.run.returncode == 0, syncs_run.run.describe()
    try:
        assert_same_records(syncs_run.source, syncs_run.target)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{syncs_run.evidence()}") from None
    # the long partition was mirrored in several micro-batches (target transactions)
    batches = [e for e in syncs_run.run.events("micro-batch mirrored") if e["records"]]
    assert len(batches) >= 3, syncs_run.run.describe()


def test_every_record_translates_to_its_target_offset(syncs_run: SyncsRun) -> None:
    syncs = read_offset_syncs(syncs_run.syncs_bootstrap, SYNCS_TOPIC[syncs_run.location])
    ours = [s for s in syncs if s.topic == syncs_run.topic]
    assert {s.partition for s in ours} == set(range(PARTITIONS)), syncs_run.evidence()
    checked = assert_translation_exact(syncs, syncs_run.topic, syncs_run.source, syncs_run.target)
    assert checked >= sum(len(v) for v in syncs_run.source.values())
    # exact translation needs only the ends of runs, not a sync per record
    assert len(ours) < checked / 4


def test_syncs_only_in_the_configured_location(syncs_run: SyncsRun) -> None:
    other_topic = SYNCS_TOPIC["target" if syncs_run.location == "source" else "source"]
    other_bootstrap = syncs_run.other_bootstrap
    if partition_count(other_bootstrap, other_topic) is None:
        return  # no other-location topic at all in this session
    others = read_offset_syncs(other_bootstrap, other_topic)
    assert not [s for s in others if s.topic == syncs_run.topic]
