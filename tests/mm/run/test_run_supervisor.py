"""`mm run` without brokers: backoff, job states, the supervisor, status alerts."""

from __future__ import annotations

import itertools
import json
import threading
import time
from pathlib import Path

import pytest
import structlog

from mm.commands.run import parse_jobs
from mm.errors import UsageError
from mm.run.backoff import Backoff
from mm.run.jobs import plan_jobs
from mm.run.state import BACKOFF, RUNNING, STOPPED, RunState, jobs_file, read_run_state
from mm.run.supervisor import Job, Supervisor
from mm.state_dir import StateDirError
from mm.status.model import StatusReport, Thresholds
from mm.status.run_jobs import attach_run, run_alerts

pytestmark = pytest.mark.unit


def test_backoff_doubles_to_the_maximum_and_resets_after_a_healthy_run() -> None:
    b = Backoff(initial=1, maximum=60, healthy_after=30)
    assert [b.delay(n) for n in range(1, 9)] == [1, 2, 4, 8, 16, 32, 60, 60]
    assert b.delay(10_000) == 60  # no overflow
    assert b.failures_in_a_row(5, ran_seconds=2) == 6
    assert b.failures_in_a_row(5, ran_seconds=30) == 1
    with pytest.raises(ValueError, match="initial 0"):
        Backoff(initial=0)


class FakeFlow:
    def __init__(self, name: str, checkpoints: bool = True, heartbeats: bool = True) -> None:
        self.name = name
        self.emit_checkpoints_enabled = checkpoints
        self.emit_heartbeats_enabled = heartbeats


def test_plan_jobs_leaves_out_jobs_no_flow_needs() -> None:
    flows = [FakeFlow("A->B"), FakeFlow("B->A", checkpoints=False, heartbeats=False)]
    assert plan_jobs(flows) == {  # type: ignore[arg-type]
        "mirror": ["A->B", "B->A"],
        "checkpoint": ["A->B"],
        "heartbeat": ["A->B"],
    }
    assert plan_jobs(flows, ["heartbeat"]) == {"heartbeat": ["A->B"]}  # type: ignore[arg-type]
    assert plan_jobs([FakeFlow("A->B", heartbeats=False)], ["heartbeat"]) == {}  # type: ignore[list-item]


def test_parse_jobs_names_what_is_wrong_and_what_is_expected() -> None:
    assert parse_jobs(None) is None
    assert parse_jobs("mirror, heartbeat") == ["mirror", "heartbeat"]
    with pytest.raises(UsageError, match=r"unknown job mirorr; expected .*mirror, checkpoint"):
        parse_jobs("mirorr")


def test_state_file_round_trip_and_atomic_write(tmp_path: Path) -> None:
    clock = iter(range(1_000, 10**9, 1_000))
    state = RunState({"mirror": ["A->B"]}, jobs_file(tmp_path), lambda: next(clock))
    state.running("mirror")
    state.failed("mirror", "MirrorError: boom", 2, delay=4.0)
    snap = read_run_state(jobs_file(tmp_path))
    assert snap is not None
    (job,) = snap.jobs
    assert (job.state, job.last_error, job.failures_in_a_row) == (BACKOFF, "MirrorError: boom", 2)
    assert job.retry_at_ms == job.last_error_ms + 4_000  # type: ignore[operator]
    state.restarting("mirror")
    assert state.jobs()[0].restarts == 1
    assert [p.name for p in (tmp_path / "run").iterdir()] == ["jobs.json"]  # no temp left


def test_state_file_unwritable_is_reported_not_raised_by_job_updates(tmp_path: Path) -> None:
    blocker = tmp_path / "state"
    blocker.write_text("a file where the state dir should be")
    state = RunState({"mirror": ["A->B"]}, jobs_file(blocker))
    state.running("mirror")  # a job's update never fails the job
    assert state.write_error is not None and str(jobs_file(blocker)) in state.write_error
    with pytest.raises(StateDirError, match="expected a writable directory"):
        state.write()  # the run's own write raises (mm run refuses to start on it)


def test_corrupt_state_file_names_the_file(tmp_path: Path) -> None:
    path = jobs_file(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    with pytest.raises(ValueError, match="is not an mm run state file"):
        read_run_state(path)
    report = StatusReport.build([], Thresholds(30_000, 100_000, 300), 0)
    attach_run(report, str(tmp_path), 0)
    assert [a.kind for a in report.alerts] == ["run_down"]
    assert str(path) in report.alerts[0].message
    assert "delete it if no run uses this state dir" in report.alerts[0].message
    # the way out, as printed: deleted, the state dir reads as one no run uses
    path.unlink()
    assert read_run_state(path) is None
    again = StatusReport.build([], Thresholds(30_000, 100_000, 300), 0)
    attach_run(again, str(tmp_path), 0)
    assert again.alerts == []


def _supervise(jobs: list[Job], **backoff: float) -> tuple[Supervisor, threading.Event, RunState]:
    stop = threading.Event()
    state = RunState({j.name: j.flows for j in jobs}, None)
    sup = Supervisor(jobs, state, stop, structlog.get_logger(), Backoff(**backoff))
    sup.start()
    return sup, stop, state


def test_a_failing_job_is_restarted_with_backoff_and_the_others_keep_running() -> None:
    calls: list[float] = []
    steady_runs = []

    def failing(stop: threading.Event) -> None:
        calls.append(time.monotonic())
        if len(calls) <= 3:
            raise RuntimeError(f"failure {len(calls)}")
        stop.wait()

    def steady(stop: threading.Event) -> None:
        steady_runs.append(1)
        stop.wait()

    sup, stop, state = _supervise(
        [Job("checkpoint", ["A->B"], failing), Job("mirror", ["A->B"], steady)],
        initial=0.05,
        maximum=1,
        healthy_after=60,
    )
    deadline = time.monotonic() + 10
    while len(calls) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(calls) == 4
    gaps = [b - a for a, b in itertools.pairwise(calls)]
    # 0.05, 0.1, 0.2 s: each wait doubles
    assert gaps[0] >= 0.05 and gaps[1] >= 0.1 and gaps[2] >= 0.2
    time.sleep(0.05)
    jobs = {j.job: j for j in state.jobs()}
    assert jobs["checkpoint"].state == RUNNING and jobs["checkpoint"].restarts == 3
    assert jobs["checkpoint"].last_error == "RuntimeError: failure 3"
    assert jobs["mirror"].state == RUNNING and steady_runs == [1]  # never restarted
    stop.set()
    assert sup.join(5) == []
    assert {j.state for j in state.jobs()} == {STOPPED}


def test_a_job_that_returns_without_a_stop_request_counts_as_failed() -> None:
    runs = []

    def returns(stop: threading.Event) -> None:
        runs.append(1)
        if len(runs) > 1:
            stop.wait()

    sup, stop, state = _supervise([Job("heartbeat", ["A->B"], returns)], initial=0.01)
    deadline = time.monotonic() + 5
    while len(runs) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert state.jobs()[0].last_error == "the job ended without a stop request"
    stop.set()
    assert sup.join(5) == []


def test_stop_during_backoff_stops_without_another_start() -> None:
    runs = []

    def fails(_stop: threading.Event) -> None:
        runs.append(1)
        raise RuntimeError("down")

    sup, stop, state = _supervise([Job("mirror", ["A->B"], fails)], initial=30, maximum=30)
    deadline = time.monotonic() + 5
    while state.jobs()[0].state != BACKOFF and time.monotonic() < deadline:
        time.sleep(0.01)
    stop.set()
    assert sup.join(5) == []
    assert runs == [1] and state.jobs()[0].state == STOPPED


class _GatewayGone(Exception):
    """As a Py4J error whose JVM has exited: its message cannot be built."""

    def __str__(self) -> str:
        raise ConnectionRefusedError(111, "Connection refused")


def test_an_error_whose_message_is_unreadable_is_logged_not_raised() -> None:
    """Seen on `mm run` stopped by a signal: the checkpoint query's stop raised a Py4J
    error after the JVM exited, and reading its message ended the thread in a traceback."""
    stopping = threading.Event()
    ended: list[str] = []

    def dies_on_stop(stop: threading.Event) -> None:
        stop.wait()
        stopping.set()
        raise _GatewayGone()

    def fails_once(stop: threading.Event) -> None:
        if not ended:
            ended.append("failed")
            raise _GatewayGone()
        stop.wait()

    sup, stop, state = _supervise(
        [Job("checkpoint", ["A->B"], dies_on_stop), Job("mirror", ["A->B"], fails_once)],
        initial=0.01,
    )
    deadline = time.monotonic() + 5
    while state.jobs()[1].restarts < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    error = state.jobs()[1].last_error
    assert error is not None and error.startswith("_GatewayGone: (message unreadable: ")
    assert "Connection refused" in error
    stop.set()
    assert sup.join(5) == [] and stopping.is_set()
    assert {j.state for j in state.jobs()} == {STOPPED}


def test_run_alerts() -> None:
    state = RunState({"mirror": ["A->B"], "checkpoint": ["A->B"]}, None, lambda: 1_000)
    state.running("mirror")
    state.failed("checkpoint", "MirrorError: snapshot unreadable", 3, 8.0)
    snap = state.snapshot()
    (alert,) = run_alerts(snap, 2_000, "/s/run/jobs.json")
    assert alert.kind == "job_failed" and "checkpoint (A->B) failed 3 time(s)" in alert.message
    (down,) = run_alerts(snap, 1_000 + 31_000, "/s/run/jobs.json")
    assert down.kind == "run_down" and "/s/run/jobs.json" in down.message
    assert "mirror, checkpoint" in down.message
    state.stopped("mirror")
    state.stopped("checkpoint")
    assert run_alerts(state.snapshot(), 10**9, "p") == []  # a clean stop is no alert
    assert json.loads(json.dumps(snap.to_json()))["jobs"][0]["job"] == "mirror"


def test_spark_submit_entry_point_runs_mm_run() -> None:
    """spark_jobs/run.py is `mm run`: same parser, so `--help` shows its options."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[3]
    proc = subprocess.run(
        [sys.executable, str(root / "spark_jobs" / "run.py"), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(root)},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "usage: mm run" in proc.stdout and "--jobs" in proc.stdout
