"""The catalogue of bad configuration and command lines (issue 13, bad input).

Every row: what the user gives, the exit code, and words of the one message that
name what is wrong AND what is expected. Refused runs against real clusters
(Tansu, over TCP) leave both clusters as they were: no topic, no group, no record
(the clusters get aliases of their own per test, so anything a run created would
be a new topic name). Cases other modules already cover are listed in
``COVERED_ELSEWHERE`` with the test that covers them (checked to exist).
"""

from __future__ import annotations

import ast
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from support.apache_kafka import KRaftBroker

from mm import reach
from mm.cli import main

TESTS = Path(__file__).resolve().parents[1]


def base_props(a: str = "127.0.0.1:1", b: str = "127.0.0.1:1", s: str = "A", t: str = "B") -> str:
    return (
        f"clusters = {s}, {t}\n{s}.bootstrap.servers = {a}\n{t}.bootstrap.servers = {b}\n"
        f"{s}->{t}.enabled = true\n{s}->{t}.topics = orders\n"
    )


@dataclass(frozen=True)
class Case:
    id: str
    extra: str  # properties lines added to the base file (A, B, A->B enabled)
    exit: int  # of `mm config check`
    says: tuple[str, ...]  # substrings of stderr: the wrong thing and the expectation


# config cases, run through `mm config check` (and, when refused, `mm mirror` and
# `mm checkpoint` against real clusters below)
CONFIG_CASES = [
    Case(
        "malformed-line",
        "this is not a property\n",
        0,
        ("warning: unknown config key this (line 6)", "did you mean topics?"),
    ),
    Case(
        "bad-unicode-escape",
        "A->B.topics = \\u12zz\n",
        2,
        ("line 6='\\\\u12zz'", "expected a \\uXXXX escape with four hexadecimal digits"),
    ),
    Case(
        "unknown-key",
        "A->B.topcs = orders\n",
        0,
        ("warning: unknown config key A->B.topcs (line 6)", "did you mean A->B.topics?"),
    ),
    Case(
        "unknown-key-strict",
        "A->B.topcs = orders\nmm.config.strict = true\n",
        2,
        ("unknown config key A->B.topcs (line 6); did you mean A->B.topics?", "strict"),
    ),
    Case(
        "wrong-boolean",
        "A->B.sync.group.offsets.enabled = maybe\n",
        2,
        ("A->B.sync.group.offsets.enabled='maybe'", "expected true or false"),
    ),
    Case(
        "wrong-integer",
        "replication.factor = three\n",
        2,
        ("replication.factor='three'", "expected -1", "or a positive integer"),
    ),
    Case(
        "negative-duration",
        "emit.heartbeats.interval.seconds = -5\n",
        2,
        ("emit.heartbeats.interval.seconds='-5'", "expected a positive integer number of seconds"),
    ),
    Case(
        "wrong-enum",
        "offset-syncs.topic.location = middle\n",
        2,
        ("offset-syncs.topic.location='middle'", "expected 'source' or 'target'"),
    ),
    Case(
        "identity-cycle",
        "B->A.enabled = true\nreplication.policy.class = IdentityReplicationPolicy\n"
        "B->A.topics = orders\n",
        2,
        (
            "replication.policy.class='IdentityReplicationPolicy'",
            "expected DefaultReplicationPolicy while A->B and B->A are both enabled",
            "topic 'orders', selected by both flows",
        ),
    ),
    Case(
        "identity-cycle-default-topics",
        "B->A.enabled = true\nB->A.replication.policy.class = IdentityReplicationPolicy\n",
        2,
        ("B->A.replication.policy.class='IdentityReplicationPolicy'", "both enabled"),
    ),
    Case(
        "internal-topics-regex",
        "A->B.topics = .*|__consumer_offsets\n",
        0,
        (
            "warning: A->B.topics = .*|__consumer_offsets names internal topics "
            "(__consumer_offsets), which A->B never mirrors",
            "expected patterns for application topics only",
        ),
    ),
    Case(
        "internal-topics-mm2",
        "A->B.topics = mm2-offset-syncs.*,.*[.]checkpoints[.]internal\n",
        0,
        ("mm2-offset-syncs.B.internal, A.checkpoints.internal", "never mirrors"),
    ),
    Case(
        "invalid-regex",
        "A->B.topics = ([a\n",
        2,
        ("A->B.topics='([a'", "expected a comma-separated list of regular expressions"),
    ),
    Case(
        "unknown-alias",
        "A->C.enabled = true\n",
        2,
        ("A->C.enabled='C'", "expected a cluster alias listed in clusters (A, B)"),
    ),
    Case(
        "bad-security-protocol",
        "A.security.protocol = PLAIN\n",
        2,
        ("A.security.protocol='PLAIN'", "expected one of PLAINTEXT, SSL, SASL_PLAINTEXT"),
    ),
    Case(
        "sasl-without-jaas",
        "B.security.protocol = SASL_SSL\nB.sasl.mechanism = SCRAM-SHA-512\n",
        2,
        ("B.sasl.jaas.config=<missing>", "expected a ScramLoginModule entry"),
    ),
    Case(
        "bad-sasl-mechanism",
        "security.protocol = SASL_PLAINTEXT\nsasl.mechanism = SCRAM\n",
        2,
        ("sasl.mechanism='SCRAM'", "expected one of GSSAPI, PLAIN, SCRAM-SHA-256"),
    ),
]

# whole files: (id, text, commands refusing it, words)
FILE_CASES = [
    ("empty-file", "", ("config", "mirror", "status"), ("clusters=<missing>", "expected a")),
    (
        "no-clusters",
        "A.bootstrap.servers = a:1\n",
        ("config", "mirror", "status"),
        ("clusters=<missing>", "expected a comma-separated list of one or more cluster aliases"),
    ),
    (
        # `mm config check` shows such a file (its flows may be enabled later)
        "no-enabled-flow",
        "clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\n",
        ("mirror", "checkpoint", "status"),
        ("clusters='A,B'", "expected at least one enabled flow"),
    ),
]
ARGS = {
    "config": ["config", "check"],
    "mirror": ["mirror", "--once"],
    "checkpoint": ["checkpoint", "--once"],
    "status": ["status"],
}


def _one_line(err: str) -> list[str]:
    # JSON log lines aside (a command's structured start-up events)
    return [line for line in err.splitlines() if line and not line.startswith("{")]


@pytest.mark.unit
@pytest.mark.parametrize("case", CONFIG_CASES, ids=[c.id for c in CONFIG_CASES])
def test_config_case(
    case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [n for n in os.environ if n.startswith("MM_")]:
        monkeypatch.delenv(name)
    path = tmp_path / "mm.properties"
    path.write_text(base_props() + case.extra, encoding="utf-8")
    assert main(["config", "check", "-c", str(path)]) == case.exit
    err = capsys.readouterr().err
    lines = _one_line(err)
    assert lines and all(line.startswith("mm config: ") for line in lines), err
    for words in case.says:
        assert words in err, err
    if case.exit == 2:
        assert "Traceback" not in err
        assert len(lines) == (2 if "strict" in case.id else 1), err


@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "command", "says"),
    [pytest.param(t, c, w, id=f"{i}-{c}") for i, t, cs, w in FILE_CASES for c in cs],
)
def test_file_case(
    text: str,
    command: str,
    says: tuple[str, ...],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "mm.properties"
    path.write_text(text, encoding="utf-8")
    assert main([*ARGS[command], "-c", str(path)]) == 2
    err = capsys.readouterr().err
    assert len(_one_line(err)) == 1, err
    for words in says:
        assert words in err, err


# --- the command line ----------------------------------------------------------------------

CLI_FILE = base_props() + "B->A.enabled = false\nbackup.cluster = A\n"


@dataclass(frozen=True)
class Cli:
    id: str
    argv: tuple[str, ...]  # FILE stands for the properties file
    exit: int
    says: tuple[str, ...]


CLI_CASES = [
    Cli(
        "missing-file",
        ("mirror", "-c", "nosuch.properties", "--once"),
        2,
        ("cannot read the configuration file", "No such file", "expected a readable"),
    ),
    Cli(
        "unknown-flow",
        ("mirror", "-c", "FILE", "--flow", "X->Y", "--once"),
        2,
        ("--flow='X->Y'", "expected one of the configured flows ['A->B', 'B->A']"),
    ),
    Cli(
        "unknown-flow-translate",
        ("translate", "-c", "FILE", "--group", "g", "--flow", "A-B"),
        2,
        ("--flow='A-B'", "expected one of the configured flows"),
    ),
    Cli(
        "disabled-flow-mirror",
        ("mirror", "-c", "FILE", "--flow", "B->A", "--once"),
        2,
        ("--flow='B->A'", "expected an enabled flow: B->A.enabled is not true"),
    ),
    Cli(
        "disabled-flow-checkpoint",
        ("checkpoint", "-c", "FILE", "--flow", "B->A", "--once"),
        2,
        ("--flow='B->A'", "set B->A.enabled = true"),
    ),
    Cli(
        "disabled-flow-heartbeat",
        ("heartbeat", "-c", "FILE", "--flow", "B->A", "--once"),
        2,
        ("--flow='B->A'", "expected an enabled flow"),
    ),
    Cli(
        "failover-group-and-groups",
        ("failover", "-c", "FILE", "--group", "g", "--groups", "g.*"),
        2,
        ("argument --groups: not allowed with argument --group", "(--group G | --groups REGEX)"),
    ),
    Cli(
        "failover-bad-regex",
        ("failover", "-c", "FILE", "--groups", "(g"),
        2,
        ("--groups '(g' is not a valid regex", "expected a Python regular expression"),
    ),
    Cli(
        "failback-quarantine-only-with-groups",
        ("failback", "-c", "FILE", "--quarantine-only", "--groups", "g.*"),
        2,
        ("--groups with --quarantine-only", "expected one of them"),
    ),
    Cli(
        "restore-unknown-cluster",
        ("restore", "-c", "FILE", "--to", "C"),
        2,
        ("--to C: no such cluster", "expected one of A, B"),
    ),
    Cli(
        "restore-replication-factor-0",
        ("restore", "-c", "FILE", "--to", "A", "--replication-factor", "0"),
        2,
        ("--replication-factor 0", "expected -1 (the cluster's default) or a positive number"),
    ),
    Cli(
        "restore-bad-topics-regex",
        ("restore", "-c", "FILE", "--to", "A", "--topics", "(x"),
        2,
        ("--topics '(x' is not a valid regex", "expected a Python regular expression"),
    ),
    Cli(
        "restore-bad-until",
        ("restore", "-c", "FILE", "--to", "A", "--until", "yesterday"),
        2,
        ("--until 'yesterday'", "expected milliseconds since the epoch or an ISO 8601"),
    ),
    Cli(
        "status-negative-timeout",
        ("status", "-c", "FILE", "--timeout", "-1"),
        2,
        ("--timeout must be a positive number of seconds",),
    ),
    Cli(
        "translate-zero-timeout",
        ("translate", "-c", "FILE", "--group", "g", "--timeout", "0"),
        2,
        ("--timeout must be a positive number of seconds",),
    ),
    Cli(
        "position-bad-set",
        ("position", "-c", "FILE", "--flow", "A->B", "--topic", "t", "--set", "0=latest"),
        2,
        ("--set '0=latest'", "expected the offset as a number >= 0, 'start' or 'end'"),
    ),
    Cli(
        "position-set-without-partition",
        ("position", "-c", "FILE", "--flow", "A->B", "--topic", "t", "--set", "1500"),
        2,
        ("--set '1500'", "expected PARTITION=OFFSET"),
    ),
    Cli(
        "failover-negative-timeout",
        ("failover", "-c", "FILE", "--group", "g", "--timeout", "-3"),
        2,
        ("--timeout must be a positive number of seconds",),
    ),
]


@pytest.mark.unit
@pytest.mark.parametrize("case", CLI_CASES, ids=[c.id for c in CLI_CASES])
def test_cli_case(
    case: Cli, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused before any cluster is asked: nothing answers on port 1, and the
    start-up check that would say so is made to fail the test if reached."""
    path = tmp_path / "mm.properties"
    path.write_text(CLI_FILE + f"backup.path = {tmp_path / 'backup'}\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)

    def reached(*_a: object, **_k: object) -> None:
        raise AssertionError("a cluster was asked before the input was refused")

    monkeypatch.setattr(reach, "require_reachable", reached)
    monkeypatch.setattr(reach, "unreachable", reached)
    argv = [str(path) if a == "FILE" else a for a in case.argv]
    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse's own refusals
        rc = int(exc.code or 0)
    assert rc == case.exit
    out = capsys.readouterr()
    assert out.out == ""
    for words in case.says:
        assert words in out.err, out.err
    assert "Traceback" not in out.err
    assert not (tmp_path / "mm-state").exists()  # no state written either


# --- refused runs against real clusters: nothing created --------------------------------


def _cluster_state(bootstrap: str) -> tuple[set[str], set[str]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = set(admin.list_topics(timeout=15).topics)
    groups = {g.group_id for g in admin.list_consumer_groups().result(15).valid}
    return topics, groups


REFUSED = [c for c in CONFIG_CASES if c.exit == 2]


def _own_pair(own_kafka: Callable[..., KRaftBroker]) -> tuple[str, str]:
    """Two clusters of the test's own: "nothing changed" compares whole clusters, and
    the other test worker writes to the shared ones meanwhile."""
    brokers = [own_kafka(wait=False) for _ in range(2)]
    for broker in brokers:
        broker.wait_ready()
    return brokers[0].bootstrap, brokers[1].bootstrap


@pytest.mark.integration
def test_refused_runs_create_nothing_on_either_cluster(
    own_kafka: Callable[..., KRaftBroker],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each refused configuration through the jobs that write (mirror, checkpoint,
    heartbeat) against live clusters: exit 2, no state directory, and the two
    clusters hold the same topics and groups afterwards."""
    monkeypatch.chdir(tmp_path)
    clusters = _own_pair(own_kafka)
    before = [_cluster_state(b) for b in clusters]
    for case in REFUSED:
        path = tmp_path / f"{case.id}.properties"
        state = tmp_path / f"state-{case.id}"
        path.write_text(
            base_props(*clusters) + case.extra + f"mm.state.dir = {state}\n", encoding="utf-8"
        )
        for command in (["mirror", "--once"], ["checkpoint", "--once"], ["heartbeat", "--once"]):
            rc = main([*command, "-c", str(path)])
            err = capsys.readouterr().err
            assert rc == 2, (case.id, command, err)
            assert not state.exists(), (case.id, command)
    assert [_cluster_state(b) for b in clusters] == before


@pytest.mark.integration
def test_unknown_group_is_named_and_nothing_is_written(
    own_kafka: Callable[..., KRaftBroker],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`mm translate --group nosuch` and `mm failover --group nosuch`: exit 1 naming
    the group and where its checkpoints were looked for; no group and no other topic
    changes. Failover records the flow's failover point all the same (it is the flow's,
    not the group's: failback needs it), in its own topic on the target."""
    monkeypatch.chdir(tmp_path)
    clusters = _own_pair(own_kafka)
    path = tmp_path / "mm.properties"
    # aliases of its own, and an (empty) checkpoints topic as a checkpoint job leaves it
    s, t = f"S{uuid.uuid4().hex[:6]}", f"T{uuid.uuid4().hex[:6]}"
    path.write_text(base_props(*clusters, s, t), encoding="utf-8")
    checkpoints = f"{s}.checkpoints.internal"
    admin = AdminClient({"bootstrap.servers": clusters[1]})
    admin.create_topics([NewTopic(checkpoints, 1, 1)])[checkpoints].result(15)
    before = [_cluster_state(b) for b in clusters]
    missing = f"no checkpoints for group 'nosuch' in {checkpoints} on {t}"
    assert main(["translate", "-c", str(path), "--group", "nosuch", "--timeout", "10"]) == 1
    err = capsys.readouterr().err
    assert missing in err, err
    assert "expected a group the checkpoint job has translated" in err, err
    assert [_cluster_state(b) for b in clusters] == before
    assert main(["failover", "-c", str(path), "--group", "nosuch", "--timeout", "10"]) == 1
    out = capsys.readouterr()
    assert missing in out.err, out.err
    points = f"mm-failover-points.{s}.internal"
    assert f"recorded in {points} on {t}" in out.out, out.out
    (a_topics, a_groups), (b_topics, b_groups) = (_cluster_state(b) for b in clusters)
    assert (a_topics, a_groups) == before[0] and b_groups == before[1][1]
    assert b_topics == before[1][0] | {points}


# cases whose test lives with the code it exercises: (case, test file, test function)
COVERED_ELSEWHERE = [
    (
        "unreachable bootstrap: one line naming alias and address, bounded time",
        "mm/test_unreachable_cluster.py",
        "test_unreachable_cluster_is_one_line_naming_it",
    ),
    (
        "unreachable bootstrap, every command at once with the default timeouts",
        "mm/test_unreachable_cluster.py",
        "test_unreachable_cluster_with_the_default_timeouts",
    ),
    (
        "missing or unreadable file, every command",
        "mm/commands/test_config_messages_cli.py",
        "test_a_missing_or_unreadable_file_is_one_line_naming_it",
    ),
    (
        "unknown key warned before the mirror starts",
        "mm/commands/test_config_messages_cli.py",
        "test_mirror_warns_about_a_typo_before_it_starts",
    ),
    (
        "wrong types, aliases, regexes, policies, TLS stores (34 cases)",
        "mm/config/test_config_errors.py",
        "test_bad_config_is_a_config_error",
    ),
    (
        "malformed JAAS entry, the secret never shown",
        "mm/config/test_config_errors.py",
        "test_bad_jaas_config_names_key_but_never_the_secret",
    ),
    (
        "strict mode: unknown keys exit 2",
        "mm/config/test_unknown_keys.py",
        "test_strict_mode_makes_unknown_keys_an_error",
    ),
    (
        "failover of groups without checkpoints (one, a regex, mixed)",
        "mm/commands/test_failover_cli.py",
        "test_groups_without_checkpoints",
    ),
]


@pytest.mark.unit
@pytest.mark.parametrize(("case", "module", "function"), COVERED_ELSEWHERE)
def test_the_covering_test_exists(case: str, module: str, function: str) -> None:
    tree = ast.parse((TESTS / module).read_text(encoding="utf-8"))
    names = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    assert function in names, f"{case}: {module}::{function} is gone"
