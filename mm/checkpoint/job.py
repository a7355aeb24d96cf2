"""Runs the checkpoint job: one Spark streaming query per flow that emits checkpoints.

Each query reads the flow's offset-syncs topic (:mod:`mm.checkpoint.reader`) and
hands every micro-batch to the flow's :class:`~mm.checkpoint.emitter.FlowCheckpointer`
on the driver (``foreachBatch``), which feeds the store, translates the source
groups' offsets and writes checkpoints.

* Continuous: processing-time trigger every ``emit.checkpoints.interval.seconds``.
  Spark runs no micro-batch when no new sync arrived, yet groups keep moving, so
  the driver also runs a round whenever a flow's interval passed without one.
* ``--once``: Spark's available-now trigger reads the syncs present now; then one
  round translates and emits, and the job exits.

Restarts: the snapshot (``store.json``) is the job's only durable state. It
records where reading of the offset-syncs topic stopped, and the query starts
there; Spark's own checkpoint directory is wiped at start so it can never
disagree with the snapshot.
"""

from __future__ import annotations

import json
import shutil
import threading
from typing import Any

from mm.checkpoint.emitter import CheckpointStats, FlowCheckpointer
from mm.config import FlowConfig, MirrorConfig
from mm.errors import MirrorError
from mm.logs import get_logger, quiet_spark_shutdown
from mm.signals import StopBound, cluster_probe, stop_on_signals
from mm.source.job import SharedRun
from mm.spark_errors import without_class, worker_error_line


def run_checkpoint(
    cfg: MirrorConfig,
    *,
    once: bool,
    flows: list[FlowConfig] | None = None,
    shared: SharedRun | None = None,
) -> dict[str, tuple[CheckpointStats, bool]]:
    """Run the flows' checkpoint queries; returns per flow (stats, last round ok).

    SIGTERM/SIGINT stop it cleanly (see :func:`_run`): the queries and Spark are
    stopped, one "checkpoint stopped on request" is logged, and the results so
    far are returned (a ``--once`` run stopped so emits no final round).
    ``shared``: one job of ``mm run`` (its stop event and Spark session; the
    session is left running)."""
    log = get_logger("mm.checkpoint")
    flows = cfg.job_flows(flows)
    active = [f for f in flows if f.emit_checkpoints_enabled]
    for f in flows:
        if not f.emit_checkpoints_enabled:
            log.info("checkpoints disabled for flow", flow=f.name)
    if not active:
        return {}
    stop = shared.stop if shared is not None else threading.Event()
    # under mm run the run's own bound covers the job (its clock never starts here)
    bound = StopBound("checkpoint", log, cluster_probe(cfg, active))
    # installed before Spark starts: a signal while it starts is a stop too
    restore = stop_on_signals(stop, log, bound=bound) if shared is None else (lambda: None)
    try:
        return _run(cfg, once, active, stop, log, bound, None if shared is None else shared.spark)
    finally:
        restore()
        if stop.is_set():
            bound.finished()  # in time: else the bound's line is the job's last
            (log.info if shared is None else log.debug)("checkpoint stopped on request")


def _run(
    cfg: MirrorConfig,
    once: bool,
    active: list[FlowConfig],
    stop: threading.Event,
    log: Any,
    bound: StopBound,
    session: Any = None,
) -> dict[str, tuple[CheckpointStats, bool]]:
    from mm.checkpoint.reader import (
        OPTION_CLUSTER,
        OPTION_CONSUMER,
        OPTION_MAX_PER_BATCH,
        OPTION_PROFILE,
        OPTION_START,
        OPTION_TOPIC,
        OffsetSyncsDataSource,
    )
    from mm.spark_session import build_spark

    workers: list[FlowCheckpointer] = []
    spark: Any = None
    queries: list[Any] = []
    restore_ours: Any = None
    try:
        for f in active:
            workers.append(FlowCheckpointer(cfg, f, once=once))
            workers[-1].start()
        if stop.is_set():
            return {w.flow.name: (w.stats, True) for w in workers}
        if session is not None:
            spark = session
        else:
            spark = build_spark("mm-checkpoint", cfg.spark, cfg.setting("spark.class.archive"))
            # PySpark installed its own SIGINT handler (cancel the jobs, raise
            # KeyboardInterrupt in the py4j call running: tracebacks); ours again
            restore_ours = stop_on_signals(stop, log, bound=bound)
        spark.dataSource.register(OffsetSyncsDataSource)
        max_per_batch = str(cfg.setting("checkpoint.max.syncs.per.batch"))
        for w in workers:
            if stop.is_set():
                break
            spark_dir = w.dir / "spark"
            shutil.rmtree(spark_dir, ignore_errors=True)  # the snapshot says where to start
            df = (
                spark.readStream.format("mm_offset_syncs")
                .option(OPTION_CONSUMER, json.dumps(w.syncs_consumer_conf))
                .option(OPTION_TOPIC, w.syncs_topic)
                .option(OPTION_PROFILE, w.syncs_profile.name)
                .option(OPTION_CLUSTER, w.syncs_cluster)
                .option(OPTION_START, json.dumps(w.snap.syncs_next))
                .option(OPTION_MAX_PER_BATCH, max_per_batch)
                .load()
            )
            writer = (
                df.writeStream.foreachBatch(w.on_batch)
                .option("checkpointLocation", str(spark_dir))
                .queryName(f"checkpoint {w.flow.name}")
            )
            interval = w.flow.emit_checkpoints_interval_seconds
            writer = (
                writer.trigger(availableNow=True)
                if once
                else writer.trigger(processingTime=f"{interval} seconds")
            )
            log.info(
                "checkpoint job starting",
                flow=w.flow.name,
                once=once,
                offset_syncs_topic=w.syncs_topic,
                checkpoints_topic=w.checkpoints_topic,
                start=w.snap.syncs_next,
            )
            queries.append(writer.start())
        if once:
            for q in queries:
                while not stop.is_set() and not _await(q, 0.5):
                    pass
            if stop.is_set():
                return {w.flow.name: (w.stats, True) for w in workers}
            return {w.flow.name: (w.stats, w.tick(final=True)) for w in workers}
        _run_continuous(queries, workers, stop)
        return {w.flow.name: (w.stats, True) for w in workers}
    finally:
        if stop.is_set() and spark is not None:
            # Stopping interrupts a micro-batch: Spark and py4j would log its
            # InterruptedException and the broken callback, pages of Java stack
            # for a stop that loses nothing (the snapshot says where to resume).
            quiet_spark_shutdown(spark)
        for q in queries:
            if q.isActive:
                q.stop()
        if stop.is_set() and spark is not None and session is None:
            try:
                spark.stop()
            except Exception as exc:  # its JVM is gone already
                log.debug("Spark did not stop cleanly", error=str(exc).splitlines()[:1])
        for w in workers:
            w.close()
        if restore_ours is not None:
            restore_ours()  # last: a second signal while stopping is still ours


def _await(q: Any, timeout: float | None = None) -> bool:
    from pyspark.errors import StreamingQueryException

    try:
        return bool(q.awaitTermination(timeout) if timeout is not None else q.awaitTermination())
    except StreamingQueryException as exc:
        raise MirrorError(
            f"query {q.name} failed: {without_class(worker_error_line(exc))}"
        ) from exc


def _run_continuous(
    queries: list[Any], workers: list[FlowCheckpointer], stop: threading.Event
) -> None:
    step = max(0.2, min(1.0, *(w.flow.emit_checkpoints_interval_seconds for w in workers)))
    while not stop.is_set():
        for q in queries:
            if not q.isActive:
                # a failed query raises its cause here (awaitTermination refuses 0)
                _await(q, 0.001)
                raise MirrorError(f"query {q.name} stopped")
        _await(queries[0], step)
        for w in workers:
            w.tick_if_due()
