"""Unknown config keys: found with their line and the closest known key, warned on
stderr before anything starts, an error in strict mode; MM2's own keys are known."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.props import TWO_CLUSTERS

from mm.config import load_config
from mm.config.properties import load_properties_with_lines
from mm.config.unknown import UnknownConfigKeysError, UnknownKey, find_unknown_keys
from mm.errors import ConfigError
from mm.logs import program, set_program

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def plain_program() -> Iterator[None]:
    """Warnings start with "mm:" outside the CLI (an in-process `mm` run names itself)."""
    before = program()
    set_program("mm")
    yield
    set_program(before)


PRODUCTION = Path(__file__).parent / "data" / "mm2-production.properties"


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("typo", "closest"),
    [
        ("A->B.topcs", "A->B.topics"),
        ("A->B.emit.checkpoint.interval.seconds", "A->B.emit.checkpoints.interval.seconds"),
        ("topcs.exclude", "topics.exclude"),
        ("clusers", "clusters"),
        ("AA.bootstrap.servers", "A.bootstrap.servers"),
        ("mm.mirror.trigger.second", "mm.mirror.trigger.seconds"),
        ("mm.config.stric", "mm.config.strict"),
        ("metrics.port", "mm.metrics.port"),
        ("backup.pth", "backup.path"),
        ("B->A.sync.group.offset.enabled", "B->A.sync.group.offsets.enabled"),
    ],
)
def test_a_typo_is_unknown_with_the_closest_known_key(typo: str, closest: str) -> None:
    assert find_unknown_keys({**TWO_CLUSTERS, typo: "1"}) == [UnknownKey(typo, None, closest)]


def test_a_key_like_no_other_has_no_suggestion() -> None:
    unknown = find_unknown_keys({**TWO_CLUSTERS, "zzz": "1"})
    assert unknown == [UnknownKey("zzz", None, None)]
    assert unknown[0].message() == (
        "unknown config key zzz; no MirrorMaker 2 or mm key is spelt like it"
    )


@pytest.mark.parametrize(
    "key",
    [
        # ours
        "mm.state.dir",
        "mm.config.strict",
        "mm.mirror.log.summary.seconds",
        "spark.executor.memory",
        "backup.path",
        "backup.segment.ms",
        "backup.compact.min.segments",
        # flow keys, globally, per flow and deprecated spellings
        "topics",
        "topics.blacklist",
        "A->B.topics",
        "A->B.groups.blacklist",
        "enabled",
        # per-cluster and inherited client properties
        "A.ssl.truststore.location",
        "A.sasl.jaas.config",
        "A.consumer.max.poll.records",
        "B.producer.linger.ms",
        "A.admin.request.timeout.ms",
        "A.whatever.librdkafka.warns.about",
        "security.protocol",
        "ssl.truststore.location",
        "sasl.mechanism",
        # MM2 / Kafka Connect keys we accept and ignore
        "tasks.max",
        "A->B.tasks.max",
        "key.converter",
        "value.converter.schemas.enable",
        "offset.storage.replication.factor",
        "config.providers.file.class",
        "exactly.once.source.support",
        "producer.override.linger.ms",
        "A->B.consumer.fetch.max.bytes",
        "A->B.source.cluster.ssl.truststore.location",
        "transforms",
        "dedicated.mode.enable.internal.rest",
    ],
)
def test_keys_mm2_or_mm_read_are_known(key: str) -> None:
    assert find_unknown_keys({**TWO_CLUSTERS, key: "x"}) == []


def test_the_production_mm2_file_has_only_its_one_unknown_key() -> None:
    props, lines = load_properties_with_lines(PRODUCTION)
    assert find_unknown_keys(props, lines=lines) == [
        UnknownKey("mm.alert.lag.seconds", "line 63", "mm.alert.checkpoint.age.seconds")
    ]


def test_a_cluster_called_backup_owns_its_backup_keys() -> None:
    props = {
        "clusters": "A, backup",
        "A.bootstrap.servers": "a:1",
        "backup.bootstrap.servers": "b:1",
    }
    assert find_unknown_keys({**props, "backup.linger.ms": "5"}) == []
    assert find_unknown_keys({**TWO_CLUSTERS, "backup.linger.ms": "5"})[0].key == "backup.linger.ms"


def test_cluster_keys_are_known_while_clusters_is_missing() -> None:
    props = {k: v for k, v in TWO_CLUSTERS.items() if k != "clusters"}
    assert find_unknown_keys({**props, "clustres": "A, B"}) == [
        UnknownKey("clustres", None, "clusters")
    ]


def test_where_names_the_file_line_or_the_environment_variable(tmp_path: Path) -> None:
    path = write(
        tmp_path / "mm2.properties",
        "clusters = A, B\n"
        "A.bootstrap.servers = a:9092,\\\n"
        "    a2:9092\n"
        "B.bootstrap.servers = b:9092\n"
        "# comment\n"
        "\n"
        "A->B.topcs = orders\n",
    )
    _, lines = load_properties_with_lines(path)
    assert lines["A.bootstrap.servers"] == 2 and lines["A->B.topcs"] == 7
    from mm.config.loader import unknown_config_keys

    unknown = unknown_config_keys(path, env={"MM_A__B__GRUPS": "x"})
    assert [u.message() for u in unknown] == [
        "unknown config key A->B.topcs (line 7); did you mean A->B.topics?",
        "unknown config key A->B.grups (from MM_A__B__GRUPS); did you mean A->B.groups?",
    ]


def test_load_warns_on_stderr_once_per_key_and_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(
        tmp_path / "mm2.properties",
        "clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\n"
        "A->B.enabled = true\nA->B.topcs = orders\nmm.mirror.trigger.second = 5\n",
    )
    cfg = load_config(path, env={})
    assert cfg.flow("A", "B").topics == (".*",)  # the typo set nothing
    assert capsys.readouterr().err.splitlines() == [
        "mm: warning: unknown config key A->B.topcs (line 5); did you mean A->B.topics?",
        "mm: warning: unknown config key mm.mirror.trigger.second (line 6); "
        "did you mean mm.mirror.trigger.seconds?",
    ]


def test_warnings_come_before_the_error_that_fails_the_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path / "mm2.properties", "clustrs = A\nA.bootstrap.servers = a:1\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    assert info.value.key == "clusters"
    assert capsys.readouterr().err.splitlines() == [
        "mm: warning: unknown config key clustrs (line 1); did you mean clusters?"
    ]


@pytest.mark.parametrize("how", ["key", "argument", "environment"])
def test_strict_mode_makes_unknown_keys_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    text = "clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\n"
    text += "A->B.topcs = x\nzzz = 1\n"
    env: dict[str, str] = {}
    if how == "key":
        text += "mm.config.strict = TRUE\n"
    elif how == "environment":
        env["MM_MM_CONFIG_STRICT"] = "true"
    path = write(tmp_path / "mm2.properties", text)
    with pytest.raises(UnknownConfigKeysError) as info:
        load_config(path, env=env, strict=how == "argument")
    assert str(info.value).splitlines() == [
        "unknown config key A->B.topcs (line 4); did you mean A->B.topics?",
        "unknown config key zzz (line 5); no MirrorMaker 2 or mm key is spelt like it",
        "2 unknown config keys: fix or remove them (unknown keys are errors with "
        "mm.config.strict = true or `mm config check --strict`)",
    ]
    assert capsys.readouterr().err == ""  # the error says it all, no warnings too


def test_strict_mode_with_only_known_keys_loads(tmp_path: Path) -> None:
    text = "clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\n"
    path = write(tmp_path / "mm2.properties", text + "mm.config.strict = true\ntasks.max = 2\n")
    assert load_config(path, env={}).setting("config.strict") is True


@pytest.mark.parametrize(("value", "env"), [("yes", False), ("1", True)])
def test_a_bad_strict_value_is_a_config_error(tmp_path: Path, value: str, env: bool) -> None:
    text = "clusters = A\nA.bootstrap.servers = a:1\n"
    if not env:
        text += f"mm.config.strict = {value}\n"
    path = write(tmp_path / "mm2.properties", text)
    with pytest.raises(ConfigError) as info:
        load_config(path, env={"MM_MM_CONFIG_STRICT": value} if env else {})
    key = "mm.config.strict" + (" (from MM_MM_CONFIG_STRICT)" if env else "")
    assert (info.value.key, info.value.value, info.value.expected) == (key, value, "true or false")


def test_check_keys_false_reports_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = "clusters = A\nA.bootstrap.servers = a:1\nzzz = 1\nmm.config.strict = true\n"
    load_config(write(tmp_path / "mm2.properties", text), env={}, check_keys=False)
    assert capsys.readouterr().err == ""


def test_process_settings_in_the_environment_are_not_unknown_keys(tmp_path: Path) -> None:
    from mm.config.loader import unknown_config_keys

    path = write(tmp_path / "mm2.properties", "clusters = A\nA.bootstrap.servers = a:1\n")
    env = {
        "MM_LOG_LEVEL": "DEBUG",
        "MM_LOG_FORMAT": "json",
        "MM_SPARK_LOG_LEVEL": "WARN",
        "MM_CONFIG": str(path),
        "MM_EMBEDDED_STATE": "/tmp/state.json",
        "MM_KAFKA_JARS": "/tmp/kafka-jars",  # ./dev sets it
    }
    assert unknown_config_keys(path, env=env) == []
    assert [u.key for u in unknown_config_keys(path, env={"MM_EMBEDED_STATE": "x"})] == [
        "embeded.state"
    ]
