"""`mm verify` against a real mirror: real brokers over TCP, real Spark, the real CLI.

One `mm mirror --once` run and two `mm verify` runs serve the module:

1. a clean mirror of two multi-partition topics full of awkward records
   (headers, null keys and values, transactional gaps), plus an aborted
   transaction planted on the target (Tansu serves it to read_committed
   consumers; Apache Kafka would not) and two honest checkpoints: verify
   exits 0;
2. then differences are made: a record planted into a target partition, a
   checkpoint ahead of its group, and a hand-built "mirror" (target records,
   state group position and offset syncs written directly) with one missing
   record and one swapped pair: verify exits 1 and names each.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from mm_client.records import Checkpoint, OffsetSync
from support.clusters import KafkaCluster
from support.mirror import (
    MirrorRun,
    create_topic,
    mirror_properties,
    partition_count,
    produce_mixed,
    read_partition,
    run_mirror_once,
)
from support.verify import VerifyRun, run_verify

pytestmark = pytest.mark.integration

CLEAN_PARTITIONS = 3
PLANT_PARTITIONS = 2
HAND_PARTITIONS = 2
HAND_RECORDS = 5
STATE_GROUP = "__mm.mirror.A.B"
SYNCS_TOPIC = "mm2-offset-syncs.B.internal"
CHECKPOINTS_TOPIC = "A.checkpoints.internal"


def partitions_of(report: dict[str, Any], topic: str) -> dict[int, dict[str, Any]]:
    (flow,) = report["flows"]
    return {p["partition"]: p for p in flow["partitions"] if p["topic"] == topic}


def produce_to(
    bootstrap: str, topic: str, partition: int, records: list[dict[str, Any]]
) -> list[int]:
    """Produce ``records`` (produce() keyword arguments) in order; their offsets."""
    offsets: list[int] = []
    errors: list[Any] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            offsets.append(msg.offset())

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for r in records:
        p.produce(topic, partition=partition, on_delivery=on_delivery, **r)
        p.flush(30)  # one at a time: keeps the order and each offset known
    assert not errors and len(offsets) == len(records), errors
    return offsets


def plant_aborted(bootstrap: str, topic: str, partition: int) -> None:
    """An aborted transaction whose records reached the broker before the abort."""
    p = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"verify-abort-{uuid.uuid4().hex}"}
    )
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(2):
        p.produce(topic, f"aborted-{i}".encode(), b"k", partition=partition)
    assert p.flush(30) == 0
    p.abort_transaction(30)


def write_checkpoints(bootstrap: str, checkpoints: list[Checkpoint]) -> None:
    if partition_count(bootstrap, CHECKPOINTS_TOPIC) is None:
        try:
            create_topic(bootstrap, CHECKPOINTS_TOPIC, 1, {"cleanup.policy": "compact"})
        except Exception:
            if partition_count(bootstrap, CHECKPOINTS_TOPIC) is None:
                raise
    produce_to(
        bootstrap,
        CHECKPOINTS_TOPIC,
        0,
        [{"key": c.key_bytes(), "value": c.value_bytes()} for c in checkpoints],
    )


def commit_positions(bootstrap: str, offsets: dict[tuple[str, int], int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tps = [TopicPartition(t, p, o) for (t, p), o in offsets.items()]
    fut = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(STATE_GROUP, tps)])
    fut[STATE_GROUP].result(30)


@dataclass
class Module:
    tag: str
    props: Path
    clean: str
    plant: str
    hand: str
    mirror: MirrorRun
    first: VerifyRun
    # what a read_committed consumer of the target sees on A.<clean>[0]
    consumer_values_clean0: list[bytes | None]


@pytest.fixture(scope="module")
def mod(
    cluster_a: KafkaCluster, cluster_b: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> Module:
    tag = uuid.uuid4().hex[:8]
    a, b = cluster_a.bootstrap_servers, cluster_b.bootstrap_servers
    clean, plant, hand = f"vclean-{tag}", f"vplant-{tag}", f"vhand-{tag}"
    create_topic(a, clean, CLEAN_PARTITIONS)
    create_topic(a, plant, PLANT_PARTITIONS)
    produce_mixed(a, clean, CLEAN_PARTITIONS)
    produce_mixed(a, plant, PLANT_PARTITIONS)
    tmp = tmp_path_factory.mktemp("verify")
    props = mirror_properties(
        tmp / "mm.properties", a, b, [clean, plant, hand], state_dir=tmp / "state"
    )
    mirror = run_mirror_once(props)
    assert mirror.returncode == 0, mirror.describe()

    # Tansu serves these to read_committed consumers; verify must not count them
    plant_aborted(b, f"A.{clean}", 0)
    consumer_view = [r.value for r in read_partition(b, f"A.{clean}", 0)]

    # two honest checkpoints on A.<clean>[1]: one exact, one behind (conservative)
    src = read_partition(a, clean, 1)
    tgt = read_partition(b, f"A.{clean}", 1)
    assert [r.content for r in src] == [r.content for r in tgt]
    write_checkpoints(
        b,
        [
            Checkpoint("verify-exact", f"A.{clean}", 1, src[3].offset, tgt[3].offset, ""),
            Checkpoint("verify-behind", f"A.{clean}", 1, src[3].offset, tgt[2].offset, ""),
        ],
    )
    first = run_verify(props, "--topics", f".*-{tag}", "--json")
    return Module(tag, props, clean, plant, hand, mirror, first, consumer_view)


def test_clean_mirror_verifies(mod: Module, cluster_b: KafkaCluster) -> None:
    assert mod.first.returncode == 0, mod.first.describe()
    report = mod.first.json()
    assert report["ok"] is True
    if cluster_b.kind == "embedded":
        # the case under test: a consumer of Tansu sees the aborted records...
        assert b"aborted-0" in mod.consumer_values_clean0
    for topic, n in ((mod.clean, CLEAN_PARTITIONS), (mod.plant, PLANT_PARTITIONS)):
        parts = partitions_of(report, topic)
        assert sorted(parts) == list(range(n))
        for rep in parts.values():
            # ...the verdict is Apache Kafka's: they are not on the target
            assert rep["ok"], rep
            assert rep["first_difference"] is None
            assert rep["records_matched"] == rep["source_records"] > 10, rep
            assert rep["position"] == rep["source"]["end"]
            assert rep["translations"]["checked"] > rep["records_matched"], rep
            assert rep["translations"]["wrong"] == 0
            assert rep["syncs"]["checked"] >= 2 and rep["syncs"]["false"] == 0, rep
    clean0 = partitions_of(report, mod.clean)[0]
    if cluster_b.kind == "embedded":  # read raw: the aborted transaction is counted
        assert any("aborted transactions left out" in n for n in clean0["notes"]), clean0
    else:  # Kafka's read_committed consumer: its offsets hold no committed record
        assert any("offsets hold no committed record" in n for n in clean0["notes"]), clean0
    cps = partitions_of(report, mod.clean)[1]["checkpoints"]
    assert (cps["exact"], cps["conservative"], cps["ahead"]) == (1, 1, 0), cps


@dataclass
class Broken:
    run: VerifyRun
    planted: int  # target offset of the record planted into A.<plant>[1]


def _hand_records(p: int) -> list[dict[str, Any]]:
    return [
        {
            "key": f"k{i}".encode(),
            "value": f"hand-{p}-{i}".encode(),
            "headers": [("h", str(i).encode()), ("h", None)],
            "timestamp": 1_600_000_000_000 + i,
        }
        for i in range(HAND_RECORDS)
    ]


@pytest.fixture(scope="module")
def broken(mod: Module, cluster_a: KafkaCluster, cluster_b: KafkaCluster) -> Broken:
    a, b = cluster_a.bootstrap_servers, cluster_b.bootstrap_servers
    # (b) a record written straight into a mirrored partition
    (planted,) = produce_to(b, f"A.{mod.plant}", 1, [{"key": b"x", "value": b"planted"}])
    # a checkpoint ahead of its group on A.<plant>[0]
    src = read_partition(a, mod.plant, 0)
    tgt = read_partition(b, f"A.{mod.plant}", 0)
    write_checkpoints(
        b, [Checkpoint("verify-ahead", f"A.{mod.plant}", 0, src[1].offset, tgt[2].offset, "")]
    )
    # (c), (d) a hand-built mirror: [0] loses record 2, [1] swaps records 1 and 2
    create_topic(a, mod.hand, HAND_PARTITIONS)
    create_topic(b, f"A.{mod.hand}", HAND_PARTITIONS)
    order = {0: [0, 1, 3, 4], 1: [0, 2, 1, 3, 4]}
    syncs = []
    for p in range(HAND_PARTITIONS):
        records = _hand_records(p)
        src_offsets = produce_to(a, mod.hand, p, records)
        tgt_offsets = produce_to(b, f"A.{mod.hand}", p, [records[i] for i in order[p]])
        syncs += [
            OffsetSync(mod.hand, p, src_offsets[i], d)
            for i, d in zip(order[p], tgt_offsets, strict=True)
        ]
    produce_to(a, SYNCS_TOPIC, 0, [{"key": s.key_bytes(), "value": s.value_bytes()} for s in syncs])
    commit_positions(b, {(f"A.{mod.hand}", p): HAND_RECORDS for p in range(HAND_PARTITIONS)})
    return Broken(run_verify(mod.props, "--topics", f".*-{mod.tag}", "--json"), planted)


def test_differences_fail_the_verification(mod: Module, broken: Broken) -> None:
    assert broken.run.returncode == 1, broken.run.describe()
    assert broken.run.json()["ok"] is False


def test_clean_partitions_still_verify(mod: Module, broken: Broken) -> None:
    for p, rep in partitions_of(broken.run.json(), mod.clean).items():
        assert rep["ok"], (p, rep)


def test_planted_record_is_extra_on_target(mod: Module, broken: Broken) -> None:
    parts = partitions_of(broken.run.json(), mod.plant)
    rep = parts[1]
    assert not rep["ok"]
    assert rep["first_difference"] == {
        "kind": "extra on target",
        "source_offset": None,
        "target_offset": broken.planted,
        "fields": [],
    }, rep
    assert (rep["missing_on_target"], rep["extra_on_target"]) == (0, 1)


def test_checkpoint_ahead_is_found(mod: Module, broken: Broken) -> None:
    rep = partitions_of(broken.run.json(), mod.plant)[0]
    assert rep["first_difference"] is None
    cps = rep["checkpoints"]
    assert cps["ahead"] == 1 and cps["first_ahead"]["group"] == "verify-ahead", cps
    assert not rep["ok"]


def test_missing_record_is_found(mod: Module, broken: Broken) -> None:
    rep = partitions_of(broken.run.json(), mod.hand)[0]
    assert rep["position"] == rep["source"]["end"] == HAND_RECORDS
    assert rep["first_difference"] == {
        "kind": "missing on target",
        "source_offset": 2,
        "target_offset": 2,
        "fields": [],
    }, rep
    assert (rep["missing_on_target"], rep["extra_on_target"]) == (1, 0)
    assert rep["syncs"] == {**rep["syncs"], "checked": 4, "false": 0}


def test_reordered_pair_is_found(mod: Module, broken: Broken) -> None:
    rep = partitions_of(broken.run.json(), mod.hand)[1]
    assert rep["first_difference"] == {
        "kind": "reordered",
        "source_offset": 1,
        "target_offset": 1,
        "fields": [],
    }, rep
    assert (rep["missing_on_target"], rep["extra_on_target"]) == (0, 0)
    assert rep["records_matched"] == 1
