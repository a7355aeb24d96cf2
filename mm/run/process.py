"""The ``mm run`` process: one Spark session, the jobs under a supervisor, the
run state file, the metrics endpoint, and a clean stop on SIGTERM/SIGINT."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from mm.config import FlowConfig, MirrorConfig
from mm.errors import MirrorError
from mm.logs import get_logger, quiet_spark_shutdown
from mm.run.backoff import Backoff
from mm.run.jobs import build_jobs, plan_jobs
from mm.run.state import WRITE_EVERY_SECONDS, JobState, RunState, jobs_file
from mm.run.supervisor import Supervisor
from mm.signals import StopBound, cluster_probe, stop_on_signals
from mm.source.job import SharedRun, lock_flow_state
from mm.state_dir import StateDirError

# how long the jobs get to stop their queries and flush before the process gives up;
# on a stop request the StopBound ends the process long before (mm.signals)
STOP_TIMEOUT_SECONDS = 120.0


@dataclass
class RunResult:
    jobs: list[JobState]
    not_stopped: list[str]


def run_all(
    cfg: MirrorConfig,
    flows: list[FlowConfig],
    *,
    only: list[str] | None = None,
    trigger_seconds: float,
    backoff: Backoff | None = None,
) -> RunResult:
    log = get_logger("mm.run")
    plan = plan_jobs(flows, only)
    if not plan:
        raise MirrorError("no job to run: no selected flow is enabled")
    stop = threading.Event()
    bound = StopBound("run", log, cluster_probe(cfg, flows))
    restore = stop_on_signals(stop, log, bound=bound)
    state = RunState(plan, jobs_file(cfg.state_dir))
    spark: Any = None
    metrics: Any = None
    supervisor: Supervisor | None = None
    try:
        _check_state_dir(cfg, state, flows, plan)
        if stop.is_set():
            return RunResult(state.jobs(), [])
        from mm.spark_session import build_spark

        spark = build_spark("mm-run", cfg.spark, cfg.setting("spark.class.archive"))
        # PySpark installed its own SIGINT handler as Spark started: ours again
        restore_spark = stop_on_signals(stop, log, bound=bound)
        shared = SharedRun(stop, spark)
        metrics = _serve_metrics(cfg, flows, shared, state)
        supervisor = Supervisor(
            build_jobs(cfg, flows, shared, plan, trigger_seconds), state, stop, log, backoff
        )
        log.info("run starting", jobs=plan, spark_master=spark.sparkContext.master)
        supervisor.start()
        reported: str | None = None
        while not stop.wait(WRITE_EVERY_SECONDS):
            try:
                state.write()
                reported = None
            except StateDirError as exc:
                error = str(exc)
                if error != reported:  # once per distinct error, not every 5 s
                    log.error("run state not written; mm status cannot see the jobs", error=error)
                    reported = error
        not_stopped = supervisor.join(STOP_TIMEOUT_SECONDS)
        if not_stopped:
            log.error("jobs did not stop in time", jobs=not_stopped, seconds=STOP_TIMEOUT_SECONDS)
        restore_spark()
        return RunResult(state.jobs(), not_stopped)
    finally:
        if metrics is not None:
            metrics.close()
        if spark is not None:
            if stop.is_set():
                quiet_spark_shutdown(spark)
            try:
                spark.stop()
            except Exception as exc:  # its JVM is gone already
                log.debug("Spark did not stop cleanly", error=str(exc).splitlines()[:1])
        if stop.is_set():
            bound.finished()  # in time: else the bound's line is the run's last
            log.info("run stopped on request")
        restore()


def _check_state_dir(
    cfg: MirrorConfig, state: RunState, flows: list[FlowConfig], plan: dict[str, list[str]]
) -> None:
    """Refuse to start unless the state dir takes the run's state file, and no other
    process mirrors one of the flows with it (before Spark starts: one line, exit 1)."""
    state.write()  # StateDirError (exit 1) naming the file: full, read-only, ...
    by_name = {f.name: f for f in flows}
    for name in plan.get("mirror", []):
        lock_flow_state(cfg, by_name[name]).close()  # raises naming the holder


def _serve_metrics(
    cfg: MirrorConfig, flows: list[FlowConfig], shared: SharedRun, state: RunState
) -> Any:
    from mm.metrics import serve_run_metrics

    return serve_run_metrics(cfg, flows, shared.mirror_stats, state)
