"""Loading a real MM2 file, flow overrides, defaults and filters."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError
from structlog.testing import capture_logs

from mm.config import ClusterConfig, FlowConfig, MirrorConfig, build_config, load_config
from mm.config.unknown import find_unknown_keys

pytestmark = pytest.mark.unit

DATA = Path(__file__).parent / "data"
PRODUCTION = DATA / "mm2-production.properties"
MINIMAL = {"clusters": "A, B", "A.bootstrap.servers": "a:9092", "B.bootstrap.servers": "b:9092"}


@pytest.fixture
def production() -> MirrorConfig:
    return load_config(PRODUCTION, env={})


def test_production_file_clusters(production: MirrorConfig) -> None:
    assert list(production.clusters) == ["primary", "backup"]
    primary = production.clusters["primary"]
    assert primary.bootstrap_servers == (
        "kafka-p1.example.com:9093",
        "kafka-p2.example.com:9093",
        "kafka-p3.example.com:9093",
    )
    assert primary.client["security.protocol"] == "SASL_SSL"
    assert primary.client["consumer.fetch.max.bytes"] == "52428800"
    assert isinstance(primary.client["sasl.jaas.config"], SecretStr)
    assert isinstance(production.clusters["backup"].client["ssl.truststore.password"], SecretStr)
    assert production.config_path == PRODUCTION


def test_production_file_flows(production: MirrorConfig) -> None:
    assert [f.name for f in production.flows] == ["primary->backup", "backup->primary"]
    assert [f.name for f in production.enabled_flows()] == ["primary->backup"]
    flow = production.flow("primary", "backup")
    assert flow.topics == ("orders.*", "payments", "customers-.*")
    assert flow.sync_group_offsets_enabled is True
    assert flow.replication_factor == 3
    assert flow.checkpoints_topic_replication_factor == 3
    assert flow.refresh_topics_interval_seconds == 30
    # Java's reader turns [\-\.] into [-.], exactly as MM2 sees it
    assert flow.topics_exclude == (".*[-.]internal", ".*.replica", "__.*", "test-.*")
    with pytest.raises(KeyError):
        production.flow("backup", "nowhere")


def test_flow_prefixed_key_overrides_global_for_that_flow_only(production: MirrorConfig) -> None:
    assert production.flow("primary", "backup").emit_checkpoints_interval_seconds == 2
    assert production.flow("backup", "primary").emit_checkpoints_interval_seconds == 5


def test_spark_mm_and_other_keys(production: MirrorConfig) -> None:
    assert production.spark == {
        "spark.master": "local[4]",
        "spark.sql.shuffle.partitions": "8",
        "spark.driver.extraJavaOptions": "-Dlog4j.configuration=file:/etc/mm/log4j.properties",
    }
    assert production.state_dir == Path("/var/lib/mm")
    assert production.mm == {"alert.lag.seconds": "30"}
    assert production.other["tasks.max"] == "4"
    assert "key.converter" in production.other


def test_ignored_keys_are_logged_and_unknown_keys_found() -> None:
    props = {**MINIMAL, "tasks.max": "4", "mystery.setting": "x", "A->B.tasks.max": "2"}
    with capture_logs() as logs:
        config = build_config(props)
    assert config.other == {"tasks.max": "4", "mystery.setting": "x"}
    assert config.flow("A", "B").other == {"tasks.max": "2"}
    by_key = {e["key"]: e for e in logs if "key" in e}
    assert by_key["tasks.max"]["log_level"] == "info"
    assert by_key["A->B.tasks.max"]["log_level"] == "info"
    # unknown keys are load_config's to report (a stderr line each), once
    assert "mystery.setting" not in by_key
    assert [u.key for u in find_unknown_keys(props)] == ["mystery.setting"]


def test_no_flows_means_nothing_replicates() -> None:
    config = build_config(MINIMAL)
    assert config.flows == ()
    assert config.enabled_flows() == []


def test_flows_are_disabled_unless_enabled() -> None:
    config = build_config({**MINIMAL, "A->B.topics": "orders"})
    assert config.flow("A", "B").enabled is False
    assert config.enabled_flows() == []


def test_top_level_enabled_does_not_enable_flows() -> None:
    with capture_logs() as logs:
        config = build_config({**MINIMAL, "enabled": "true", "A->B.topics": "x"})
    assert config.enabled_flows() == []
    assert any(e.get("key") == "enabled" and e["log_level"] == "warning" for e in logs)


def test_defaults() -> None:
    flow = build_config({**MINIMAL, "A->B.enabled": "true"}).flow("A", "B")
    assert flow.enabled is True
    assert flow.topics == (".*",)
    assert flow.topics_exclude == (r".*[\-\.]internal", r".*\.replica", "__.*")
    assert flow.groups == (".*",)
    assert flow.groups_exclude == ("console-consumer-.*", "connect-.*", "__.*")
    assert flow.replication_policy_class == (
        "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
    )
    assert flow.replication_policy_separator == "."
    assert flow.offset_lag_max == 100
    assert flow.emit_checkpoints_enabled is True
    assert flow.emit_checkpoints_interval_seconds == 5  # MM2: 60
    assert flow.emit_heartbeats_enabled is True
    assert flow.emit_heartbeats_interval_seconds == 1
    assert flow.sync_group_offsets_enabled is False
    assert flow.sync_group_offsets_interval_seconds == 5  # MM2: 60
    assert flow.offset_syncs_topic_location == "source"
    assert flow.refresh_topics_interval_seconds == 10  # MM2: 600
    assert flow.refresh_groups_interval_seconds == 10  # MM2: 600
    assert flow.sync_topic_configs_enabled is True
    assert flow.replication_factor == -1  # MM2: 2
    assert flow.config_properties_exclude[-1] == r"min\.insync\.replicas"
    assert len(flow.config_properties_exclude) == 6
    assert flow.use_defaults_from == "target"
    assert flow.errors_tolerance == "none"
    assert flow.errors_deadletterqueue_topic_name is None


def test_typed_values_are_parsed() -> None:
    props = {
        **MINIMAL,
        "A->B.enabled": " TRUE ",
        "offset-syncs.topic.location": "Target",
        "errors.tolerance": "ALL",
        "use.defaults.from": " Source ",
        "errors.deadletterqueue.topic.name": "mm2-dlq",
        "offset.lag.max": "0",
        "A->B.replication.policy.separator": "_",
    }
    flow = build_config(props).flow("A", "B")
    assert flow.enabled is True
    assert flow.offset_syncs_topic_location == "target"
    assert flow.errors_tolerance == "all"
    assert flow.use_defaults_from == "source"
    assert flow.errors_deadletterqueue_topic_name == "mm2-dlq"
    assert flow.offset_lag_max == 0
    assert flow.replication_policy_separator == "_"


def test_topic_and_group_filters() -> None:
    props = {**MINIMAL, "A->B.topics": "orders.*, payments", "A->B.groups": "app-.*"}
    flow = build_config(props).flow("A", "B")
    assert flow.topic_filter("orders")
    assert flow.topic_filter("orders-eu")
    assert not flow.topic_filter("my-orders")  # whole-name match, like MM2
    assert not flow.topic_filter("payments-eu")
    assert not flow.topic_filter("orders.internal")  # default exclusion wins
    assert not flow.topic_filter("__consumer_offsets")
    assert flow.group_filter("app-billing")
    assert not flow.group_filter("billing")
    assert not flow.config_property_filter("min.insync.replicas")
    assert flow.config_property_filter("retention.ms")


def test_default_filters_skip_internal_topics_and_groups() -> None:
    flow = build_config({**MINIMAL, "A->B.enabled": "true"}).flow("A", "B")
    for topic in ("mm2-offset-syncs.B.internal", "A.checkpoints.internal", "x.replica", "__t"):
        assert not flow.topic_filter(topic), topic
    assert flow.topic_filter("orders")
    for group in ("console-consumer-1", "connect-mm", "__g"):
        assert not flow.group_filter(group), group
    assert flow.group_filter("billing")


def test_empty_include_list_matches_nothing() -> None:
    flow = build_config({**MINIMAL, "A->B.topics": ""}).flow("A", "B")
    assert flow.topics == ()
    assert not flow.topic_filter("orders")


def test_legacy_blacklist_aliases() -> None:
    props = {**MINIMAL, "topics.blacklist": "secret-.*", "A->B.groups.blacklist": "batch-.*"}
    flow = build_config(props).flow("A", "B")
    assert flow.topics_exclude == ("secret-.*",)
    assert flow.groups_exclude == ("batch-.*",)


def test_new_key_beats_legacy_alias_and_flow_beats_global() -> None:
    props = {
        **MINIMAL,
        "topics.exclude": "new-.*",
        "topics.blacklist": "old-.*",
        "B->A.topics.blacklist": "flow-.*",
        "A->B.enabled": "true",
    }
    config = build_config(props)
    assert config.flow("A", "B").topics_exclude == ("new-.*",)
    assert config.flow("B", "A").topics_exclude == ("flow-.*",)


def test_top_level_security_settings_are_inherited() -> None:
    props = {
        **MINIMAL,
        "security.protocol": "SSL",
        "ssl.truststore.location": "/etc/ca.pem",
        "B.security.protocol": "PLAINTEXT",
    }
    config = build_config(props)
    a, b = config.clusters["A"], config.clusters["B"]
    assert a.client["security.protocol"] == "SSL"
    assert b.client["security.protocol"] == "PLAINTEXT"
    assert b.client["ssl.truststore.location"] == "/etc/ca.pem"
    assert a.inherited == frozenset({"security.protocol", "ssl.truststore.location"})
    assert b.inherited == frozenset({"ssl.truststore.location"})


def test_cluster_alias_keys_do_not_shadow_global_flow_keys() -> None:
    props = {
        "clusters": "topics, B",
        "topics.bootstrap.servers": "t:1",
        "B.bootstrap.servers": "b:1",
    }
    props["topics.exclude"] = "x"
    config = build_config(props)
    assert "exclude" not in config.clusters["topics"].client


def test_state_dir_default_is_relative_to_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert build_config(MINIMAL).state_dir == tmp_path / "mm-state"
    assert build_config({**MINIMAL, "mm.state.dir": "state"}).state_dir == tmp_path / "state"


def test_models_are_frozen(production: MirrorConfig) -> None:
    with pytest.raises(ValidationError):
        production.state_dir = Path("/tmp")  # type: ignore[misc]
    with pytest.raises(ValidationError):
        production.flows[0].enabled = False  # type: ignore[misc]
    with pytest.raises(ValidationError):
        production.clusters["primary"].alias = "x"  # type: ignore[misc]


def test_mirror_config_reads_no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STATE_DIR", "/from/env")
    monkeypatch.setenv("MM_STATE_DIR", "/from/env")
    config = MirrorConfig(clusters={})
    assert config.state_dir != Path("/from/env")


def test_fields_have_descriptions() -> None:
    for model in (ClusterConfig, FlowConfig, MirrorConfig):
        for name, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{name}"


def test_policy_comes_from_mm_client() -> None:
    pytest.importorskip("mm_client.policy")
    flow = build_config({**MINIMAL, "A->B.enabled": "true"}).flow("A", "B")
    assert flow.policy() is not None


def test_job_flows_refuse_a_config_without_enabled_flows() -> None:
    from mm.errors import ConfigError

    cfg = build_config(MINIMAL)
    with pytest.raises(ConfigError, match="at least one enabled flow"):
        cfg.job_flows()
    enabled = build_config({**MINIMAL, "A->B.enabled": "true"})
    assert [f.name for f in enabled.job_flows()] == ["A->B"]
    assert enabled.job_flows([enabled.flow("A", "B")]) == [enabled.flow("A", "B")]
