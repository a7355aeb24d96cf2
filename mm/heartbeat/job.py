"""Runs the heartbeat job: a plain producer loop, no Spark.

Each flow emits every ``emit.heartbeats.interval.seconds`` on its own schedule
(a late round does not cause a burst: the next one is scheduled an interval
after it). ``once`` emits one heartbeat per flow and returns. SIGTERM/SIGINT
(or the ``stop`` event) end the loop between rounds; the producers are flushed.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from mm.config import FlowConfig, MirrorConfig
from mm.errors import KafkaOperationError, MirrorError
from mm.heartbeat.emitter import HeartbeatEmitter, HeartbeatStats, HeartbeatWriteError
from mm.logs import get_logger
from mm.signals import StopBound, cluster_probe, stop_on_signals

__all__ = ["HeartbeatWriteError", "heartbeat_flows", "run_heartbeat"]


def heartbeat_flows(flows: list[FlowConfig]) -> tuple[list[FlowConfig], list[FlowConfig]]:
    """(flows that emit heartbeats, flows with emit.heartbeats.enabled = false)."""
    return (
        [f for f in flows if f.emit_heartbeats_enabled],
        [f for f in flows if not f.emit_heartbeats_enabled],
    )


def run_heartbeat(
    cfg: MirrorConfig,
    *,
    once: bool,
    flows: list[FlowConfig] | None = None,
    stop: threading.Event | None = None,
) -> dict[str, HeartbeatStats]:
    """Emit heartbeats for ``flows`` (default: every enabled flow that emits them).

    Returns per-flow stats. Raises HeartbeatWriteError when a source cannot be
    written (authorization), KafkaOperationError when ``once`` could not write.
    """
    log = get_logger("mm.heartbeat")
    flows = cfg.job_flows(flows)
    active, disabled = heartbeat_flows(flows)
    for f in disabled:
        log.info("heartbeats disabled for flow", flow=f.name)
    if not active:
        return {}
    emitter = HeartbeatEmitter(cfg, active, log=log)
    # a caller's stop event (mm run) means the caller announces the stop
    announce = log.info if stop is None else log.debug
    stop = stop or threading.Event()
    # a flush or a topic creation waiting on a frozen source: see StopBound
    bound = StopBound("heartbeats", log, cluster_probe(cfg, active))
    restore = stop_on_signals(stop, log, bound=bound)
    try:
        if once:
            emitter.prepare()
            errors = emitter.emit(active)
            failed = {k: v for k, v in errors.items() if v}
            if failed:
                raise KafkaOperationError(
                    "heartbeats not written: "
                    + "; ".join(f"{name}: {err}" for name, err in sorted(failed.items())),
                    retriable=True,
                )
            return emitter.stats
        if not _prepare_until_ready(emitter, stop, log):
            return emitter.stats
        log.info(
            "heartbeats starting",
            flows={f.name: f.emit_heartbeats_interval_seconds for f in active},
        )
        _loop(emitter, active, stop, log)
        return emitter.stats
    finally:
        restore()
        emitter.close()
        if stop.is_set():
            bound.finished()  # in time: else the bound's line is the job's last
            announce(
                "heartbeats stopped on request",
                **{name: st.summary() for name, st in emitter.stats.items()},
            )


def _prepare_until_ready(emitter: HeartbeatEmitter, stop: threading.Event, log: Any) -> bool:
    """Create the heartbeats topics, retrying (with backoff) while a source is unreachable.

    False when stopped first; HeartbeatWriteError (not authorized) is not retried.
    """
    delay = 1.0
    while not stop.is_set():
        try:
            emitter.prepare()
            return True
        except HeartbeatWriteError:
            raise
        except MirrorError as exc:
            log.error(
                "heartbeats topic not ready; retrying", error=str(exc), retry_in_seconds=delay
            )
            stop.wait(delay)
            delay = min(30.0, delay * 2)
    return False


def _loop(
    emitter: HeartbeatEmitter, flows: list[FlowConfig], stop: threading.Event, log: Any
) -> None:
    due = {f.name: time.monotonic() for f in flows}
    by_name = {f.name: f for f in flows}
    reported = 0.0
    while not stop.is_set():
        now = time.monotonic()
        ready = [by_name[n] for n, t in due.items() if t <= now]
        if ready:
            emitter.emit(ready)
            after = time.monotonic()
            for f in ready:
                nxt = due[f.name] + f.emit_heartbeats_interval_seconds
                # behind schedule (a slow or failed round): no burst, just carry on
                due[f.name] = nxt if nxt > after else after + f.emit_heartbeats_interval_seconds
            if after - reported >= 60:
                reported = after
                log.info(
                    "heartbeats emitted",
                    **{n: st.summary() for n, st in emitter.stats.items()},
                )
        stop.wait(max(0.0, min(due.values()) - time.monotonic()))
