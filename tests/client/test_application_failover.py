"""An application team's failover, from the docs alone: the example services and what
``mm_client`` refuses so that nothing is skipped or re-read silently.

One module fixture, as the services would meet it: a 3-partition topic on A with
transactions interleaved with plain records (commit markers leave gaps in the
offsets); each example service of ``examples/`` consumes it on A, committing every
40 records, and crashes after a number of records that is not a multiple of 40;
a few more groups are committed by hand; then one ``mm mirror --once`` and one
``mm checkpoint --once``. Each test then does what ``docs/application-teams.md``
says, against the real clusters, and checks what the service processed: every
record of A exactly once, except the records processed on A after the last commit,
processed once more on B.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient
from mm_client import (
    NoCheckpointsError,
    RewindRefusedError,
    TopicNotOnTargetError,
    TopicPartition,
    TranslatedOffsets,
    commit_group_offsets,
    commit_translated,
    plan_failover,
    target_topics,
    translate_offsets,
)
from mm_client.kafka_python_config import map_kafka_python
from support.clusters import KafkaCluster
from support.groups import commit_admin, group_offsets, run_mm
from support.mirror import create_topic, mirror_properties, run_mirror_once

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PARTITIONS = 3
PER_PARTITION = 160
COMMIT_EVERY = 40
# how many records each service processes on A before it crashes (none a multiple of 40)
SERVICES = {
    "kafka_python_subscribe_service": 257,
    "kafka_python_assign_service": 131,
    "confluent_service": 213,
}


@dataclass
class Scene:
    a: str
    b: str
    topic: str
    tag: str
    values: set[str]  # every committed record's value on A
    on_a: dict[str, list[dict[str, Any]]]  # service -> rows it processed on A, in order
    groups: dict[str, str]  # service or role -> group id

    @property
    def target_topic(self) -> str:
        return f"A.{self.topic}"


def _produce(bootstrap: str, topic: str, tag: str) -> set[str]:
    """Per partition: transactions of 5 records between runs of 3 plain records."""
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"app-{tag}"})
    txn.init_transactions(30)
    values: set[str] = set()
    i = 0
    while i < PER_PARTITION:
        txn.begin_transaction()
        for p in range(PARTITIONS):
            for j in range(5):
                value = f"{tag}-{p}-{i + j}"
                txn.produce(topic, value.encode(), partition=p)
                values.add(value)
        txn.commit_transaction(30)
        for p in range(PARTITIONS):
            for j in range(5, 8):
                value = f"{tag}-{p}-{i + j}"
                plain.produce(topic, value.encode(), partition=p)
                values.add(value)
        assert plain.flush(30) == 0
        i += 8
    return values


def run_service(name: str, *args: str, timeout: float = 120.0) -> list[dict[str, Any]]:
    """One example service to its end; the rows it printed (one per record processed)."""
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, (name, args, done.stdout[-3000:], done.stderr[-3000:])
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


@pytest.fixture(scope="module")
def scene(
    cluster_a: KafkaCluster, cluster_b: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> Scene:
    a, b = cluster_a.bootstrap_servers, cluster_b.bootstrap_servers
    tmp = tmp_path_factory.mktemp("app-failover")
    tag = uuid.uuid4().hex[:8]
    topic = f"orders-{tag}"
    groups = {name: f"app-{tag}-{name}" for name in [*SERVICES, "partial", "ahead"]}
    create_topic(a, topic, PARTITIONS)
    values = _produce(a, topic, tag)
    on_a = {}
    for name, crash_after in SERVICES.items():
        on_a[name] = run_service(
            name,
            *("--bootstrap", a, "--topic", topic, "--group", groups[name]),
            *("--commit-every", str(COMMIT_EVERY), "--stop-after", str(crash_after)),
        )
        assert len(on_a[name]) == crash_after, name
    commit_admin(a, groups["partial"], topic, {0: 50})  # only partition 0 committed on A
    commit_admin(a, groups["ahead"], topic, dict.fromkeys(range(PARTITIONS), 100))
    props = mirror_properties(
        tmp / "mm2.properties", a, b, [topic], state_dir=tmp / "state",
        extra={"A->B.groups": f"app-{tag}-.*"},
    )  # fmt: skip
    mirror = run_mirror_once(props)
    assert mirror.returncode == 0, mirror.describe()
    checkpoint = run_mm(props, "checkpoint", "--once")
    assert checkpoint.returncode == 0, checkpoint.describe()
    return Scene(a, b, topic, tag, values, on_a, groups)


# --- the example services, from the documented recipe ---------------------------------------


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_example_service_fails_over_with_nothing_skipped(scene: Scene, service: str) -> None:
    """0 skipped; processed twice = exactly what it processed on A after its last commit."""
    on_b = run_service(
        service,
        *("--bootstrap", scene.b, "--topic", scene.topic, "--group", scene.groups[service]),
        *("--commit-every", str(COMMIT_EVERY), "--failover-from", "A", "--idle", "4"),
    )
    assert {row["topic"] for row in on_b} == {scene.target_topic}
    seen_a = [row["value"] for row in scene.on_a[service]]
    seen_b = [row["value"] for row in on_b]
    assert len(seen_b) == len(set(seen_b)), "a record processed twice on B"
    assert set(seen_a) | set(seen_b) == scene.values, "records skipped"
    crash_after = SERVICES[service]
    uncommitted = seen_a[crash_after - crash_after % COMMIT_EVERY :]
    assert sorted(set(seen_a) & set(seen_b)) == sorted(uncommitted)
    assert len(uncommitted) == crash_after % COMMIT_EVERY


# --- what the helpers refuse or report ---------------------------------------------------------


def test_a_misspelt_group_is_refused_naming_the_groups_that_have_checkpoints(
    scene: Scene,
) -> None:
    wrong = f"app-{scene.tag}-kafka-python-subscribe"  # dashes for underscores
    offsets = translate_offsets({"bootstrap.servers": scene.b}, "A", wrong)
    assert offsets == {} and isinstance(offsets, TranslatedOffsets)  # MM2's meaning kept
    consumer = Consumer({"bootstrap.servers": scene.b, "group.id": wrong})
    try:
        with pytest.raises(NoCheckpointsError) as refused:
            commit_translated(consumer, offsets)
    finally:
        consumer.close()
    assert repr(wrong) in str(refused.value)
    assert scene.groups["kafka_python_subscribe_service"] in refused.value.other_groups
    assert scene.groups["kafka_python_subscribe_service"] in str(refused.value)
    with pytest.raises(NoCheckpointsError, match="has no checkpoint from A"):
        commit_group_offsets({"bootstrap.servers": scene.b}, wrong, offsets)
    plan = plan_failover({"bootstrap.servers": scene.b}, "A", wrong)
    with pytest.raises(NoCheckpointsError) as from_plan:
        commit_group_offsets({"bootstrap.servers": scene.b}, wrong, plan.offsets())
    assert scene.groups["kafka_python_subscribe_service"] in from_plan.value.other_groups
    assert group_offsets(scene.b, wrong) == {}


def test_partitions_without_a_checkpoint_are_reported(
    scene: Scene, caplog: pytest.LogCaptureFixture
) -> None:
    group = scene.groups["partial"]
    offsets = translate_offsets({"bootstrap.servers": scene.b}, "A", group)
    assert list(offsets) == [TopicPartition(scene.target_topic, 0)]
    with caplog.at_level(logging.WARNING, logger="mm_client.consumers"):
        applied = commit_group_offsets({"bootstrap.servers": scene.b}, group, offsets)
    missing = [TopicPartition(scene.target_topic, p) for p in (1, 2)]
    assert list(applied.without_checkpoint) == missing
    assert "auto.offset.reset" in applied.outcome
    warned = [r.getMessage() for r in caplog.records if r.name == "mm_client.consumers"]
    assert any(f"{scene.target_topic}[1], {scene.target_topic}[2]" in m for m in warned), warned
    first = TopicPartition(scene.target_topic, 0)
    assert group_offsets(scene.b, group) == {(first.topic, 0): offsets[first]}


def test_moving_a_group_backwards_needs_allow_rewind(scene: Scene) -> None:
    group = scene.groups["ahead"]
    conf = {"bootstrap.servers": scene.b}
    offsets = translate_offsets(conf, "A", group)
    assert len(offsets) == PARTITIONS
    # the service has run on B since: 30 records past the translated offset on partition 1
    ahead = {tp.partition: o + (30 if tp.partition == 1 else 0) for tp, o in offsets.items()}
    commit_admin(scene.b, group, scene.target_topic, ahead)
    before = group_offsets(scene.b, group)
    with pytest.raises(RewindRefusedError, match=r"\[1\] \d+ -> \d+ \(30 offsets again\)") as no:
        commit_group_offsets(conf, group, offsets)
    assert list(no.value.rewinds) == [TopicPartition(scene.target_topic, 1)]
    assert group_offsets(scene.b, group) == before  # nothing changed
    applied = commit_group_offsets(conf, group, offsets, allow_rewind=True)
    assert list(applied.rewound) == [TopicPartition(scene.target_topic, 1)]
    moved = {(tp.topic, tp.partition): o for tp, o in offsets.items()}
    assert group_offsets(scene.b, group) == moved


@pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning")
def test_the_source_topic_name_is_refused_with_the_mirrors_name(scene: Scene) -> None:
    """Committing for ``orders`` on B used to hang 30 s in kafka-python; subscribing
    to it auto-created an empty ``orders``."""
    from kafka import KafkaConsumer

    group = f"app-{scene.tag}-source-name"
    consumer = KafkaConsumer(
        bootstrap_servers=scene.b, group_id=group, enable_auto_commit=False,
        allow_auto_create_topics=False,
    )  # fmt: skip
    started = time.monotonic()
    try:
        with pytest.raises(TopicNotOnTargetError) as refused:
            commit_translated(consumer, {(scene.topic, 0): 5})
    finally:
        consumer.close(autocommit=False)
    assert time.monotonic() - started < 10
    assert repr(scene.target_topic) in str(refused.value)
    assert refused.value.suggestions == {scene.topic: [scene.target_topic]}
    assert target_topics({"bootstrap.servers": scene.b}, "A", [scene.topic]) == [scene.target_topic]
    with pytest.raises(TopicNotOnTargetError, match=f"'nope-{scene.tag}'"):
        target_topics({"bootstrap.servers": scene.b}, "A", [f"nope-{scene.tag}"])
    names = AdminClient({"bootstrap.servers": scene.b}).list_topics(timeout=10).topics
    assert scene.topic not in names and f"nope-{scene.tag}" not in names


@pytest.mark.filterwarnings("ignore:open_text is deprecated:DeprecationWarning")
def test_kafka_python_settings_are_accepted_and_what_was_mapped_is_said(
    scene: Scene, caplog: pytest.LogCaptureFixture
) -> None:
    from kafka import KafkaConsumer

    group = scene.groups["ahead"]
    expected = translate_offsets({"bootstrap.servers": scene.b}, "A", group)
    consumer = KafkaConsumer(bootstrap_servers=[scene.b], group_id=group)
    try:
        with caplog.at_level(logging.INFO, logger="mm_client.config"):
            # a KafkaConsumer's whole config, as a team would pass it
            assert translate_offsets(consumer.config, "A", group) == expected
    finally:
        consumer.close(autocommit=False)
    notes = [r.getMessage() for r in caplog.records if r.name == "mm_client.config"]
    assert notes and "bootstrap_servers -> bootstrap.servers" in notes[0], notes
    assert "value_deserializer" in notes[0]  # left out, by name


def test_kafka_python_security_settings_map_to_librdkafka() -> None:
    mapped = map_kafka_python(
        {
            "bootstrap_servers": ["b1:9093", "b2:9093"],
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_plain_username": "orders",
            "sasl_plain_password": "secret",
            "ssl_cafile": "/etc/kafka/ca.pem",
            "ssl_certfile": "/etc/kafka/client.pem",
            "ssl_keyfile": "/etc/kafka/client.key",
            "ssl_password": "kp",
            "ssl_check_hostname": False,
            "ssl_context": None,
            "api_version": (3, 6),
        }
    )
    assert mapped.properties == {
        "bootstrap.servers": "b1:9093,b2:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "orders",
        "sasl.password": "secret",
        "ssl.ca.location": "/etc/kafka/ca.pem",
        "ssl.certificate.location": "/etc/kafka/client.pem",
        "ssl.key.location": "/etc/kafka/client.key",
        "ssl.key.password": "kp",
        "ssl.endpoint.identification.algorithm": "none",
    }
    assert mapped.left_out == ("api_version",)
    with pytest.raises(ValueError, match=r"ssl_context \(give the files instead"):
        map_kafka_python({"bootstrap_servers": "b:9093", "ssl_context": object()})
    with pytest.raises(ValueError, match=r"bootstrap_server \(not a kafka-python"):
        map_kafka_python({"bootstrap_servers": "b:9093", "bootstrap_server": "typo"})


UNREACHABLE = """
import socket, sys, mm_client
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
for bootstrap in (f"127.0.0.1:{port}", "no-such-host.invalid:9092"):
    try:
        mm_client.translate_offsets({"bootstrap.servers": bootstrap}, "A", "g", timeout=3)
    except mm_client.CheckpointsUnavailableError as exc:
        print(exc)
"""


def test_an_unreachable_cluster_is_one_clear_error_and_no_noise() -> None:
    """A fresh interpreter with no logging configured, as a service's script: stderr
    used to get ~100 librdkafka FAIL lines per 5 s; the error never said DNS."""
    done = subprocess.run(
        [sys.executable, "-c", UNREACHABLE], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    refused, unresolved = done.stdout.splitlines()
    assert "nothing accepts connections at 127.0.0.1:" in refused
    assert "DNS: the host of no-such-host.invalid:9092 does not resolve" in unresolved
