"""`mm drill`: a workload, the DR scenarios, the figures, on embedded clusters or
(``-c FILE``, :class:`mm.drill.external.ExternalSetup`) on the user's own.

Order of events (each scenario on its own topic and groups, so one's records never
count in another's figures):

1. clusters A (durable: it must come back for failback) and B; the mirror,
   checkpoint and heartbeat jobs started as an operator starts them;
2. **switchover**: producers and groups run on A; producers stop, groups stop,
   `mm switchover` moves the groups, they resume on B;
3. **failover**: the same workload; A's broker dies under load (see below);
   the mirror jobs are stopped (as an operator would, so nothing from A reaches B
   once it is back), `mm failover` moves the groups from B's checkpoints, they
   resume on B;
4. **failback**: A back; `mm failback` quarantines what A holds past the failover
   point and moves the failover's groups back to A, where they resume: none may
   process a record twice more than it had before, or never process one.

The disaster: ``freeze`` (the default) stops A's broker with SIGSTOP, and failback
resumes it (SIGCONT): to every client a frozen broker is a dead host, and A comes
back with what it acknowledged. ``kill`` SIGKILLs A and restarts it: Apache Kafka
recovers its logs from disk; the embedded broker (where Kafka's jars are absent,
or ``--broker tansu``) needs a durable A, whose storage (S3 on a local moto server)
is slow here (mirror micro-batches of 1-12 s against a few hundred ms in memory),
so its figures then measure that storage more than the mirror. The drill's own
clusters run on Apache Kafka where its jars are present (:mod:`mm.embedded.clusters`).

On the user's clusters (``-c``) nothing of theirs is touched: the drill's topics,
groups and aliases carry its run's mark (:mod:`mm.drill.external`), it runs no
`mm heartbeat` (A's ``heartbeats`` topic is the user's), and the disaster is
simulated: the drill SIGKILLs its own mirror and checkpoint jobs while its producers
still write to A, which keeps running (failback: A never went down). On close it
deletes everything carrying the mark on both clusters, or lists it with ``--keep``
(:mod:`mm.drill.cleanup`).

Consumers on B run at full speed so a drill stays bounded; RTO "caught up" is when
a group has processed every record B holds.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import pyarrow.parquet as pq
from confluent_kafka import KafkaException
from confluent_kafka.admin import NewTopic
from mm_client.checkpoints_reader import read_checkpoints
from mm_client.cluster_errors import CheckpointsUnavailableError
from mm_client.kafka import new_admin
from mm_client.kafka.errors import wrap

from mm.config import FlowConfig, MirrorConfig, load_config
from mm.config.librdkafka import Role
from mm.dr.transactions import abort_args, open_transactions
from mm.drill.accounting import (
    GroupFigures,
    LossFigures,
    RecordId,
    Verdict,
    describe_estimate,
    group_figures,
    judge_failover,
    judge_switchover,
    loss_estimate,
    loss_figures,
    lost_ids,
    twice_bound,
)
from mm.drill.external import DrillNames, ExternalSetup, render_properties
from mm.drill.jobs import Job, mm_env, run_command
from mm.drill.report import (
    DrillReport,
    GroupReport,
    ProofRow,
    ScenarioReport,
    Series,
    latency_stats,
)
from mm.drill.scenarios import SCENARIOS
from mm.drill.workload import (
    GroupConsumer,
    GroupLog,
    Processed,
    SeqProducer,
    TargetWatcher,
    decode,
    end_dead_sessions,
    restart_transactional,
    wait_until,
)
from mm.embedded import EmbeddedClusters
from mm.embedded.clusters import BROKER_NAMES
from mm.embedded.kafka_jars import require_jars
from mm.embedded.kraft import KRaftCluster, java_cmd
from mm.errors import MirrorError
from mm.kafka.committed import TO_THE_END
from mm.verify.reads import committed_offsets, log_bounds, log_ends

PARTITIONS = 6
CHECKPOINT_WAIT_S = 120.0
# a transaction still open this long after its producer restarted hangs
HANGING_AFTER_S = 10.0
TRANSACTIONS_TOOL = "org.apache.kafka.tools.TransactionsCommand"  # kafka-transactions.sh
SESSION_WAIT_S = 60.0  # joining a group on A to end its dead members' sessions
RESUME_WAIT_S = 120.0  # groups back on A until they processed every acknowledged record
EMBEDDED_NAMES = DrillNames("drill", "A", "B")
NOTE = (
    "Embedded clusters: the transactional producer commits every transaction (its commit "
    "markers leave offset gaps) but aborts none, because the embedded broker serves "
    "aborted records to read_committed readers, which Apache Kafka never does; figures "
    "count only records A acknowledged. Consumers resume on B at full speed."
)
EXTERNAL_NOTE = (
    "Your clusters (-c): the drill used its own topics and groups only. The disaster was "
    "simulated: the drill's mirror, checkpoint jobs were SIGKILLed while its producers "
    "still wrote to A, which kept running; the loss and RPO figures measure the mirror's "
    "lag when its jobs died, not the loss of a broker. Transactions are committed, none "
    "aborted (as on the embedded clusters, so the figures compare). Consumers resume on B "
    "at full speed."
)
DISASTERS = {
    "freeze": "A's broker frozen (SIGSTOP), resumed for failback",
    "kill": "A's broker killed (SIGKILL), restarted for failback",
    "simulated": "simulated: the drill's own mirror and checkpoint jobs killed (SIGKILL); "
    "A kept running",
}

# (speed label, seconds per record on A, stop after this share of the workload)
GROUPS: tuple[tuple[str, float, float | None], ...] = (
    ("keeping-up", 0.0, None),
    ("lagging", 0.012, None),
    ("stopped", 0.0, 0.5),
)


@dataclass
class DrillOptions:
    duration: float = 20.0  # seconds of workload per scenario
    rate: float = 100.0  # records/s of the plain producer (the transactional one: half)
    scenarios: Sequence[str] = SCENARIOS
    disaster: str = "freeze"  # or "kill"; "simulated" with ``external`` (module docstring)
    out: Path | None = None
    progress: Callable[[str], None] = print
    external: ExternalSetup | None = None  # -c FILE: the user's clusters, not embedded ones
    keep: bool = False  # external: leave the drill's topics and groups for a look
    broker: str = "auto"  # the drill's own clusters: kafka, tansu or auto (mm.embedded.clusters)


@dataclass
class _Workload:
    topic: str
    producers: list[SeqProducer]
    logs: dict[str, GroupLog]
    consumers: list[GroupConsumer]
    watcher: TargetWatcher
    started: float = field(default_factory=time.time)

    def acked(self) -> dict[RecordId, float]:
        out: dict[RecordId, float] = {}
        for p in self.producers:
            out.update(p.acked_snapshot())
        return out


class Drill:
    """One drill run: owns the clusters, the jobs and the figures."""

    def __init__(self, opts: DrillOptions, run_dir: Path) -> None:
        self.opts, self.run_dir = opts, run_dir
        self.ext = opts.external
        if self.ext is not None and opts.disaster != "simulated":
            raise MirrorError(f"disaster {opts.disaster!r} on external clusters: only simulated")
        self.names = EMBEDDED_NAMES if self.ext is None else self.ext.names
        self.logs_dir = run_dir / "logs"
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        self.clusters = (
            EmbeddedClusters(run_dir / "brokers", broker=opts.broker) if self.ext is None else None
        )
        self.series = Series()
        self.reports: list[ScenarioReport] = []
        self.jobs: list[Job] = []
        self.a = self.b = ""
        self.config = run_dir / "mm.properties"
        # the drill's files holding the user's connection settings: owner-only, and
        # deleted with the drill's topics
        self._credential_files = [self.config]
        self.cfg: MirrorConfig | None = None
        self.flow: FlowConfig | None = None
        # the derived config holds the user's MM_* overrides already
        self.env = mm_env(overrides=self.ext is None)
        self.cleanup: dict[str, list[str]] = {}
        self._lost_at_failover: set[RecordId] = set()
        self._failover_workload: _Workload | None = None
        self._failover_extra: dict[str, Any] = {}

    # --- set-up ----------------------------------------------------------------------
    def start(self) -> None:
        if self.ext is not None:
            self._start_external(self.ext)
        else:
            self._start_embedded()
        for name in ("mirror", "checkpoint", "heartbeat"):
            if name == "heartbeat" and self.ext is not None:
                continue  # it would write to A's `heartbeats` topic: the user's
            self.jobs.append(Job(name, self.config, self.logs_dir, name, env=self.env))
        started = ", ".join(f"mm {j.name}" for j in self.jobs)
        self.opts.progress(f"started {started} (Spark); waiting for the mirror")
        self._wait_mirror_ready()

    def _start_external(self, ext: ExternalSetup) -> None:
        say = self.opts.progress
        # it holds the user's connection settings (credentials too): owner-only
        self.config.touch(mode=0o600)
        self.config.write_text(render_properties(ext.properties))
        self._load_config()
        self.a, self.b = (ext.bootstrap[ext.user_source], ext.bootstrap[ext.user_target])
        say(
            f"clusters (yours, from -c): {ext.user_source} {self.a} as {self.names.source}, "
            f"{ext.user_target} {self.b} as {self.names.target}; drill topics and groups "
            f"{self.names.prefix}-*"
        )
        for warning in ext.warnings:
            say(f"warning: {warning}")
        # the broker's default replication factor: a real cluster's, not 1
        self._create_topics(replication_factor=-1)

    def _create_topics(self, replication_factor: int) -> None:
        admin = new_admin(self._client("source", "admin"))
        topics = [self.names.topic(s) for s in ("switchover", "failover", "ready")]
        new = [NewTopic(t, PARTITIONS, replication_factor) for t in topics]
        # the user's alias on their clusters (the run's own is in no message they read)
        cluster = "A" if self.ext is None else self.ext.user_source
        for topic, f in admin.create_topics(new).items():
            try:
                f.result(30)
            except KafkaException as exc:
                raise wrap(exc, f"create the drill's topic {topic} on cluster {cluster}") from exc

    def _load_config(self) -> None:
        # the drill wrote this file: the user's keys were checked when -c was read
        self.cfg = load_config(self.config, env={}, check_keys=False)
        self.flow = self.cfg.flow(self.names.source, self.names.target)

    def _client(self, which: Literal["source", "target"], role: Role) -> dict[str, str]:
        """librdkafka settings of the drill's source or target cluster for ``role``."""
        assert self.cfg is not None, "start() loads the config"
        alias = self.names.source if which == "source" else self.names.target
        return dict(self.cfg.cluster(alias).librdkafka(role))

    def remote(self, topic: str) -> str:
        assert self.flow is not None, "start() loads the config"
        return self.flow.policy().format_remote_topic(self.names.source, topic)

    def _start_embedded(self) -> None:
        assert self.clusters is not None
        say = self.opts.progress
        durable = self.opts.disaster == "kill"
        if durable:  # the embedded broker's A on durable storage (Apache Kafka's always is)
            self.clusters.add("A", durable=True)
        infos = self.clusters.start(("A", "B"))  # side by side: Apache Kafka takes seconds
        self.a, self.b = infos["A"].bootstrap_servers, infos["B"].bootstrap_servers
        profile = infos["A"].profile
        # the embedded broker's durable storage answers a fetch it cannot fill within
        # the wait with nothing, and the mirror's 10 ms default wait then never reads
        # a backlog of many small batches (measured: 0 records in 10 s)
        slow_fetch = durable and profile == "embedded"
        say(
            f"clusters ({BROKER_NAMES[self.clusters.broker]}): A {self.a}"
            f"{' (durable)' if durable else ''}, B {self.b}"
        )
        self.config.write_text(
            "# written by mm drill\n"
            "clusters = A, B\n"
            f"A.bootstrap.servers = {self.a}\n"
            f"B.bootstrap.servers = {self.b}\n"
            f"mm.broker.profile = {profile}\n"
            "A->B.enabled = true\n"
            "A->B.topics = drill-.*\n"
            "A->B.groups = drill-.*\n"
            "A->B.emit.checkpoints.interval.seconds = 1\n"
            + ("A.consumer.fetch.max.wait.ms = 500\n" if slow_fetch else "")
            # the drill's groups appear after the checkpoint job started
            + "A->B.refresh.groups.interval.seconds = 2\n"
            "A->B.refresh.groups.interval.seconds = 2\n"
            f"mm.state.dir = {self.run_dir / 'state'}\n"
        )
        self._load_config()
        self._create_topics(replication_factor=1)

    def _wait_mirror_ready(self) -> None:
        topic = self.names.topic("ready")
        probe = SeqProducer("ready", self._client("source", "producer"), topic, 20.0)
        watcher = TargetWatcher(
            self._client("target", "consumer"),
            self.remote(topic),
            PARTITIONS,
            f"{self.names.prefix}-watcher",
        )
        probe.start()
        watcher.start()
        try:
            if not wait_until(lambda: bool(watcher.snapshot()) or not self._jobs_alive(), 240):
                raise MirrorError("the mirror copied nothing to B within 240 s")
            if not self._jobs_alive():
                dead = [j for j in self.jobs if not j.alive()]
                raise MirrorError(
                    f"mm {dead[0].name} exited ({dead[0].proc.returncode}): "
                    f"{dead[0].why_it_ended()}"
                )
        finally:
            probe.stop()
            watcher.stop()
            probe.join(10)
            watcher.join(10)

    def _jobs_alive(self) -> bool:
        return all(j.alive() for j in self.jobs)

    def stop_jobs(self) -> None:
        for job in self.jobs:
            job.terminate()  # all at once: each takes seconds to stop Spark
        for job in self.jobs:
            job.stop()
        self.jobs = []

    def kill_jobs(self) -> None:
        for job in self.jobs:
            job.kill()
        self.jobs = []

    def close(self) -> None:
        self.stop_jobs()
        if self.clusters is not None:
            proc = self.clusters["A"].process if "A" in self.clusters.clusters else None
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGCONT)  # a frozen broker cannot stop gracefully
            self.clusters.stop()
            return
        if self.cfg is None or self.ext is None:
            return  # nothing was created
        from mm.drill.cleanup import clean_up, kept

        admins = {
            self.ext.user_source: self._client("source", "admin"),
            self.ext.user_target: self._client("target", "admin"),
        }
        if self.opts.keep:
            self.cleanup = kept(self.names, admins)
        else:
            self.cleanup = clean_up(self.names, admins)
            # the drill's copies of the user's credentials go with the topics
            for path in self._credential_files:
                path.unlink(missing_ok=True)

    # --- workload --------------------------------------------------------------------
    def _workload(self, scenario: str) -> _Workload:
        topic = self.names.topic(scenario)
        rate = self.opts.rate
        on_a = self._client("source", "producer")
        txn_id = f"{self.names.prefix}-{scenario}-txn"
        producers = [
            SeqProducer(f"{scenario}-plain", on_a, topic, rate),
            # no aborted transactions on the embedded broker: it serves their records
            # to read_committed readers, so the mirror copies them (Apache Kafka does
            # not) and translations past them cannot be exact; commit markers still
            # leave offset gaps
            SeqProducer(
                f"{scenario}-txn",
                on_a,
                topic,
                rate / 2,
                txn_size=5,
                abort_every=0,
                transactional_id=txn_id,
            ),
        ]
        logs, consumers = {}, []
        for speed, delay, stop_share in GROUPS:
            log = GroupLog(self.names.group(scenario, speed), speed)
            logs[log.group] = log
            consumers.append(
                GroupConsumer(
                    log,
                    "A",
                    self._client("source", "consumer"),
                    topic,
                    delay=delay,
                    stop_after=None if stop_share is None else stop_share * self.opts.duration,
                )
            )
        watcher = TargetWatcher(
            self._client("target", "consumer"),
            self.remote(topic),
            PARTITIONS,
            f"{self.names.prefix}-watcher",
        )
        w = _Workload(topic, producers, logs, consumers, watcher)
        for t in (*producers, *consumers, watcher):
            t.start()
        return w

    def _run_for(self, w: _Workload, seconds: float, label: str) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            time.sleep(min(2.0, max(0.0, deadline - time.monotonic())))
            self._sample(w)
            acked = w.acked()
            on_b = len(w.watcher.snapshot().keys() & acked.keys())
            groups = ", ".join(f"{g.speed} {len(g.snapshot())}" for g in w.logs.values())
            self.opts.progress(
                f"  {label}: {len(acked)} acknowledged on A, {on_b} on B; processed: {groups}"
            )

    def _sample(self, w: _Workload) -> None:
        now = time.time()
        for log in w.logs.values():
            done = log.snapshot()
            by_cluster: dict[str, int] = {}
            for p in done:
                by_cluster[p.cluster] = by_cluster.get(p.cluster, 0) + 1
            for cluster, n in by_cluster.items():
                self.series.positions.setdefault(log.group, []).append((now, cluster, n))

    def _consume_on_b(self, w: _Workload) -> list[GroupConsumer]:
        on_b = self._client("target", "consumer")
        remote = self.remote(w.topic)
        consumers = [GroupConsumer(log, "B", on_b, remote) for log in w.logs.values()]
        for c in consumers:
            c.start()
        return consumers

    def _until_caught_up(
        self, w: _Workload, consumers: list[GroupConsumer], moved_from: float, timeout: float
    ) -> dict[str, float | None]:
        """Per group, seconds from ``moved_from`` until it processed every record B holds
        that A acknowledged (None: not within ``timeout``)."""
        caught: dict[str, float | None] = {g: None for g in w.logs}
        acked = w.acked()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(v is None for v in caught.values()):
            time.sleep(0.5)
            self._sample(w)
            want = w.watcher.snapshot().keys() & acked.keys()
            for log in w.logs.values():
                if caught[log.group] is None and want <= {p.record for p in log.snapshot()}:
                    caught[log.group] = time.time() - moved_from
        for c in consumers:
            c.stop()
        for c in consumers:
            c.join(30)
        return caught

    def _until_checkpointed(self, w: _Workload, scenario: str, timeout: float) -> None:
        """Runs the workload on until B holds a checkpoint of every group on every
        partition of the topic: on a loaded machine the checkpoint job can lag the
        whole workload, and the mirror copies a partition whose first record arrived
        during a micro-batch's continuation only from the next micro-batch on (seen:
        two of six partitions never mirrored before an 8 s workload's disaster). A
        disaster strikes a mirror in its steady state; one before it ever copied a
        partition measures start-up. After ``timeout`` the failover goes on anyway."""
        deadline = time.monotonic() + timeout
        # a group that stopped half-way may have stopped before the job first saw it
        running = {g for g, log in w.logs.items() if log.speed != "stopped"}
        missing = running
        while time.monotonic() < deadline:
            try:
                snap = read_checkpoints(
                    self._client("target", "consumer"),
                    self.names.source,
                    self.names.groups_regex(scenario),
                    10.0,
                    replication_policy=self.flow.policy() if self.flow else None,
                )
                # the stopped group too, once the job has seen it
                missing = {
                    g
                    for g in w.logs
                    if (g in running and g not in snap.groups)
                    or (g in snap.groups and len(snap.checkpoints(g)) < PARTITIONS)
                }
            except CheckpointsUnavailableError:
                pass  # no checkpoints topic yet: the job has not emitted any
            if not missing:
                return
            self._run_for(w, 2.0, f"{scenario}: waiting for checkpoints of {len(missing)} groups")
        self.opts.progress(
            f"{scenario}: no checkpoints on every partition for {', '.join(sorted(missing))} yet"
        )

    def _abort_hanging(self, topic: str) -> list[str]:
        """Transactions still open on A's ``topic`` once its producer restarted, aborted
        with Kafka's tool as `mm failback`'s message says; what was done.

        A frozen one-node Kafka cluster fences itself when it resumes (its controller
        finds its own broker's session expired): its partitions are leaderless for a
        moment, and Kafka 4.3.1's coordinator, rolling the frozen producer's timed-out
        transaction back in that moment, takes them for deleted and skips their
        markers (seen in a CI run). That transaction then hangs: no producer ends it.
        """
        cluster = self.clusters["A"] if self.clusters is not None else None
        if not isinstance(cluster, KRaftCluster):
            return []  # the embedded broker: its producer's restart ended it
        assert self.cfg is not None, "start() loads the config"
        conf = self._client("source", "consumer")
        profile = self.cfg.cluster(self.names.source).profile
        keys = [(topic, p) for p in range(PARTITIONS)]
        deadline = time.monotonic() + SESSION_WAIT_S
        open_since: float | None = None
        # markers of a transaction aborted just now may still be on their way
        while True:
            try:
                ends = {k: hi for k, (_lo, hi) in log_bounds(conf, keys, 30, profile).items()}
                hanging = open_transactions(ends, log_ends(conf, keys, 30))
            except MirrorError:  # A's partitions still without a leader: read again
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)
                continue
            if not hanging:
                return []
            open_since = open_since or time.monotonic()
            if time.monotonic() - open_since >= HANGING_AFTER_S:
                break
            time.sleep(1)
        done = []
        for (t, p), (start, _) in sorted(hanging.items()):
            args = abort_args(t, p, start)
            cmd = java_cmd(require_jars(), TRANSACTIONS_TOOL, "--bootstrap-server", self.a, *args)
            run = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
            if run.returncode != 0:
                raise MirrorError(
                    f"kafka-transactions.sh {' '.join(args)} on A exited {run.returncode}: "
                    f"{(run.stdout + run.stderr)[-2000:]}"
                )
            done.append(
                f"a transaction hung on A in {t}[{p}] from offset {start} (Kafka's "
                "coordinator skipped its markers while A was fenced on resuming): aborted "
                f"with kafka-transactions.sh {' '.join(args)}, as mm failback's message says"
            )
        return done

    def _stop_workload(self, w: _Workload, *, crash: bool = False) -> None:
        """Stop producers and consumers on A; ``crash``: as their cluster died under
        them (no last commit, no wait for a close the dead cluster cannot answer)."""
        for p in w.producers:
            p.stop()
        for c in w.consumers:
            c.stop(commit=not crash)
        deadline = time.monotonic() + (2 if crash else 30)
        for t in (*w.producers, *w.consumers):
            t.join(max(0.0, deadline - time.monotonic()))

    def _keep_records(self, w: _Workload, extra: dict[str, Any] | None = None) -> None:
        """Every record's fate, for whoever checks the figures: acknowledged on A (when),
        on B (where), processed by each group (where, when)."""
        acked = w.acked()
        doc = {
            "acked": [[p, s, t] for (p, s), t in sorted(acked.items())],
            "on_target": [[p, s, *at] for (p, s), at in sorted(w.watcher.snapshot().items())],
            "groups": {
                g: [[*x.record, x.cluster, x.partition, x.offset, x.at] for x in log.snapshot()]
                for g, log in w.logs.items()
            },
            **(extra or {}),
        }
        (self.run_dir / "records").mkdir(exist_ok=True)
        (self.run_dir / "records" / f"{w.topic}.json").write_text(json.dumps(doc))

    def _figures(
        self, w: _Workload, moved_at: float, caught: dict[str, float | None], loss: LossFigures
    ) -> tuple[list[GroupFigures], list[GroupReport], set[RecordId]]:
        acked = w.acked()
        lost = lost_ids(acked, set(w.watcher.snapshot()))
        figures, reports = [], []
        for log in w.logs.values():
            done = log.snapshot()
            before = [p.record for p in done if p.cluster == "A" and p.record in acked]
            after = [p.record for p in done if p.cluster == "B" and p.record in acked]
            g = group_figures(log.group, before, after, acked.keys(), lost)
            first_b = next((p.at for p in done if p.cluster == "B"), None)
            up_to_date = caught[log.group]
            if up_to_date is not None and first_b is not None:
                # caught up on B: not before it processed anything there
                up_to_date = max(up_to_date, first_b - moved_at)
            figures.append(g)
            reports.append(
                GroupReport(
                    g,
                    rto_first_s=None if first_b is None else round(first_b - moved_at, 3),
                    rto_caught_up_s=None if up_to_date is None else round(up_to_date, 3),
                )
            )
        return figures, reports, lost

    def _latency_before(self, w: _Workload, until: float) -> list[float]:
        samples = [(t, ms) for t, ms in w.watcher.latency if t <= until]
        # the chart gets at most one point per 0.5 s (the worst of it)
        buckets: dict[int, float] = {}
        for t, ms in samples:
            k = int(t * 2)
            buckets[k] = max(buckets.get(k, 0.0), ms)
        self.series.latency_ms.extend((k / 2, ms) for k, ms in sorted(buckets.items()))
        return [ms for _, ms in samples]

    def _kafka_view(self, w: _Workload, clusters: Sequence[str]) -> list[str]:
        """Drops the deliveries on ``clusters`` ("A", "B") of records that are not
        committed there by Apache Kafka's read_committed rule (raw log read): the
        embedded broker serves a transaction's records before it is aborted (the
        mirror's, when a range fails and is retried; a producer's that died), and
        Apache Kafka never does. The figures are then what Kafka's consumers would
        have seen. Returns a sentence per cluster where something was dropped."""
        assert self.cfg is not None, "start() loads the config"
        where = {
            "A": (self.names.source, w.topic),
            "B": (self.names.target, self.remote(w.topic)),
        }
        notes = []
        for cluster in clusters:
            alias, topic = where[cluster]
            seen = {
                (p.partition, p.offset)
                for log in w.logs.values()
                for p in log.snapshot()
                if p.cluster == cluster
            }
            if cluster == "B":
                seen |= set(w.watcher.snapshot().values())
            if not seen:
                continue
            visible: set[tuple[int, int]] = set()
            for part in sorted({p for p, _ in seen}):
                low = min(o for p, o in seen if p == part)
                offsets = committed_offsets(
                    self.cfg.cluster(alias), topic, part, low, TO_THE_END, 30.0
                )
                visible.update((part, o) for o in offsets)
            dropped = _drop_invisible(w, cluster, visible)
            if dropped:
                notes.append(
                    f"{dropped} deliveries on {cluster} of records not committed there (the "
                    "embedded broker serves transactions' records before their abort; Apache "
                    "Kafka never does) are not counted"
                )
        return notes

    # --- scenarios -------------------------------------------------------------------
    def switchover(self) -> ScenarioReport:
        say = self.opts.progress
        say(f"switchover: workload on A for {self.opts.duration:.0f}s")
        w = self._workload("switchover")
        self._run_for(w, self.opts.duration, "switchover")
        self._stop_workload(w)
        at = time.time()
        self.series.events.append((at, "switchover"))
        say("switchover: producers and consumers stopped; running mm switchover")
        res = run_command(
            self.config,
            self.logs_dir,
            "switchover",
            "--flow",
            self.names.flow,
            "--groups",
            self.names.groups_regex("switchover"),
            "--settle",
            "2",
            "--timeout",
            "180",
            "--json",
            env=self.env,
        )
        moved_at = time.time()
        doc = res.json()
        say(f"switchover: mm switchover exited {res.returncode} after {res.seconds:.1f}s")
        consumers = self._consume_on_b(w)
        caught = self._until_caught_up(w, consumers, at, 120)
        latency = self._latency_before(w, at)
        w.watcher.stop()
        notes = self._kafka_view(w, ["B"])
        loss = loss_figures(w.acked(), set(w.watcher.snapshot()), at)
        figures, reports, _ = self._figures(w, at, caught, loss)
        self._keep_records(w, {"switchover": doc})
        verdict = judge_switchover(loss, figures)
        reasons = list(verdict.reasons) + notes
        if res.returncode != 0:
            reasons.append(f"mm switchover exited {res.returncode}: {doc.get('message')}")
        return ScenarioReport(
            "switchover",
            verdict.passed and res.returncode == 0,
            reasons,
            None,
            moved_at,
            loss,
            reports,
            replication_latency_ms=latency_stats(latency),
        )

    def failover(self) -> ScenarioReport:
        say = self.opts.progress
        what = "the mirror jobs are killed" if self.ext is not None else "A is killed"
        say(f"failover: workload on A for {self.opts.duration:.0f}s, then {what}")
        w = self._workload("failover")
        self._run_for(w, self.opts.duration, "failover")
        self._until_checkpointed(w, "failover", CHECKPOINT_WAIT_S)
        if self.ext is not None:
            # never a broker of the user's: the drill's own jobs die, mid-batch, while
            # its producers still write to A; from then on A's records never reach B
            self.kill_jobs()
            at = time.time()
            self.series.events.append((at, "disaster (simulated)"))
            say("failover: mirror jobs killed (SIGKILL); stopping the producers and consumers")
            self._stop_workload(w, crash=True)
        else:
            at = self._fail_a()
            self._stop_workload(w, crash=True)
            # an operator stops the A->B jobs at failover: once A is back, nothing it
            # holds past the failover point may reach B
            self.stop_jobs()
        time.sleep(1.0)  # the watcher reads the last of what B holds
        res = run_command(
            self.config,
            self.logs_dir,
            "failover",
            "--flow",
            self.names.flow,
            "--groups",
            self.names.groups_regex("failover"),
            "--json",
            env=self.env,
        )
        moved_at = time.time()
        self.series.events.append((moved_at, "failover"))
        doc = res.json()
        say(f"failover: mm failover exited {res.returncode} after {res.seconds:.1f}s")
        consumers = self._consume_on_b(w)
        caught = self._until_caught_up(w, consumers, at, 120)
        latency = self._latency_before(w, at)
        w.watcher.stop()
        notes = self._kafka_view(w, ["B"])
        acked = w.acked()
        loss = loss_figures(acked, set(w.watcher.snapshot()), at)
        figures, reports, lost = self._figures(w, at, caught, loss)
        copies = w.watcher.snapshot()
        allowed = {
            g: twice_bound(
                [copies.get(p.record) for p in log.snapshot() if p.cluster == "A"],
                _resume_points(doc, g),
            )
            for g, log in w.logs.items()
        }
        self._failover_extra = {"failover": doc, "twice_allowed": allowed}
        self._keep_records(w, self._failover_extra)
        verdict: Verdict = judge_failover(figures, allowed)
        reasons = list(verdict.reasons) + notes
        point = doc.get("failover_point")
        # mm failover's own figure (exact, a lower bound, unknown): never a bare 0
        estimate = None if point is None else loss_estimate(point)
        if estimate is not None:
            say(f"failover: {describe_estimate(estimate, loss)}")
        if res.returncode != 0:
            reasons.append(f"mm failover exited {res.returncode}: {doc.get('message')}")
        self._lost_at_failover = lost
        self._failover_workload = w
        proof = doc.get("proof") or {}
        return ScenarioReport(
            "failover",
            verdict.passed and res.returncode == 0,
            reasons,
            at,
            moved_at,
            loss,
            reports,
            replication_latency_ms=latency_stats(latency),
            proof=None if not proof else [ProofRow(**r) for r in proof.get("partitions", [])],
            proof_message=proof.get("message"),
            loss_estimate=estimate,
        )

    def failback(self) -> ScenarioReport:
        say = self.opts.progress
        if self.clusters is None:
            say(
                "failback: A never went down; mm failback quarantines what it holds past "
                "the failover point"
            )
        elif self.opts.disaster == "kill":
            say("failback: restarting A (durable storage keeps what it acknowledged)")
            self.clusters["A"].restart()
        else:
            say("failback: resuming A (SIGCONT)")
            proc = self.clusters["A"].process
            if proc is None:
                raise MirrorError("cluster A is not running")
            proc.send_signal(signal.SIGCONT)
        self.series.events.append((time.time(), "failback"))
        w = self._failover_workload
        if w is None:
            raise MirrorError("the failback scenario needs the failover scenario")
        # The transaction the frozen producer left open on A: Apache Kafka aborts it
        # after transaction.timeout.ms, the embedded broker never does, and while it is
        # open that broker answers 0 as those partitions' read_committed end (measured;
        # Kafka answers the transaction's first offset), which mm failback must take for
        # "A lost records B has". End it as Kafka would, as the restarted application
        # would too: a producer with its transactional.id fences the dead one.
        for p in w.producers:
            if p.txn_size:
                restart_transactional(
                    self._client("source", "producer"), p.transactional_id, SESSION_WAIT_S
                )
        reasons = []
        if self.clusters is not None:
            for line in self._abort_hanging(w.topic):
                say(f"failback: {line}")
        dead = end_dead_sessions(
            self._client("source", "consumer"), sorted(w.logs), w.topic, SESSION_WAIT_S
        )
        reasons += [
            f"group {g}: its dead members on A stayed: {why}" for g, why in dead.items() if why
        ]
        quarantine = self.run_dir / "quarantine"
        res = run_command(
            self._failback_config(),
            self.logs_dir,
            "failback",
            "--flow",
            self.names.flow,
            "--groups",
            self.names.groups_regex("failover"),
            "--quarantine-dir",
            str(quarantine),
            "--json",
            env=self.env,
        )
        moved_at = time.time()
        doc = res.json()
        say(f"failback: mm failback exited {res.returncode} after {res.seconds:.1f}s")
        held = _quarantined(quarantine)
        lost = self._lost_at_failover
        if res.returncode != 0:
            reasons.append(f"mm failback exited {res.returncode}: {doc.get('message')}")
        missing = lost - held
        if missing:
            reasons.append(
                f"{len(missing)} records acknowledged on A and never mirrored are not in the "
                "quarantine"
            )
        back = groups_back(doc)
        not_back = {g: why for g, why in back.items() if why is not None}
        reasons += [f"group {g} not back on A: {why}" for g, why in sorted(not_back.items())]
        if set(back) != set(w.logs):
            reasons.append(f"mm failback reported groups {sorted(back)}, not {sorted(w.logs)}")
        moved = sorted(g for g, why in back.items() if why is None and g in w.logs)
        say(f"failback: {len(moved)} groups back on A, resuming there")
        verdict, reports, notes = self._resume_on_a(w, moved, moved_at, doc)
        reasons += verdict.reasons
        # the records file again, with what the groups processed back on A
        self._keep_records(w, {**self._failover_extra, "failback": doc, "back_at": moved_at})
        return ScenarioReport(
            "failback",
            res.returncode == 0 and not missing and not reasons,
            reasons + notes,
            None,
            moved_at,
            # of what the failover lost: how many the quarantine holds, how many it
            # does not (lost for good)
            LossFigures(len(lost), len(lost & held), len(missing), 0.0),
            reports,
            quarantined_records=_divergent(doc),
            content_compared=sum(
                int(r.get("content_depth_scanned") or 0) for r in doc.get("partitions", [])
            ),
            content_differs=int(doc.get("rewritten_partitions") or 0),
        )

    def _resume_on_a(
        self, w: _Workload, groups: list[str], moved_at: float, doc: dict[str, Any]
    ) -> tuple[Verdict, list[GroupReport], list[str]]:
        """The moved groups' consumers back on A, until each processed every record A
        acknowledged (the divergent ones included), then judged: nothing never
        processed, and nothing processed twice beyond the failover's repeats and the
        records it had processed on A before the disaster without committing them
        (at-least-once: those at or past where `mm failback` resumed it)."""
        if not groups:
            return Verdict(False, ("no group came back to A",)), [], []
        on_a = self._client("source", "consumer")
        consumers = [GroupConsumer(w.logs[g], "A", on_a, w.topic) for g in groups]
        for c in consumers:
            c.start()
        acked = set(w.acked())
        caught: dict[str, float | None] = dict.fromkeys(groups)
        deadline = time.monotonic() + RESUME_WAIT_S
        while time.monotonic() < deadline and any(v is None for v in caught.values()):
            time.sleep(0.5)
            self._sample(w)
            for g in groups:
                if caught[g] is None and acked <= {p.record for p in w.logs[g].snapshot()}:
                    caught[g] = time.time() - moved_at
        for c in consumers:
            c.stop()
        for c in consumers:
            c.join(30)
        notes = self._kafka_view(w, ["A", "B"])
        figures, reports, allowed = [], [], {}
        for g in groups:
            done = w.logs[g].snapshot()
            before = [p.record for p in done if p.at < moved_at]
            after = [p.record for p in done if p.at >= moved_at]
            done_on_a = [
                (p.partition, p.offset) for p in done if p.cluster == "A" and p.at < moved_at
            ]
            allowed[g] = (
                len(before) - len(set(before)) + twice_bound(done_on_a, _resume_points(doc, g))
            )
            fig = group_figures(g, before, after, acked)
            first = next((p.at for p in done if p.at >= moved_at), None)
            figures.append(fig)
            reports.append(
                GroupReport(
                    fig,
                    rto_first_s=None if first is None else round(first - moved_at, 3),
                    rto_caught_up_s=caught[g],
                )
            )
        errors = [f"group {c.log.group} on A: {c.error}" for c in consumers if c.error]
        verdict = judge_failover(figures, allowed)
        return Verdict(verdict.passed and not errors, (*verdict.reasons, *errors)), reports, notes

    def _fail_a(self) -> float:
        """The embedded disaster: A's broker frozen or killed; returns when."""
        assert self.clusters is not None
        proc = self.clusters["A"].process
        if proc is None:
            raise MirrorError("cluster A is not running")
        if self.opts.disaster == "kill":
            proc.kill()
        else:
            proc.send_signal(signal.SIGSTOP)
        at = time.time()
        self.series.events.append((at, "disaster"))
        how = "killed (SIGKILL)" if self.opts.disaster == "kill" else "frozen (SIGSTOP)"
        self.opts.progress(f"failover: A {how}; stopping the producers, consumers and mirror jobs")
        return at

    def _failback_config(self) -> Path:
        """The drill's config with the reverse flow B->A enabled, for `mm failback`
        only (the jobs keep mirroring A->B alone). Nothing is written on B during
        the drill, so it selects no topic: the groups still come back exactly."""
        path = self.run_dir / "mm-failback.properties"
        reverse = f"{self.names.target}->{self.names.source}"
        path.touch(mode=0o600)  # a copy of the drill's config: the user's credentials
        self._credential_files.append(path)
        path.write_text(
            self.config.read_text() + "# mm failback: the reverse flow (B's own topics to A)\n"
            f"{reverse}.enabled = true\n"
            f"{reverse}.topics = {re.escape(self.names.prefix)}-.*\n"
        )
        return path

    # --- whole drill -----------------------------------------------------------------
    def run(self) -> DrillReport:
        started = datetime.now(UTC)
        t0 = time.monotonic()
        self.start()
        for name in self.opts.scenarios:
            if name == "failback" and "failover" not in self.opts.scenarios:
                raise MirrorError("the failback scenario needs the failover scenario")
            report = getattr(self, name)()
            self.reports.append(report)
            self.opts.progress(f"{name}: {'PASS' if report.passed else 'FAIL'}")
        ext = self.ext
        return DrillReport(
            started_at=started.isoformat(timespec="seconds"),
            duration_s=round(time.monotonic() - t0, 1),
            clusters={"A": self.a, "B": self.b} if ext is None else dict(ext.bootstrap),
            embedded=ext is None,
            topic=", ".join(self.names.topic(s) for s in self.opts.scenarios if s != "failback"),
            partitions=PARTITIONS,
            note=NOTE if ext is None else EXTERNAL_NOTE,
            scenarios=self.reports,
            series=self.series,
            disaster=DISASTERS[self.opts.disaster],
            aliases={}
            if ext is None
            else {ext.user_source: self.names.source, ext.user_target: self.names.target},
        )


def _resume_points(doc: dict[str, Any], group: str) -> dict[int, int | None]:
    """Partition -> the target offset `mm failover` committed for ``group``."""
    for g in doc.get("groups", []):
        if g.get("group") == group:
            return {int(r["partition"]): r.get("after") for r in g.get("partitions", [])}
    return {}


def _drop_invisible(w: _Workload, cluster: str, visible: set[tuple[int, int]]) -> int:
    """Forget ``cluster``'s deliveries (and on B the watcher's copies) outside ``visible``."""

    def invisible(p: Processed) -> bool:
        return p.cluster == cluster and (p.partition, p.offset) not in visible

    if cluster == "B":
        w.watcher.forget(lambda where: where not in visible)
    return sum(log.drop(invisible) for log in w.logs.values())


def groups_back(doc: dict[str, Any]) -> dict[str, str | None]:
    """Per group `mm failback` reported: None when its position on A is exact (moved
    or already there, every partition translated exactly), else why not."""
    out: dict[str, str | None] = {}
    for g in doc.get("groups") or []:
        inexact = [p for p in g.get("partitions", []) if not p.get("exact")]
        if g.get("status") not in ("moved", "unchanged"):
            out[g["group"]] = f"not moved ({g.get('status')})"
        elif inexact:
            out[g["group"]] = f"{len(inexact)} partition(s) not exact"
        else:
            out[g["group"]] = None
    return out


def _quarantined(directory: Path) -> set[RecordId]:
    """The drill records among the quarantined ones (Parquet files of `mm failback`)."""
    held: set[RecordId] = set()
    for path in sorted(directory.glob("**/*.parquet")):
        for value in pq.read_table(path, columns=["value"]).column("value").to_pylist():
            decoded = decode(value)
            if decoded is not None:
                held.add(decoded[0])
    return held


def _divergent(doc: dict[str, Any]) -> int:
    return sum(int(r.get("records") or 0) for r in doc.get("partitions", []))
