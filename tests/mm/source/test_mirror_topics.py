"""Target topics: created like the source, refused when they have too few partitions,
discovered while a continuous mirror runs, and their configs kept in sync.

One `mm mirror --once` run serves the creation and fewer-partitions tests (MM2's
default `use.defaults.from = target`); the `use.defaults.from = source` test
runs its own; the discovery and config-sync tests run their own continuous
mirrors.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)
from support.clusters import KafkaCluster
from support.mirror import (
    ContinuousMirror,
    MirrorRun,
    assert_same_records,
    create_topic,
    delete_topic,
    group_alive,
    mirror_properties,
    partition_count,
    produce_batch,
    produce_mixed,
    read_topic,
    run_mirror_once,
    topic_configs,
    wait_for_records,
)

pytestmark = pytest.mark.integration

# set on the source topic; copied to the target
COPIED = {
    "retention.ms": "123456789",
    "cleanup.policy": "compact",
    "max.message.bytes": "2097152",
    "segment.ms": "3600000",
}
# set on the source topic but in MM2's default config.properties.exclude: never copied
EXCLUDED = {
    "message.timestamp.type": "LogAppendTime",
    "unclean.leader.election.enable": "true",
}


@dataclass
class TopicsRun:
    cfg_topic: str
    few_topic: str
    run: MirrorRun
    props: Path


@pytest.fixture(scope="module")
def topics_run(
    cluster_a: KafkaCluster, cluster_b: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> TopicsRun:
    tag = uuid.uuid4().hex[:8]
    a, b = cluster_a.bootstrap_servers, cluster_b.bootstrap_servers
    cfg_topic, few_topic = f"mtopic-cfg-{tag}", f"mtopic-few-{tag}"
    create_topic(a, cfg_topic, 3, {**COPIED, **EXCLUDED})
    create_topic(a, few_topic, 3)
    create_topic(b, f"A.{few_topic}", 2)  # fewer partitions than the source
    for t in (cfg_topic, few_topic):
        for p in range(3):
            produce_batch(a, t, p, 20, f"{t}-{p}")
    tmp = tmp_path_factory.mktemp("mirror-topics")
    props = mirror_properties(
        tmp / "mm.properties", a, b, [cfg_topic, few_topic], state_dir=tmp / "state"
    )
    return TopicsRun(cfg_topic, few_topic, run_mirror_once(props), props)


def test_target_has_source_partition_count_and_records(
    topics_run: TopicsRun, cluster_a: KafkaCluster, cluster_b: KafkaCluster
) -> None:
    target = f"A.{topics_run.cfg_topic}"
    assert partition_count(cluster_b.bootstrap_servers, target) == 3, topics_run.run.describe()
    assert_same_records(
        read_topic(cluster_a.bootstrap_servers, topics_run.cfg_topic, 3),
        read_topic(cluster_b.bootstrap_servers, target, 3),
        target_create_time=True,
    )


def test_target_gets_source_configs_minus_excluded(
    topics_run: TopicsRun, cluster_a: KafkaCluster, cluster_b: KafkaCluster
) -> None:
    source = topic_configs(cluster_a.bootstrap_servers, topics_run.cfg_topic)
    target = topic_configs(cluster_b.bootstrap_servers, f"A.{topics_run.cfg_topic}")
    # excluded configs are never copied, whatever the broker reports
    for name, value in EXCLUDED.items():
        assert target.get(name, (None, 0))[0] != value, f"{name} copied: {target.get(name)}"
    topic_level = {
        n for n, (_v, src) in source.items() if src == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    }
    if not set(COPIED) <= topic_level:
        # Tansu 0.6 reports a topic's own configs as DEFAULT_CONFIG; like MM2, the
        # mirror copies only configs the broker says were set on the topic
        pytest.xfail(
            "source broker does not label topic overrides DYNAMIC_TOPIC_CONFIG: "
            f"{ {n: source.get(n) for n in COPIED} }"
        )
    for name, value in COPIED.items():
        assert target.get(name, (None, 0))[0] == value, f"{name}: {target.get(name)}"


def test_source_defaults_copy_every_config_set_on_the_source(
    cluster_a: KafkaCluster, cluster_b: KafkaCluster, tmp_path: Path
) -> None:
    """With `use.defaults.from = source` the configs reach the target whatever source
    label the broker gives them (Tansu 0.6 labels a topic's own settings defaults)."""
    topic = f"mtopic-srcdef-{uuid.uuid4().hex[:8]}"
    a, b = cluster_a.bootstrap_servers, cluster_b.bootstrap_servers
    create_topic(a, topic, 2, {**COPIED, **EXCLUDED})
    for p in range(2):
        produce_batch(a, topic, p, 10, f"{topic}-{p}")
    props = mirror_properties(
        tmp_path / "mm.properties",
        a,
        b,
        [topic],
        state_dir=tmp_path / "state",
        extra={"A->B.use.defaults.from": "source"},  # for the flow, as MM2 resolves it
    )
    run = run_mirror_once(props)
    assert run.returncode == 0, run.describe()
    target = topic_configs(b, f"A.{topic}")
    for name, value in COPIED.items():
        assert target.get(name, (None, 0))[0] == value, f"{name}: {target.get(name)}"
    for name, value in EXCLUDED.items():
        assert target.get(name, (None, 0))[0] != value, f"{name} copied: {target.get(name)}"
    assert_same_records(
        read_topic(a, topic, 2), read_topic(b, f"A.{topic}", 2), target_create_time=True
    )


def alter_topic_configs(bootstrap: str, topic: str, configs: dict[str, str]) -> None:
    """IncrementalAlterConfigs SET on ``topic`` (Tansu 0.6 supports it; AlterConfigs not)."""
    entries = [
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()
    ]
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.incremental_alter_configs([res])[res].result(30)


def test_config_change_on_source_reaches_running_mirror_target(
    cluster_a: KafkaCluster, cluster_b: KafkaCluster, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:8]
    a, b = cluster_a.bootstrap_servers, cluster_b.bootstrap_servers
    topic = f"mtopic-sync-{tag}"
    create_topic(a, topic, 1, {**COPIED, **EXCLUDED})
    produce_batch(a, topic, 0, 20, "sync")
    props = mirror_properties(
        tmp_path / "mm.properties",
        a,
        b,
        [topic],
        state_dir=tmp_path / "state",
        extra={
            "use.defaults.from": "source",  # Tansu labels topic settings as defaults
            "refresh.topics.interval.seconds": "1",
            "sync.topic.configs.interval.seconds": "2",
            "mm.mirror.trigger.seconds": "1",
        },
    )
    changed = {"retention.ms": "987654321", "segment.ms": "7200000"}
    mirror = ContinuousMirror(props, tmp_path)
    try:
        # the target exists and holds the records: the mirror is up
        wait_for_records(
            b, f"A.{topic}", 1, read_topic(a, topic, 1), timeout=120, target_create_time=True
        )
        alter_topic_configs(a, topic, changed)
        assert {n: topic_configs(a, topic)[n][0] for n in changed} == changed
        deadline = time.monotonic() + 60
        while True:
            target = topic_configs(b, f"A.{topic}")
            if all(target.get(n, (None, 0))[0] == v for n, v in changed.items()):
                break
            assert time.monotonic() < deadline, (
                f"configs not synced within 60s: {target}\n{mirror.output()[-4000:]}"
            )
            time.sleep(0.5)
        # the sync copied nothing excluded, though the source sets those too
        for name, value in EXCLUDED.items():
            assert target.get(name, (None, 0))[0] != value, f"{name} synced: {target.get(name)}"
        assert target.get("cleanup.policy", (None, 0))[0] == COPIED["cleanup.policy"]
        assert mirror.proc.poll() is None, mirror.output()[-4000:]
        assert '"synced topic configs"' in mirror.output()
    finally:
        mirror.close()


def test_fewer_target_partitions_is_a_clear_error(
    topics_run: TopicsRun, cluster_a: KafkaCluster, cluster_b: KafkaCluster
) -> None:
    run, topic = topics_run.run, topics_run.few_topic
    assert run.returncode == 1, run.describe()
    lines = [ln for ln in run.stdout.splitlines() if topic in ln]
    assert lines, run.describe()
    assert any("2 partitions" in ln and "3" in ln and f"A.{topic}" in ln for ln in lines), lines
    # nothing written into the too-small target, and it was left as it was
    assert partition_count(cluster_b.bootstrap_servers, f"A.{topic}") == 2
    assert all(not recs for recs in read_topic(cluster_b.bootstrap_servers, f"A.{topic}").values())
    # the other topic of the same run was still mirrored completely
    assert_same_records(
        read_topic(cluster_a.bootstrap_servers, topics_run.cfg_topic, 3),
        read_topic(cluster_b.bootstrap_servers, f"A.{topics_run.cfg_topic}", 3),
        target_create_time=True,
    )
    # the way out, as printed: "or delete it so the mirror recreates it"
    delete_topic(cluster_b.bootstrap_servers, f"A.{topic}")
    again = run_mirror_once(topics_run.props)
    assert again.returncode == 0, again.describe()
    assert partition_count(cluster_b.bootstrap_servers, f"A.{topic}") == 3
    assert_same_records(
        read_topic(cluster_a.bootstrap_servers, topic, 3),
        read_topic(cluster_b.bootstrap_servers, f"A.{topic}", 3),
        target_create_time=True,
    )


def test_topic_created_while_mirror_runs_is_picked_up(
    cluster_a: KafkaCluster, cluster_b: KafkaCluster, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:8]
    a, b = cluster_a.bootstrap_servers, cluster_b.bootstrap_servers
    first, late = f"mdisc-{tag}-first", f"mdisc-{tag}-late"
    create_topic(a, first, 2)
    produce_batch(a, first, 0, 50, "first")
    props = mirror_properties(
        tmp_path / "mm.properties",
        a,
        b,
        [f"mdisc-{tag}-.*"],
        state_dir=tmp_path / "state",
        extra={"refresh.topics.interval.seconds": "2", "mm.mirror.trigger.seconds": "1"},
    )
    mirror = ContinuousMirror(props, tmp_path)
    try:
        # the topic present at start is mirrored first: the job is up and running
        wait_for_records(b, f"A.{first}", 2, read_topic(a, first, 2), timeout=120)
        create_topic(a, late, 3)
        produce_mixed(a, late, 3)
        produce_batch(a, late, 1, 500, "late-tail")
        expected = read_topic(a, late, 3)
        started = time.monotonic()
        got = wait_for_records(b, f"A.{late}", 3, expected, timeout=90)
        assert_same_records(expected, got)
        assert time.monotonic() - started < 90
        assert mirror.proc.poll() is None, mirror.output()[-4000:]
        code = mirror.terminate(timeout=60)
        assert code is not None, "mm mirror did not exit within 60s of SIGTERM"
        # the JVM and Python workers go with it
        deadline = time.monotonic() + 30
        while group_alive(mirror.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not group_alive(mirror.proc.pid), "processes left behind after SIGTERM"
    finally:
        mirror.close()
