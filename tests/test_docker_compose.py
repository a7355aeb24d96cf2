"""docker-compose.yml (the sink-region deployment) is consistent with the code.

No Docker engine is needed: the file is parsed, and every `mm` command it runs
is parsed by the real CLI parser, so a renamed subcommand or option fails here
instead of in a container. The mounted properties file must load and name the
compose services.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest

from mm.cli import build_parser
from mm.config import load_config

pytestmark = pytest.mark.unit

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker-compose.yml"
CONFIG_IN_CONTAINER = "/etc/mm/mm.properties"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return dict(compose["services"])


def _argv(value: Any) -> list[str]:
    """A compose command/entrypoint (list or string) as argv."""
    if value is None:
        return []
    if isinstance(value, str):
        return shlex.split(value)
    return [str(v) for v in value]


def _mm_commands(services: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    """Service name -> the `mm` argv it runs (services running something else left out)."""
    out = {}
    for name, svc in services.items():
        argv = _argv(svc.get("entrypoint")) + _argv(svc.get("command"))
        if argv and Path(argv[0]).name == "mm":
            out[name] = argv[1:]
    return out


def _mounts(svc: dict[str, Any]) -> dict[str, str]:
    """Container path -> host path of a service's bind mounts (short syntax)."""
    out = {}
    for v in svc.get("volumes", []):
        parts = str(v).split(":")
        if len(parts) >= 2 and parts[0].startswith((".", "/")):
            out[parts[1]] = parts[0]
    return out


def test_no_accidental_variable_interpolation() -> None:
    """Compose substitutes ``$VAR``/``${VAR}`` from the host everywhere, the inline
    Dockerfile included: a literal ``$`` must be written ``$$``."""
    unescaped = COMPOSE.read_text().replace("$$", "")
    at = unescaped.find("$")
    assert at < 0, f"unescaped $ near {unescaped[max(0, at - 30) : at + 30]!r}"


def test_services_of_a_sink_region_deployment(services: dict[str, dict[str, Any]]) -> None:
    # mm run: mirror, checkpoints and heartbeats; mm status --serve: what the alerts read
    expected = {"kafka-a", "kafka-b", "spark-master", "spark-worker", "mm-run", "mm-status"}
    assert expected <= set(services), f"missing: {expected - set(services)}"


@pytest.mark.parametrize("name", ["kafka-a", "kafka-b"])
def test_kafka_clusters_are_kraft_single_nodes(
    services: dict[str, dict[str, Any]], name: str
) -> None:
    svc = services[name]
    assert str(svc["image"]).startswith("apache/kafka:")
    env = {k: str(v) for k, v in svc["environment"].items()}
    assert set(env["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == f"1@{name}:9093"
    listeners = dict(item.split("://", 1) for item in env["KAFKA_LISTENERS"].split(","))
    advertised = dict(item.split("://", 1) for item in env["KAFKA_ADVERTISED_LISTENERS"].split(","))
    # other containers reach the broker by its service name on the listener it binds
    assert advertised["PLAINTEXT"] == f"{name}:9092"
    assert listeners["PLAINTEXT"].endswith(":9092")
    assert "CONTROLLER" not in advertised
    protocols = dict(
        item.split(":") for item in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(",")
    )
    assert set(listeners) <= set(protocols)
    assert env["KAFKA_CONTROLLER_LISTENER_NAMES"] in listeners


def test_two_clusters_are_two_clusters(services: dict[str, dict[str, Any]]) -> None:
    ids = {services[n]["environment"]["CLUSTER_ID"] for n in ("kafka-a", "kafka-b")}
    assert len(ids) == 2
    host_ports = [p for n in ("kafka-a", "kafka-b") for p in services[n].get("ports", [])]
    assert len({str(p).split(":")[0] for p in host_ports}) == len(host_ports)


def test_spark_worker_registers_with_the_master(services: dict[str, dict[str, Any]]) -> None:
    master = _argv(services["spark-master"]["command"])
    worker = _argv(services["spark-worker"]["command"])
    assert "org.apache.spark.deploy.master.Master" in master
    assert "org.apache.spark.deploy.worker.Worker" in worker
    port = master[master.index("--port") + 1]
    host = master[master.index("--host") + 1]
    assert f"spark://{host}:{port}" in worker


def test_every_mm_command_exists_in_the_cli(services: dict[str, dict[str, Any]]) -> None:
    """Each `mm ...` the file runs parses with mm's own parser (subcommand and options)."""
    commands = _mm_commands(services)
    assert {"run", "status"} <= {argv[0] for argv in commands.values()}
    parser = build_parser()
    for name, argv in commands.items():
        try:
            args = parser.parse_args(argv)
        except SystemExit:
            pytest.fail(f"service {name}: `mm {' '.join(argv)}` is not a valid mm command line")
        assert getattr(args, "_run", None) is not None, f"service {name}: no subcommand"
        config = getattr(args, "config", None)
        assert config == CONFIG_IN_CONTAINER, f"service {name} reads {config}"


def test_mm_services_mount_the_properties_file(services: dict[str, dict[str, Any]]) -> None:
    for name in _mm_commands(services):
        mounts = _mounts(services[name])
        assert CONFIG_IN_CONTAINER in mounts, f"service {name} does not mount the config"
        host = (ROOT / mounts[CONFIG_IN_CONTAINER]).resolve()
        assert host == (ROOT / "deploy" / "mm.properties").resolve()
        assert host.is_file()


def test_long_running_jobs_wait_for_clusters(services: dict[str, dict[str, Any]]) -> None:
    for name, argv in _mm_commands(services).items():
        if argv[0] not in {"run", "mirror", "checkpoint", "status"}:
            continue
        deps = services[name].get("depends_on", {})
        assert {"kafka-a", "kafka-b", "spark-worker"} <= set(deps), name
        assert "--once" not in argv, f"{name} should run continuously"
    for svc in services.values():
        for dep in svc.get("depends_on", []):
            assert dep in services, f"depends on unknown service {dep}"


def test_mounted_properties_match_the_services(services: dict[str, dict[str, Any]]) -> None:
    """deploy/mm.properties loads (MM2 format) and points at the compose services."""
    cfg = load_config(ROOT / "deploy" / "mm.properties")
    assert cfg.cluster("A").bootstrap_servers == ("kafka-a:9092",)
    assert cfg.cluster("B").bootstrap_servers == ("kafka-b:9092",)
    assert [f.name for f in cfg.enabled_flows()] == ["A->B"]
    master = _argv(services["spark-master"]["command"])
    port = master[master.index("--port") + 1]
    assert cfg.spark["spark.master"] == f"spark://spark-master:{port}"
    # the state dir is a volume shared by the job containers
    # (mm status reads mm run's jobs.json from it)
    for name in ("mm-run", "mm-status"):
        volumes = [str(v).split(":") for v in services[name]["volumes"]]
        assert [str(cfg.state_dir)] in [v[1:2] for v in volumes], name
    # the Spark applications (mm run is one) fit on the worker at once
    worker = _argv(services["spark-worker"]["command"])
    apps = {"run", "mirror", "checkpoint"}
    jobs = sum(1 for argv in _mm_commands(services).values() if argv[0] in apps)
    assert int(cfg.spark["spark.cores.max"]) * jobs <= int(worker[worker.index("--cores") + 1])


def test_everything_the_alerts_need_runs(services: dict[str, dict[str, Any]]) -> None:
    """The alerts read heartbeats (emitted by mm run), mm status --serve and mm run's
    metrics: Prometheus scrapes both ports and loads deploy/alerts.yml."""
    cfg = load_config(ROOT / "deploy" / "mm.properties")
    (flow,) = cfg.enabled_flows()
    assert flow.emit_heartbeats_enabled and flow.emit_checkpoints_enabled
    commands = _mm_commands(services)
    status = commands["mm-status"]
    serve = status[status.index("--serve") + 1]
    prom = yaml.safe_load((ROOT / "deploy" / "prometheus.yml").read_text())
    targets = {
        c["job_name"]: t
        for c in prom["scrape_configs"]
        for s in c["static_configs"]
        for t in s["targets"]
    }
    assert targets["mm-status"] == f"mm-status:{serve}"
    assert targets["mm-run"] == f"mm-run:{cfg.setting('metrics.port')}"
    mounts = _mounts(services["prometheus"])
    assert mounts["/etc/prometheus/alerts.yml"] == "./deploy/alerts.yml"
    assert "/etc/prometheus/alerts.yml" in prom["rule_files"]
    alerts = yaml.safe_load((ROOT / "deploy" / "alerts.yml").read_text())
    jobs_in_rules = " ".join(r.get("expr", "") for g in alerts["groups"] for r in g["rules"])
    assert "mm-run" in jobs_in_rules and "mm-status" in jobs_in_rules


def test_spark_python_in_the_image_is_installed_by_the_project() -> None:
    """PYSPARK_PYTHON in the image names a console script the project installs."""
    import tomllib

    text = COMPOSE.read_text()
    line = next(ln for ln in text.splitlines() if "PYSPARK_PYTHON=" in ln)
    exe = line.split("PYSPARK_PYTHON=", 1)[1].split()[0]
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert exe in scripts, (exe, sorted(scripts))
    assert scripts[exe] == "mm.spark_python:main"
