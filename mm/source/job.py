"""Runs the mirror: one Spark streaming query per enabled flow.

``--once`` uses Spark's available-now trigger: everything present on the source
when the job starts (the tail of every partition included) is mirrored, then
the job exits. Otherwise a processing-time trigger runs micro-batches forever.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient
from mm_client.kafka.admin import ensure_topic
from mm_client.kafka.clients import new_admin

from mm.config import FlowConfig, MirrorConfig
from mm.errors import MirrorError
from mm.logs import get_logger, quiet_spark_shutdown
from mm.signals import StopBound, cluster_probe, stop_on_signals
from mm.source.refused import refusal_message
from mm.source.runtime import mirror_plan, offset_syncs_topic, planner_settings
from mm.source.topics import TopicMirrorPlanner
from mm.spark_errors import worker_error_line

# The offset-syncs topic is NOT compacted (MM2 compacts it): exact translation of a
# group needs every sync between its offset and the head, and compaction keeps one
# per partition. Retention bounds it instead (docs/offset-syncs.md).
OFFSET_SYNCS_RETENTION_KEY = "offset.syncs.retention.ms"


def offset_syncs_topic_config(cfg: MirrorConfig) -> dict[str, str]:
    """Configs the mirror creates the offset-syncs topic with (``mm.offset.syncs.retention.ms``)."""
    ms = cfg.setting(OFFSET_SYNCS_RETENTION_KEY)
    return {"cleanup.policy": "delete", "retention.ms": str(ms)}


def _admin(cfg: MirrorConfig, cluster: str) -> AdminClient:
    conf: dict[str, Any] = cfg.cluster(cluster).librdkafka("admin")
    return new_admin(conf)


def ensure_offset_syncs_topic(cfg: MirrorConfig, flow: FlowConfig) -> None:
    where = flow.target if flow.offset_syncs_topic_location == "target" else flow.source
    ensure_topic(
        _admin(cfg, where),
        offset_syncs_topic(flow),
        f"cluster {where}",
        flow.offset_syncs_topic_replication_factor,
        config=offset_syncs_topic_config(cfg),
    )


def ensure_shards_topic(cfg: MirrorConfig, flow: FlowConfig) -> None:
    """The target's record of the flow's shard map (mm.source.shard_store)."""
    from mm.source.shard_store import SHARDS_TOPIC_CONFIG, shards_topic

    _ensure_target_topic(cfg, flow, shards_topic(flow.source), SHARDS_TOPIC_CONFIG)


def ensure_ends_topic(cfg: MirrorConfig, flow: FlowConfig) -> None:
    """The target's record of the source ends the mirror saw (mm.source.ends)."""
    from mm.source.ends import ENDS_TOPIC_CONFIG, ends_topic

    _ensure_target_topic(cfg, flow, ends_topic(flow.source), ENDS_TOPIC_CONFIG)


def _ensure_target_topic(
    cfg: MirrorConfig, flow: FlowConfig, topic: str, config: Mapping[str, str]
) -> None:
    """One of the flow's one-partition internal topics on its target, created once (the
    replication factor of its offset-syncs topic)."""
    ensure_topic(
        _admin(cfg, flow.target),
        topic,
        f"cluster {flow.target}",
        flow.offset_syncs_topic_replication_factor,
        config=dict(config),
    )


@dataclass
class SharedRun:
    """What a job gets when it runs inside ``mm run`` rather than as its own command.

    The process owns the signals (``stop`` is set on SIGTERM/SIGINT), the Spark
    session (a job never stops it: the other jobs use it too), the metrics
    endpoint, and the mirror's per-flow totals (kept across the job's restarts,
    so its counters do not fall back to zero)."""

    stop: threading.Event
    spark: Any
    mirror_stats: dict[str, FlowStats] = field(default_factory=dict)


@dataclass
class FlowStats:
    """Totals a flow's query accumulates across micro-batches (driver side)."""

    batches: int = 0
    records: int = 0
    bytes: int = 0
    transactions: int = 0
    syncs: int = 0
    lost: int = 0
    lost_ranges: set[tuple[str, int, int, int]] = field(default_factory=set)
    errors: dict[tuple[str, int], str] = field(default_factory=dict)
    positions: dict[tuple[str, int], int] = field(default_factory=dict)
    # end offset the last micro-batch planned per source partition (lag = end - position)
    ends: dict[tuple[str, int], int] = field(default_factory=dict)
    # Spark's durationMs per micro-batch (latestOffset, addBatch, triggerExecution, ...)
    durations: list[dict[str, int]] = field(default_factory=list)
    # source topic -> why it cannot be mirrored (e.g. target has fewer partitions)
    failed_topics: dict[str, str] = field(default_factory=dict)
    # failed queries restarted; records a failed micro-batch committed are not in
    # ``records`` (its summary rows never reach the driver), the target has them
    restarts: int = 0
    # a worker's error that a cluster refused the principal: ends the flow
    refused: str | None = None


def topic_planner(cfg: MirrorConfig, flow: FlowConfig) -> TopicMirrorPlanner:
    """The flow's topic planner, built from the same settings the Spark source gets
    in its :class:`~mm.source.plan.MirrorPlan` (driver-side check)."""
    return TopicMirrorPlanner(
        **planner_settings(cfg, flow), log=get_logger("mm.mirror.planner", flow=flow.name)
    )


class ProgressLog:
    """What one flow's mirror logs about its micro-batches.

    A batch that mirrored records other than heartbeats is an INFO "micro-batch
    mirrored" event (tests and operators read those); an idle batch (nothing, or
    only heartbeat records, which move every second) is the same event at DEBUG.
    Every ``interval`` seconds (mm.mirror.log.summary.seconds) an INFO "mirror
    progress" event sums the batches since the last one: batches (idle ones too),
    records, bytes, heartbeat records, and the partitions still behind their
    planned end with their lag. :meth:`tick` emits a due summary between batches.
    """

    def __init__(
        self,
        flow: FlowConfig,
        stats: FlowStats,
        log: Any,
        interval: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._is_heartbeats = flow.policy().is_heartbeats_topic
        self._stats = stats
        self._log = log
        self._interval = interval
        self._clock = clock
        self._lock = threading.Lock()  # batches run on a Spark callback thread
        self._since = clock()
        self._window = dict.fromkeys(
            ("batches", "idle_batches", "records", "bytes", "heartbeat_records"), 0
        )

    def batch(self, batch_id: int, rows: list[Any], lag: dict[str, int], seconds: float) -> None:
        records = sum(r.records for r in rows)
        bytes_ = sum(r.bytes for r in rows)
        heartbeats = sum(r.records for r in rows if self._is_heartbeats(r.topic))
        idle = records == heartbeats
        emit = self._log.debug if idle else self._log.info
        emit(
            "micro-batch mirrored",
            batch=batch_id,
            records=records,
            bytes=bytes_,
            partitions=len(rows),
            lag=lag,
            total_records=self._stats.records,
            lost_total=self._stats.lost,
            seconds=seconds,
        )
        with self._lock:
            w = self._window
            w["batches"] += 1
            w["idle_batches"] += idle
            w["records"] += records
            w["bytes"] += bytes_
            w["heartbeat_records"] += heartbeats
        self.tick()

    def tick(self) -> None:
        """Log the summary if ``interval`` seconds passed since the last one."""
        with self._lock:
            now = self._clock()
            if now - self._since < self._interval:
                return
            window, seconds = self._window, now - self._since
            self._window = dict.fromkeys(window, 0)
            self._since = now
            st = self._stats
            # copies (one C-level step each): batches update them on another thread
            ends, positions = dict(st.ends), dict(st.positions)
            behind = {
                k: end - positions.get(k, -1)
                for k, end in ends.items()
                if end > positions.get(k, -1)
            }
        self._log.info(
            "mirror progress",
            seconds=round(seconds, 1),
            **window,
            partitions=len(ends),
            partitions_behind=len(behind),
            lag_records=sum(behind.values()),
            total_records=st.records,
            lost_total=st.lost,
        )


def batch_handler(
    flow: FlowConfig, stats: FlowStats, progress: ProgressLog | None = None
) -> Callable[[Any, int], None]:
    log = get_logger("mm.mirror", flow=flow.name)
    progress = progress or ProgressLog(flow, stats, log, interval=60.0)

    def handle(batch_df: Any, batch_id: int) -> None:
        started = time.monotonic()
        rows = batch_df.collect()
        stats.batches += 1
        records = bytes_ = 0
        lag: dict[str, int] = {}
        for r in rows:
            records += r.records
            bytes_ += r.bytes
            stats.transactions += r.transactions
            stats.syncs += r.syncs
            key = (r.topic, r.partition)
            stats.positions[key] = max(stats.positions.get(key, -1), r.position)
            stats.ends[key] = r.planned_end
            lag[f"{r.topic}:{r.partition}"] = max(0, r.planned_end - r.position)
            if r.lost:
                rng = (r.topic, r.partition, r.lost_from, r.lost_to)
                if rng not in stats.lost_ranges:
                    stats.lost_ranges.add(rng)
                    stats.lost += r.lost
                    log.error(
                        "source records deleted before they were mirrored",
                        topic=r.topic,
                        partition=r.partition,
                        lost=r.lost,
                        lost_from=r.lost_from,
                        lost_to=r.lost_to,
                    )
            if r.refused:
                stats.refused = stats.refused or r.error
            elif r.error:
                stats.errors[key] = r.error
                log.error("partition stopped", topic=r.topic, partition=r.partition, error=r.error)
            else:
                stats.errors.pop(key, None)
        stats.records += records
        stats.bytes += bytes_
        progress.batch(batch_id, rows, lag, round(time.monotonic() - started, 3))

    return handle


def run_mirror(
    cfg: MirrorConfig,
    *,
    once: bool,
    trigger_seconds: float,
    flows: list[FlowConfig] | None = None,
    shared: SharedRun | None = None,
) -> dict[str, FlowStats]:
    """Start the flows' queries and wait; returns per-flow stats (when ``once``).

    Refuses (MirrorError) when another process mirrors one of the flows with the
    same state dir (see :func:`lock_flow_state`). ``shared`` runs it as one job of
    ``mm run`` (see :class:`SharedRun`)."""
    log = get_logger("mm.mirror")
    flows = cfg.job_flows(flows)
    locks: list[Any] = []
    stop = shared.stop if shared is not None else threading.Event()
    # under mm run the run's own bound covers the job (its clock never starts here)
    bound = StopBound("mirror", log, cluster_probe(cfg, flows))
    # from the start: a signal while topics are checked or Spark starts is a stop
    # too (the default SIGTERM would kill the process, SIGINT raise a traceback);
    # under mm run the process's own handlers are in place (and this is a thread)
    restore = stop_on_signals(stop, log, bound=bound) if shared is None else (lambda: None)
    try:
        for flow in flows:
            locks.append(lock_flow_state(cfg, flow))
        return _run_flows(cfg, flows, once, trigger_seconds, log, stop, bound, shared)
    finally:
        restore()
        for lock in locks:
            lock.close()  # closing the file releases its lock


def lock_flow_state(cfg: MirrorConfig, flow: FlowConfig) -> Any:
    """Take the flow's state lock, or refuse: one running mirror per flow and state dir.

    Two mirrors of one flow sharing a Spark checkpoint keep failing each other's
    micro-batches. The lock is an ``flock`` on ``<state dir>/mirror/<src>-<tgt>.lock``
    (holding our pid for the message): the kernel drops it when the process dies,
    even by kill -9, so a crashed run never blocks its restart. Returns the open
    file; closing it releases the lock.
    """
    import fcntl

    from mm.state_dir import state_error

    path = Path(cfg.state_dir) / "mirror" / f"{flow.source}-{flow.target}.lock"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        f = open(path, "a+")  # kept open while the mirror runs
    except OSError as exc:
        raise state_error(path.parent, exc) from None
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        holder = f.read().strip() or "unknown"
        f.close()
        raise MirrorError(
            f"flow {flow.name} is already being mirrored with state dir {cfg.state_dir} "
            f"(process {holder} holds {path}); stop that mirror first, or give this one "
            "its own mm.state.dir"
        ) from None
    try:
        f.truncate(0)
        f.write(f"{os.getpid()}\n")
        f.flush()
    except OSError as exc:
        f.close()
        raise state_error(path, exc) from None
    return f


def _colliding_topics(
    flows: list[FlowConfig], planners: dict[str, TopicMirrorPlanner]
) -> dict[str, dict[str, str]]:
    """Source topics two flows into one cluster would mirror into one target topic."""
    from mm.source.topics import target_collisions

    targets = [f.target for f in flows]
    shared = [f for f in flows if targets.count(f.target) > 1]
    claims = {}
    for flow in shared:
        policy = flow.policy()
        topics = planners[flow.name].selected()
        claims[flow.name] = (
            flow.target,
            {t: policy.format_remote_topic(flow.source, t) for t in topics},
        )
    return target_collisions(claims)


def _run_flows(
    cfg: MirrorConfig,
    flows: list[FlowConfig],
    once: bool,
    trigger_seconds: float,
    log: Any,
    stop: threading.Event,
    bound: StopBound,
    shared: SharedRun | None = None,
) -> dict[str, FlowStats]:
    for flow in flows:
        _ensure_flow_topics(cfg, flow)
    failed_topics, plans = _plan_flows(cfg, flows, log, once)
    if shared is None:
        stats = {f.name: FlowStats(failed_topics=failed_topics[f.name]) for f in flows}
    else:
        stats = shared.mirror_stats
        for f in flows:
            st = stats.setdefault(f.name, FlowStats())
            st.failed_topics = failed_topics[f.name]
            st.refused = None  # a restart under mm run tries again: an ACL may be granted
    if stop.is_set():  # before Spark starts: nothing to stop
        bound.finished()
        (log.info if shared is None else log.debug)("mirror stopped on request")
        return stats
    from mm.spark_session import build_spark

    spark = (
        build_spark("mm-mirror", cfg.spark, cfg.setting("spark.class.archive"))
        if shared is None
        else shared.spark
    )
    queries = _FlowQueries(cfg, flows, plans, stats, spark, once, trigger_seconds, log)
    from mm.metrics import serve_mirror_metrics

    # only with mm.metrics.port; mm run serves its own
    metrics = serve_mirror_metrics(cfg, flows, stats) if shared is None else None
    from mm.source.acl_sync import start_acl_sync

    acl_sync = start_acl_sync(cfg, flows, lambda alias: _admin(cfg, alias))  # its own thread
    # ours again: PySpark installed its own SIGINT handler when Spark started (it
    # cancels the jobs and raises KeyboardInterrupt in whatever py4j call runs)
    restore = stop_on_signals(stop, log, bound=bound) if shared is None else (lambda: None)
    try:
        if not stop.is_set():
            queries.supervise(stop)
        _raise_refusal(stats)
    finally:
        if acl_sync is not None:
            acl_sync.close()
        if metrics is not None:
            metrics.close()
        queries.shut_down(stop, shared is not None, bound)
        # restored last: a second Ctrl-C while stopping is still ours, not PySpark's
        restore()
    return stats


def _ensure_flow_topics(cfg: MirrorConfig, flow: FlowConfig) -> None:
    """The flow's internal topics (offset syncs, ends, shard map) and its dead-letter
    topic, created before any query starts."""
    ensure_offset_syncs_topic(cfg, flow)
    ensure_ends_topic(cfg, flow)
    ensure_shards_topic(cfg, flow)
    if flow.errors_tolerance == "all" and flow.errors_deadletterqueue_topic_name:
        ensure_topic(
            _admin(cfg, flow.target),
            flow.errors_deadletterqueue_topic_name,
            f"cluster {flow.target}",
            flow.replication_factor,
            config={"cleanup.policy": "delete"},
        )


def _plan_flows(
    cfg: MirrorConfig, flows: list[FlowConfig], log: Any, once: bool
) -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    """Each flow's topics that cannot be mirrored (logged) and its encoded plan.

    The Spark source plans in its own Python process, so topics it refuses (a target
    with fewer partitions) never reach the driver: they are checked here too, and the
    target topics created, before the queries start."""
    failed_topics: dict[str, dict[str, str]] = {}
    plans: dict[str, str] = {}
    planners = {flow.name: topic_planner(cfg, flow) for flow in flows}
    run_id = uuid.uuid4().hex  # every flow of this run (mm.source.task.enter_run)
    refused = _colliding_topics(flows, planners)
    for flow in flows:
        planner = planners[flow.name]
        planner.refused = refused.get(flow.name, {})
        for topic, why in sorted(planner.refused.items()):
            log.error("topic cannot be mirrored", flow=flow.name, topic=topic, reason=why)
        planner.refresh()
        failed_topics[flow.name] = dict(planner.failed)
        # the source starts from this refresh rather than repeating it
        plan = mirror_plan(cfg, flow, planner, continuous=not once, run_id=run_id)
        plans[flow.name] = plan.encode()
    return failed_topics, plans


class _FlowQueries:
    """The flows' streaming queries: started, restarted with back-off when one fails
    (tasks resume from what the target holds), ended on a refusal or a stop."""

    def __init__(
        self,
        cfg: MirrorConfig,
        flows: list[FlowConfig],
        plans: dict[str, str],
        stats: dict[str, FlowStats],
        spark: Any,
        once: bool,
        trigger_seconds: float,
        log: Any,
    ) -> None:
        from mm.source.reader import MirrorDataSource

        self.cfg, self.plans, self.stats, self.spark = cfg, plans, stats, spark
        self.once, self.trigger_seconds, self.log = once, trigger_seconds, log
        self.flows = {f.name: f for f in flows}
        spark.dataSource.register(MirrorDataSource)
        self.max_per_partition = str(cfg.setting("mirror.max.records.per.partition.per.batch"))
        summary_seconds = float(cfg.setting("mirror.log.summary.seconds"))
        self.progress = {
            f.name: ProgressLog(
                f, stats[f.name], get_logger("mm.mirror", flow=f.name), interval=summary_seconds
            )
            for f in flows
        }
        self.retry_timeout = float(cfg.setting("mirror.retry.timeout.seconds"))
        self.active: dict[str, Any] = {}
        self.failing_since: dict[str, float] = {}
        self.backoff: dict[str, float] = {}
        self.progress_at_start: dict[str, int] = {}
        self.live_halt = threading.Event()
        if not once:  # a continuous flow's lag between its batches (mm.source.live)
            from mm.source.live import keep_fresh, live_positions

            keep_fresh([live_positions(cfg, f, stats[f.name]) for f in flows], self.live_halt)

    def start(self, flow: FlowConfig) -> Any:
        from mm.source.reader import OPTION_CORES, OPTION_MAX_PER_PARTITION, OPTION_PLAN

        spark = self.spark
        checkpoint = Path(self.cfg.state_dir) / "mirror" / f"{flow.source}-{flow.target}"
        df = (
            spark.readStream.format("mm_mirror")
            .option(OPTION_PLAN, self.plans[flow.name])
            .option(OPTION_MAX_PER_PARTITION, self.max_per_partition)
            .option(OPTION_CORES, str(spark.sparkContext.defaultParallelism))
            .load()
        )
        handler = batch_handler(flow, self.stats[flow.name], self.progress[flow.name])
        writer = (
            df.writeStream.foreachBatch(handler)
            .option("checkpointLocation", str(checkpoint))
            .queryName(f"mirror {flow.name}")
        )
        writer = (
            writer.trigger(availableNow=True)
            if self.once
            else writer.trigger(processingTime=f"{self.trigger_seconds} seconds")
        )
        self.log.info(
            "mirror starting",
            flow=flow.name,
            once=self.once,
            checkpoint=str(checkpoint),
            spark_master=spark.sparkContext.master,
        )
        return writer.start()

    def supervise(self, stop: threading.Event) -> None:
        """Start every flow's query and watch them until all ended (``--once``), a
        refusal or a persistent failure (MirrorError), or ``stop``."""
        from pyspark.errors import StreamingQueryException

        self.active = {name: self.start(f) for name, f in self.flows.items()}
        self.progress_at_start = dict.fromkeys(self.active, 0)
        while self.active and not stop.is_set():
            _raise_refusal(self.stats)
            for name, q in list(self.active.items()):
                if not q.isActive and not self._ended(name, q, stop):
                    return
            for name in self.active:
                self.progress[name].tick()  # an idle flow runs no batches: summarise anyway
            if self.active and not stop.is_set():
                # wakes as soon as a query ends (not on a fixed poll); the short
                # timeout keeps signals and restarts responsive
                try:
                    self.spark.streams.awaitAnyTermination(0.1)  # seconds; floats accepted
                except StreamingQueryException:
                    pass  # handled above on the next pass, from q.exception()
                self.spark.streams.resetTerminated()

    def _ended(self, name: str, q: Any, stop: threading.Event) -> bool:
        """Handle flow ``name``'s ended query: done (``--once``), or restarted after
        its back-off. False when ``stop`` came during the back-off."""
        st = self.stats[name]
        st.durations += [dict(p.get("durationMs", {})) for p in q.recentProgress]
        exc = q.exception()
        if exc is None:
            del self.active[name]  # --once: everything available was mirrored
            return True
        # Restarting is safe: tasks resume from what the target holds. Back off so an
        # unreachable cluster is not hammered; give up after a while.
        now = time.monotonic()
        if st.batches > self.progress_at_start[name]:
            self.failing_since.pop(name, None)
            self.backoff.pop(name, None)
        since = self.failing_since.setdefault(name, now)
        cause = worker_error_line(exc)
        refusal = refusal_message(name, cause)
        if refusal is not None:  # no retry can help before an operator acts
            raise MirrorError(refusal)
        if now - since >= self.retry_timeout:
            raise MirrorError(
                f"flow {name} kept failing for {now - since:.0f}s "
                f"(mm.mirror.retry.timeout.seconds={self.retry_timeout:.0f}): {cause}"
            )
        delay = self.backoff[name] = min(60.0, self.backoff.get(name, 0.5) * 2)
        self.log.error(
            "mirror query failed; restarting", flow=name, error=cause, retry_in_seconds=delay
        )
        if stop.wait(delay):
            return False
        self.progress_at_start[name] = st.batches
        st.restarts += 1
        self.active[name] = self.start(self.flows[name])
        return True

    def shut_down(self, stop: threading.Event, shared: bool, bound: StopBound) -> None:
        """Stop the queries still running (and, on a run of its own that was refused
        or asked to stop, the Spark session). A stop that takes longer than the
        bound (a query waiting on a frozen cluster) is ended by ``bound``."""
        spark, log = self.spark, self.log
        self.live_halt.set()
        # a refusal ends a run of its own as quietly as a stop request (under mm run
        # the session is shared: the other jobs' logs stay on)
        quiet = stop.is_set() or (not shared and _refused(self.stats))
        if quiet:
            # Stopping a query interrupts its micro-batch: Spark and py4j would log the
            # InterruptedException and the callback's broken connection (about a
            # thousand lines of Java stack). Nothing is lost by the interruption: the
            # next run resumes from what the target holds.
            quiet_spark_shutdown(spark)
        for q in self.active.values():
            if q.isActive:
                q.stop()
        if quiet and not stop.is_set():
            _stop_session(spark, log)  # the refusal is the run's last line
        if stop.is_set():
            if not shared:
                _stop_session(spark, log)
            bound.finished()
            # under mm run, the run's own line is the one the operator reads
            (log.info if not shared else log.debug)("mirror stopped on request")


def _refused(stats: dict[str, FlowStats]) -> bool:
    return any(st.refused is not None for st in stats.values())


def _raise_refusal(stats: dict[str, FlowStats]) -> None:
    """Ends the run when a flow's workers were refused by a cluster (MirrorError)."""
    for name, st in stats.items():
        if st.refused is not None:
            raise MirrorError(refusal_message(name, st.refused) or st.refused)


def _stop_session(spark: Any, log: Any) -> None:
    """Stops Spark before the process exits, rather than leaving it to the JVM's
    shutdown hooks (which log as they go)."""
    try:
        spark.stop()
    except Exception as exc:  # its JVM is gone already
        log.debug("Spark did not stop cleanly", error=str(exc).splitlines()[:1])
