"""The jobs ``mm run`` supervises: mirror, checkpoint and heartbeat, each for every
enabled flow that has it, all sharing the process's Spark session and stop event."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from mm.run import CHECKPOINT, HEARTBEAT, JOB_NAMES, MIRROR
from mm.run.supervisor import Job

if TYPE_CHECKING:  # the jobs' modules load Spark: only when a job runs
    from mm.config import FlowConfig, MirrorConfig
    from mm.source.job import SharedRun

__all__ = ["CHECKPOINT", "HEARTBEAT", "JOB_NAMES", "MIRROR", "build_jobs", "plan_jobs"]


def plan_jobs(flows: list[FlowConfig], only: list[str] | None = None) -> dict[str, list[str]]:
    """Job name -> the flows it serves; a job no flow needs is left out."""
    wanted = only or list(JOB_NAMES)
    jobs = {
        MIRROR: [f.name for f in flows],
        CHECKPOINT: [f.name for f in flows if f.emit_checkpoints_enabled],
        HEARTBEAT: [f.name for f in flows if f.emit_heartbeats_enabled],
    }
    return {name: names for name, names in jobs.items() if name in wanted and names}


def build_jobs(
    cfg: MirrorConfig,
    flows: list[FlowConfig],
    shared: SharedRun,
    plan: dict[str, list[str]],
    trigger_seconds: float,
) -> list[Job]:
    by_name = {f.name: f for f in flows}

    def mirror(_stop: threading.Event) -> None:
        from mm.source.job import run_mirror

        run_mirror(
            cfg,
            once=False,
            trigger_seconds=trigger_seconds,
            flows=[by_name[n] for n in plan[MIRROR]],
            shared=shared,
        )

    def checkpoint(_stop: threading.Event) -> None:
        from mm.checkpoint.job import run_checkpoint

        run_checkpoint(cfg, once=False, flows=[by_name[n] for n in plan[CHECKPOINT]], shared=shared)

    def heartbeat(stop: threading.Event) -> None:
        from mm.heartbeat.job import run_heartbeat

        run_heartbeat(cfg, once=False, flows=[by_name[n] for n in plan[HEARTBEAT]], stop=stop)

    runners = {MIRROR: mirror, CHECKPOINT: checkpoint, HEARTBEAT: heartbeat}
    return [Job(name, flows_of, runners[name]) for name, flows_of in plan.items()]
