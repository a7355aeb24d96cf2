"""A SASL password appears in no output, log, report, file or metric of any command.

Both clusters authenticate with SCRAM; their passwords (one from the file, one from
an ``MM_*`` variable) and a keystore password are sentinels. Every command that can
run without a broker, or fails fast against unreachable bootstrap addresses, runs as
a user runs it (``python -m mm``, debug logs, JSON logs); the sentinels must be
absent from stdout, stderr and every file the run leaves under its directory (state,
backup path, reports). ``mm status``'s report also goes through the Prometheus
exposition and the text and JSON renderings in-process.

Cluster A fails at connection time (nothing listens on its port), cluster B at
client construction (its keystore file does not exist): the two ways a job meets
an unreachable cluster.
"""

from __future__ import annotations

import io
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from support.cli import MM

from mm.config import load_config

pytestmark = pytest.mark.unit

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
SENTINELS = ("SENTINEL-a-5d2e", "SENTINEL-b-env-8c41", "SENTINEL-b-keystore-07aa")


def _jaas(user: str, password: str) -> str:
    return f'{SCRAM} required username="{user}" password="{password}";'


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    certifi = pytest.importorskip("certifi")
    props = tmp_path / "mm.properties"
    props.write_text(
        "\n".join(
            [
                "clusters = A, B",
                # nothing listens on port 1 or 2
                "A.bootstrap.servers = 127.0.0.1:1",
                "B.bootstrap.servers = 127.0.0.1:2",
                "security.protocol = SASL_SSL",
                "sasl.mechanism = SCRAM-SHA-512",
                f"ssl.truststore.location = {certifi.where()}",
                f"A.sasl.jaas.config = {_jaas('mm-a', SENTINELS[0])}",
                # B's password comes from MM_B__SASL_JAAS_CONFIG
                f"B.ssl.keystore.location = {tmp_path / 'missing-keystore.p12'}",
                f"B.ssl.keystore.password = {SENTINELS[2]}",
                "A->B.enabled = true",
                "B->A.enabled = true",
                "backup.cluster = A",
                f"backup.path = {tmp_path / 'backup'}",
                f"mm.state.dir = {tmp_path / 'state'}",
                "",
            ]
        )
    )
    env = {
        **os.environ,
        "MM_B__SASL_JAAS_CONFIG": _jaas("mm-b", SENTINELS[1]),
        "MM_LOG_LEVEL": "debug",
        "MM_LOG_FORMAT": "json",
    }
    return props, env


def _assert_clean(text: str, where: str) -> None:
    for s in SENTINELS:
        assert s not in text, f"{s} in {where}:\n{text}"


COMMANDS = [
    ["config", "check"],
    ["config", "check", "--json"],
    ["status", "--json", "--timeout", "1"],
    ["status", "--timeout", "1", "--flow", "A->B"],
    ["verify", "--json", "--timeout", "1"],
    ["backup", "--once", "--json", "--timeout", "1"],
    ["backup", "ls"],
    ["restore", "--to", "B", "--dry-run", "--json", "--timeout", "1"],
    ["restore", "--to", "A", "--json", "--timeout", "1"],
    ["translate", "--group", "g", "--flow", "A->B", "--timeout", "1"],
    ["position", "--topic", "t", "--flow", "A->B", "--timeout", "1"],
    ["failover", "--group", "g", "--flow", "A->B", "--dry-run", "--json", "--timeout", "1"],
    ["switchover", "--flow", "A->B", "--dry-run", "--json", "--timeout", "1", "--report", "r.json"],
    ["failback", "--flow", "A->B", "--dry-run", "--json", "--timeout", "1"],
    # the long-running jobs: refused at start by the reachability check (10 s)
    ["run"],
    ["mirror", "--once"],
]


def _lanes(commands: list[list[str]]) -> list[list[list[str]]]:
    """The commands in lanes that run side by side, those sharing a lock (the flow's
    mirror lock, the backup path) one after another in one lane; every other command
    in a lane of its own (two of them wait out the 10 s reachability check)."""
    shared = {"run": "mirror", "mirror": "mirror", "backup": "backup", "restore": "backup"}
    lanes: dict[str, list[list[str]]] = {}
    for i, args in enumerate(commands):
        lanes.setdefault(shared.get(args[0], str(i)), []).append(args)
    return list(lanes.values())


def test_no_command_shows_a_secret(setup: tuple[Path, dict[str, str]]) -> None:
    props, env = setup

    def run(args: list[str]) -> subprocess.CompletedProcess[str]:
        # config check takes -c after the action; every other command too
        argv = [*MM, *args[:2], "-c", str(props), *args[2:]]
        if args[0] != "config":
            argv = [*MM, args[0], "-c", str(props), *args[1:]]
        return subprocess.run(
            argv, cwd=props.parent, env=env, capture_output=True, text=True, timeout=120
        )

    def run_lane(lane: list[list[str]]) -> list[tuple[str, subprocess.CompletedProcess[str]]]:
        return [(" ".join(args), run(args)) for args in lane]

    lanes = _lanes(COMMANDS)
    with ThreadPoolExecutor(len(lanes)) as pool:
        done = {where: proc for ran_lane in pool.map(run_lane, lanes) for where, proc in ran_lane}
    assert len(done) == len(COMMANDS)
    ran = []
    for args in COMMANDS:
        where = " ".join(args)
        proc = done[where]
        _assert_clean(proc.stdout, f"stdout of mm {where}")
        _assert_clean(proc.stderr, f"stderr of mm {where}")
        # a failure is one line naming the problem: a traceback shows the code's
        # lines (and, with a locals-showing handler, its values)
        assert "Traceback" not in proc.stderr, f"mm {where}:\n{proc.stderr}"
        ran.append((where, proc.returncode, proc.stdout + proc.stderr))
    # the runs did something worth checking: settings shown, clusters tried and refused
    out = {w: o for w, _rc, o in ran}
    assert "SCRAM-SHA-512" in out["config check"]
    assert "127.0.0.1:1" in out["status --json --timeout 1"]
    # B's clients fail at construction: one line naming the setting (verify reads
    # SASL/TLS clusters on Apache Kafka: it gets as far as B's first client too)
    for cmd in ("restore --to B", "translate --group g", "verify --json"):
        shown = next(o for w, o in out.items() if w.startswith(cmd))
        assert "Failed to open ssl.keystore.location" in shown
    assert all(rc != 0 for w, rc, _o in ran if not w.startswith(("config", "backup ls")))
    files = [p for p in props.parent.rglob("*") if p.is_file() and p != props]
    for path in files:
        _assert_clean(path.read_bytes().decode("utf-8", "replace"), str(path))


def test_status_report_and_metrics_show_no_secret(
    setup: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from prometheus_client import CollectorRegistry, generate_latest
    from rich.console import Console
    from structlog.testing import capture_logs

    from mm.metrics import StatusCollector
    from mm.status.collect import collect
    from mm.status.render import render, to_json

    props, env = setup
    monkeypatch.setenv("MM_B__SASL_JAAS_CONFIG", env["MM_B__SASL_JAAS_CONFIG"])
    with capture_logs() as logs:
        cfg = load_config(props)
        report = collect(cfg, cfg.enabled_flows(), timeout=1.0)
    assert cfg.cluster("B").librdkafka()["sasl.password"] == SENTINELS[1]  # it was set
    assert all(f.error for f in report.flows)  # both flows met an unreachable cluster
    collector = StatusCollector()
    collector.update(report)
    registry = CollectorRegistry()
    registry.register(collector)
    metrics = generate_latest(registry).decode()
    assert "mm_status_up" in metrics
    console = Console(file=io.StringIO(), width=200)
    console.print(render(report))
    for where, text in {
        "metrics": metrics,
        "text report": console.file.getvalue(),  # type: ignore[attr-defined]
        "JSON report": to_json(report),
        "logs": repr(logs),
        "errors": repr([f.error for f in report.flows]),
    }.items():
        _assert_clean(text, where)
