"""`mm run` on real brokers and real Spark.

* All three jobs in one process; one job (checkpoint) failing at start because its
  state directory is blocked: it is restarted with backoff while the mirror and
  heartbeats keep running, `mm status` and the metrics endpoint show it, and it
  recovers by itself once the directory is usable; SIGTERM stops everything with
  exit 0 and no traceback.
(The driver killed 10 times under load, fault 4: test_run_kill.py.)
"""

from __future__ import annotations

import json
import signal
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from support.clusters import KafkaCluster
from support.eos import (
    BackgroundProducer,
    MirrorProcess,
    kill_groups,
    log_events,
    process_tree,
    wait_all_gone,
    wait_for_batches,
)
from support.mirror import (
    create_topic,
)
from support.run import mm_command, run_properties

from mm.embedded import procs

PARTITIONS = 3


def _status(config: Path) -> dict:  # type: ignore[type-arg]
    out = mm_command(config, "status", "--json")
    assert out.stdout.startswith("{"), out.stdout + out.stderr
    doc: dict = json.loads(out.stdout)  # type: ignore[type-arg]
    return doc


def _scrape(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("mm_")
    }


def _until(what: str, check: Callable[[], object], timeout: float, run: MirrorProcess) -> object:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        assert run.running(), f"mm run exited while waiting for {what}:\n{run.output()[-6000:]}"
        late = time.monotonic() >= deadline
        assert not late, f"no {what} after {timeout:.0f}s:\n{run.output()[-6000:]}"
        time.sleep(0.5)


def _jobs(config: Path) -> dict[str, dict]:  # type: ignore[type-arg]
    path = config.parent / "state" / "run" / "jobs.json"
    if not path.exists():
        return {}
    return {j["job"]: j for j in json.loads(path.read_text())["jobs"]}


@pytest.mark.integration
@pytest.mark.timeout(600)
def test_run_restarts_a_failed_job_alone_reports_it_and_stops_cleanly(
    cluster_a: KafkaCluster,
    cluster_b: KafkaCluster,
    unique_topic: Callable[..., str],
    tmp_path: Path,
) -> None:
    topic = unique_topic("run")
    create_topic(cluster_a.bootstrap_servers, topic, PARTITIONS)
    port = procs.free_port()
    config = run_properties(tmp_path, cluster_a, cluster_b, topic, **{"mm.metrics.port": str(port)})
    # the checkpoint job's state directory is taken by a file: it fails at every start
    blocked = tmp_path / "state" / "checkpoint" / "A-B"
    blocked.parent.mkdir(parents=True)
    blocked.write_text("not a directory")
    producer = BackgroundProducer(
        cluster_a.bootstrap_servers, topic, PARTITIONS, rate_per_partition=100, seed=7
    ).start()
    run = MirrorProcess(config, tmp_path / "run", command="run")
    try:
        wait_for_batches(run.stderr_path, 2, 120, alive=run.running)
        _until(
            "the checkpoint job restarted twice",
            lambda: _jobs(config).get("checkpoint", {}).get("restarts", 0) >= 2,
            120,
            run,
        )
        jobs = _jobs(config)
        assert jobs["mirror"]["state"] == "running" and jobs["mirror"]["restarts"] == 0, jobs
        assert jobs["heartbeat"]["state"] == "running" and jobs["heartbeat"]["restarts"] == 0
        assert str(blocked) in (jobs["checkpoint"]["last_error"] or ""), jobs["checkpoint"]
        failures = [e for e in log_events(run.stderr_path, "job failed; restarting")]
        delays = [e["retry_in_seconds"] for e in failures if e["job"] == "checkpoint"]
        assert delays[:2] == [1.0, 2.0], delays  # backoff doubles
        assert all(e["job"] == "checkpoint" for e in failures), failures

        # mm status: the failing job, as an alert naming it and its error
        doc = _until(
            "a job_failed alert in mm status",
            lambda: next(
                (
                    d
                    for d in [_status(config)]
                    if any(a["kind"] == "job_failed" for a in d["alerts"])
                ),
                None,
            ),
            60,
            run,
        )
        (alert,) = [a for a in doc["alerts"] if a["kind"] == "job_failed"]  # type: ignore[index]
        assert (
            "job checkpoint (A->B) failed" in alert["message"] and str(blocked) in alert["message"]
        )
        assert {j["job"]: j["state"] for j in doc["run"]["jobs"]}["mirror"] == "running"  # type: ignore[index]
        metrics = _scrape(port)
        assert metrics['mm_job_up{job="mirror"}'] == 1.0
        assert metrics['mm_job_up{job="heartbeat"}'] == 1.0
        assert metrics['mm_job_restarts_total{job="checkpoint"}'] >= 2
        assert metrics['mm_records_mirrored_total{flow="A->B",source="A",target="B"}'] > 0

        blocked.unlink()  # the operator fixes it: the next restart succeeds
        _until(
            "the checkpoint job running again",
            lambda: (
                _jobs(config).get("checkpoint", {}).get("state") == "running"
                and any(
                    e.get("flow") == "A->B"
                    for e in log_events(run.stderr_path, "checkpoint job starting")
                )
            ),
            120,
            run,
        )
        assert metrics_job_up(port, "checkpoint") == 1.0
        assert _status(config)["run"]["stale"] is False
    finally:
        producer.stop()
    assert run.running()
    tree = process_tree(run.proc.pid)
    sizes = [len(path.read_bytes()) for path in (run.stdout_path, run.stderr_path)]
    run.proc.send_signal(signal.SIGTERM)
    code = run.proc.wait(120)
    left = wait_all_gone(tree, 30)
    kill_groups(left)
    out = run.output()
    assert code == 0, out[-6000:]
    assert not left, f"processes left after SIGTERM: {left}"
    running, stopping = "", ""
    for path, size in zip((run.stdout_path, run.stderr_path), sizes, strict=True):
        data = path.read_bytes()
        running += data[:size].decode(errors="replace")
        stopping += data[size:].decode(errors="replace")
    # the stop prints its own lines and nothing else: no trace of Spark, py4j or Python
    for bad in ("Traceback", "Exception"):
        at = stopping.find(bad)
        assert at < 0, f"{bad} in what mm run printed on SIGTERM:\n{stopping[-8000:]}"
    # while it ran: a trace only with a failure the run logged and recovered from (a
    # Spark task failing under load fails its query, which the mirror restarts)
    recovered = log_events(run.stderr_path, "mirror query failed; restarting")
    running = running.replace('"exception"', "")  # a log field's name, not a trace
    for bad in ("Traceback", "Exception"):
        at = running.find(bad)
        context = running[max(0, at - 3000) :][:8000]
        assert at < 0 or recovered, f"{bad} while mm run ran, no failure logged:\n{context}"
    assert len(log_events(run.stderr_path, "run stopped on request")) == 1
    assert run.stdout_path.read_text().count("stopped, ") == 3, run.stdout_path.read_text()
    assert {j["state"] for j in _jobs(config).values()} == {"stopped"}


def metrics_job_up(port: int, job: str) -> float:
    return _scrape(port)[f'mm_job_up{{job="{job}"}}']
