"""`mm drill -c FILE`, the pure parts: the drill's names never meet the user's, the
derived config, refused flows, the cleanup plan."""

from __future__ import annotations

from pathlib import Path

import pytest

from mm.config.loader import build_config
from mm.config.properties import parse_properties
from mm.dr.failover_point import failover_points_topic
from mm.drill.external import (
    DrillNames,
    cleanup_plan,
    derive_properties,
    external_names,
    new_mark,
    prepare_external,
    render_properties,
)
from mm.errors import UsageError
from mm.source.ends import ends_topic
from mm.source.runtime import flow_runtime, offset_syncs_topic, state_group

USER = {
    "clusters": "primary, backup, other",
    "primary.bootstrap.servers": "p1:9092,p2:9092",
    "primary.security.protocol": "PLAINTEXT",
    "primary.consumer.fetch.max.bytes": "1048576",
    "backup.bootstrap.servers": "b1:9092",
    "other.bootstrap.servers": "o1:9092",
    "sasl.mechanism": "PLAIN",
    "primary->backup.enabled": "true",
    "primary->backup.topics": ".*",
    "primary->backup.groups": "billing-.*",
    "primary->backup.topics.exclude": "mm-.*",
    "primary->backup.replication.policy.separator": "_",
    "primary->backup.errors.deadletterqueue.topic.name": "dead-letters",
    "backup->other.enabled": "true",
    "emit.heartbeats.enabled": "true",
    "mm.state.dir": "/var/lib/mm",
    "mm.mirror.shards": "2",
}
MARK = "drill-0a1b2c3d"


def _derived(tmp_path: Path, props: dict[str, str] | None = None) -> dict[str, str]:
    names = external_names(MARK, "primary", "backup")
    return derive_properties(props or USER, "primary", "backup", names, tmp_path / "state")


def test_a_mark_is_new_each_run() -> None:
    marks = {new_mark() for _ in range(50)}
    assert len(marks) == 50 and all(m.startswith("drill-") and len(m) == 14 for m in marks)


def test_names_carry_the_mark() -> None:
    names = external_names(MARK, "primary", "backup")
    assert names.topic("switchover") == f"mm-{MARK}-switchover"
    assert names.group("failover", "lagging") == f"mm-{MARK}-failover-lagging"
    assert names.flow == f"{MARK}-primary->{MARK}-backup"
    assert names.owns(f"{MARK}-primary.checkpoints.internal")
    assert not names.owns("drill-switchover")
    assert not DrillNames("drill", "A", "B").owns("drill-switchover")  # embedded: no mark


def test_every_internal_name_differs_from_the_users_flow_and_carries_the_mark(
    tmp_path: Path,
) -> None:
    user = build_config(USER)
    drill = build_config(_derived(tmp_path))
    theirs = user.flow("primary", "backup")
    ours = drill.flow(f"{MARK}-primary", f"{MARK}-backup")
    topic = f"mm-{MARK}-switchover"
    pairs = [
        (state_group(theirs), state_group(ours)),
        (offset_syncs_topic(theirs), offset_syncs_topic(ours)),
        (
            theirs.policy().checkpoints_topic("primary"),
            ours.policy().checkpoints_topic(ours.source),
        ),
        (ends_topic(theirs.source), ends_topic(ours.source)),
        (failover_points_topic(theirs.source), failover_points_topic(ours.source)),
        (
            flow_runtime(user, theirs).transactional_id_prefix,
            flow_runtime(drill, ours).transactional_id_prefix,
        ),
        (
            theirs.policy().format_remote_topic("primary", topic),
            ours.policy().format_remote_topic(ours.source, topic),
        ),
        (
            theirs.policy().format_remote_topic("primary", "heartbeats"),
            ours.policy().format_remote_topic(ours.source, "heartbeats"),
        ),
    ]
    for user_name, drill_name in pairs:
        assert drill_name != user_name and MARK in drill_name, (user_name, drill_name)
        # nor is one a prefix of the other (transactional ids extend the prefix)
        assert not drill_name.startswith(user_name + "."), (user_name, drill_name)


def test_derived_config_keeps_the_connections_and_the_flows_policy(tmp_path: Path) -> None:
    props = _derived(tmp_path)
    cfg = build_config(props)
    src, tgt = f"{MARK}-primary", f"{MARK}-backup"
    assert list(cfg.clusters) == [src, tgt]  # `other` and its flow are gone
    assert cfg.cluster(src).bootstrap_servers == ("p1:9092", "p2:9092")
    assert cfg.cluster(src).client["consumer.fetch.max.bytes"] == "1048576"
    assert cfg.cluster(src).client["sasl.mechanism"] == "PLAIN"  # inherited, as before
    flow = cfg.flow(src, tgt)
    assert flow.enabled and flow.replication_policy_separator == "_"
    assert flow.topic_filter(f"mm-{MARK}-switchover") and not flow.topic_filter("orders")
    assert flow.group_filter(f"mm-{MARK}-switchover-lagging")
    assert not flow.group_filter("billing-eu")
    assert not flow.emit_heartbeats_enabled  # A's `heartbeats` topic is the user's
    assert flow.errors_deadletterqueue_topic_name is None  # the user's topic
    assert cfg.state_dir == tmp_path / "state"
    assert cfg.setting("mirror.shards") == 2
    assert cfg.cluster(tgt).librdkafka("producer")["transaction.timeout.ms"] == "10000"
    assert not any(k.startswith("primary") or k.startswith("backup") for k in props)


def test_derived_config_survives_the_properties_file(tmp_path: Path) -> None:
    odd = {**USER, "primary.sasl.jaas.config": 'x required password="a=b:c\\\\d #e";'}
    props = _derived(tmp_path, odd)
    assert parse_properties(render_properties(props)) == props


def test_prepare_refuses_one_cluster_twice_and_a_tls_failback(tmp_path: Path) -> None:
    same = {**USER, "backup.bootstrap.servers": "p2:9092"}
    cfg = build_config(same)
    with pytest.raises(UsageError, match="share bootstrap servers"):
        prepare_external(
            cfg,
            same,
            cfg.flow("primary", "backup"),
            mark=MARK,
            state_dir=tmp_path,
            scenarios=["switchover"],
        )
    # a TLS cluster read raw (the embedded broker's profile) carries only the failover
    tls = {**USER, "primary.security.protocol": "SSL", "mm.broker.profile": "embedded"}
    cfg = build_config(tls)
    flow = cfg.flow("primary", "backup")
    with pytest.raises(UsageError, match=r"plain TCP only.*run --scenarios failover"):
        prepare_external(
            cfg, tls, flow, mark=MARK, state_dir=tmp_path, scenarios=["failover", "failback"]
        )
    ok = prepare_external(cfg, tls, flow, mark=MARK, state_dir=tmp_path, scenarios=["failover"])
    assert ok.bootstrap == {"primary": "p1:9092,p2:9092", "backup": "b1:9092"}


def test_prepare_warns_when_the_users_mirror_selects_the_drills_topics(tmp_path: Path) -> None:
    every = {**USER, "primary->backup.topics.exclude": "__.*"}
    cfg = build_config(every)
    setup = prepare_external(
        cfg, every, cfg.flow("primary", "backup"), mark=MARK, state_dir=tmp_path, scenarios=[]
    )
    assert setup.warnings and "selects the drill's topics" in setup.warnings[0]
    cfg = build_config(USER)  # excludes mm-.*
    setup = prepare_external(
        cfg, USER, cfg.flow("primary", "backup"), mark=MARK, state_dir=tmp_path, scenarios=[]
    )
    assert setup.warnings == []


def test_cleanup_plan_takes_only_the_runs_names() -> None:
    names = external_names(MARK, "A", "B")
    plan = cleanup_plan(
        names,
        {
            "A": ["orders", f"mm-{MARK}-switchover", f"mm2-offset-syncs.{MARK}-B.internal"],
            "B": ["A.orders", f"{MARK}-A.mm-{MARK}-failover", "mm-drill-ffffffff-switchover"],
        },
        {
            "A": ["billing", f"mm-{MARK}-switchover-lagging"],
            "B": [f"__mm.mirror.{MARK}-A.{MARK}-B"],
        },
    )
    assert plan.topics == {
        "A": [f"mm-{MARK}-switchover", f"mm2-offset-syncs.{MARK}-B.internal"],
        "B": [f"{MARK}-A.mm-{MARK}-failover"],  # not another run's
    }
    assert plan.groups == {
        "A": [f"mm-{MARK}-switchover-lagging"],
        "B": [f"__mm.mirror.{MARK}-A.{MARK}-B"],
    }
    with pytest.raises(ValueError):
        cleanup_plan(DrillNames("drill", "A", "B"), {}, {})


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--disaster", "freeze"], "never stops a broker it did not start"),
        (["--flow", "A->C"], "one of the configured flows"),
        (["--flow", "B->A"], "share bootstrap servers"),
    ],
)
def test_drill_c_refuses_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    from mm.cli import main

    config = tmp_path / "mm.properties"
    config.write_text(
        "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = a:9092\n"
        "A->B.enabled = true\nB->A.enabled = false\n"
    )
    out = tmp_path / "out"
    assert main(["drill", "-c", str(config), "--out", str(out), *extra]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()  # refused before anything was created


@pytest.mark.parametrize("extra", [["--keep"], ["--flow", "A->B"], ["--disaster", "simulated"]])
def test_drill_without_c_refuses_its_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str]
) -> None:
    from mm.cli import main

    assert main(["drill", "--out", str(tmp_path / "out"), *extra]) == 2
    assert "-c" in capsys.readouterr().err
