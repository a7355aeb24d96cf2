"""The mirror as a Spark Python streaming data source.

Spark plans, the workers mirror: an offset is a flat dict
``{"<topic>:<partition>": <end offset>}``; each micro-batch plans one range per
source topic-partition with new data, grouped into shards by the flow's shard
map (the map is settled before the batch, :mod:`mm.source.shard_store`) and the
shards into at most one Spark task per core (:mod:`mm.source.shards`). ``read``
mirrors each of its shards' ranges straight from the source to the target inside
the Python worker through the shard's one transactional producer, the shards side
by side (:mod:`mm.source.shard_run`, with the worker's pooled clients), yielding
one summary row per range. Record payloads never enter the JVM.

The reader is built from the flow's :class:`~mm.source.plan.MirrorPlan`, passed
as the option ``mm.secret.plan`` (Spark redacts option names containing
"secret" in plans and logs: the plan holds client credentials). ``read`` runs on
executors and uses only the plan's picklable :class:`FlowRuntime`.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    SupportsTriggerAvailableNow,
)

from mm.errors import MirrorError
from mm.source.keepalive import REFRESH_PREFIX, RefreshClock
from mm.source.spec import MIRROR_RESULT_SCHEMA, FlowRuntime, RangeSpec

OPTION_PLAN = "mm.secret.plan"
OPTION_MAX_PER_PARTITION = "max.records.per.partition"
# the cores Spark runs tasks on (the default shard count's formula, mm.source.shard_map)
OPTION_CORES = "cores"


def _key(topic: str, partition: int) -> str:
    return f"{topic}:{partition}"


def _split(key: str) -> tuple[str, int]:
    topic, _, p = key.rpartition(":")
    return topic, int(p)


class MirrorDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "mm_mirror"

    def schema(self) -> str:
        return MIRROR_RESULT_SCHEMA

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return MirrorStreamReader(dict(self.options))


class MirrorStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: dict[str, str]) -> None:
        from mm.source.plan import MirrorPlan

        self._plan = MirrorPlan.decode(options[OPTION_PLAN])
        self.runtime: FlowRuntime = self._plan.runtime
        self._max_per_partition = int(options.get(OPTION_MAX_PER_PARTITION, "1000000"))
        self._planner: Any = None
        self._last_refresh = 0.0
        self._topics: dict[str, Any] = {}
        self._target_offsets: dict[str, int] | None = None
        self._log_starts: dict[str, int] = {}
        self._clock: RefreshClock | None = None
        self._admin: Any = None
        self._ends: Any = None  # mm.source.ends.EndsPublisher, once needed
        self._refresher: Any = None  # mm.source.ends.EndsRefresher, once needed
        self._positions_read_at: float | None = None  # mm.source.moved
        self._target_admin: Any = None
        self._cores = int(options.get(OPTION_CORES, "0")) or (os.cpu_count() or 1)
        self._shard_map: Any = None  # mm.source.shard_map.ShardMap, once settled
        self._shard_store: Any = None
        # a continuous mirror's running batch: what it was planned with, and the thread
        # that asks for a new plan when that is no longer current (mm.source.replan)
        self._lock = threading.RLock()
        self._batches = 0
        self._planned_topics: dict[str, tuple[int, str]] = {}
        self._idle_at: dict[str, int] = {}
        self._watcher: Any = None

    # --- picklability: executors only need the runtime -------------------------
    def __getstate__(self) -> dict[str, Any]:
        # (the per-batch bound: continuation sweeps keep to it too)
        return {"runtime": self.runtime, "max_per_partition": self._max_per_partition}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.runtime = state["runtime"]
        self._max_per_partition = state["max_per_partition"]

    # --- planning (driver) ------------------------------------------------------
    def _planner_obj(self) -> Any:
        if self._planner is None:
            from mm.logs import configure_logging, get_logger
            from mm.source.topics import TopicMirrorPlanner

            configure_logging()
            rt = self.runtime
            log = get_logger("mm.mirror.planner", flow=f"{rt.source}->{rt.target}")
            planner = TopicMirrorPlanner(**self._plan.planner, log=log)
            now = time.time()
            age = now - self._plan.refreshed_at
            if self._plan.fresh_topics(now):
                planner.seed(self._plan.topics, self._plan.failed, age)
                self._topics = dict(self._plan.topics)
                self._last_refresh = time.monotonic() - age
            self._planner = planner
        return self._planner

    def _refresh_topics(self, force: bool = False) -> None:
        planner = self._planner_obj()  # may start from the driver's fresh refresh
        interval = self._plan.refresh_topics_interval_seconds
        if force or not self._topics or time.monotonic() - self._last_refresh >= interval:
            self._topics = planner.refresh()
            self._last_refresh = time.monotonic()

    def _current_ends(self) -> dict[str, int]:
        from mm.kafka.watermarks import watermarks

        self._refresh_topics()
        tps = [(t, p) for t, mt in self._topics.items() for p in range(mt.partitions)]
        missing: set[tuple[str, int]] = set()
        marks = watermarks(
            self.runtime.source_consumer,
            tps,
            admin=self._source_admin(),
            profile=self.runtime.source_profile,
            missing=missing,
        )
        if missing:
            # a source topic deleted since the last topic refresh: those partitions
            # keep their positions this batch, and the refresh now decides (a topic
            # gone, or recreated: refused by its topic ID until the operator acts)
            from mm.logs import get_logger

            get_logger("mm.mirror.planner").warning(
                "source partitions not found (topic deleted?): left out of this batch",
                partitions=[f"{t}[{p}]" for t, p in sorted(missing)],
            )
            self._refresh_topics(force=True)
            tps = [tp for tp in tps if tp not in missing]
        self._ends_publisher().seen({k: hi for k, (_lo, hi) in marks.items()})
        self._ends_refresher().watch(tps)
        ends: dict[str, int] = {}
        for (t, p), (lo, hi) in marks.items():
            k = _key(t, p)
            self._log_starts[k] = lo
            ends[k] = hi
        return ends

    def _ends_publisher(self) -> Any:
        """Publishes the source ends seen to the target (the failover point's estimate)."""
        if self._ends is None:
            from mm_client.kafka import latest_wins_producer_conf, new_producer

            from mm.logs import get_logger
            from mm.source.ends import EndsPublisher, ends_topic

            rt = self.runtime
            self._ends = EndsPublisher(
                new_producer(latest_wins_producer_conf(rt.target_producer)),
                ends_topic(rt.source),
                f"{rt.source}->{rt.target}",
                log=get_logger("mm.mirror.planner").warning,
            )
        return self._ends

    def _ends_refresher(self) -> Any:
        """Publishes fresh ends while a long micro-batch runs (mm.source.ends)."""
        if self._refresher is None:
            from mm_client.kafka.clients import new_admin

            from mm.kafka.watermarks import watermarks
            from mm.logs import get_logger
            from mm.source.ends import EndsRefresher

            # its own clients: the planner's are used by the planner's thread
            admin = new_admin(self._plan.planner["source_admin"])
            conf = self.runtime.source_consumer
            profile = self.runtime.source_profile

            def read(tps: Any) -> dict[tuple[str, int], int]:
                marks = watermarks(conf, list(tps), admin=admin, profile=profile)
                return {k: hi for k, (_lo, hi) in marks.items()}

            self._refresher = EndsRefresher(
                self._ends_publisher(), read, log=get_logger("mm.mirror.planner").warning
            )
            self._refresher.start()
        return self._refresher

    def _source_admin(self) -> Any:
        """The planner's AdminClient of the source (batched offset listings)."""
        if self._admin is None:
            from mm_client.kafka.clients import new_admin

            self._admin = new_admin(self._plan.planner["source_admin"])
        return self._admin

    def initialOffset(self) -> dict[str, int]:
        return {}

    def prepareForTriggerAvailableNow(self) -> None:
        started = time.monotonic()
        # the driver refreshed the topics just before starting the query
        self._refresh_topics(force=not self._plan.fresh_topics(time.time()))
        self._target_offsets = self._current_ends()
        # a run this short may end before an asynchronous delivery
        self._ends_publisher().close()
        from mm.logs import get_logger

        get_logger("mm.mirror.planner").debug(
            "available-now target planned",
            partitions=len(self._target_offsets),
            seconds=round(time.monotonic() - started, 3),
        )

    def _refresh_clock(self) -> RefreshClock:
        if self._clock is None:
            plan = self._plan
            self._clock = RefreshClock.load(
                plan.position_refresh_seconds, plan.position_refresh_file
            )
        return self._clock

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadAllAvailable()

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        if self._watcher is not None:
            self._watcher.disarmed()  # the batch it watched has ended
        with self._lock:
            return self._latest_offset(start)

    def _latest_offset(self, start: dict[str, int]) -> dict[str, int]:
        ends = (
            dict(self._target_offsets) if self._target_offsets is not None else self._current_ends()
        )
        out = dict(start)
        for k, end in ends.items():
            begin = start.get(k, self._log_starts.get(k, 0))
            if end > begin:
                # bound one micro-batch so progress is reported and committed regularly
                out[k] = min(end, begin + self._max_per_partition)
            elif end < begin and k in start:
                # the log end went backwards: the topic was deleted and recreated (or
                # truncated). Planned on (see partitions), so the task that owns the
                # partition checks its position against the new log and reports it.
                out[k] = end
            else:
                out.setdefault(k, begin)
        # idle partitions whose position is due to be committed again (a new count
        # makes Spark run a batch even when no partition has new data)
        clock = self._refresh_clock()
        clock.reload()
        idle = [k for k in ends if k in start and out[k] == start[k]]
        refresh = set(clock.due(idle, time.time()))
        refresh.update(self._behind_plan({k: start[k] for k in idle}))
        for k in refresh:
            rk = REFRESH_PREFIX + k
            out[rk] = int(start.get(rk, 0)) + 1
        return out

    def _behind_plan(self, start: dict[str, int]) -> list[str]:
        """Partitions of ``start`` (idle ones) whose committed position is below
        Spark's plan (:mod:`mm.source.moved`); the state group is read at most every
        CHECK_INTERVAL_S (a `--once` run: at its first batch only); only where the
        target keeps acknowledged commits. A failed read is logged and, continuous,
        tried again next batch: the plan goes on."""
        from mm.source.moved import CHECK_INTERVAL_S, behind_plan

        rt = self.runtime
        if not rt.target_profile.keeps_acknowledged_commits:
            return []  # a lower position there may be a lost commit (mm.kafka.profile)
        now = time.monotonic()
        if self._positions_read_at is not None and (
            # --once: at its first batch only, or a partition that stays behind (one
            # stopped at a record) would keep asking for batches and never end the run
            self._target_offsets is not None or now - self._positions_read_at < CHECK_INTERVAL_S
        ):
            return []
        self._positions_read_at = now
        targets = {t: mt.target_topic for t, mt in self._topics.items()}
        # a partition planned no further than its log start expects no position
        asked = {
            k: (targets[t], p)
            for k in start
            for t, p in [_split(k)]
            if t in targets and start[k] > self._log_starts.get(k, 0)
        }
        committed = self._committed_positions(asked.values())
        if isinstance(committed, Exception):
            from mm.logs import get_logger

            get_logger("mm.mirror.planner").warning(
                "mirror positions not read; checked again next batch", error=str(committed)
            )
            if self._target_offsets is None:
                self._positions_read_at = None  # continuous: again next batch
            return []
        return behind_plan({k: start[k] for k in asked}, self._log_starts, targets, committed)

    def _committed_positions(
        self, partitions: Iterable[tuple[str, int]]
    ) -> dict[tuple[str, int], int] | Exception:
        """The state group's committed positions of ``partitions`` (target topic,
        partition), read stable: the previous run's last commit may still be on its
        way, and its position before would look like one moved back."""
        from mm_client.kafka.admin import stable_group_offsets

        rt = self.runtime
        return stable_group_offsets(
            self._state_admin(), rt.state_group, partitions, 30.0, rt.target
        )

    def _state_admin(self) -> Any:
        if self._target_admin is None:
            from mm_client.kafka.clients import new_admin

            self._target_admin = new_admin(self._plan.planner["target_admin"])
        return self._target_admin

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        with self._lock:
            return self._partitions(start, end)

    def _partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        from mm.source.shards import plan_shards, plan_tasks

        specs: list[RangeSpec] = []
        refresh = {
            k[len(REFRESH_PREFIX) :]
            for k, n in end.items()
            if k.startswith(REFRESH_PREFIX) and n != start.get(k, 0)
        }
        planned: list[str] = []
        idle: list[tuple[str, int, int]] = []
        for k, e in sorted(end.items()):
            if k.startswith(REFRESH_PREFIX):
                continue
            topic, p = _split(k)
            s = start.get(k)
            if s is None:
                s = self._log_start(topic, p, k)
            if e == s and k not in refresh:
                idle.append((topic, p, s))
                continue
            mt = self._topics.get(topic)
            if mt is None:
                self._refresh_topics(force=True)
                mt = self._topics.get(topic)
                if mt is None:
                    continue  # no longer mirrored (filter changed or target topic failed)
            # e < s: the log end went backwards (see latestOffset); an empty range at
            # the new end lets the task compare the mirror's position with it
            extra = {"refresh": True} if e == s else {}
            specs.append(
                RangeSpec(topic, p, mt.target_topic, min(s, e), e, mt.max_record_bytes, extra)
            )
            planned.append(k)
        if planned:
            clock = self._refresh_clock()
            clock.planned(planned, time.time())
            clock.save()
        if not specs:
            return []
        continuous = self.runtime.task_continue_seconds > 0
        if continuous:
            specs += self._idle_ranges(idle)
        shard_map = self._settled_map({(s.target_topic, s.partition) for s in specs})
        shards = plan_shards(specs, shard_map, self.runtime.transactional_id_prefix)
        tasks = plan_tasks(shards, self._cores)
        if continuous:
            return self._watched(tasks, {_key(t, p): at for t, p, at in idle})
        return tasks

    def _watched(self, tasks: list[Any], idle: dict[str, int]) -> list[Any]:
        """``tasks`` with the plan mark they watch, and the planner's watcher armed
        for their batch (mm.source.replan); unwatched when the mark cannot be read."""
        import dataclasses

        from mm.logs import get_logger
        from mm.source.replan import ReplanWatcher

        try:
            mark = self._shard_store.end_offset()
        except MirrorError as exc:
            get_logger("mm.mirror.planner").warning(
                "shard map topic's end not read; the batch runs its full time", error=str(exc)
            )
            return tasks
        self._planned_topics = {
            t: (mt.partitions, mt.target_topic) for t, mt in self._topics.items()
        }
        self._idle_at = idle
        if self._watcher is None:
            store = self._shard_store
            self._watcher = ReplanWatcher(
                self._replan_reason, lambda why: store.request_replan(why, "planner")
            )
            self._watcher.start()
        self._batches += 1
        self._watcher.armed(self._batches)
        return [dataclasses.replace(t, plan_mark=mark) for t in tasks]

    def _replan_reason(self) -> str | None:
        """Why the running batch's plan is no longer current, if it is not: the topics
        mirrored changed, or an idle partition's position is due for its refresh or
        was moved below the plan (what the next latestOffset would act on)."""
        from mm.source.replan import topics_changed

        with self._lock:
            self._refresh_topics()  # when its interval has passed
            now = {t: (mt.partitions, mt.target_topic) for t, mt in self._topics.items()}
            why = topics_changed(self._planned_topics, now)
            if why is not None:
                return why
            clock = self._refresh_clock()
            clock.reload()
            due = clock.due(list(self._idle_at), time.time())
            if due:
                return f"positions due for their refresh: {', '.join(due[:5])}"
            behind = self._behind_plan(dict(self._idle_at))
            if behind:
                self._positions_read_at = None  # the next plan reads them again
                return f"positions moved below the plan: {', '.join(behind[:5])}"
            return None

    def _idle_ranges(self, idle: Iterable[tuple[str, int, int]]) -> list[RangeSpec]:
        """Empty ranges at ``idle`` partitions' ends (topic, partition, end), for a
        continuous mirror's batch: every shard then runs, and its continuation
        (:mod:`mm.source.sweep`) reads every partition of the shard, so a record
        written to a partition that had nothing new when the batch was planned is
        mirrored within a sweep, not one batch later."""
        out = []
        for topic, p, at in idle:
            mt = self._topics.get(topic)
            if mt is not None:  # a topic no longer mirrored is the next plan's business
                out.append(RangeSpec(topic, p, mt.target_topic, at, at, mt.max_record_bytes))
        return out

    def _settled_map(self, keys: set[tuple[str, int]]) -> Any:
        """The shard map every range of the batch is written under: the one this
        reader settled, or (first batch, or partitions it does not hold) a new round
        (:func:`mm.source.shard_store.settle`) over every target partition known, so
        that an upgrade from per-partition ids fences the ids of idle partitions too."""
        if self._shard_map is not None and keys <= self._shard_map.assignment.keys():
            return self._shard_map
        from mm.logs import get_logger
        from mm.source.shard_store import fence_live, settle, store_for

        rt = self.runtime
        if self._shard_store is None:
            self._shard_store = store_for(rt)
        known = {(mt.target_topic, p) for mt in self._topics.values() for p in range(mt.partitions)}
        conf = {k: v for k, v in rt.target_producer.items() if k != "transactional.id"}
        log = get_logger("mm.mirror.planner", flow=f"{rt.source}->{rt.target}")
        fenced: list[str] = []

        def fence_round(ids: Iterable[str]) -> None:
            live, unknown = fence_live(
                ids, conf, cluster=f"cluster {rt.target}", metadata_topic=self._shard_store.topic
            )
            if unknown is not None:
                log.info("fenced every id of the previous map", ids=len(live), why=unknown)
            fenced.extend(live)

        step = settle(self._shard_store, known | keys, self._plan.shards, fence_round,
                      cores=self._cores)  # fmt: skip
        if step.changed:
            log.info(
                "shard map recorded",
                generation=step.map.generation,
                shards=step.map.shards,
                partitions=len(step.map.assignment),
                fenced=len(fenced),
                fence_candidates=len(step.fence),
            )
        self._shard_map = step.map
        return step.map

    def _log_start(self, topic: str, partition: int, key: str) -> int:
        if key not in self._log_starts:
            from mm.kafka.watermarks import watermarks

            lo, _ = watermarks(
                self.runtime.source_consumer,
                [(topic, partition)],
                profile=self.runtime.source_profile,
            )[(topic, partition)]
            self._log_starts[key] = lo
        return self._log_starts[key]

    def commit(self, end: dict[str, int]) -> None:
        pass

    # --- mirroring (executor) ----------------------------------------------------
    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        """The task's shards mirrored side by side, one thread each (each through its
        own producer and consumer); one row per range. A shard that failed fails the
        task (Spark runs it again: every shard resumes from its committed positions),
        once the others have ended."""
        from concurrent.futures import ThreadPoolExecutor

        from mm.logs import configure_logging
        from mm.source.shards import MirrorTask
        from mm.source.task import enter_run

        assert isinstance(partition, MirrorTask)
        configure_logging()
        enter_run(self.runtime)
        started = time.monotonic()
        shards = partition.shards
        pace, store = self._task_pace(partition.plan_mark, started)
        try:
            if len(shards) == 1:
                outcomes = [self._shard_rows(shards[0], started, pace)]
            else:
                with ThreadPoolExecutor(len(shards), thread_name_prefix="mm-shard") as pool:
                    futures = [pool.submit(self._shard_rows, s, started, pace) for s in shards]
                    outcomes = [f.result() for f in futures]
        finally:
            if store is not None:
                store.close()
        for rows in outcomes:
            yield from rows

    def _task_pace(self, plan_mark: int, started: float) -> tuple[Any, Any]:
        """When the task's continuation ends besides its deadline (mm.source.replan),
        and the store it watches (None for a task that does not continue)."""
        from mm.source.replan import PlanWatch, TaskPace

        if self.runtime.task_continue_seconds <= 0:
            return None, None
        from mm.source.shard_store import store_for

        store = store_for(self.runtime)
        watch = PlanWatch(plan_mark, store.end_offset)
        return TaskPace(watch, lambda why: store.request_replan(why, "task"), started), store

    def _shard_rows(self, shard: Any, started: float, pace: Any) -> list[tuple[Any, ...]]:
        """The result rows of ``shard``'s ranges; a refusal is each range's row (no
        retry helps: the driver ends the flow in one line, not Spark's and py4j's
        traces); anything else raises."""
        try:
            results = self._mirror_shard(shard, started, pace)
        except Exception as exc:
            from mm_client.kafka import cause_code, is_refusal

            from mm.source.task import RangeResult

            if not is_refusal(cause_code(exc)):
                raise
            rows = []
            for spec in shard.ranges:
                r = RangeResult(spec.topic, spec.partition, spec.target_topic, spec.start, spec.end)
                r.error, r.refused = str(exc), True
                rows.append(r.row())
            return rows
        return [r.row() for r in results.values()]

    def _mirror_shard(self, shard: Any, started: float, pace: Any) -> dict[tuple[str, int], Any]:
        results = self._run_shard(shard, shard.ranges)
        if pace is not None:
            from mm.source.sweep import keep_mirroring

            keep_mirroring(
                shard.ranges,
                results,
                started + self.runtime.task_continue_seconds,
                self._sweep_ends,
                lambda specs: list(self._run_shard(shard, specs).values()),
                max_per_partition=self._max_per_partition,
                keep_going=pace.keep_going,
                stopped=pace.stopped,
                moved=lambda so_far: self._moved(shard, so_far),
            )
        return results

    def _moved(self, shard: Any, results: Any) -> str | None:
        """Which of ``shard``'s partitions an operator moved while the task ran, in
        words (mm.source.sweep.moved_positions); None when none was."""
        from mm.source.sweep import moved_positions
        from mm.source.task import read_states, worker_pool

        specs = [s for s in shard.ranges if not s.extra.get("refresh")]
        try:
            states = read_states(self.runtime, specs, pool=worker_pool(self.runtime))
        except MirrorError as exc:
            # only the check is lost: the batch's next plan reads the positions anyway
            from mm.logs import get_logger

            get_logger("mm.mirror.task").warning("positions not checked", error=str(exc))
            return None
        committed = {
            (s.topic, s.partition): states[(s.target_topic, s.partition)][0] for s in specs
        }
        moved = moved_positions({k: r for k, r in results.items() if k in committed}, committed)
        if not moved:
            return None
        return "positions moved under the mirror: " + ", ".join(f"{t}[{p}]" for t, p in moved[:5])

    def _run_shard(self, shard: Any, ranges: Sequence[RangeSpec]) -> dict[tuple[str, int], Any]:
        """Mirror ``ranges`` of ``shard`` through its producer (mm.source.shard_run)."""
        from mm_client.kafka.pool import ClientPool

        from mm.logs import get_logger
        from mm.source.shard_run import ShardRun
        from mm.source.shard_store import store_for
        from mm.source.task import worker_pool

        rt = self.runtime
        log = get_logger("mm.mirror.task", flow=f"{rt.source}->{rt.target}", shard=shard.shard)
        started = time.monotonic()

        def still_newest() -> bool:
            newest = store_for(rt).read()
            return newest is not None and newest.map.generation == shard.generation

        # 0 = every task builds and closes its own clients (mm.mirror.pool.max.clients)
        pooled = rt.pool_max_clients > 0
        pool = worker_pool(rt) if pooled else ClientPool()
        run = ShardRun(
            rt,
            shard.transactional_id,
            ranges,
            pool=pool,
            log=log.warning,
            stop_log=log.error,
            routine_log=log.info,
            still_newest=still_newest,
        )
        try:
            results = run.run()
        finally:
            if not pooled:
                pool.clear()
        log.debug(
            "shard mirrored",
            ranges=len(ranges),
            records=sum(r.records for r in results.values()),
            seconds=round(time.monotonic() - started, 3),
            **run.timings,
        )
        return results

    def _sweep_ends(self, keys: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Source ends (read_committed) of ``keys``, with this worker's probe clients."""
        from mm.source.task import source_ends

        return source_ends(self.runtime, keys)
