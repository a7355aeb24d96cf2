"""The mirror on a Spark standalone cluster (a master and a worker from the pyspark
wheel), through `mm mirror --once` and through the spark-submit entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.clusters import KafkaCluster
from support.mirror import (
    assert_same_records,
    create_topic,
    mirror_properties,
    produce_mixed,
    read_topic,
    run_mirror_once,
)
from support.spark_cluster import StandaloneCluster, pyspark_home, spark_env

ROOT = Path(__file__).resolve().parents[3]
PARTITIONS = 3

# the driver runs here; executors connect back to it over loopback
DRIVER = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.executor.memory": "512m",
}


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-standalone"))
    try:
        yield cluster.start()
    finally:
        left = cluster.stop()
        assert not left, "Spark processes survived the cluster's stop:\n" + "\n".join(
            f"  {p.pid} (group {p.pgid}): {p.cmd}" for p in left
        )


def _apps_ran_on(cluster: StandaloneCluster) -> list[Path]:
    """Executor directories the worker created (one per application)."""
    return sorted((cluster.work / "worker").glob("app-*/*/stderr"))


def _mirrored(cluster_a: KafkaCluster, cluster_b: KafkaCluster, topic: str) -> None:
    source = read_topic(cluster_a.bootstrap_servers, topic, PARTITIONS)
    target = read_topic(cluster_b.bootstrap_servers, f"A.{topic}", PARTITIONS)
    assert_same_records(source, target)
    assert sum(len(v) for v in source.values()) > 0


def _starting_master(stderr: str) -> str:
    for line in stderr.splitlines():
        if line.startswith("{") and '"mirror starting"' in line:
            return str(json.loads(line)["spark_master"])
    raise AssertionError(f"no 'mirror starting' event:\n{stderr[-4000:]}")


@pytest.mark.integration
def test_mirror_once_on_a_standalone_cluster(
    spark_cluster: StandaloneCluster,
    cluster_a: KafkaCluster,
    cluster_b: KafkaCluster,
    unique_topic: Callable[..., str],
    tmp_path: Path,
) -> None:
    """`mm mirror --once` with ``spark.master = spark://...``: the ranges are mirrored by
    executors of the standalone worker, and every record arrives (exactly, in order)."""
    topic = unique_topic("standalone")
    create_topic(cluster_a.bootstrap_servers, topic, PARTITIONS)
    produce_mixed(cluster_a.bootstrap_servers, topic, PARTITIONS)
    before = _apps_ran_on(spark_cluster)
    config = mirror_properties(
        tmp_path / "mm.properties",
        cluster_a.bootstrap_servers,
        cluster_b.bootstrap_servers,
        [topic],
        state_dir=tmp_path / "state",
        extra={"spark.master": spark_cluster.url, **DRIVER},
    )
    run = run_mirror_once(config)
    assert run.returncode == 0, run.describe() + "\n" + spark_cluster.logs()
    assert _starting_master(run.stderr) == spark_cluster.url
    assert len(_apps_ran_on(spark_cluster)) > len(before), "no executor ran on the worker"
    _mirrored(cluster_a, cluster_b, topic)


@pytest.mark.integration
def test_spark_submit_entry_point(
    spark_cluster: StandaloneCluster,
    cluster_a: KafkaCluster,
    cluster_b: KafkaCluster,
    unique_topic: Callable[..., str],
    tmp_path: Path,
) -> None:
    """`spark-submit --master spark://... spark_jobs/mirror.py -c FILE --once` runs the
    mirror on the cluster (the file names no master: --master is not overridden by
    mm's local default) and mirrors every record."""
    topic = unique_topic("submit")
    create_topic(cluster_a.bootstrap_servers, topic, PARTITIONS)
    produce_mixed(cluster_a.bootstrap_servers, topic, PARTITIONS)
    before = _apps_ran_on(spark_cluster)
    config = mirror_properties(
        tmp_path / "mm.properties",
        cluster_a.bootstrap_servers,
        cluster_b.bootstrap_servers,
        [topic],
        state_dir=tmp_path / "state",
    )
    # no spark.* in the file: spark-submit's --master must be what runs
    config.write_text(
        "".join(
            line + "\n" for line in config.read_text().splitlines() if not line.startswith("spark.")
        )
    )
    conf = [arg for k, v in DRIVER.items() for arg in ("--conf", f"{k}={v}")]
    env = {**spark_env(tmp_path), "MM_LOG_FORMAT": "json"}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    (tmp_path / "local").mkdir(exist_ok=True)
    proc = subprocess.run(
        [
            str(pyspark_home() / "bin" / "spark-submit"),
            "--master",
            spark_cluster.url,
            *conf,
            str(ROOT / "spark_jobs" / "mirror.py"),
            "-c",
            str(config),
            "--once",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        start_new_session=True,
        check=False,
    )
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-8000:]}"
    assert _starting_master(proc.stdout + proc.stderr) == spark_cluster.url
    assert len(_apps_ran_on(spark_cluster)) > len(before), "no executor ran on the worker"
    _mirrored(cluster_a, cluster_b, topic)


@pytest.mark.unit
def test_spark_submit_entry_point_runs_mm_mirror() -> None:
    """The entry point is `mm mirror`: same parser, so `--help` shows mirror's options."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "spark_jobs" / "mirror.py"), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "usage: mm mirror" in proc.stdout
    assert "--once" in proc.stdout
