"""`mm config check|defaults` run as a user runs them: `python -m mm` in a subprocess.

No brokers and no Spark: every case only loads a properties file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import MM

from mm.config import FlowConfig
from mm.config.defaults_doc import MM2_DIFFERENCES
from mm.config.keys import MASK
from mm.config.loader import FLOW_KEYS
from mm.config.settings import SETTINGS

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[3]
PRODUCTION = REPO / "tests" / "mm" / "config" / "data" / "mm2-production.properties"
PRODUCTION_SECRETS = ("pr1mary-S3cret", "b4ckup-S3cret", "truststore-pw")

BASE = {
    "clusters": "A, B",
    "A.bootstrap.servers": "a:9092",
    "B.bootstrap.servers": "b:9092",
    "A->B.enabled": "true",
}
SECRETS = {
    "A.sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="mm" password="jaas-Pa55word";',
    "A.ssl.key.password": "key-Pa55word",
    "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="top" password="top-Pa55word";',
    "B.ssl.keystore.password": "keystore-Pa55word",
}
# MM2 property -> our default
DEFAULTS = {key: FlowConfig.model_fields[f].default for f, (key, _) in FLOW_KEYS.items()}
SECRET_VALUES = ("jaas-Pa55word", "key-Pa55word", "top-Pa55word", "keystore-Pa55word")


def clean_env(**extra: str) -> dict[str, str]:
    """The test process's environment without MM_* variables, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MM_")}
    return {**env, **extra}


def mm(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MM, *args],
        cwd=REPO,
        env=clean_env() if env is None else env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def write_props(path: Path, props: dict[str, str]) -> Path:
    path.write_text("".join(f"{k} = {v}\n" for k, v in props.items()), encoding="utf-8")
    return path


def assert_one_line_error(
    proc: subprocess.CompletedProcess[str],
    key: str,
    value: str,
    expected: str,
    *,
    warnings: tuple[str, ...] = (),
) -> str:
    """Exit 2 and one error line on stderr, after exactly ``warnings`` (unknown keys)."""
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 + len(warnings), proc.stderr
    assert tuple(lines[:-1]) == warnings, proc.stderr
    line = lines[-1]
    assert line.startswith("mm config: invalid config "), line
    assert key in line, line
    assert value in line, line
    assert expected in line, line
    return line


# (properties over BASE (None removes a key), key named, value shown, words of the expectation)
BAD_CONFIGS = [
    pytest.param(
        {"replication.policy.class": "com.example.MyPolicy"},
        "replication.policy.class",
        "'com.example.MyPolicy'",
        "DefaultReplicationPolicy",
        id="unknown-policy-class",
    ),
    pytest.param(
        {"A->C.enabled": "true"},
        "A->C.enabled",
        "'C'",
        "a cluster alias listed in clusters (A, B)",
        id="flow-to-undefined-cluster",
    ),
    pytest.param(
        {"emit.checkpoints.interval.seconds": "soon"},
        "emit.checkpoints.interval.seconds",
        "'soon'",
        "a positive integer number of seconds",
        id="non-numeric-interval",
    ),
    pytest.param(
        {"A->B.emit.heartbeats.interval.seconds": "soon"},
        "A->B.emit.heartbeats.interval.seconds",
        "'soon'",
        "a positive integer number of seconds",
        id="non-numeric-flow-interval",
    ),
    pytest.param(
        {"clusters": "A, B, C"},
        "C.bootstrap.servers",
        "<missing>",
        "host:port",
        id="missing-bootstrap-servers",
    ),
    pytest.param(
        {"topics": "orders, payments["},
        "topics",
        "payments[",
        "regular expressions",
        id="invalid-regex-topics",
    ),
    pytest.param(
        {"A->B.groups.exclude": "(unclosed"},
        "A->B.groups.exclude",
        "(unclosed",
        "regular expressions",
        id="invalid-regex-groups-exclude",
    ),
    pytest.param(
        {"offset-syncs.topic.location": "middle"},
        "offset-syncs.topic.location",
        "'middle'",
        "'source' or 'target'",
        id="invalid-offset-syncs-location",
    ),
    pytest.param(
        {"clusters": ""},
        "clusters",
        "''",
        "one or more cluster aliases",
        id="empty-clusters",
    ),
    pytest.param(
        {"clusters": None},
        "clusters",
        "<missing>",
        "one or more cluster aliases",
        id="no-clusters-key",
    ),
]


@pytest.mark.parametrize(("extra", "key", "value", "expected"), BAD_CONFIGS)
def test_check_reports_bad_config_in_one_line(
    tmp_path: Path, extra: dict[str, str | None], key: str, value: str, expected: str
) -> None:
    props = {k: v for k, v in {**BASE, **extra}.items() if v is not None}
    path = write_props(tmp_path / "mm2.properties", props)
    assert_one_line_error(mm("config", "check", "-c", str(path)), key, value, expected)


def test_check_reports_nonexistent_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.properties"
    proc = mm("config", "check", "-c", str(missing))
    assert proc.returncode == 2 and proc.stdout == "", proc
    assert proc.stderr.splitlines() == [
        f"mm config: cannot read the configuration file {str(missing)!r}: No such file or "
        "directory; expected a readable MirrorMaker 2 properties file (-c FILE or MM_CONFIG)"
    ]


def test_help_of_commands_without_a_config_file_does_not_describe_one() -> None:
    for command in ("embedded", "demo"):
        out = mm(command, "--help").stdout
        assert "properties" not in out and "Exit codes:" in out, out
    assert "connect-mirror-maker.properties" in mm("mirror", "--help").stdout


@pytest.mark.parametrize(
    ("error", "key", "value", "expected"),
    [
        pytest.param(
            {"refresh.topics.interval.seconds": "soon"},
            "refresh.topics.interval.seconds",
            "'soon'",
            "positive integer",
            id="error-elsewhere",
        ),
        pytest.param(
            {"B.bootstrap.servers": "no-port"},
            "B.bootstrap.servers",
            "'no-port'",
            "host:port",
            id="error-in-cluster-with-secrets",
        ),
        pytest.param(
            {"A.sasl.jaas.config": 'PlainLoginModule required password="jaas-Pa55word'},
            "A.sasl.jaas.config",
            repr(MASK),
            "a JAAS login module entry",
            id="error-in-the-secret-itself",
        ),
    ],
)
def test_errors_never_show_secrets(
    tmp_path: Path, error: dict[str, str], key: str, value: str, expected: str
) -> None:
    # ignored MM2 keys are logged by the loader: they add no stderr line; an unknown
    # key adds its warning (line 10 of the file) before the error
    props = {**BASE, **SECRETS, "tasks.max": "4", "some.unknown.key": "x", **error}
    path = write_props(tmp_path / "mm2.properties", props)
    proc = mm("config", "check", "-c", str(path))
    warning = (
        "mm config: warning: unknown config key some.unknown.key (line 10); "
        "no MirrorMaker 2 or mm key is spelt like it"
    )
    assert_one_line_error(proc, key, value, expected, warnings=(warning,))
    for secret in SECRET_VALUES:
        assert secret not in proc.stderr


def test_check_masks_secrets_of_a_valid_file(tmp_path: Path) -> None:
    path = write_props(tmp_path / "mm2.properties", {**BASE, **SECRETS})
    for extra in ((), ("--json",)):
        proc = mm("config", "check", "-c", str(path), *extra)
        assert proc.returncode == 0, proc.stderr
        assert MASK in proc.stdout
        for secret in SECRET_VALUES:
            assert secret not in proc.stdout + proc.stderr
    clusters = {c["alias"]: c for c in json.loads(proc.stdout)["clusters"]}
    assert clusters["A"]["client"]["sasl.jaas.config"] == MASK
    assert clusters["A"]["client"]["ssl.key.password"] == MASK
    assert clusters["B"]["client"]["sasl.jaas.config"] == MASK  # inherited from top level
    assert clusters["B"]["inherited"] == ["sasl.jaas.config"]


@pytest.mark.parametrize(
    ("variable", "key", "value", "expected"),
    [
        pytest.param(
            "MM_A__BOOTSTRAP_SERVERS",
            "A.bootstrap.servers (from MM_A__BOOTSTRAP_SERVERS)",
            "'bad-value-without-port'",
            "host:port",
            id="cluster-key",
        ),
        pytest.param(
            "MM_A__B__EMIT_CHECKPOINTS_INTERVAL_SECONDS",
            "A->B.emit.checkpoints.interval.seconds"
            " (from MM_A__B__EMIT_CHECKPOINTS_INTERVAL_SECONDS)",
            "'bad-value-without-port'",
            "positive integer",
            id="flow-key",
        ),
    ],
)
def test_check_reports_bad_env_override(
    tmp_path: Path, variable: str, key: str, value: str, expected: str
) -> None:
    path = write_props(tmp_path / "mm2.properties", BASE)
    env = clean_env(**{variable: "bad-value-without-port"})
    assert_one_line_error(mm("config", "check", "-c", str(path), env=env), key, value, expected)


def test_check_accepts_the_production_file_without_showing_secrets() -> None:
    proc = mm("config", "check", "-c", str(PRODUCTION))
    assert proc.returncode == 0, proc.stderr
    # the loader's notes are part of the summary; the one unknown key is also on stderr
    assert proc.stderr.splitlines() == [
        "mm config: warning: unknown config key mm.alert.lag.seconds (line 63); "
        "did you mean mm.alert.checkpoint.age.seconds?"
    ]
    out = proc.stdout
    for secret in PRODUCTION_SECRETS:
        assert secret not in out
    for expected in (
        "state dir  /var/lib/mm",
        "kafka-p1.example.com:9093, kafka-p2.example.com:9093, kafka-p3.example.com:9093",
        "SASL_SSL",
        "primary->backup (enabled)",
        "backup->primary (disabled)",
        "orders.*, payments, customers-.*",
        "org.apache.kafka.connect.mirror.DefaultReplicationPolicy",
        "spark.master",
        "mm.alert.lag.seconds",
        "key=tasks.max",  # a note: accepted and ignored
    ):
        assert expected in out, out


def test_check_json_has_the_effective_settings_with_env_overrides() -> None:
    env = clean_env(MM_PRIMARY__BACKUP__SYNC_GROUP_OFFSETS_INTERVAL_SECONDS="7", MM_CONFIG="")
    proc = mm("config", "check", "-c", str(PRODUCTION), "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    for secret in PRODUCTION_SECRETS:
        assert secret not in proc.stdout
    summary = json.loads(proc.stdout)
    assert summary["state_dir"] == "/var/lib/mm"
    primary = summary["clusters"][0]
    assert primary["alias"] == "primary"
    assert primary["security.protocol"] == "SASL_SSL"
    assert primary["client"]["sasl.jaas.config"] == MASK
    flows = {f["flow"]: f for f in summary["flows"]}
    assert set(flows) == {"primary->backup", "backup->primary"}
    forward = flows["primary->backup"]
    assert forward["enabled"] is True
    assert forward["topics"] == ["orders.*", "payments", "customers-.*"]
    assert forward["emit.checkpoints.interval.seconds"] == 2
    assert forward["emit.heartbeats.interval.seconds"] == 1
    assert forward["offset-syncs.topic.location"] == "source"
    assert forward["sync.group.offsets.enabled"] is True
    assert forward["sync.group.offsets.interval.seconds"] == 7  # from the environment
    assert flows["backup->primary"]["enabled"] is False
    assert flows["backup->primary"]["sync.group.offsets.interval.seconds"] == 5
    assert summary["spark"]["spark.master"] == "local[4]"
    assert summary["mm"] == {"mm.alert.lag.seconds": "30"}
    assert {n["key"] for n in summary["notes"]} >= {"tasks.max", "key.converter"}


def test_check_reads_mm_config_when_no_file_is_given(tmp_path: Path) -> None:
    path = write_props(tmp_path / "mm2.properties", BASE)
    proc = mm("config", "check", env=clean_env(MM_CONFIG=str(path)))
    assert proc.returncode == 0, proc.stderr
    assert "A->B (enabled)" in proc.stdout
    proc = mm("config", "check")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "mm config: no configuration file: pass -c FILE or set MM_CONFIG"
    ]


def test_check_notes_that_no_flow_is_enabled(tmp_path: Path) -> None:
    path = write_props(tmp_path / "mm2.properties", {**BASE, "A->B.enabled": "false"})
    proc = mm("config", "check", "-c", str(path))
    assert proc.returncode == 0, proc.stderr
    assert "warning: no flow is enabled" in proc.stdout


# --- defaults ---------------------------------------------------------------------


def test_defaults_lists_every_flow_key_and_mm2_differences() -> None:
    proc = mm("config", "defaults")
    assert proc.returncode == 0, proc.stderr
    for key, _old in FLOW_KEYS.values():
        assert f"  {key} " in proc.stdout
    for key, diff in MM2_DIFFERENCES.items():
        row = next(r for r in proc.stdout.splitlines() if r.split()[:1] == [key] and diff.why in r)
        assert row.split()[:3] == [key, str(DEFAULTS[key]), str(diff.mm2)]

    for key in SETTINGS:
        assert f"  mm.{key} " in proc.stdout
    rows = json.loads(mm("config", "defaults", "--json").stdout)
    assert [r["key"] for r in rows] == [key for key, _old in FLOW_KEYS.values()] + [
        f"mm.{key}" for key in SETTINGS
    ]
    by_key = {r["key"]: r for r in rows}
    assert by_key["emit.checkpoints.interval.seconds"] == {
        "key": "emit.checkpoints.interval.seconds",
        "ours": 5,
        "mm2": 60,
        "why": MM2_DIFFERENCES["emit.checkpoints.interval.seconds"].why,
    }
    assert by_key["topics"] == {"key": "topics", "ours": [".*"], "mm2": [".*"], "why": None}


def test_mm2_difference_table_matches_the_field_descriptions() -> None:
    """A FlowConfig field documents MM2's default ("MM2: x") iff the table has it."""
    documented = {}
    for field, (key, _old) in FLOW_KEYS.items():
        description = FlowConfig.model_fields[field].description or ""
        if "MM2:" in description:
            documented[key] = description
    assert set(documented) == set(MM2_DIFFERENCES)
    for key, diff in MM2_DIFFERENCES.items():
        assert f"MM2: {diff.mm2}" in documented[key]
        assert diff.mm2 != DEFAULTS[key]
        assert type(diff.mm2) is type(DEFAULTS[key])


# --- start-up cost ----------------------------------------------------------------


def test_help_does_not_import_pyspark() -> None:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "mm", "--help"],
        cwd=REPO,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "validate a connect-mirror-maker.properties file" in proc.stdout
    # importtime does not list modules loaded by importlib.import_module (the
    # commands), only what they import; the next test checks sys.modules itself
    assert "pyspark" not in proc.stderr
    assert "py4j" not in proc.stderr


def test_building_the_parser_does_not_import_pyspark() -> None:
    # a fresh interpreter: this test session may already have imported pyspark
    code = (
        "import sys, mm.commands.config\n"
        "assert 'mm.config' not in sys.modules, 'mm.commands.config imports mm.config early'\n"
        "import mm.cli\n"
        "mm.cli.build_parser()\n"
        "bad = [m for m in ('pyspark', 'py4j') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


# --- unknown keys -----------------------------------------------------------------

TYPOS = "A->B.topcs = orders\nmm.mirror.trigger.second = 5\n"
TYPO_LINES = [
    "unknown config key A->B.topcs (line 5); did you mean A->B.topics?",
    "unknown config key mm.mirror.trigger.second (line 6); did you mean mm.mirror.trigger.seconds?",
]


def write_typos(path: Path, extra: str = "") -> Path:
    write_props(path, BASE)  # four lines
    path.write_text(path.read_text() + TYPOS + extra, encoding="utf-8")
    return path


def test_check_warns_about_unknown_keys_on_stderr_and_in_the_notes(tmp_path: Path) -> None:
    path = write_typos(tmp_path / "mm2.properties")
    proc = mm("config", "check", "-c", str(path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == [f"mm config: warning: {line}" for line in TYPO_LINES]
    assert "warning: unknown config key (key=A->B.topcs, where=line 5, " in proc.stdout
    notes = json.loads(mm("config", "check", "-c", str(path), "--json").stdout)["notes"]
    assert {"level": "warning", "event": "unknown config key", "key": "A->B.topcs"} | {
        "where": "line 5",
        "did_you_mean": "A->B.topics",
    } in notes


@pytest.mark.parametrize(
    ("args", "extra"),
    [
        pytest.param(("config", "check", "--strict"), "", id="check-strict"),
        pytest.param(("config", "check"), "mm.config.strict = true\n", id="check-strict-key"),
        # any command: refused before it connects to anything or starts Spark
        pytest.param(("mirror",), "mm.config.strict = true\n", id="mirror-strict-key"),
    ],
)
def test_strict_mode_exits_2_naming_every_unknown_key(
    tmp_path: Path, args: tuple[str, ...], extra: str
) -> None:
    path = write_typos(tmp_path / "mm2.properties", extra)
    proc = mm(*args, "-c", str(path))
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    name = f"mm {args[0]}"
    assert proc.stderr.splitlines() == [
        *(f"{name}: {line}" for line in TYPO_LINES),
        f"{name}: 2 unknown config keys: fix or remove them (unknown keys are errors with "
        "mm.config.strict = true or `mm config check --strict`)",
    ]


def test_strict_check_of_a_clean_file_passes(tmp_path: Path) -> None:
    path = write_props(tmp_path / "mm2.properties", {**BASE, "tasks.max": "4"})
    proc = mm("config", "check", "-c", str(path), "--strict")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
