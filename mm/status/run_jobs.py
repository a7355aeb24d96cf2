"""The jobs of an ``mm run`` process in ``mm status`` (from its run state file).

Pure: :func:`run_alerts` decides what the snapshot read from
``<mm.state.dir>/run/jobs.json`` means. A run that stopped cleanly marks every
job stopped; a file that is not refreshed while its jobs claim to run means the
process died (or hangs): an alert. So is a job waiting to restart after a failure.
"""

from __future__ import annotations

from pathlib import Path

from mm.run.state import BACKOFF, STOPPED, RunSnapshot, jobs_file, read_run_state
from mm.status.model import Alert, StatusReport

RUN = "mm run"  # the alerts' "flow": they concern the process, not one flow


def run_alerts(snap: RunSnapshot | None, now_ms: int, path: str) -> list[Alert]:
    if snap is None:
        return []
    running = [j for j in snap.jobs if j.state != STOPPED]
    if running and snap.stale(now_ms):
        age = (now_ms - snap.updated_ms) // 1000
        return [
            Alert(
                RUN,
                "run_down",
                f"mm run (pid {snap.pid}) last updated {path} {age} s ago while its jobs "
                f"{', '.join(j.job for j in running)} were running: the process is not "
                "running (or hangs); expected an update every few seconds",
                age,
            )
        ]
    alerts = []
    for j in snap.jobs:
        if j.state == BACKOFF:
            alerts.append(
                Alert(
                    RUN,
                    "job_failed",
                    f"job {j.job} ({', '.join(j.flows)}) failed {j.failures_in_a_row} time(s) "
                    f"in a row, restarting; last error: {j.last_error}",
                    j.failures_in_a_row,
                    0,
                )
            )
    return alerts


def attach_run(report: StatusReport, state_dir: str | Path, now_ms: int) -> None:
    """Add the run's jobs and their alerts to ``report`` when ``state_dir`` has a run
    state file (an unreadable one is an alert naming it, not a crash)."""
    path = jobs_file(state_dir)
    try:
        snap = read_run_state(path)
    except (ValueError, OSError) as exc:
        report.alerts.append(Alert(RUN, "run_down", str(exc)))
        return
    if snap is None:
        return
    running = any(j.state != STOPPED for j in snap.jobs)
    report.run = {"path": str(path), "stale": running and snap.stale(now_ms), **snap.to_json()}
    report.alerts.extend(run_alerts(snap, now_ms, str(path)))
