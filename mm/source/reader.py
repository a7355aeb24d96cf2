"""The mirror as a Spark Python streaming data source.

Spark plans, the workers mirror: an offset is a flat dict
``{"<topic>:<partition>": <end offset>}``; each micro-batch plans one range per
source topic-partition with new data, grouped into input partitions by planned
records (:mod:`mm.source.shards`: a small batch is one Spark task, a backlog
spreads over the cores). ``read`` mirrors its ranges straight from the source
to the target inside the Python worker, several at once
(:mod:`mm.source.task`, with the worker's pooled clients), yielding one
summary row per range. Record payloads never enter the JVM.

The reader is built from the flow's :class:`~mm.source.plan.MirrorPlan`, passed
as the option ``mm.secret.plan`` (Spark redacts option names containing
"secret" in plans and logs: the plan holds client credentials). ``read`` runs on
executors and uses only the plan's picklable :class:`FlowRuntime`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
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

from mm.source.keepalive import REFRESH_PREFIX, RefreshClock
from mm.source.spec import MIRROR_RESULT_SCHEMA, FlowRuntime, RangeSpec

OPTION_PLAN = "mm.secret.plan"
OPTION_MAX_PER_PARTITION = "max.records.per.partition"


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
            from mm_client.kafka import new_producer

            from mm.logs import get_logger
            from mm.source.ends import EndsPublisher, ends_topic

            rt = self.runtime
            conf = {**rt.target_producer, "enable.idempotence": True, "acks": "all"}
            conf.pop("transactional.id", None)
            self._ends = EndsPublisher(
                new_producer(conf),
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
        refresh.update(k for k in self._behind_plan(start) if k in idle)
        for k in refresh:
            rk = REFRESH_PREFIX + k
            out[rk] = int(start.get(rk, 0)) + 1
        return out

    def _behind_plan(self, start: dict[str, int]) -> list[str]:
        """Partitions whose committed position is below Spark's plan
        (:mod:`mm.source.moved`); the state group is read at most every
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
        committed = self._committed_positions()
        if isinstance(committed, Exception):
            from mm.logs import get_logger

            get_logger("mm.mirror.planner").warning(
                "mirror positions not read; checked again next batch", error=str(committed)
            )
            if self._target_offsets is None:
                self._positions_read_at = None  # continuous: again next batch
            return []
        targets = {t: mt.target_topic for t, mt in self._topics.items()}
        return behind_plan(start, self._log_starts, targets, committed)

    def _committed_positions(self) -> dict[tuple[str, int], int] | Exception:
        """The state group's committed positions by target topic and partition."""
        from mm_client.kafka.admin import group_offsets_or_errors

        rt = self.runtime
        group = rt.state_group
        read = group_offsets_or_errors(self._state_admin(), [group], 30.0, rt.target)[group]
        if isinstance(read, Exception):
            return read
        return {(tp.topic, tp.partition): tp.offset for tp in read if tp.offset >= 0}

    def _state_admin(self) -> Any:
        if self._target_admin is None:
            from mm_client.kafka.clients import new_admin

            self._target_admin = new_admin(self._plan.planner["target_admin"])
        return self._target_admin

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        from mm.source.shards import plan_shards

        specs: list[RangeSpec] = []
        refresh = {
            k[len(REFRESH_PREFIX) :]
            for k, n in end.items()
            if k.startswith(REFRESH_PREFIX) and n != start.get(k, 0)
        }
        planned: list[str] = []
        for k, e in sorted(end.items()):
            if k.startswith(REFRESH_PREFIX):
                continue
            topic, p = _split(k)
            s = start.get(k)
            if s is None:
                s = self._log_start(topic, p, k)
            if e == s and k not in refresh:
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
        return plan_shards(specs, self._plan.records_per_task, self._plan.ranges_per_task)

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
        from mm.logs import configure_logging
        from mm.source.shards import MirrorShard

        assert isinstance(partition, MirrorShard)
        configure_logging()
        started = time.monotonic()
        ranges = partition.ranges
        threads = max(1, min(self.runtime.task_threads, len(ranges)))
        try:
            results = self._mirror_shard(ranges, threads, started)
        except Exception as exc:
            from mm_client.kafka import cause_code, is_refusal

            from mm.source.task import RangeResult

            if not is_refusal(cause_code(exc)):
                raise
            # a refusal goes back as a row, not a failed task: no retry helps, and the
            # driver ends the flow in one line instead of Spark's and py4j's traces
            for spec in ranges:
                r = RangeResult(spec.topic, spec.partition, spec.target_topic, spec.start, spec.end)
                r.error, r.refused = str(exc), True
                yield r.row()
            return
        for r in results.values():
            yield r.row()

    def _mirror_shard(
        self, ranges: Sequence[RangeSpec], threads: int, started: float
    ) -> dict[tuple[str, int], Any]:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(threads, thread_name_prefix="mm-mirror") as pool:
            results = {(r.topic, r.partition): r for r in self._mirror_all(pool, ranges)}
            if self.runtime.task_continue_seconds > 0:
                from mm.logs import get_logger
                from mm.source.sweep import keep_mirroring

                log = get_logger("mm.mirror.task")

                def sweep(specs: list[RangeSpec]) -> list[Any]:
                    t0 = time.monotonic()
                    out = self._mirror_all(pool, specs)
                    log.debug(
                        "sweep mirrored",
                        ranges=len(specs),
                        records=sum(r.records for r in out),
                        seconds=round(time.monotonic() - t0, 3),
                    )
                    return out

                keep_mirroring(
                    ranges,
                    results,
                    started + self.runtime.task_continue_seconds,
                    self._sweep_ends,
                    sweep,
                    max_per_partition=self._max_per_partition,
                )
        return results

    def _mirror_all(self, pool: Any, ranges: Sequence[RangeSpec]) -> list[Any]:
        """Mirror ``ranges`` concurrently, then acknowledge their offset syncs together;
        raises the first failure once every range has run to its end (each commits on
        its own)."""
        from mm.source.task import flush_syncs, reused_producer_states, worker_pool

        states: dict[tuple[str, int], Any] = {}
        if self.runtime.pool_max_clients > 0 and len(ranges) > 1:
            # one OffsetFetch for the ranges whose producer is reused (no own read then)
            states = reused_producer_states(self.runtime, list(ranges), worker_pool(self.runtime))
        # the ranges' last offset syncs, acknowledged together when all are done
        pending: list[Any] = []
        futures = [
            pool.submit(
                self._mirror_one, spec, pending, states.get((spec.target_topic, spec.partition))
            )
            for spec in ranges
        ]
        errors = [f.exception() for f in futures]
        flush_syncs(pending)
        failed = next((e for e in errors if e is not None), None)
        if failed is not None:
            raise failed
        return [f.result() for f in futures]

    def _sweep_ends(self, keys: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Source ends (read_committed) of ``keys``, with this worker's probe clients."""
        from mm.source.task import source_ends

        return source_ends(self.runtime, keys)

    def _mirror_one(self, spec: RangeSpec, pending: list[Any], state_hint: Any = None) -> Any:
        from mm.logs import get_logger
        from mm.source.task import PartitionStoppedError, RangeResult, mirror_range, worker_pool

        log = get_logger(
            "mm.mirror.task",
            flow=f"{self.runtime.source}->{self.runtime.target}",
            topic=spec.topic,
            partition=spec.partition,
        )
        started = time.monotonic()
        log.debug("range started", start=spec.start, end=spec.end)
        try:
            result = mirror_range(
                self.runtime,
                spec,
                log=log.warning,
                # 0 = every range builds and closes its own clients
                # (mm.mirror.pool.max.clients, see FlowRuntime.pool_max_clients)
                pool=worker_pool(self.runtime) if self.runtime.pool_max_clients > 0 else None,
                pending_syncs=pending,
                state_hint=state_hint,
            )
            log.debug(
                "range mirrored",
                resumed_from=result.resumed_from,
                position=result.position,
                records=result.records,
                transactions=result.transactions,
                seconds=round(time.monotonic() - started, 3),
            )
        except PartitionStoppedError as exc:
            # stops this partition only; the driver reports it every batch until fixed
            log.error("partition stopped", error=str(exc))
            result = exc.result or RangeResult(
                spec.topic, spec.partition, spec.target_topic, spec.start, spec.end
            )
            result.error = str(exc)
        return result
