"""Per-cluster SASL/SSL settings reach every client every job builds.

One MM2-spelt file gives A and B different SASL_SSL + SCRAM credentials and CA
files. Every librdkafka configuration a job hands to a client (on the driver) or
ships to its Spark tasks (FlowRuntime, TaskContext, RestoreContext, the checkpoint
reader's options) must carry the security settings of the cluster it talks to:
a client that lost them would connect in PLAINTEXT (refused at best), one with
the other cluster's credentials would authenticate as the wrong principal.
Jobs that read logs (verify, switchover, failback, the drill) read them with
read_committed consumers on Apache Kafka, and refuse such clusters up front only
where the broker profile needs the raw reader. No broker is contacted.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from mm_client.kafka import clients as client_factory

from mm.config import MirrorConfig, build_config
from mm.errors import ConfigError

pytestmark = pytest.mark.unit

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
SECURED = {
    "A": {"user": "mm-a", "password": "SENTINEL-a-9f3", "ca": "/etc/mm/a-ca.pem"},
    "B": {"user": "mm-b", "password": "SENTINEL-b-71c", "ca": "/etc/mm/b-ca.pem"},
}


def _props(**extra: str) -> dict[str, str]:
    props = {
        "clusters": "A, B",
        "A.bootstrap.servers": "a1:9093,a2:9093",
        "B.bootstrap.servers": "b1:9093",
        "A->B.enabled": "true",
        "B->A.enabled": "true",
        "backup.cluster": "A",
        "backup.path": "/tmp/mm-backup-never-written",
    }
    for alias, s in SECURED.items():
        props |= {
            f"{alias}.security.protocol": "SASL_SSL",
            f"{alias}.sasl.mechanism": "SCRAM-SHA-512",
            f"{alias}.sasl.jaas.config": f'{SCRAM} required username="{s["user"]}" '
            f'password="{s["password"]}";',
            f"{alias}.ssl.truststore.type": "PEM",
            f"{alias}.ssl.truststore.location": s["ca"],
            f"{alias}.ssl.endpoint.identification.algorithm": "https",
        }
    return props | extra


@pytest.fixture
def cfg(tmp_path: Path) -> MirrorConfig:
    return build_config(_props(**{"mm.state.dir": str(tmp_path / "state")}))


def assert_secured(conf: Any, alias: str) -> None:
    """``conf`` connects to ``alias`` with ``alias``'s credentials and CA, no one else's."""
    s = SECURED[alias]
    other = SECURED["B" if alias == "A" else "A"]
    conf = dict(conf)
    assert conf["security.protocol"] == "SASL_SSL"
    # librdkafka's property is sasl.mechanisms, with sasl.mechanism as its alias
    assert conf.get("sasl.mechanisms", conf.get("sasl.mechanism")) == "SCRAM-SHA-512"
    assert conf["sasl.username"] == s["user"]
    assert conf["sasl.password"] == s["password"]
    assert conf["ssl.ca.location"] == s["ca"]
    assert conf["ssl.endpoint.identification.algorithm"] == "https"
    assert other["password"] not in json.dumps(conf, default=str)
    assert conf["bootstrap.servers"] == {"A": "a1:9093,a2:9093", "B": "b1:9093"}[alias]


@pytest.mark.parametrize("role", ["admin", "consumer", "producer"])
@pytest.mark.parametrize("alias", ["A", "B"])
def test_every_role_of_every_cluster(cfg: MirrorConfig, alias: str, role: Any) -> None:
    assert_secured(cfg.cluster(alias).librdkafka(role), alias)
    kp = cfg.cluster(alias).kafka_python(role)
    assert kp["security_protocol"] == "SASL_SSL"
    assert kp["sasl_mechanism"] == "SCRAM-SHA-512"
    assert kp["sasl_plain_password"] == SECURED[alias]["password"]
    assert kp["ssl_cafile"] == SECURED[alias]["ca"]


def test_top_level_security_is_inherited_and_a_cluster_keeps_its_own() -> None:
    # MM2 files often set security once at the top; a cluster's own keys win
    props = {
        k: v
        for k, v in _props().items()
        if not k.startswith("A.s") or k == "A.bootstrap.servers"  # A's security removed
    }
    props |= {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": f'{SCRAM} required username="mm-a" password="SENTINEL-a-9f3";',
        "ssl.truststore.location": "/etc/mm/a-ca.pem",
        "ssl.endpoint.identification.algorithm": "https",
    }
    cfg = build_config(props)
    assert_secured(cfg.cluster("A").librdkafka("producer"), "A")
    assert_secured(cfg.cluster("B").librdkafka("producer"), "B")


def test_librdkafka_accepts_every_key_it_is_given() -> None:
    """Real clients are constructed (no connection is made before a request): a key
    librdkafka does not know, or a CA it cannot read, fails right here."""
    certifi = pytest.importorskip("certifi")
    props = _props()
    for alias in SECURED:
        props[f"{alias}.ssl.truststore.location"] = certifi.where()
    cfg = build_config(props)
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient

    conf = cfg.cluster("A")
    Producer(conf.librdkafka("producer")).flush(0)
    Consumer({**conf.librdkafka("consumer"), "group.id": "g"}).close()
    AdminClient(conf.librdkafka("admin"))


# --- the mirror: FlowRuntime and planner settings travel to Spark ----------------------


@pytest.mark.parametrize(("source", "target"), [("A", "B"), ("B", "A")])
def test_mirror_runtime_and_task_clients(cfg: MirrorConfig, source: str, target: str) -> None:
    from mm.kafka.watermarks import probe_consumer_conf
    from mm.source import shard_run, task
    from mm.source.plan import MirrorPlan
    from mm.source.runtime import mirror_plan, planner_settings

    flow = cfg.flow(source, target)
    # what the Spark source receives: the plan, pickled into a (redacted) option
    plan = MirrorPlan.decode(mirror_plan(cfg, flow).encode())
    rt = plan.runtime
    assert_secured(rt.source_consumer, source)
    assert_secured(rt.source_producer, source)  # offset syncs on the source
    assert_secured(rt.source_admin, source)
    assert_secured(rt.target_producer, target)
    assert_secured(rt.target_consumer, target)
    assert_secured(plan.planner["source_admin"], source)
    assert_secured(plan.planner["target_admin"], target)
    assert planner_settings(cfg, flow)["target_admin"] == plan.planner["target_admin"]
    # the confs a task derives for its clients keep them
    assert_secured(shard_run.shard_producer_conf(rt, "mm.A.B.g1.s0"), target)
    assert_secured(task._consumer_conf(rt), source)
    assert_secured(task._state_consumer_conf(rt), target)
    assert_secured(task._sync_producer_conf(rt), source)
    assert_secured(probe_consumer_conf(rt.source_consumer), source)


def test_mirror_offset_syncs_on_target_use_target_credentials(tmp_path: Path) -> None:
    from mm.source.runtime import flow_runtime

    cfg = build_config(_props(**{"A->B.offset-syncs.topic.location": "target"}))
    rt = flow_runtime(cfg, cfg.flow("A", "B"))
    assert rt.offset_syncs_on_target
    assert_secured(rt.target_producer, "B")


# --- checkpoint, heartbeat, status ------------------------------------------------------


@pytest.mark.parametrize("location", ["source", "target"])
def test_checkpoint_job_clients(cfg: MirrorConfig, location: str) -> None:
    from mm.checkpoint.emitter import FlowCheckpointer

    cfg = build_config(
        _props(**{"mm.state.dir": str(cfg.state_dir), "A->B.offset-syncs.topic.location": location})
    )
    cp = FlowCheckpointer(cfg, cfg.flow("A", "B"))
    assert_secured(cp._source_admin_conf, "A")
    assert_secured(cp._target_admin_conf, "B")
    assert_secured(cp.target_consumer_conf, "B")
    assert_secured(cp._target_producer_conf, "B")
    # the offset-syncs reader goes to Spark as a JSON option: from the cluster holding them
    assert_secured(
        json.loads(json.dumps(cp.syncs_consumer_conf)), "A" if location == "source" else "B"
    )


class _Built(Exception):
    def __init__(self, kind: str, conf: dict[str, Any]) -> None:
        super().__init__(kind)
        self.kind, self.conf = kind, conf


@pytest.fixture
def first_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every client constructor (the toolkit's only ones) raises _Built with its conf."""

    def factory(kind: str) -> Any:
        def build(conf: dict[str, Any]) -> Any:
            raise _Built(kind, dict(conf))

        return build

    monkeypatch.setattr(client_factory, "Producer", factory("producer"))
    monkeypatch.setattr(client_factory, "Consumer", factory("consumer"))
    monkeypatch.setattr(client_factory, "AdminClient", factory("admin"))


def _built(call: Any) -> _Built:
    with pytest.raises(_Built) as info:
        call()
    return info.value


@pytest.mark.usefixtures("first_client")
def test_heartbeat_clients_write_to_the_source(cfg: MirrorConfig) -> None:
    from mm.heartbeat.emitter import HeartbeatEmitter

    emitter = HeartbeatEmitter(cfg, cfg.enabled_flows(), log=None)
    for alias in ("A", "B"):
        built = _built(lambda alias=alias: emitter._producer(alias))
        assert built.kind == "producer"
        assert_secured(built.conf, alias)
    built = _built(lambda: emitter.prepare(timeout=0.1))
    assert built.kind == "admin"
    assert_secured(built.conf, cfg.enabled_flows()[0].source)


def test_status_collector_clients(cfg: MirrorConfig) -> None:
    from mm.status.collect import _FlowCollector
    from mm.status.model import FlowStatus

    for flow in cfg.enabled_flows():
        st = FlowStatus(flow.name, flow.source, flow.target, 0)
        c = _FlowCollector(cfg, flow, st, 1.0, 10)
        assert_secured(c.src_admin, flow.source)
        assert_secured(c.src_consumer, flow.source)
        assert_secured(c.tgt_admin, flow.target)
        assert_secured(c.tgt_consumer, flow.target)


# --- backup and restore: contexts shipped to Spark tasks --------------------------------


def test_backup_task_context(cfg: MirrorConfig) -> None:
    from mm.backup.job import task_context
    from mm.backup.settings import backup_settings
    from mm.backup.task import TaskContext, consumer_conf

    ctx = task_context(cfg, backup_settings(cfg), 5.0)
    shipped = TaskContext.from_dict(json.loads(json.dumps(ctx.to_dict())))
    assert_secured(shipped.consumer, "A")
    assert_secured(consumer_conf(shipped.consumer), "A")
    # the raw reader speaks PLAINTEXT only: a SASL cluster is read by the broker filter
    assert shipped.committed_filter == "broker"


def test_backup_raw_filter_is_refused_on_sasl(cfg: MirrorConfig) -> None:
    from mm.backup.job import task_context
    from mm.backup.settings import backup_settings

    cfg = build_config(_props(**{"backup.committed.filter": "raw"}))
    with pytest.raises(ConfigError, match="raw log reader speaks PLAINTEXT only"):
        task_context(cfg, backup_settings(cfg), 5.0)


@pytest.mark.parametrize("to", ["A", "B"])
def test_restore_context(cfg: MirrorConfig, to: str) -> None:
    from mm.restore.job import RestoreOptions, restore_context
    from mm.restore.task import RestoreContext

    ctx = restore_context(cfg, RestoreOptions(to=to))
    shipped = RestoreContext.from_dict(json.loads(json.dumps(ctx.to_dict())))
    assert_secured(shipped.producer, to)
    assert_secured(shipped.consumer, to)
    assert_secured(shipped.admin, to)  # the mapping topic's leader lookup


# --- failover, translate: target-only reads and writes ----------------------------------


@pytest.mark.usefixtures("first_client")
def test_failover_point_clients(cfg: MirrorConfig) -> None:
    from mm.dr.failover_point import failover_point
    from mm.dr.failover_point_run import read_failover_point, record_failover_point

    flow = cfg.flow("A", "B")
    built = _built(lambda: read_failover_point(cfg, flow, 0.1))
    assert_secured(built.conf, "B")
    point = failover_point("A->B", "A", "B", 0, {}, None, None, {}, str, flow.topic_filter)
    built = _built(lambda: record_failover_point(cfg, flow, point, 0.1))
    assert built.kind == "admin"
    assert_secured(built.conf, "B")


@pytest.mark.usefixtures("first_client")
def test_group_moves_and_checkpoint_reads(cfg: MirrorConfig) -> None:
    from mm_client.checkpoints_reader import read_checkpoints

    from mm.dr.groups import move_groups

    flow = cfg.flow("A", "B")
    target = cfg.cluster(flow.target)
    # the confs mm failover and mm translate pass (mm/commands/failover.py, translate.py)
    built = _built(lambda: move_groups(target.librdkafka("admin"), "B", {"g": {}}, False, 0.1))
    assert_secured(built.conf, "B")
    built = _built(
        lambda: read_checkpoints(
            target.librdkafka("consumer"),
            "A",
            lambda g: True,
            0.1,
            replication_policy=flow.policy(),
        )
    )
    assert_secured(built.conf, "B")


# --- log readers: verify, switchover, failback, the drill -------------------------------


def _dr_reads(cfg: MirrorConfig) -> dict[str, Any]:
    from mm.dr.failback_run import find_divergence, run_failback
    from mm.dr.switchover_run import FlowReads
    from mm.verify.job import _plan_flow

    flow = cfg.flow("A", "B")
    return {
        "mm verify": lambda: _plan_flow(cfg, flow, None, 0.1, 1024),
        "mm switchover": lambda: FlowReads(cfg, flow, 0.1),
        "mm failback": lambda: run_failback(cfg, flow, groups=None, dry_run=True, timeout=0.1),
        "mm failback ": lambda: find_divergence(cfg, flow, dry_run=True, timeout=0.1),
    }


@pytest.mark.usefixtures("first_client")
def test_log_readers_on_apache_kafka_read_sasl_with_the_clusters_settings(
    cfg: MirrorConfig,
) -> None:
    """On Apache Kafka (the default profile) the DR commands read logs with
    read_committed consumers: a SASL_SSL cluster is no reason to refuse, and the
    first client they build carries the cluster's own credentials."""
    from mm.kafka.committed import reader_of
    from mm.kafka.rawlog import ScanStats

    for call in _dr_reads(cfg).values():
        built = _built(call)  # a client was built: nothing refused
        alias = "B" if built.conf["bootstrap.servers"] == "b1:9093" else "A"
        assert_secured(built.conf, alias)
    for alias in ("A", "B"):
        reader = reader_of(cfg.cluster(alias))
        assert not reader.raw
        reader.check("mm verify")  # no refusal
        built = _built(lambda r=reader: list(r.scan(None, "t", 0, 0, 10, ScanStats())))
        assert built.kind == "consumer"
        assert_secured(built.conf, alias)
        assert built.conf["isolation.level"] == "read_committed"


@pytest.mark.usefixtures("first_client")
def test_raw_readers_refuse_sasl_before_any_client(tmp_path: Path) -> None:
    """Where the broker profile needs the raw reader (plain TCP), TLS/SASL clusters are
    refused up front, naming the key, the profile and the way that works."""
    import re

    props = _props(**{"mm.state.dir": str(tmp_path), "mm.broker.profile": "embedded"})
    cfg = build_config(props)
    for command, call in _dr_reads(cfg).items():
        # a ConfigError, not _Built: refused before any client was constructed
        with pytest.raises(ConfigError) as info:
            call()
        assert info.value.key == "A.security.protocol"
        assert command.strip() in str(info.value)
        assert re.search(r"PLAINTEXT.*plain TCP only.*profile is embedded", str(info.value))


def test_drill_reading_scenarios_refused_on_sasl_only_where_read_raw(tmp_path: Path) -> None:
    from mm.drill.external import prepare_external
    from mm.errors import UsageError

    for scenarios in (["failback"], ["switchover", "failover"]):
        cfg = build_config(_props(**{"mm.broker.profile": "embedded"}))
        with pytest.raises(UsageError, match=r"plain TCP only.*run --scenarios failover"):
            prepare_external(
                cfg,
                _props(),
                cfg.flow("A", "B"),
                mark="m1",
                state_dir=tmp_path,
                scenarios=scenarios,
            )
    cfg = build_config(_props())  # Apache Kafka: every scenario on SASL_SSL
    setup = prepare_external(
        cfg,
        _props(),
        cfg.flow("A", "B"),
        mark="m1",
        state_dir=tmp_path,
        scenarios=["switchover", "failover", "failback"],
    )
    assert setup.bootstrap == {"A": "a1:9093,a2:9093", "B": "b1:9093"}


def test_runtime_is_a_copy_not_a_view(cfg: MirrorConfig) -> None:
    """Tasks add keys to their confs (transactional.id, group.id): the runtime's own
    dicts must not change, or the next task would inherit them."""
    from mm.source import shard_run, task
    from mm.source.runtime import flow_runtime

    rt = flow_runtime(cfg, cfg.flow("A", "B"))
    before = dataclasses.asdict(rt)
    shard_run.shard_producer_conf(rt, "mm.A.B.g1.s0")
    task._consumer_conf(rt)
    task._state_consumer_conf(rt)
    assert dataclasses.asdict(rt) == before


def test_spark_options_carrying_credentials_are_redacted() -> None:
    """The mirror's plan and the checkpoint job's consumer travel as Spark options,
    which Spark shows in plans, logs and its UI unless the option's name matches
    spark.redaction.regex (default below): their names must match it."""
    import re

    from mm.checkpoint.reader import OPTION_CONSUMER
    from mm.source.reader import OPTION_PLAN

    spark_default = re.compile(r"(?i)secret|password|token|access[.]key")
    assert spark_default.search(OPTION_PLAN)
    assert spark_default.search(OPTION_CONSUMER)
