"""Apache Kafka with TLS, mutual TLS, SASL (SCRAM, PLAIN) and an authorizer: the
clusters production runs, and the mirror on them.

The secured broker (:mod:`support.secure_kafka`) is proven first: every listener
carries records for the super user, and an ordinary principal is refused until
an ACL grants it. Then the DR day on a pair of such clusters, both reached over
SSL, over mutual TLS, or over SASL_SSL with SCRAM-SHA-512, configured as in an MM2
file: ``mm run`` gives B the exact records and the group's exact translated
offsets, which ``mm_client`` reads; ``mm status`` reports; ``mm verify`` matches
every record, ``mm switchover`` proves and moves the group, ``mm failover``
records its point and ``mm failback`` finds A's divergent records (read with a
read_committed consumer; these commands refused every TLS/SASL cluster before);
``mm backup`` and ``mm restore`` copy A's topic into B. Nothing the runs write
holds a password. The drill runs with A over SASL_SSL and B over mutual TLS.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from mm_client import translate_offsets
from mm_client.cluster_errors import CheckpointsUnavailableError
from mm_client.records import Heartbeat
from support.apache_kafka import write_properties
from support.groups import commit_admin, group_offsets, run_mm
from support.secure_kafka import SecureKRaftBroker

PARTITIONS = 3
RECORDS = 300


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, SecureKRaftBroker]]:
    root = tmp_path_factory.mktemp("secured")
    brokers = {alias: SecureKRaftBroker(root / alias, wait=False) for alias in ("A", "B")}
    try:
        for broker in brokers.values():
            broker.wait_ready()
        yield brokers
    finally:
        for broker in brokers.values():
            broker.stop()


def _create(broker: SecureKRaftBroker, topic: str, partitions: int = 1) -> None:
    admin = AdminClient(broker.client("SASL_SSL"))
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def _produce(conf: dict[str, str], topic: str, values: list[bytes]) -> None:
    producer = Producer({**conf, "acks": "all"})
    errors: list[KafkaError] = []
    for i, value in enumerate(values):
        producer.produce(
            topic,
            value,
            partition=i % PARTITIONS if len(values) > 1 else 0,
            on_delivery=lambda err, _m: errors.append(err) if err else None,
        )
    assert producer.flush(30) == 0
    if errors:
        raise KafkaException(errors[0])


def _read(conf: dict[str, str], topic: str, partitions: int, expected: int) -> list[bytes]:
    return [m.value() for m in _read_messages(conf, topic, partitions, expected)]


def _read_messages(conf: dict[str, str], topic: str, partitions: int, expected: int) -> list[Any]:
    consumer = Consumer(
        {**conf, "group.id": f"read-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: list[Any] = []
        misses = 0
        while len(out) < expected and misses < 20:
            msgs = consumer.consume(500, 1.0)
            misses = 0 if msgs else misses + 1
            for msg in msgs:
                if msg.error():
                    raise KafkaException(msg.error())
                out.append(msg)
        return out
    finally:
        consumer.close()


@pytest.mark.parametrize(
    ("listener", "mechanism"),
    [
        ("SSL", ""),
        ("MTLS", ""),
        ("SASL_SSL", "SCRAM-SHA-512"),
        ("SASL_SSL", "PLAIN"),
        ("SASL_SSL", "OAUTHBEARER"),
        ("SASL_PLAINTEXT", "SCRAM-SHA-512"),
        ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
    ],
)
def test_every_listener_carries_records_for_the_super_user(
    secured: dict[str, SecureKRaftBroker], listener: str, mechanism: str
) -> None:
    broker = secured["A"]
    conf = broker.client(listener, "admin", mechanism or "SCRAM-SHA-512")
    topic = f"listener-{listener.lower()}-{mechanism.lower()}-{uuid.uuid4().hex[:6]}"
    admin = AdminClient(conf)  # kept: a collected client ends its requests
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    _produce(conf, topic, [b"over-" + listener.encode()])
    assert _read(conf, topic, 1, 1) == [b"over-" + listener.encode()]


@pytest.mark.parametrize("listener", ["SASL_SSL", "MTLS"])
def test_an_ordinary_principal_gets_what_acls_grant(
    secured: dict[str, SecureKRaftBroker], listener: str
) -> None:
    """User ``app`` (a SCRAM user, or the CN of its client certificate) is refused
    writing a topic until an ACL allows ``User:app`` to write it."""
    broker = secured["A"]
    topic = f"acl-{listener.lower()}-{uuid.uuid4().hex[:6]}"
    _create(broker, topic)
    app = broker.client(listener, "app")
    with pytest.raises(KafkaException) as refused:
        _produce(app, topic, [b"not allowed"])
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, refused.value
    admin = AdminClient(broker.client("SASL_SSL"))
    grant = AclBinding(
        ResourceType.TOPIC,
        topic,
        ResourcePatternType.LITERAL,
        "User:app",
        "*",
        AclOperation.WRITE,
        AclPermissionType.ALLOW,
    )
    admin.create_acls([grant])[grant].result(30)
    # CreateAcls answers once the controller holds the ACL; the broker's authorizer
    # applies it from the metadata log a moment later (seen: a write refused right after)
    deadline = time.monotonic() + 15
    while True:
        try:
            _produce(app, topic, [b"allowed"])
            break
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_AUTHORIZATION_FAILED:
                raise
            if time.monotonic() > deadline:
                raise AssertionError(f"User:app still refused 15 s after the grant: {exc}") from exc
            time.sleep(0.2)
    assert _read(broker.client("SASL_SSL"), topic, 1, 1) == [b"allowed"]


def _config(
    tmp_path: Path,
    a_settings: dict[str, str],
    b: SecureKRaftBroker,
    topic: str,
    group: str,
    b_listener: str = "MTLS",
    extra: dict[str, object] | None = None,
    b_user: str = "admin",
    b_settings: dict[str, str] | None = None,
) -> Path:
    """Flow A->B of ``topic`` and ``group``: A reached with ``a_settings``, B over
    ``b_listener`` as ``b_user`` (its super user), or with ``b_settings``, as an MM2
    file spells them."""
    props: dict[str, object] = {
        "clusters": "A, B",
        **a_settings,
        **(b_settings or b.mm2("B", b_listener, b_user)),
        "A->B.enabled": "true",
        "A->B.topics": topic,
        "A->B.groups": group,
        "replication.factor": 1,
        "checkpoints.topic.replication.factor": 1,
        "heartbeats.topic.replication.factor": 1,
        "offset-syncs.topic.replication.factor": 1,
        "mm.state.dir": tmp_path / "state",
        "spark.master": "local[2]",
        **(extra or {}),
    }
    return write_properties(tmp_path / "connect-mirror-maker.properties", props)


def _allow(resource: ResourceType, name: str, principal: str, op: AclOperation) -> AclBinding:
    return AclBinding(
        resource, name, ResourcePatternType.LITERAL, principal, "*", op, AclPermissionType.ALLOW
    )


def test_acl_sync_without_describe_on_the_source_says_so_and_the_grant_is_followed(
    secured: dict[str, SecureKRaftBroker], tmp_path: Path
) -> None:
    """The mirror's principal on A (``User:mm``) may use every topic, group and
    transactional id but not DESCRIBE the cluster, which DescribeAcls needs. Apache
    Kafka refuses DescribeAcls, and librdkafka reads the refusal as "no ACLs" (before:
    the sync copied nothing and said nothing). The mirror runs and warns, naming the
    right to grant; granted as it says, the next run copies the topic's ACLs to B by
    MM2's rules: READ copied, ALLOW WRITE not, ALL as READ, DENY copied, prefixed and
    ``*`` bindings (User:mm's own rights here) left out."""
    a, b = secured["A"], secured["B"]
    topic = f"acls-{uuid.uuid4().hex[:6]}"
    _create(a, topic)
    _produce(a.client("SASL_SSL"), topic, [b"one"])
    admin_a = AdminClient(a.client("SASL_SSL"))  # the super user
    rights = [
        _allow(kind, "*", "User:mm", AclOperation.ALL)
        for kind in (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID)
    ]
    app_reads = _allow(ResourceType.TOPIC, topic, "User:app", AclOperation.READ)
    deny = AclBinding(
        ResourceType.TOPIC,
        topic,
        ResourcePatternType.LITERAL,
        "User:intruder",
        "*",
        AclOperation.READ,
        AclPermissionType.DENY,
    )
    prefixed = AclBinding(
        ResourceType.TOPIC,
        "acls-",
        ResourcePatternType.PREFIXED,
        "User:app",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    source = [
        app_reads,
        _allow(ResourceType.TOPIC, topic, "User:app", AclOperation.WRITE),  # never copied
        _allow(ResourceType.TOPIC, topic, "User:ops", AclOperation.ALL),  # copied as READ
        deny,
        prefixed,
    ]
    for future in admin_a.create_acls([*rights, *source]).values():
        future.result(30)
    config = _config(tmp_path, a.mm2("A", "SASL_SSL", "mm"), b, topic, f"g-{topic}")
    remote = f"A.{topic}"
    wanted = {
        (x.principal, x.operation, x.permission_type)
        for x in (
            _allow(ResourceType.TOPIC, remote, "User:app", AclOperation.READ),
            _allow(ResourceType.TOPIC, remote, "User:ops", AclOperation.READ),
            AclBinding(
                ResourceType.TOPIC,
                remote,
                ResourcePatternType.LITERAL,
                "User:intruder",
                "*",
                AclOperation.READ,
                AclPermissionType.DENY,
            ),
        )
    }
    admin_b = AdminClient(b.client("SASL_SSL"))

    def on_b() -> list[AclBinding]:
        listed = admin_b.describe_acls(
            AclBindingFilter(
                ResourceType.TOPIC,
                f"A.{topic}",
                ResourcePatternType.LITERAL,
                None,
                None,
                AclOperation.ANY,
                AclPermissionType.ANY,
            )
        )
        return list(listed.result(30))

    try:
        _acl_sync_refused_then_granted(admin_a, config, on_b, wanted, topic, b)
    finally:
        # the broker is the module's: later tests expect User:mm to hold no right
        granted = [*rights, *source, _describe_cluster("User:mm")]
        for future in admin_a.delete_acls([_exactly(x) for x in granted]).values():
            future.result(30)


def _describe_cluster(principal: str) -> AclBinding:
    return _allow(ResourceType.BROKER, "kafka-cluster", principal, AclOperation.DESCRIBE)


def _exactly(binding: AclBinding) -> AclBindingFilter:
    return AclBindingFilter(
        binding.restype,
        binding.name,
        binding.resource_pattern_type,
        binding.principal,
        binding.host,
        binding.operation,
        binding.permission_type,
    )


def _acl_sync_refused_then_granted(
    admin_a: AdminClient,
    config: Path,
    on_b: Any,
    wanted: set[tuple[str, AclOperation, AclPermissionType]],
    topic: str,
    b: SecureKRaftBroker,
) -> None:
    first = run_mm(config, "mirror", "--once")
    assert first.returncode == 0, first.output[-6000:]
    assert (
        "topic ACL sync: not authorized to list topic ACLs (DescribeAcls) on cluster A: "
        "grant the mirror's principal DESCRIBE on CLUSTER there, or set "
        "A->B.sync.topic.acls.enabled = false"
    ) in first.output, first.output[-6000:]
    assert on_b() == []
    assert _read(b.client("MTLS"), f"A.{topic}", 1, 1) == [b"one"]

    grant = _describe_cluster("User:mm")
    admin_a.create_acls([grant])[grant].result(30)
    again = run_mm(config, "mirror", "--once")
    assert again.returncode == 0, again.output[-6000:]
    assert "topic ACL sync" not in again.output, again.output[-6000:]
    assert {(x.principal, x.operation, x.permission_type) for x in on_b()} == wanted


@pytest.mark.parametrize(("a_listener", "b_listener"), [("SSL", "MTLS"), ("SASL_SSL", "SASL_SSL")])
def test_the_dr_day_on_a_secured_pair(
    secured: dict[str, SecureKRaftBroker], tmp_path: Path, a_listener: str, b_listener: str
) -> None:
    """A over ``a_listener`` and B over ``b_listener`` (SSL with a CA file and mutual
    TLS, each command reading and writing both: one run where one run per listener
    was before; SASL_SSL with SCRAM-SHA-512 on both), spelt as an MM2 file spells
    them: `mm run` mirrors every record exactly once and checkpoints the group
    exactly (read by mm_client); `mm status`,
    `mm verify`, `mm switchover`, `mm failover`, `mm failback`, `mm backup` and
    `mm restore` exit as on PLAINTEXT with the same verdicts (verify, switchover and
    failback refused every TLS/SASL cluster before), verify's and failback's reports
    with the same verdicts and fields as over the PLAINTEXT listeners; no password in
    anything the runs wrote."""
    from support.mirror import running_job

    a, b = secured["A"], secured["B"]
    topic, group, values, committed = _orders_and_a_group(a)
    config = _config(
        tmp_path,
        a.mm2("A", a_listener, "admin"),
        b,
        topic,
        group,
        b_listener=b_listener,
        extra={
            "emit.checkpoints.interval.seconds": "1",
            "mm.mirror.trigger.seconds": "0.5",
            "backup.cluster": "A",
            "backup.path": tmp_path / "backup",
        },
    )
    target = f"A.{topic}"
    with running_job(config, tmp_path, ("run", "--jobs", "mirror,checkpoint")) as job:
        _until_translated(b, group, target, committed, job)
        got = _read(b.client(b_listener), target, PARTITIONS, RECORDS)
        assert sorted(got) == sorted(values)
        status = run_mm(config, "status", "--json")
        assert status.returncode == 0, status.output[-6000:]
        assert json.loads(status.stdout)["flows"], status.stdout

    # the DR day on the same clusters: the record-level audit, a switchover proven by
    # content, a failover point, and failback's divergence read from A; the audit and
    # the divergence also over the operator's PLAINTEXT listeners, to compare
    (tmp_path / "plain").mkdir()
    plain = _config(
        tmp_path / "plain", a.mm2("A", "PLAINTEXT"), b, topic, group, "PLAINTEXT",
        extra={"mm.state.dir": tmp_path / "state"},
    )  # fmt: skip
    _same_over_plaintext(_assert_verified(config, topic), plain, ("verify", "--json"))
    switch = run_mm(config, "switchover", "--groups", group, "--settle", "1", "--json")
    assert switch.returncode == 0, switch.output[-6000:]
    report = json.loads(switch.stdout)
    assert report["ok"] and [g["status"] for g in report["groups"]] == ["moved"], report
    assert report["proof"]["translations_exact"] == PARTITIONS, report
    failover = run_mm(config, "failover", "--groups", group, "--json")
    assert failover.returncode == 0, failover.output[-6000:]
    late = [f"late-{i}".encode() for i in range(6)]
    _produce(a.client("SASL_SSL"), topic, late)  # A took writes B never got
    back = run_mm(config, "failback", "--quarantine-only", "--dry-run", "--json")
    assert back.returncode == 0, back.output[-6000:]
    divergence = json.loads(back.stdout)
    assert divergence["divergent_records"] == len(late), divergence
    _same_over_plaintext(back, plain, ("failback", "--quarantine-only", "--dry-run", "--json"))

    # A's topic backed up over the same listener, restored into B under a prefix
    backup = run_mm(config, "backup", "--once", "--json")
    assert backup.returncode == 0, backup.output[-6000:]
    restore = run_mm(
        config, "restore", "--to", "B", "--topics", topic, "--topic-prefix", "r.", "--json"
    )
    assert restore.returncode == 0, restore.output[-6000:]
    restored = _read(b.client(b_listener), f"r.{topic}", PARTITIONS, RECORDS + len(late))
    assert sorted(restored) == sorted([*values, *late])

    passwords = [*a.passwords.values(), *b.passwords.values()]
    _assert_no_password(tmp_path, config, passwords, job.final_output)


def _until_translated(
    b: SecureKRaftBroker, group: str, target: str, committed: dict[int, int], job: Any
) -> None:
    """Waits (240 s at most, while ``job`` runs) until ``group``'s checkpoints on B,
    read by mm_client, translate to ``committed`` on ``target``: one plain producer per
    partition wrote A's topic, so source and target offsets are the same."""
    deadline = time.monotonic() + 240
    translated: dict[int, int] = {}
    while time.monotonic() < deadline and job.proc.poll() is None:
        try:
            found = translate_offsets(b.client("SASL_SSL"), "A", group)
        except CheckpointsUnavailableError:  # the job has not created the topic yet
            found = {}
        translated = {tp.partition: o for tp, o in found.items() if tp.topic == target}
        if translated == committed:
            return
        time.sleep(1)
    assert translated == committed, job.output()[-6000:]


def _same_over_plaintext(run: Any, plain: Path, args: tuple[str, ...]) -> None:
    """``args`` run with the ``plain`` config (the same clusters over their PLAINTEXT
    listeners) exit as ``run`` did, with the same JSON fields and values (times
    aside)."""
    again = run_mm(plain, *args)
    assert again.returncode == run.returncode, again.output[-6000:]
    docs = [json.loads(r.stdout) for r in (run, again)]
    assert _fields(docs[0]) == _fields(docs[1]), (args, docs)
    timed = ("seconds", "spark_tasks", "failover_point_recorded_ms")
    assert [{k: v for k, v in d.items() if k not in timed} for d in docs] == [
        {k: v for k, v in d.items() if k not in timed} for d in docs[::-1]
    ], (args, docs)


def _fields(doc: Any, at: str = "") -> set[str]:
    """Every key path of a JSON document (list items under ``[]``)."""
    if isinstance(doc, dict):
        return {f"{at}.{k}" for k in doc} | {
            path for k, v in doc.items() for path in _fields(v, f"{at}.{k}")
        }
    if isinstance(doc, list):
        return {path for item in doc for path in _fields(item, f"{at}[]")}
    return set()


def _assert_verified(config: Path, topic: str) -> Any:
    """`mm verify` passes and matched every record of ``topic``; returns its run."""
    verify = run_mm(config, "verify", "--json")
    assert verify.returncode == 0, verify.output[-6000:]
    report = json.loads(verify.stdout)
    assert report["ok"], report
    # the module's A may hold a heartbeats topic (other tests wrote it): mirrored too
    parts = [p for p in report["flows"][0]["partitions"] if p["topic"] == topic]
    assert sum(p["records_matched"] for p in parts) == RECORDS, parts
    return verify


def _orders_and_a_group(a: SecureKRaftBroker) -> tuple[str, str, list[bytes], dict[int, int]]:
    """A new topic on A with :data:`RECORDS` records and a group that read part of it:
    (topic, group, the values, the group's committed offsets)."""
    topic = f"orders-{uuid.uuid4().hex[:6]}"
    group = f"billing-{uuid.uuid4().hex[:6]}"
    _create(a, topic, PARTITIONS)
    values = [f"order-{i:04d}".encode() for i in range(RECORDS)]
    _produce(a.client("SASL_SSL"), topic, values)
    committed = {0: 40, 1: 77, 2: RECORDS // PARTITIONS}
    commit_admin(a.bootstrap, group, topic, committed)  # the operator's PLAINTEXT listener
    return topic, group, values, committed


def _assert_no_password(root: Path, config: Path, passwords: list[str], *outputs: str) -> None:
    """No password in any output, nor in any file the runs wrote under ``root`` (the
    configuration file, which holds them, aside)."""
    files = [p for p in root.rglob("*") if p.is_file() and p != config]
    assert len(files) > 10, files  # the runs' outputs, state and backup are there
    for password in passwords:
        for text in outputs:
            assert password not in text
        for path in files:
            assert password.encode() not in path.read_bytes(), f"{path} holds a password"


def _mirror_acls(topic: str) -> tuple[list[AclBinding], list[AclBinding]]:
    """What `mm mirror` needs as ``User:mm`` for flow A->B of ``topic`` (offset syncs on
    A, topic ACL sync and heartbeats off), on A and on B: docs/security.md's row."""
    allow = _rights

    op = AclOperation
    on_a = [
        *allow(ResourceType.TOPIC, topic, [op.READ, op.DESCRIBE, op.DESCRIBE_CONFIGS]),
        *allow(
            ResourceType.TOPIC, "mm2-offset-syncs.B.internal", [op.CREATE, op.WRITE, op.DESCRIBE]
        ),
        # the source reader is assign-only, but librdkafka asks for its group's
        # coordinator, which Apache Kafka authorizes with DESCRIBE on the group
        *allow(ResourceType.GROUP, "__mm.mirror.A.B", [op.DESCRIBE]),
    ]
    on_b = [
        *allow(
            ResourceType.TOPIC,
            "A.",
            [op.CREATE, op.WRITE, op.READ, op.DESCRIBE, op.DESCRIBE_CONFIGS, op.ALTER_CONFIGS],
            prefixed=True,
        ),
        *allow(ResourceType.TOPIC, "mm-mirror-ends.A.internal", [op.CREATE, op.WRITE, op.DESCRIBE]),
        *allow(
            ResourceType.TOPIC,
            "mm-mirror-shards.A.internal",
            [op.CREATE, op.WRITE, op.READ, op.DESCRIBE],
        ),
        *allow(ResourceType.TRANSACTIONAL_ID, "mm.A.B.", [op.WRITE, op.DESCRIBE], prefixed=True),
        *allow(ResourceType.GROUP, "__mm.mirror.A.B", [op.READ, op.DESCRIBE]),
    ]
    return on_a, on_b


def test_mirror_as_a_principal_holding_only_its_listed_acls(
    secured: dict[str, SecureKRaftBroker], tmp_path: Path
) -> None:
    """`mm mirror --once` as ``User:mm`` (SCRAM over SASL_SSL on both clusters) holding
    only the ACLs docs/security.md lists for it: every record copied exactly. Before
    this run the table missed two (DESCRIBE on the reader's group on A, READ on the
    remote topics on B) and the mirror, refused, restarted its query until killed."""
    a, b = secured["A"], secured["B"]
    topic = f"orders-{uuid.uuid4().hex[:6]}"
    _create(a, topic, PARTITIONS)
    values = [f"order-{i:04d}".encode() for i in range(RECORDS)]
    _produce(a.client("SASL_SSL"), topic, values)
    mirror = _mirror_as_mm(secured, tmp_path, topic, _mirror_acls(topic))
    assert mirror.returncode == 0, mirror.output[-6000:]
    assert "authorization failed" not in mirror.output.lower(), mirror.output[-6000:]
    got = _read(b.client("SASL_SSL"), f"A.{topic}", PARTITIONS, RECORDS)
    assert sorted(got) == sorted(values)


def _mirror_as_mm(
    secured: dict[str, SecureKRaftBroker],
    tmp_path: Path,
    topic: str,
    acls: tuple[list[AclBinding], list[AclBinding]],
) -> Any:
    """`mm mirror --once` of ``topic`` as ``User:mm`` (SCRAM over SASL_SSL on both
    clusters; topic ACL sync, heartbeats and checkpoints off) holding ``acls`` (on A,
    on B) for the run only (the brokers are the module's: later tests expect User:mm
    to hold no right)."""
    a, b = secured["A"], secured["B"]
    admins = {"A": AdminClient(a.client("SASL_SSL")), "B": AdminClient(b.client("SASL_SSL"))}
    config = _config(
        tmp_path,
        a.mm2("A", "SASL_SSL", "mm"),
        b,
        topic,
        "none",
        b_listener="SASL_SSL",
        b_user="mm",
        extra={
            "A->B.sync.topic.acls.enabled": "false",
            "A->B.emit.heartbeats.enabled": "false",
            "A->B.emit.checkpoints.enabled": "false",
        },
    )
    with _Granted(admins, acls):
        return run_mm(config, "mirror", "--once", timeout=180)


def test_heartbeats_refused_without_acls_then_disabled_or_granted_as_the_message_says(
    secured: dict[str, SecureKRaftBroker], tmp_path: Path
) -> None:
    """An operator's ways out followed: user ``mm`` may not write A's heartbeats topic, so
    `mm heartbeat --once` refuses naming the ACLs to grant or the key to set; the key set
    as it says, the job runs and writes nothing on A; the ACLs granted instead, the job
    writes its heartbeat."""
    a, b = secured["A"], secured["B"]
    props: dict[str, object] = {
        "clusters": "A, B",
        **a.mm2("A", "SASL_SSL", "mm"),
        **b.mm2("B", "MTLS", "admin"),
        "A->B.enabled": "true",
        "A->B.topics": "nothing",
        "heartbeats.topic.replication.factor": 1,
        "mm.state.dir": tmp_path / "state",
    }
    config = write_properties(tmp_path / "mm.properties", props)
    refused = run_mm(config, "heartbeat", "--once", timeout=120)
    assert refused.returncode == 1, refused.output[-3000:]
    assert "not authorized to write heartbeats to topic heartbeats on cluster A" in refused.stderr
    assert (
        "Grant the A producer's principal WRITE and DESCRIBE on topic heartbeats (and CREATE, "
        "or create it: 1 partition, cleanup.policy=compact)"
    ) in refused.stderr, refused.stderr[-3000:]
    way_out = "or set emit.heartbeats.enabled = false for A->B"
    assert way_out in refused.stderr and "Traceback" not in refused.stderr, refused.stderr

    off = write_properties(
        tmp_path / "off.properties", {**props, "A->B.emit.heartbeats.enabled": "false"}
    )
    disabled = run_mm(off, "heartbeat", "--once", timeout=120)
    assert disabled.returncode == 0, disabled.output[-3000:]
    assert [e["flow"] for e in disabled.events("heartbeats disabled for flow")] == ["A->B"]
    assert "heartbeat A->B: disabled (emit.heartbeats.enabled = false), nothing written" in (
        disabled.stderr
    )
    admin = AdminClient(a.client("SASL_SSL"))  # the super user sees every topic
    assert "heartbeats" not in admin.list_topics(timeout=30).topics

    grants = [
        AclBinding(
            ResourceType.TOPIC,
            "heartbeats",
            ResourcePatternType.LITERAL,
            "User:mm",
            "*",
            op,
            AclPermissionType.ALLOW,
        )
        for op in (AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE)
    ]
    for fut in admin.create_acls(grants).values():
        fut.result(30)
    try:
        granted = run_mm(config, "heartbeat", "--once", timeout=120)
    finally:
        # the broker is the module's: later tests expect User:mm to hold no right (with
        # these, its mirrors would see the heartbeats topic)
        for fut in admin.delete_acls([_exactly(x) for x in grants]).values():
            fut.result(30)
    assert granted.returncode == 0, granted.output[-3000:]
    assert "heartbeat A->B: 1 written to heartbeats on A" in granted.stdout, granted.output
    (msg,) = _read_messages(a.client("SASL_SSL"), "heartbeats", 1, 1)
    beat = Heartbeat.from_bytes(msg.key(), msg.value())
    assert (beat.source_cluster_alias, beat.target_cluster_alias) == ("A", "B")


def test_drill_on_a_secured_pair_passes_every_scenario(
    secured: dict[str, SecureKRaftBroker], tmp_path: Path
) -> None:
    """`mm drill -c FILE` with A over TLS with a CA file and B over mutual TLS, as an
    MM2 file spells them: switchover, failover and failback all pass, as on
    PLAINTEXT (before: the failback scenario was refused and the switchover failed).
    Every scenario reads and writes both clusters, in both directions (failback
    mirrors B back into A), so one drill takes each spelling as source and as
    target (it ran once per listener before: 75-110 s each). The SASL_SSL pair:
    the least-privilege drill below."""
    a, b = secured["A"], secured["B"]
    config = write_properties(
        tmp_path / "mm.properties",
        {
            "clusters": "A, B",
            **a.mm2("A", "SSL", "admin"),
            **b.mm2("B", "MTLS", "admin"),
            "A->B.enabled": "true",
            "replication.factor": 1,
        },
    )
    _assert_drill_passed(secured, tmp_path, config, _drill(config, tmp_path / "drill"))


@pytest.mark.parametrize(
    ("dropped", "named"),
    [
        # (cluster, ACL index in _mirror_acls' list), what the line must name
        (("A", 0), "fetch {topic}[0] on cluster A (reader group __mm.mirror.A.B)"),
        (("B", 1), "produce to A.{topic}[0] on cluster B failed: Failed to add partition(s)"),
        # the planner's first transactional call: it takes the flow's shard map writer
        (
            ("B", 13),
            "init transactions of the shard map writer mm.A.B.shards "
            "(topic mm-mirror-shards.A.internal) on cluster B",
        ),
    ],
    ids=["source-READ", "target-WRITE", "transactional-id-WRITE"],
)
def test_mirror_refused_one_listed_acl_stops_at_once_in_one_line(
    secured: dict[str, SecureKRaftBroker],
    tmp_path: Path,
    dropped: tuple[str, int],
    named: str,
) -> None:
    """`mm mirror --once` as ``User:mm`` holding every ACL of its row but one: exit 1
    at once with one line naming the operation, the resource and the cluster, no
    traceback, nothing written to B. Before: Spark's and py4j's traces, then the
    query restarted with back-off until mm.mirror.retry.timeout.seconds (300 s)."""
    a, b = secured["A"], secured["B"]
    topic = f"orders-{uuid.uuid4().hex[:6]}"
    _create(a, topic, PARTITIONS)
    _produce(a.client("SASL_SSL"), topic, [f"order-{i:04d}".encode() for i in range(30)])
    on_a, on_b = _mirror_acls(topic)
    alias, index = dropped
    taken = (on_a if alias == "A" else on_b)[index]
    started = time.monotonic()
    mirror = _mirror_as_mm(
        secured,
        tmp_path,
        topic,
        ([x for x in on_a if x is not taken], [x for x in on_b if x is not taken]),
    )
    took = time.monotonic() - started
    assert mirror.returncode == 1, mirror.output[-6000:]
    errors = [line for line in mirror.stderr.splitlines() if line.startswith("mm mirror: error:")]
    assert len(errors) == 1, mirror.output[-6000:]
    assert errors[0].startswith("mm mirror: error: flow A->B stopped, refused by the cluster: ")
    # whichever partition the shard reached first: [0] stands for any
    pattern = re.escape(named.format(topic=topic)).replace(r"\[0\]", r"\[\d+\]")
    assert re.search(pattern, errors[0]), errors[0]
    assert "AUTHORIZATION_FAILED" in errors[0] and errors[0].endswith("then run again")
    assert "Traceback" not in mirror.output and "Exception" not in mirror.output, mirror.output
    assert took < 100, took  # no restart with back-off: the refusal ends the run
    ends = Consumer({**b.client("SASL_SSL"), "group.id": "ends"})
    try:
        for p in range(PARTITIONS):
            low_high = ends.get_watermark_offsets(TopicPartition(f"A.{topic}", p), timeout=30)
            assert low_high == (0, 0), (p, low_high)  # nothing half-done on B
    finally:
        ends.close()


def _rights(
    resource: ResourceType, name: str, ops: list[AclOperation], prefixed: bool = False
) -> list[AclBinding]:
    pattern = ResourcePatternType.PREFIXED if prefixed else ResourcePatternType.LITERAL
    return [
        AclBinding(resource, name, pattern, "User:mm", "*", op, AclPermissionType.ALLOW)
        for op in ops
    ]


def _job_acls(job: str, topic: str, group: str) -> tuple[list[AclBinding], list[AclBinding]]:
    """docs/security.md's row of ``job`` for flow A->B of ``topic`` and ``group``, as
    (ACLs on A, ACLs on B) of ``User:mm``."""
    op, T, G = AclOperation, ResourceType.TOPIC, ResourceType.GROUP
    read = [op.READ, op.DESCRIBE]
    mirror_group = _rights(G, "__mm.mirror.A.B", [op.DESCRIBE])
    # mm's own throwaway readers (never joined, never committed): the coordinator lookup
    readers = _rights(G, "__mm-", [op.DESCRIBE], prefixed=True)
    switchover_b = [
        *_rights(T, "A.checkpoints.internal", read),
        *_rights(T, "mm-mirror-ends.A.internal", read),
        *_rights(T, f"A.{topic}", read),
        *mirror_group,
        *_rights(G, group, read),
        *readers,
    ]
    # the failover also records its point (a switchover does not: a run without
    # this right moved the group)
    points = _rights(T, "mm-failover-points.A.internal", [op.CREATE, op.WRITE, op.DESCRIBE])
    rows = {
        "translate": ([], [*_rights(T, "A.checkpoints.internal", read), *readers]),
        "checkpoint": (
            [
                *_rights(G, group, [op.DESCRIBE]),
                *_rights(T, topic, [op.DESCRIBE]),
                *_rights(T, "mm2-offset-syncs.B.internal", [*read, op.DESCRIBE_CONFIGS]),
                *readers,
            ],
            [
                *_rights(T, "A.checkpoints.internal", [op.CREATE, op.WRITE, *read]),
                # its translation history, for offsets kept outside Kafka groups
                *_rights(T, "mm-offset-history.A.internal", [op.CREATE, op.WRITE, op.DESCRIBE]),
                *mirror_group,
                *readers,
            ],
        ),
        "status": (
            # heartbeats: MM2's policy mirrors them with every flow, and status reads the
            # age of every mirrored topic's newest record
            [
                *_rights(T, topic, read),
                *_rights(T, "heartbeats", read),
                *_rights(G, group, [op.DESCRIBE]),
                *readers,
            ],
            [*_rights(T, "A.", read, prefixed=True), *mirror_group, *readers],
        ),
        "verify": (
            [
                *_rights(T, topic, read),
                *_rights(T, "mm2-offset-syncs.B.internal", read),
                *readers,
            ],
            [*_rights(T, "A.", read, prefixed=True), *mirror_group, *readers],
        ),
        "switchover": (
            [*_rights(T, topic, read), *_rights(G, group, [op.DESCRIBE]), *readers],
            switchover_b,
        ),
        "failover": ([], [*switchover_b, *points]),
        "failback": (
            [*_rights(T, topic, read), *_rights(G, group, read), *readers],
            [
                *_rights(T, "mm-failover-points.A.internal", read),
                *_rights(T, f"A.{topic}", read),
                *readers,
            ],
        ),
        "backup": (
            [
                *_rights(T, topic, [*read, op.DESCRIBE_CONFIGS]),
                *_rights(G, group, [op.DESCRIBE]),
                *readers,
            ],
            [],
        ),
        "restore": (
            [],
            [
                # READ: the restore's position is committed in its transactions
                *_rights(T, "r.", [op.CREATE, op.WRITE, *read], prefixed=True),
                *_rights(T, "mm-restore-offsets.A.internal", [op.CREATE, op.WRITE, *read]),
                *_rights(
                    ResourceType.TRANSACTIONAL_ID, "mm-restore-A-", [op.WRITE, op.DESCRIBE], True
                ),
                *_rights(G, "mm-restore-A", read),
                *_rights(G, group, read),
            ],
        ),
    }
    return rows[job]


# per job, the right of its row taken away first: (cluster, (resource, operation))
_TAKEN = {
    "translate": ("B", ("A.checkpoints.internal", AclOperation.READ)),
    "checkpoint": ("A", ("mm2-offset-syncs.B.internal", AclOperation.READ)),
    "status": ("B", ("A.", AclOperation.READ)),
    "verify": ("B", ("__mm-", AclOperation.DESCRIBE)),
    "switchover": ("B", ("{group}", AclOperation.READ)),
    "failover": ("B", ("A.checkpoints.internal", AclOperation.READ)),
    "failback": ("A", ("{topic}", AclOperation.READ)),
    "backup": ("A", ("{topic}", AclOperation.READ)),
    "restore": ("B", ("r.", AclOperation.WRITE)),
}


def _assert_refused_in_words(job: str, run: Any, resource: str, cluster: list[str]) -> None:
    """``run`` failed (exit 1) and says so without a trace: its words name the resource
    refused, the cluster (by alias, or as mm_client names it: its bootstrap servers)
    and the refusal."""
    assert run.returncode == 1, (job, run.output[-6000:])
    assert "Traceback" not in run.output, (job, run.output[-6000:])
    said = [
        line
        for line in run.output.splitlines()
        if "AUTHORIZATION_FAILED" in line
        and resource in line
        and any(f"on cluster {c}" in line or f" on {c}" in line for c in cluster)
    ]
    assert said, (job, resource, cluster, run.output[-6000:])


class _Granted:
    """Grants ``User:mm`` one job's ACLs on A and B for a ``with`` block, then takes them
    back (the brokers are the module's: later tests expect User:mm to hold no right)."""

    def __init__(self, admins: dict[str, AdminClient], acls: tuple[list[Any], list[Any]]):
        self.admins, self.acls = admins, dict(zip("AB", acls, strict=True))

    def __enter__(self) -> None:
        for alias, acls in self.acls.items():
            for future in (self.admins[alias].create_acls(acls) if acls else {}).values():
                future.result(30)

    def __exit__(self, *exc: object) -> None:
        for alias, acls in self.acls.items():
            if acls:
                for future in self.admins[alias].delete_acls([_exactly(x) for x in acls]).values():
                    future.result(30)


def test_the_dr_day_as_a_principal_holding_only_each_jobs_listed_acls(
    secured: dict[str, SecureKRaftBroker], tmp_path: Path
) -> None:
    """After a mirror (run by the super user), each DR-day command runs as ``User:mm``
    (SCRAM over SASL_SSL on both clusters): first holding its docs/security.md row but
    one right (:data:`_TAKEN`), refused in one traceback-free line naming the resource,
    the cluster and the refusal; then holding exactly its row, exiting as it does for
    the super user: checkpoint, translate, status, verify, switchover, failover, failback,
    backup, restore. Before: verify's refused reader ended in a traceback, and the
    restore's in a failed Spark job naming an invalid transaction state."""
    a, b = secured["A"], secured["B"]
    topic, group, values, committed = _orders_and_a_group(a)
    common = {
        "A->B.sync.topic.acls.enabled": "false",
        "A->B.emit.heartbeats.enabled": "false",
        # the module's A may hold old heartbeats (other tests wrote them): mirrored,
        # they read as minutes of latency and `mm status` would alert
        "mm.alert.replication.latency.ms": 3_600_000,
        "mm.state.dir": tmp_path / "state",
        "backup.cluster": "A",
        "backup.path": tmp_path / "backup",
    }
    configs = {}  # one state dir: the super user's mirror, then User:mm's jobs
    for user in ("admin", "mm"):
        (tmp_path / user).mkdir()
        configs[user] = _config(
            tmp_path / user, a.mm2("A", "SASL_SSL", user), b, topic, group, "SASL_SSL",
            extra=common, b_user=user,
        )  # fmt: skip
    admin_config, config = configs["admin"], configs["mm"]
    mirror = run_mm(admin_config, "mirror", "--once")
    assert mirror.returncode == 0, mirror.output[-6000:]
    admins = {"A": AdminClient(a.client("SASL_SSL")), "B": AdminClient(b.client("SASL_SSL"))}

    def as_mm(job: str, *args: str) -> Any:
        on_a, on_b = _job_acls(job, topic, group)
        # first without one right of its row: refused, in words naming what
        alias, (resource, operation) = _TAKEN[job]
        name = resource.format(topic=topic, group=group)
        kept = [
            [x for x in acls if not (side == alias and (x.name, x.operation) == (name, operation))]
            for side, acls in (("A", on_a), ("B", on_b))
        ]
        assert sum(map(len, kept)) == len(on_a) + len(on_b) - 1, (job, kept)
        with _Granted(admins, (kept[0], kept[1])):
            refused = run_mm(config, job, *args, timeout=180)
        names = [alias, secured[alias].bootstrap_of("SASL_SSL")]
        _assert_refused_in_words(job, refused, name.removesuffix("."), names)
        with _Granted(admins, (on_a, on_b)):
            run = run_mm(config, job, *args, timeout=180)
        assert run.returncode == 0, (job, run.output[-6000:])
        return json.loads(run.stdout) if "--json" in args else run

    as_mm("checkpoint", "--once")
    found = translate_offsets(b.client("SASL_SSL"), "A", group)
    assert {tp.partition: o for tp, o in found.items()} == committed, found
    # an application team's kafka-python settings for the same listener: the same answer
    sasl = b.client("SASL_SSL")
    kafka_python = {
        "bootstrap_servers": [sasl["bootstrap.servers"]],
        "security_protocol": "SASL_SSL",
        "ssl_cafile": sasl["ssl.ca.location"],
        "sasl_mechanism": sasl["sasl.mechanism"],
        "sasl_plain_username": sasl["sasl.username"],
        "sasl_plain_password": sasl["sasl.password"],
        "value_deserializer": bytes.decode,
    }
    assert translate_offsets(kafka_python, "A", group) == found
    with pytest.raises(CheckpointsUnavailableError, match="SASL: the broker refused the cred"):
        translate_offsets({**kafka_python, "sasl_plain_password": "wrong"}, "A", group, 5)
    no_ca = {k: v for k, v in kafka_python.items() if k != "ssl_cafile"}
    with pytest.raises(CheckpointsUnavailableError, match="TLS: the handshake failed"):
        translate_offsets(no_ca, "A", group, 5)
    translated = as_mm("translate", "--group", group, "--json")["offsets"]
    assert {x["partition"]: x["offset"] for x in translated} == committed, translated
    assert as_mm("status", "--json")["flows"]
    report = as_mm("verify", "--json")
    assert report["ok"], report
    switched = as_mm("switchover", "--groups", group, "--settle", "1", "--json")
    assert switched["ok"] and [g["status"] for g in switched["groups"]] == ["moved"], switched
    as_mm("failover", "--groups", group, "--json")
    late = [f"late-{i}".encode() for i in range(6)]
    _produce(a.client("SASL_SSL"), topic, late)
    back = as_mm("failback", "--quarantine-only", "--dry-run", "--json")
    assert back["divergent_records"] == len(late), back
    as_mm("backup", "--once", "--json")
    as_mm("restore", "--to", "B", "--topics", topic, "--topic-prefix", "r.", "--json")
    restored = _read(b.client("SASL_SSL"), f"r.{topic}", PARTITIONS, RECORDS + len(late))
    assert sorted(restored) == sorted([*values, *late])


@pytest.mark.parametrize(
    ("a_side", "b_side"),
    [
        (("SASL_PLAINTEXT", "SCRAM-SHA-256", "PEM"), ("SASL_SSL", "OAUTHBEARER", "PEM")),
        (("SASL_SSL", "PLAIN", "PEM"), ("MTLS", "", "PKCS12")),
    ],
    ids=["scram256-plaintext+oauthbearer", "plain+mtls-pkcs12"],
)
def test_the_other_mechanisms_carry_the_mirror_the_audit_and_the_status(
    secured: dict[str, SecureKRaftBroker],
    tmp_path: Path,
    a_side: tuple[str, str, str],
    b_side: tuple[str, str, str],
) -> None:
    """The mechanisms and key stores the DR-day test does not use, spelt as an MM2 file
    spells them: SASL_PLAINTEXT with SCRAM-SHA-256, SASL_SSL with OAUTHBEARER (Apache
    Kafka's unsecured tokens: OAuthBearerLoginModule with unsecuredLoginStringClaim_sub),
    SASL_SSL with PLAIN, mutual TLS with a password-protected PKCS12 key store.
    `mm mirror --once` copies every record, `mm verify` matches them, `mm status`
    reports the flow; no password in anything the runs wrote."""
    a, b = secured["A"], secured["B"]
    topic = f"orders-{uuid.uuid4().hex[:6]}"
    _create(a, topic, PARTITIONS)
    values = [f"order-{i:04d}".encode() for i in range(RECORDS)]
    _produce(a.client("SASL_SSL"), topic, values)
    (a_listener, a_mech, _), (b_listener, b_mech, b_store) = a_side, b_side
    config = _config(
        tmp_path,
        a.mm2("A", a_listener, "admin", a_mech or "SCRAM-SHA-512"),
        b,
        topic,
        "none",
        b_settings=b.mm2("B", b_listener, "admin", b_mech or "SCRAM-SHA-512", keystore=b_store),
        # the module's A may hold old heartbeats (other tests wrote them): mirrored,
        # they read as minutes of latency and `mm status` would alert
        extra={"mm.alert.replication.latency.ms": 3_600_000},
    )
    mirror = run_mm(config, "mirror", "--once")
    assert mirror.returncode == 0, mirror.output[-6000:]
    got = _read(b.client("SASL_SSL"), f"A.{topic}", PARTITIONS, RECORDS)
    assert sorted(got) == sorted(values)
    verify = _assert_verified(config, topic)
    status = run_mm(config, "status", "--json")
    assert status.returncode == 0, status.output[-6000:]
    flows = json.loads(status.stdout)["flows"]
    assert [(f["flow"], f["error"]) for f in flows] == [("A->B", None)], status.stdout
    passwords = [*a.passwords.values(), *b.passwords.values()]
    _assert_no_password(tmp_path, config, passwords, mirror.output, verify.output, status.output)


def _drill_acls() -> list[AclBinding]:
    """docs/security.md's row of `mm drill -c` for ``User:mm``, the same on A and B (the
    failback mirrors B back into A): every name a run creates starts with one of its
    prefixes, as the run's mark is new each time."""
    op, T, G = AclOperation, ResourceType.TOPIC, ResourceType.GROUP
    owned = [op.CREATE, op.WRITE, op.READ, op.DESCRIBE, op.DESCRIBE_CONFIGS, op.DELETE]
    topics = [
        "mm-drill-",
        "drill-",
        "mm2-offset-syncs.drill-",
        "mm-mirror-ends.drill-",
        "mm-mirror-shards.drill-",
        "mm-offset-history.drill-",
    ]
    return [
        *(x for t in topics for x in _rights(T, t, owned, prefixed=True)),
        *_rights(T, "mm-failover-points.drill-", owned, prefixed=True),
        # MM2's policy mirrors every heartbeats topic the principal can see (config sync
        # included); one it may not DESCRIBE it does not see
        *_rights(T, "heartbeats", [op.READ, op.DESCRIBE, op.DESCRIBE_CONFIGS]),
        *_rights(G, "mm-drill-", [op.READ, op.DESCRIBE, op.DELETE], prefixed=True),
        *_rights(G, "__mm.mirror.drill-", [op.READ, op.DESCRIBE, op.DELETE], prefixed=True),
        *_rights(G, "__mm-", [op.DESCRIBE], prefixed=True),
        *_rights(ResourceType.TRANSACTIONAL_ID, "mm.drill-", [op.WRITE, op.DESCRIBE], True),
        *_rights(ResourceType.TRANSACTIONAL_ID, "mm-drill-", [op.WRITE, op.DESCRIBE], True),
    ]


def _drill(config: Path, out: Path) -> subprocess.CompletedProcess[str]:
    import os
    import sys

    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    return subprocess.run(
        [
            *(sys.executable, "-m", "mm", "drill", "-c", str(config), "--duration", "5"),
            *("--scenarios", "switchover,failover,failback", "--out", str(out)),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        check=False,
    )


@pytest.mark.parametrize(
    ("dropped", "named"),
    [
        # (cluster, resource, operation) taken from the drill's row; what its line names
        (("A", "mm-drill-", "CREATE"), "create the drill's topic mm-drill-"),
        (("B", "mm.drill-", "WRITE"), "init transactions of the shard map writer mm.drill-"),
    ],
    ids=["A-topics-CREATE", "B-transactional-ids-WRITE"],
)
def test_drill_refused_one_listed_acl_stops_in_one_line_and_cleans_up(
    secured: dict[str, SecureKRaftBroker],
    tmp_path: Path,
    dropped: tuple[str, str, str],
    named: str,
) -> None:
    """`mm drill -c FILE` as ``User:mm`` holding the drill's row but one right: exit 1
    with one traceback-free line naming the operation, the resource and the refusal
    (before: the topics' creation said only "Authorization failed"; a refused job
    printed its whole log), and no topic of the run left on either cluster."""
    a, b = secured["A"], secured["B"]
    config = _drill_config(secured, tmp_path)
    side, name, operation = dropped
    acls = {alias: _drill_acls() for alias in "AB"}
    acls[side] = [
        x for x in acls[side] if (x.name, x.operation) != (name, getattr(AclOperation, operation))
    ]
    assert len(acls[side]) == len(_drill_acls()) - 1
    admins = {"A": AdminClient(a.client("SASL_SSL")), "B": AdminClient(b.client("SASL_SSL"))}
    with _Granted(admins, (acls["A"], acls["B"])):
        res = _drill(config, tmp_path / "drill")
    assert res.returncode == 1, res.stdout[-5000:] + res.stderr[-5000:]
    assert "Traceback" not in res.stdout + res.stderr, res.stderr[-5000:]
    errors = [line for line in res.stderr.splitlines() if line.startswith("mm drill: error: ")]
    assert len(errors) == 1 and named in errors[0], res.stderr[-5000:]
    assert "_AUTHORIZATION_FAILED" in errors[0] and "on cluster " in errors[0], errors
    assert "mm-drill-" in res.stdout and "clean-up: deleted" in res.stdout, res.stdout
    for admin in admins.values():
        left = [t for t in admin.list_topics(timeout=30).topics if "mm-drill-" in t]
        assert left == [], left


def _drill_config(secured: dict[str, SecureKRaftBroker], tmp_path: Path) -> Path:
    """Flow A->B, both clusters SCRAM over SASL_SSL as ``User:mm``."""
    return write_properties(
        tmp_path / "mm.properties",
        {
            "clusters": "A, B",
            **secured["A"].mm2("A", "SASL_SSL", "mm"),
            **secured["B"].mm2("B", "SASL_SSL", "mm"),
            "A->B.enabled": "true",
            "replication.factor": 1,
        },
    )


def test_drill_as_a_principal_holding_only_its_listed_acls(
    secured: dict[str, SecureKRaftBroker], tmp_path: Path
) -> None:
    """`mm drill -c FILE` on a SASL_SSL (SCRAM-SHA-512) pair as ``User:mm`` holding only
    the drill's listed ACLs: every scenario passes, as on PLAINTEXT, and its cleanup
    deletes what it created; no password in anything it wrote."""
    a, b = secured["A"], secured["B"]
    config = _drill_config(secured, tmp_path)
    admins = {"A": AdminClient(a.client("SASL_SSL")), "B": AdminClient(b.client("SASL_SSL"))}
    with _Granted(admins, (_drill_acls(), _drill_acls())):
        res = _drill(config, tmp_path / "drill")
    _assert_drill_passed(secured, tmp_path, config, res)


def _assert_drill_passed(
    secured: dict[str, SecureKRaftBroker],
    tmp_path: Path,
    config: Path,
    res: subprocess.CompletedProcess[str],
) -> None:
    """The drill (its report under ``tmp_path / "drill"``) passed every scenario as on
    PLAINTEXT, deleted what it created, and wrote no password."""
    from mm.drill.report import from_json

    assert res.returncode == 0, res.stdout[-5000:] + res.stderr[-5000:]
    report = from_json((tmp_path / "drill" / "drill-report.json").read_text())
    by_name = {s.name: s for s in report.scenarios}
    assert set(by_name) == {"switchover", "failover", "failback"}
    for scenario in by_name.values():
        assert scenario.passed, (scenario.name, scenario.reasons)
    assert by_name["switchover"].loss.lost_records == 0
    assert by_name["failback"].loss.acked_records == by_name["failover"].loss.lost_records
    assert "not deleted" not in report.cleanup
    passwords = [p for broker in secured.values() for p in broker.passwords.values()]
    _assert_no_password(tmp_path, config, passwords, res.stdout, res.stderr)


def _failback_acls(topic: str, group: str, local: str) -> tuple[list[AclBinding], list[AclBinding]]:
    """docs/security.md's row of a whole `mm failback` (the divergence, the mirror B->A
    of ``local``, ``group`` back on A) for ``User:mm``: (on A, on B)."""
    op, T, G = AclOperation, ResourceType.TOPIC, ResourceType.GROUP
    read = [op.READ, op.DESCRIBE]
    readers = _rights(G, "__mm-", [op.DESCRIBE], prefixed=True)
    on_a = [
        *_rights(T, topic, read),
        *_rights(G, group, read),
        *readers,
        # the mirror B->A writes into A as `mm mirror` writes into its target
        *_rights(
            T,
            "B.",
            [op.CREATE, op.WRITE, op.READ, op.DESCRIBE, op.DESCRIBE_CONFIGS, op.ALTER_CONFIGS],
            prefixed=True,
        ),
        *_rights(T, "mm-mirror-ends.B.internal", [op.CREATE, op.WRITE, op.DESCRIBE]),
        *_rights(T, "mm-mirror-shards.B.internal", [op.CREATE, op.WRITE, op.READ, op.DESCRIBE]),
        *_rights(ResourceType.TRANSACTIONAL_ID, "mm.B.A.", [op.WRITE, op.DESCRIBE], True),
        *_rights(G, "__mm.mirror.B.A", read),
    ]
    on_b = [
        *_rights(T, "mm-failover-points.A.internal", read),
        *_rights(T, f"A.{topic}", read),
        *_rights(G, group, read),
        *readers,
        # ... and reads B as `mm mirror` reads its source
        *_rights(T, local, [*read, op.DESCRIBE_CONFIGS]),
        # READ: the groups' places on B's topics translated with them
        *_rights(T, "mm2-offset-syncs.A.internal", [op.CREATE, op.WRITE, *read]),
        *_rights(G, "__mm.mirror.B.A", [op.DESCRIBE]),
        # the A->B mirror's positions: how far B's copies of A's topics reach
        *_rights(G, "__mm.mirror.A.B", [op.DESCRIBE]),
    ]
    return on_a, on_b


def test_a_whole_failback_as_a_principal_holding_only_its_listed_acls(
    secured: dict[str, SecureKRaftBroker], tmp_path: Path
) -> None:
    """`mm failback` as ``User:mm`` (SCRAM over SASL_SSL on both clusters) after a
    failover: first holding its row but the reverse mirror's transactional-id WRITE on
    A (refused in one line, no group moved), then holding exactly its row: B's own
    topic mirrored into A exactly and the group back on A at its place on B."""
    a, b = secured["A"], secured["B"]
    topic, group, _values, committed = _orders_and_a_group(a)
    local = f"local-{uuid.uuid4().hex[:6]}"
    flows = {
        "B->A.enabled": "true",
        "B->A.topics": local,
        "B->A.groups": group,
        "B->A.sync.topic.acls.enabled": "false",
        "A->B.sync.topic.acls.enabled": "false",
        "A->B.emit.heartbeats.enabled": "false",
        "B->A.emit.heartbeats.enabled": "false",
    }
    configs = {}
    for user in ("admin", "mm"):
        (tmp_path / user).mkdir()
        configs[user] = _config(
            tmp_path / user, a.mm2("A", "SASL_SSL", user), b, topic, group, "SASL_SSL",
            extra={**flows, "mm.state.dir": tmp_path / "state"}, b_user=user,
        )  # fmt: skip
    for step in (("mirror", "--once"), ("checkpoint", "--once"), ("failover", "--groups", group)):
        done = run_mm(configs["admin"], *step, "--flow", "A->B")
        assert done.returncode == 0, (step, done.output[-6000:])
    # on B after the failover: its own topic, and the group's place in it
    _create(b, local, PARTITIONS)
    mine = [f"b-{i:02d}".encode() for i in range(12)]
    _produce(b.client("SASL_SSL"), local, mine)
    commit_admin(b.bootstrap, group, local, {0: 2})

    admins = {"A": AdminClient(a.client("SASL_SSL")), "B": AdminClient(b.client("SASL_SSL"))}
    on_a, on_b_acls = _failback_acls(topic, group, local)
    without = [x for x in on_a if (x.name, x.operation) != ("mm.B.A.", AclOperation.WRITE)]
    assert len(without) == len(on_a) - 1
    args = ("failback", "--flow", "A->B", "--groups", group, "--json")
    with _Granted(admins, (without, on_b_acls)):
        refused = run_mm(configs["mm"], *args, timeout=240)
    _assert_refused_in_words("failback", refused, "B.", ["A"])
    assert all(t != f"B.{local}" for t, _ in group_offsets(a.bootstrap, group)), "moved"
    with _Granted(admins, (on_a, on_b_acls)):
        back = run_mm(configs["mm"], *args, timeout=240)
    assert back.returncode == 0, back.output[-6000:]
    report = json.loads(back.stdout)
    assert [(g["group"], g["status"]) for g in report["groups"]] == [(group, "moved")], report
    assert sorted(_read(a.client("SASL_SSL"), f"B.{local}", PARTITIONS, len(mine))) == mine
    # back on A where it stood on B: A's topic as committed before, B's topic at 2
    want = {**{(topic, p): o for p, o in committed.items()}, (f"B.{local}", 0): 2}
    assert group_offsets(a.bootstrap, group) == want


def test_mm_run_as_one_principal_resumes_by_itself_once_the_refused_right_is_granted(
    secured: dict[str, SecureKRaftBroker], tmp_path: Path
) -> None:
    """`mm run` (mirror and checkpoint) as ``User:mm`` holding the sum of their rows but
    the mirror's transactional-id WRITE on B: the mirror job is refused in its one
    line and restarted with the run's back-off; the right granted while it runs (the
    way out the line names), it mirrors every record exactly and the group's
    checkpoints translate exactly, with no restart of `mm run`."""
    from support.mirror import running_job

    a, b = secured["A"], secured["B"]
    topic, group, values, committed = _orders_and_a_group(a)
    config = _config(
        tmp_path, a.mm2("A", "SASL_SSL", "mm"), b, topic, group, "SASL_SSL", b_user="mm",
        extra={
            "A->B.sync.topic.acls.enabled": "false",
            "A->B.emit.heartbeats.enabled": "false",
            "emit.checkpoints.interval.seconds": "1",
            "mm.mirror.trigger.seconds": "0.5",
        },
    )  # fmt: skip
    mirror_a, mirror_b = _mirror_acls(topic)
    checkpoint_a, checkpoint_b = _job_acls("checkpoint", topic, group)
    # `mm run`'s row: the sum of its jobs' (one binding where both list it)
    on_a, on_b = (
        list({(x.restype, x.name, x.resource_pattern_type, x.operation): x for x in xs}.values())
        for xs in ([*mirror_a, *checkpoint_a], [*mirror_b, *checkpoint_b])
    )
    (txn_write,) = [x for x in on_b if (x.name, x.operation) == ("mm.A.B.", AclOperation.WRITE)]
    admins = {"A": AdminClient(a.client("SASL_SSL")), "B": AdminClient(b.client("SASL_SSL"))}
    target = f"A.{topic}"
    with _Granted(admins, (on_a, [x for x in on_b if x is not txn_write])):
        with running_job(config, tmp_path, ("run", "--jobs", "mirror,checkpoint")) as job:
            deadline = time.monotonic() + 180
            # librdkafka logs the refusal at once; the job's one line follows once the
            # job has stopped (seconds later on a loaded host)
            while "refused by the cluster" not in job.output():
                assert time.monotonic() < deadline and job.proc.poll() is None, job.output()
                time.sleep(1)
            assert "TRANSACTIONAL_ID_AUTHORIZATION_FAILED" in job.output(), job.output()[-6000:]
            with _Granted(admins, ([], [txn_write])):
                _until_translated(b, group, target, committed, job)
                got = _read(b.client("SASL_SSL"), target, PARTITIONS, RECORDS)
                assert sorted(got) == sorted(values)
