"""MM_* environment variables override properties-file keys."""

from __future__ import annotations

from pathlib import Path

import pytest
from structlog.testing import capture_logs

from mm.config import load_config
from mm.config.env import apply_env_overrides, env_key
from mm.errors import ConfigError

pytestmark = pytest.mark.unit

PRODUCTION = Path(__file__).parent / "data" / "mm2-production.properties"


def test_cluster_override_matches_alias_case_insensitively() -> None:
    config = load_config(PRODUCTION, env={"MM_PRIMARY__BOOTSTRAP_SERVERS": "p-dr:9093"})
    assert config.clusters["primary"].bootstrap_servers == ("p-dr:9093",)


def test_role_prefixed_cluster_override() -> None:
    config = load_config(PRODUCTION, env={"MM_BACKUP__PRODUCER_LINGER_MS": "5"})
    assert config.clusters["backup"].client["producer.linger.ms"] == "5"
    assert config.clusters["backup"].librdkafka("producer")["linger.ms"] == "5"


def test_flow_override() -> None:
    env = {
        "MM_PRIMARY__BACKUP__EMIT_CHECKPOINTS_INTERVAL_SECONDS": "7",
        "MM_BACKUP__PRIMARY__ENABLED": "true",
    }
    config = load_config(PRODUCTION, env=env)
    assert config.flow("primary", "backup").emit_checkpoints_interval_seconds == 7
    assert config.flow("backup", "primary").enabled is True


def test_global_override_applies_to_every_flow_without_own_key() -> None:
    env = {"MM_EMIT_CHECKPOINTS_INTERVAL_SECONDS": "9", "MM_REPLICATION_FACTOR": "-1"}
    config = load_config(PRODUCTION, env=env)
    assert config.flow("backup", "primary").emit_checkpoints_interval_seconds == 9
    assert config.flow("primary", "backup").emit_checkpoints_interval_seconds == 2  # own key
    assert config.flow("primary", "backup").replication_factor == -1


def test_hyphenated_mm2_key_is_found() -> None:
    config = load_config(PRODUCTION, env={"MM_OFFSET_SYNCS_TOPIC_LOCATION": "target"})
    assert config.flow("primary", "backup").offset_syncs_topic_location == "target"


def test_spark_keys() -> None:
    env = {
        "MM_SPARK_MASTER": "local[2]",
        "MM_SPARK_DRIVER_EXTRAJAVAOPTIONS": "-Dx=1",  # spelt as in the file
        "MM_SPARK_EXECUTOR_MEMORY": "2g",
    }
    config = load_config(PRODUCTION, env=env)
    assert config.spark["spark.master"] == "local[2]"
    assert config.spark["spark.driver.extraJavaOptions"] == "-Dx=1"
    assert config.spark["spark.executor.memory"] == "2g"


def test_mm_keys() -> None:
    config = load_config(PRODUCTION, env={"MM_MM_STATE_DIR": "/srv/mm", "MM_MM_ALERT_X": "1"})
    assert config.state_dir == Path("/srv/mm")
    assert config.mm["alert.x"] == "1"


def test_clusters_from_environment_define_new_aliases() -> None:
    env = {
        "MM_CLUSTERS": "primary, backup, dr",
        "MM_DR__BOOTSTRAP_SERVERS": "dr:9092",
        "MM_PRIMARY__DR__ENABLED": "true",
    }
    config = load_config(PRODUCTION, env=env)
    assert config.clusters["dr"].bootstrap_servers == ("dr:9092",)
    assert config.flow("primary", "dr").enabled is True


def test_config_from_environment_only() -> None:
    env = {
        "MM_CLUSTERS": "A,B",
        "MM_A__BOOTSTRAP_SERVERS": "a:1",
        "MM_B__BOOTSTRAP_SERVERS": "b:1",
        "MM_A__B__ENABLED": "true",
    }
    config = load_config(None, env=env)
    assert [f.name for f in config.enabled_flows()] == ["A->B"]
    assert config.config_path is None


def test_reserved_variables_are_not_overrides() -> None:
    env = {"MM_LOG_LEVEL": "DEBUG", "MM_LOG_FORMAT": "json", "MM_SPARK_LOG_LEVEL": "INFO"}
    config = load_config(PRODUCTION, env=env)
    assert "log.level" not in config.other
    assert "spark.log.level" not in config.spark


def test_unknown_alias_and_malformed_names_are_skipped_with_warning() -> None:
    env = {"MM_NOWHERE__BOOTSTRAP_SERVERS": "x:1", "MM_A____B": "1", "MM_A__B__C__D": "1"}
    with capture_logs() as logs:
        props, sources = apply_env_overrides({"clusters": "A"}, env)
    assert props == {"clusters": "A"}
    assert sources == {}
    assert sorted(e["variable"] for e in logs if e["log_level"] == "warning") == sorted(env)


def test_os_environ_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MM_PRIMARY__BOOTSTRAP_SERVERS", "from-os:1")
    config = load_config(PRODUCTION)
    assert config.clusters["primary"].bootstrap_servers == ("from-os:1",)


def test_invalid_value_from_environment_names_the_variable() -> None:
    env = {"MM_PRIMARY__BACKUP__EMIT_CHECKPOINTS_INTERVAL_SECONDS": "-3"}
    with pytest.raises(ConfigError) as info:
        load_config(PRODUCTION, env=env)
    assert info.value.key == (
        "primary->backup.emit.checkpoints.interval.seconds"
        " (from MM_PRIMARY__BACKUP__EMIT_CHECKPOINTS_INTERVAL_SECONDS)"
    )
    assert info.value.value == "-3"


def test_env_key() -> None:
    assert env_key("offset-syncs.topic.location") == "OFFSET_SYNCS_TOPIC_LOCATION"
    assert env_key("spark.driver.extraJavaOptions") == "SPARK_DRIVER_EXTRAJAVAOPTIONS"


def test_single_underscore_does_not_reach_cluster_keys() -> None:
    props = {"clusters": "A", "A.bootstrap.servers": "a:1"}
    new, _ = apply_env_overrides(props, {"MM_A_BOOTSTRAP_SERVERS": "x:1"})
    assert new["A.bootstrap.servers"] == "a:1"
    assert new["a.bootstrap.servers"] == "x:1"  # a top-level key, reported as unknown later
