"""Exactly-once mirroring under crashes and under a second instance of the job.

What "exactly once" means here: per partition, the target's committed records
(Kafka's read_committed view) are the source's committed records, in order,
each once. The target is read raw and the read_committed rule applied from its
transaction markers (tests/support/eos.py explains why: Tansu serves aborted
records to read_committed consumers). On a broker that is not Tansu the
consumer's own read_committed view must agree.

Records carry per-partition sequence numbers, so a duplicate, a loss or a
reordering shows as a difference of the two sequences.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.clusters import KafkaCluster
from support.eos import (
    BackgroundProducer,
    CommittedView,
    LogBatch,
    MirrorProcess,
    PartitionLog,
    Proc,
    TailWatch,
    committed_view,
    freeze_tree,
    kill_groups,
    log_events,
    mirrored_batches,
    read_log,
    record_value,
    signal_all,
    stale_starts,
    tree_description,
    wait_all_gone,
    wait_for_batches,
)
from support.mirror import (
    create_topic,
    describe_log,
    mirror_cmd,
    mirror_properties,
    read_offset_syncs,
    read_partitions,
    run_mirror_once,
)

PARTITIONS = 4
MIRROR_SETTINGS = {
    "mm.mirror.trigger.seconds": "0.5",
    # small ranges: many micro-batches, so many target transactions
    "mm.mirror.max.records.per.partition.per.batch": "2000",
}

# Small fetches and produce batches: a transaction's records reach the target in
# many requests spread over tens of milliseconds instead of one, so the window in
# which a transaction is open on the target (what a crash must survive) is wide
# enough to kill inside it.
SLOW_TRANSACTIONS = {
    "A.consumer.max.partition.fetch.bytes": "16384",
    "B.producer.batch.size": "16384",
    "B.producer.linger.ms": "1",
}

OVERLAP_SECONDS = 30
# records per partition on the source before the kill test's mirror starts: its first
# transactions copy them all, long enough to be caught open
FIRST_TRANSACTION_RECORDS = 20_000

KV = tuple[bytes | None, bytes | None]


class Runs:
    """Continuous `mm mirror` runs of one test; every process is killed at the end."""

    def __init__(self, config: Path, log_root: Path) -> None:
        self.config = config
        self.log_root = log_root
        self.started: list[MirrorProcess] = []
        self.trees: list[list[Proc]] = []
        self.freezes = 0

    def start(
        self, name: str, config: Path | None = None, env: dict[str, str] | None = None
    ) -> MirrorProcess:
        run = MirrorProcess(config or self.config, self.log_root / name, env=env)
        self.started.append(run)
        return run

    def snapshot(self, run: MirrorProcess) -> list[Proc]:
        tree = run.tree()
        self.trees.append(tree)
        return tree

    def kill(self, run: MirrorProcess, *, whole_tree: bool) -> list[Proc]:
        """kill -9 the run: its process group (JVM included), or every group of its tree
        (the PySpark daemon puts itself and its workers in a group of their own).
        Returns the processes the run had."""
        return self._kill(run, self.snapshot(run), whole_tree)

    def _kill(self, run: MirrorProcess, tree: list[Proc], whole_tree: bool) -> list[Proc]:
        if whole_tree:
            kill_groups(tree)
        else:
            kill_groups([p for p in tree if p.pgid == run.proc.pid])
            signal_all(tree, signal.SIGCONT)  # the rest may have been frozen
        run.proc.wait(30)
        return tree

    def kill_mid_transaction(
        self, run: MirrorProcess, watch: TailWatch, *, whole_tree: bool, timeout: float
    ) -> tuple[list[Proc], list[int]]:
        """kill -9 the run while a target transaction is open.

        Freezes the run (SIGSTOP), lets requests in flight land, and looks at the
        target: if a partition's last stable offset is below its high watermark, a
        transaction is open. It stays open only if its commit was not already asked
        for (the coordinator writes a commit's markers whether the producer runs or
        not: on a 208-partition topic a scan of the tails can see a commit's markers
        still on their way, for over a second on a loaded machine), so only the
        partitions whose transaction the coordinator holds as Ongoing are kept
        (where the cluster cannot say, those still open at a second look a moment
        later), and the kill lands inside their transaction for sure. Otherwise
        thaws the run and tries again a moment later.
        Returns (processes, partitions with an open transaction); [] at the deadline
        (then the run was killed anyway).
        """
        rng = random.Random()
        deadline = time.monotonic() + timeout
        while True:
            self.freezes += 1
            tree = freeze_tree(run.proc.pid)
            self.trees.append(tree)
            time.sleep(0.05)
            found = watch.open_transactions()
            if found:
                ongoing = watch.ongoing()
                if ongoing is None:
                    time.sleep(0.5)
                    ongoing = set(watch.open_transactions())
                found = sorted(set(found) & ongoing)
            if found or time.monotonic() > deadline:
                return self._kill(run, tree, whole_tree), found
            signal_all(tree, signal.SIGCONT)
            time.sleep(rng.uniform(0.02, 0.25))

    def close(self) -> None:
        for run in self.started:
            self.snapshot(run)
        kill_groups([p for tree in self.trees for p in tree])  # those still running
        for run in self.started:
            if run.running():
                run.proc.wait(30)


@pytest.fixture
def runs_factory(tmp_path: Path) -> Iterator[Callable[[Path], Runs]]:
    made: list[Runs] = []

    def make(config: Path) -> Runs:
        r = Runs(config, tmp_path / "runs")
        made.append(r)
        return r

    yield make
    for r in made:
        r.close()


def _source_views(bootstrap: str, topic: str, partitions: int) -> dict[int, list[KV]]:
    """Every partition's (key, value) pairs readable now (read_committed), through one
    consumer."""
    read = read_partitions(bootstrap, topic, range(partitions))
    return {p: [(r.key, r.value) for r in recs] for p, recs in read.items()}


def _target_views(
    bootstrap: str, topic: str, partitions: int = PARTITIONS
) -> dict[int, CommittedView]:
    return {p: committed_view(read_log(bootstrap, topic, p)) for p in range(partitions)}


def _assert_exactly_once(
    cluster_a: KafkaCluster,
    cluster_b: KafkaCluster,
    topic: str,
    producer: BackgroundProducer,
) -> dict[int, CommittedView]:
    """Target == source per partition (read_committed), and the source is what was produced."""
    target_topic = f"A.{topic}"
    views = _target_views(cluster_b.bootstrap_servers, target_topic, producer.partitions)
    sources = _source_views(cluster_a.bootstrap_servers, topic, producer.partitions)
    consumer_views = _source_views(cluster_b.bootstrap_servers, target_topic, producer.partitions)
    problems = []
    for p in range(producer.partitions):
        source = sources[p]
        produced = [
            (b"k-" + record_value(p, i), record_value(p, i)) for i in range(producer.produced[p])
        ]
        assert source == produced, f"source {topic}[{p}] is not what was produced"
        target = [(r.key, r.value) for r in views[p].records]
        if target != source:
            first = _first_difference(source, target)
            near = views[p].records[first - 1].offset if 0 < first <= len(target) else None
            problems.append(
                f"{_difference(p, source, target)}\n"
                f"{describe_log(cluster_b.bootstrap_servers, target_topic, p, near)}"
            )
        consumer_view = consumer_views[p]
        if cluster_b.kind != "embedded":
            # a real read_committed consumer must see the same (Tansu: see module docstring)
            assert consumer_view == target, f"{target_topic}[{p}]: consumer view differs"
        elif len(consumer_view) != len(target):
            print(
                f"{target_topic}[{p}]: a read_committed consumer on Tansu sees "
                f"{len(consumer_view) - len(target)} records of aborted transactions"
            )
    assert not problems, "\n".join(problems)
    return views


def _drained_exactly_once(
    config: Path,
    cluster_a: KafkaCluster,
    cluster_b: KafkaCluster,
    topic: str,
    producer: BackgroundProducer,
    kills: list[str],
) -> dict[int, CommittedView]:
    """After the kills: the mirror drained with --once, then :func:`_assert_exactly_once`."""
    print(f"produced {producer.total} records; " + "; ".join(kills))
    drain = run_mirror_once(config)
    assert drain.returncode == 0, drain.describe()
    views = _assert_exactly_once(cluster_a, cluster_b, topic, producer)
    print(f"drain (--once) took {drain.seconds:.0f}s; {_summary(views)}")
    return views


def _difference(p: int, source: list[KV], target: list[KV]) -> str:
    seen: dict[KV, int] = {}
    for kv in target:
        seen[kv] = seen.get(kv, 0) + 1
    dups = sum(n - 1 for n in seen.values() if n > 1)
    src = set(source)
    missing = sum(1 for kv in source if kv not in seen)
    extra = sum(1 for kv in seen if kv not in src)
    first = _first_difference(source, target)
    return (
        f"partition {p}: source {len(source)} records, target {len(target)}: "
        f"{dups} duplicates, {missing} missing, {extra} unknown; first difference at "
        f"index {first}: source {source[first] if first < len(source) else '<end>'!r} "
        f"target {target[first] if first < len(target) else '<end>'!r}"
    )


def _first_difference(source: list[KV], target: list[KV]) -> int:
    return next(
        (i for i, (a, b) in enumerate(zip(source, target, strict=False)) if a != b),
        min(len(source), len(target)),
    )


def both(first: MirrorProcess, second: MirrorProcess) -> list[tuple[str, MirrorProcess]]:
    return [("first", first), ("second", second)]


def _target_count(bootstrap: str, topic: str) -> int:
    return sum(len(v.records) for v in _target_views(bootstrap, topic).values())


def _summary(views: dict[int, CommittedView]) -> str:
    return (
        f"target: {sum(len(v.records) for v in views.values())} records, "
        f"{sum(v.committed_txns for v in views.values())} committed and "
        f"{sum(v.aborted_txns for v in views.values())} aborted transactions "
        f"({sum(v.aborted_records for v in views.values())} aborted records), "
        f"{sum(v.open_records for v in views.values())} records in open transactions"
    )


def _kill_setup(
    cluster_a: KafkaCluster,
    cluster_b: KafkaCluster,
    topic: str,
    tmp_path: Path,
    settings: dict[str, str],
    partitions: int = PARTITIONS,
) -> tuple[int, random.Random, str, Path]:
    """A kill test's seed (printed), its random source, its topic (created) and the
    mirror's configuration (``settings`` with slow transactions)."""
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    create_topic(cluster_a.bootstrap_servers, topic, partitions)
    config = mirror_properties(
        tmp_path / "mm.properties",
        cluster_a.bootstrap_servers,
        cluster_b.bootstrap_servers,
        [topic],
        state_dir=tmp_path / "state",
        extra={**settings, **SLOW_TRANSACTIONS},
    )
    return seed, random.Random(seed), topic, config


@pytest.mark.integration
@pytest.mark.timeout(900)
def test_exactly_once_across_kill_9(
    cluster_a: KafkaCluster,
    cluster_b: KafkaCluster,
    unique_topic: Callable[..., str],
    tmp_path: Path,
    runs_factory: Callable[[Path], Runs],
) -> None:
    """4 x kill -9 of a continuous mirror while the source keeps growing, then drain:
    each source record is in the target exactly once, in order; no process survives a kill."""
    seed, rng, topic, config = _kill_setup(
        cluster_a, cluster_b, unique_topic("eos"), tmp_path, MIRROR_SETTINGS
    )
    runs = runs_factory(config)
    producer = BackgroundProducer(
        cluster_a.bootstrap_servers, topic, PARTITIONS, rate_per_partition=300, seed=seed
    ).start()
    # (aim at an open target transaction?, kill every process group or only the run's)
    plan = [(True, True), (False, False), (True, False), (False, True)]
    kills: list[str] = []
    first_kill_in_transaction = False
    watch = TailWatch(cluster_b.bootstrap_servers, f"A.{topic}", PARTITIONS)
    try:
        run = runs.start("run-0")
        for i, (mid_transaction, whole_tree) in enumerate(plan):
            n = wait_for_batches(run.stderr_path, 1, 120, alive=lambda r=run: r.proc.poll() is None)
            assert n >= 1, f"run {i} mirrored nothing:\n{run.output()[-6000:]}"
            time.sleep(rng.uniform(0.5, 6.0))
            assert run.proc.poll() is None, f"run {i} exited by itself:\n{run.output()[-6000:]}"
            open_partitions: list[int] = []
            if mid_transaction:
                tree, open_partitions = runs.kill_mid_transaction(
                    run, watch, whole_tree=whole_tree, timeout=60
                )
                if i == 0:
                    first_kill_in_transaction = bool(open_partitions)
            else:
                tree = runs.kill(run, whole_tree=whole_tree)
            killed_at = time.monotonic()
            left = wait_all_gone(tree, 30)
            assert not left, (
                f"kill {i} ({'every group' if whole_tree else 'process group'}) left "
                f"processes running:\n{tree_description(left)}\nrun had:\n{tree_description(tree)}"
            )
            kills.append(
                f"kill {i} after {len(mirrored_batches(run.stderr_path))} batches, "
                f"{f'open transaction on {open_partitions}' if open_partitions else 'random'}, "
                f"{runs.freezes} freezes so far, "
                f"{'every group' if whole_tree else 'process group only'}: "
                f"{len(tree)} processes in {len({p.pgid for p in tree})} groups, all gone after "
                f"{time.monotonic() - killed_at:.1f}s"
            )
            if i == 0:
                print(f"processes of a run:\n{tree_description(tree)}")
            run = runs.start(f"run-{i + 1}")
        wait_for_batches(run.stderr_path, 2, 120, alive=lambda: run.proc.poll() is None)
    finally:
        watch.close()
        producer.stop()
    runs.kill(run, whole_tree=True)
    print(f"produced {producer.total} records, {producer.transactions} source transactions")
    print("\n".join(kills))

    drain = run_mirror_once(config)
    assert drain.returncode == 0, drain.describe()
    print(f"drain (--once) took {drain.seconds:.0f}s")
    views = _assert_exactly_once(cluster_a, cluster_b, topic, producer)
    print(_summary(views))
    if first_kill_in_transaction:
        # the first kill froze a transaction open and killed every process: the
        # restarted task's init_transactions must have aborted it
        assert sum(v.aborted_txns for v in views.values()) >= 1, _summary(views)


@pytest.mark.integration
def test_kill_9_mid_transaction_at_208_partitions(
    cluster_a: KafkaCluster,
    cluster_b: KafkaCluster,
    unique_topic: Callable[..., str],
    tmp_path: Path,
    runs_factory: Callable[[Path], Runs],
) -> None:
    """kill -9 of every process of a continuous mirror while its shards' transactions
    are open on a 208-partition topic the source keeps writing (a shard's transaction
    spans many partitions), once more at random, then drain: each source record in
    the target exactly once, in order, and the open transactions aborted."""
    partitions = 208
    seed, rng, topic, config = _kill_setup(
        cluster_a, cluster_b, unique_topic("wide"), tmp_path, MIRROR_SETTINGS, partitions
    )
    runs = runs_factory(config)
    producer = BackgroundProducer(
        cluster_a.bootstrap_servers, topic, partitions, rate_per_partition=8, seed=seed
    ).start()
    watch = TailWatch(cluster_b.bootstrap_servers, f"A.{topic}", partitions)
    kills: list[str] = []
    try:
        run = runs.start("run-0")
        n = wait_for_batches(run.stderr_path, 1, 180, alive=lambda: run.proc.poll() is None)
        assert n >= 1, f"the mirror mirrored nothing:\n{run.output()[-6000:]}"
        tree, open_partitions = runs.kill_mid_transaction(run, watch, whole_tree=True, timeout=90)
        assert open_partitions, "no transaction was open when the mirror was killed"
        assert not wait_all_gone(tree, 30), "the kill left processes running"
        kills.append(f"kill 0: transactions open on {len(open_partitions)} partitions")
        run = runs.start("run-1")
        n = wait_for_batches(run.stderr_path, 1, 180, alive=lambda: run.proc.poll() is None)
        assert n >= 1, f"the restarted mirror mirrored nothing:\n{run.output()[-6000:]}"
        time.sleep(rng.uniform(0.5, 3.0))
        tree = runs.kill(run, whole_tree=True)
        assert not wait_all_gone(tree, 30), "the second kill left processes running"
        kills.append(f"kill 1 after {n} batches")
    finally:
        watch.close()
        producer.stop()
    views = _drained_exactly_once(config, cluster_a, cluster_b, topic, producer, kills)
    # what the first kill left open was aborted by the restart's fencing (at least one:
    # a commit's markers may still have been on their way to some of those partitions)
    assert sum(v.aborted_txns for v in views.values()) >= 1, _summary(views)


def _kill_in_a_first_transaction(
    runs: Runs, run: MirrorProcess, watch: TailWatch, timeout: float
) -> tuple[list[Proc], list[int]]:
    """kill -9 every process of ``run`` while a target partition's first transaction is
    open (records on the target, none committed): watch the target's tails, freeze the
    run the moment records appear, kill it if one such partition is there, else thaw
    and go on while some partition has not begun. Returns (processes, those partitions)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and run.proc.poll() is None:
        tails = watch.tails()
        if not any(hw > 0 for _, hw in tails.values()):
            time.sleep(0.005)
            continue
        tree = freeze_tree(run.proc.pid)
        runs.trees.append(tree)
        time.sleep(0.05)  # requests on the wire land
        found = watch.first_transactions_open()
        if found:
            return runs._kill(run, tree, whole_tree=True), found
        signal_all(tree, signal.SIGCONT)
        now = watch.tails()
        if len(now) == PARTITIONS and all(lso > 0 for lso, _ in now.values()):
            break  # every partition has committed already: too late
    raise AssertionError(
        f"no partition's first transaction seen open within {timeout:.0f}s:\n{run.output()[-4000:]}"
    )


@pytest.mark.integration
@pytest.mark.timeout(900)
def test_kill_9_three_times_on_apache_kafka(
    own_kafka: Callable[..., Any],
    unique_topic: Callable[..., str],
    tmp_path: Path,
    runs_factory: Callable[[Path], Runs],
) -> None:
    """Three kill -9 of a continuous mirror under load on Apache Kafka 4.3.1, the first
    while partitions' first transactions are open (nothing committed there yet, no
    position), then `mm mirror --once`: exit 0 and each source record in the target
    exactly once, in order. On Apache Kafka a killed first transaction's records count
    in the log end (pending, then aborted) though no read_committed reader sees them;
    the restarted mirror must take the partition as empty, not refuse it."""
    brokers = [own_kafka(wait=False) for _ in range(2)]
    for broker in brokers:
        broker.wait_ready()
    cluster_a, cluster_b = (
        KafkaCluster(name, broker.bootstrap, "kafka", broker.log_path)
        for name, broker in zip("AB", brokers, strict=True)
    )
    seed, rng, topic, config = _kill_setup(
        cluster_a, cluster_b, unique_topic("kill"), tmp_path, {"mm.mirror.trigger.seconds": "0.5"}
    )
    runs = runs_factory(config)
    # plain records only: no source transaction markers, so no sync point closes the
    # mirror's first transactions early; what the source holds when the mirror starts
    # (tens of thousands per partition, written before it starts) makes them long.
    # Without the prefill they held the ~5,000 records of Spark's start-up: on a loaded
    # machine every partition's first transaction once committed before the watch saw one
    producer = BackgroundProducer(
        cluster_a.bootstrap_servers,
        topic,
        PARTITIONS,
        rate_per_partition=250,
        seed=seed,
        transactional_share=0.0,
        prefill=FIRST_TRANSACTION_RECORDS,
    ).start()
    watch = TailWatch(cluster_b.bootstrap_servers, f"A.{topic}", PARTITIONS)
    kills: list[str] = []
    try:
        producer.wait_produced(PARTITIONS * FIRST_TRANSACTION_RECORDS)
        run = runs.start("run-0")
        tree, first = _kill_in_a_first_transaction(runs, run, watch, 240)
        assert not wait_all_gone(tree, 30), "kill 0 left processes running"
        kills.append(f"kill 0: first transactions open on partitions {first}")
        for i, whole_tree in ((1, False), (2, True)):
            run = runs.start(f"run-{i}")
            n = wait_for_batches(run.stderr_path, 1, 180, alive=lambda r=run: r.proc.poll() is None)
            assert n >= 1, f"run {i} mirrored nothing:\n{run.output()[-6000:]}"
            time.sleep(rng.uniform(0.5, 4.0))
            assert run.proc.poll() is None, f"run {i} exited by itself:\n{run.output()[-6000:]}"
            tree = runs.kill(run, whole_tree=whole_tree)
            assert not wait_all_gone(tree, 30), f"kill {i} left processes running"
            kills.append(f"kill {i} after {n} batches")
    finally:
        watch.close()
        producer.stop()
    views = _drained_exactly_once(config, cluster_a, cluster_b, topic, producer, kills)
    # the first kill left open transactions that the next run's fencing aborted
    assert sum(v.aborted_txns for v in views.values()) >= len(first), _summary(views)


@pytest.mark.integration
def test_second_instance_of_a_flow(
    cluster_a: KafkaCluster,
    cluster_b: KafkaCluster,
    unique_topic: Callable[..., str],
    tmp_path: Path,
    runs_factory: Callable[[Path], Runs],
) -> None:
    """A second `mm mirror` of a flow while the first runs.

    Same config (same state dir): it refuses to start, exit 1, naming the running
    one, which carries on. Own state dir (a second deployment by mistake): both
    run; their tasks fence each other's transactions (one transactional.id per
    target partition), the mirror keeps progressing, and after both stop and a
    drain the target holds each record exactly once.
    """
    topic = unique_topic("twice")
    create_topic(cluster_a.bootstrap_servers, topic, PARTITIONS)

    def properties(name: str) -> Path:
        return mirror_properties(
            tmp_path / f"{name}.properties",
            cluster_a.bootstrap_servers,
            cluster_b.bootstrap_servers,
            [topic],
            state_dir=tmp_path / f"state-{name}",
            extra=MIRROR_SETTINGS,
        )

    config, other_config = properties("first"), properties("second")
    runs = runs_factory(config)
    broker_log_mark = _log_size(cluster_b)
    producer = BackgroundProducer(
        cluster_a.bootstrap_servers, topic, PARTITIONS, rate_per_partition=400
    ).start()
    try:
        # debug logs: each range's start and end, to tell a stale state read if it fails
        debug = {"MM_LOG_LEVEL": "DEBUG"}
        first = runs.start("first", env=debug)
        alive = lambda: first.proc.poll() is None  # noqa: E731
        assert wait_for_batches(first.stderr_path, 1, 120, alive), first.output()[-6000:]

        refused = subprocess.run(
            mirror_cmd(config), capture_output=True, text=True, timeout=120, check=False
        )
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert "is already being mirrored" in refused.stderr, refused.stderr
        assert f"process {first.proc.pid} " in refused.stderr, refused.stderr
        batches = len(mirrored_batches(first.stderr_path))
        assert wait_for_batches(first.stderr_path, batches + 1, 60, alive) > batches, (
            f"the first mirror stopped mirroring:\n{first.output()[-6000:]}"
        )

        second = runs.start("second", other_config, env=debug)
        deadline = time.monotonic() + 120
        while not log_events(second.stderr_path, "mirror starting"):
            if second.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"second mirror did not start:\n{second.output()[-6000:]}")
            time.sleep(0.2)
        target_before = _target_count(cluster_b.bootstrap_servers, f"A.{topic}")
        batches_before = {n: len(mirrored_batches(r.stderr_path)) for n, r in both(first, second)}
        time.sleep(OVERLAP_SECONDS)
        target_after = _target_count(cluster_b.bootstrap_servers, f"A.{topic}")
        together = {
            n: len(mirrored_batches(r.stderr_path)) - batches_before[n]
            for n, r in both(first, second)
        }
        exits = {n: r.proc.poll() for n, r in both(first, second)}
        failures = {
            n: len(log_events(r.stderr_path, "mirror query failed; restarting"))
            for n, r in both(first, second)
        }
        print(
            f"{OVERLAP_SECONDS}s together: batches with records {together}, query restarts "
            f"{failures}, exit codes {exits}, target grew by {target_after - target_before}"
        )
        assert target_after > target_before, "no progress while two mirrors ran"
    finally:
        producer.stop()
    for r in (first, second):
        runs.kill(r, whole_tree=True)
    drain = run_mirror_once(config)
    assert drain.returncode == 0, drain.describe()
    try:
        views = _assert_exactly_once(cluster_a, cluster_b, topic, producer)
    except AssertionError as exc:
        faults = _tansu_faults(cluster_a, cluster_b, topic, str(exc), broker_log_mark)
        if faults is not None:
            pytest.xfail(f"{faults}\n{exc}")
        logs = {n: r.stderr_path for n, r in both(first, second)}
        stale = [s for p in range(PARTITIONS) for s in stale_starts(logs, p)]
        raise AssertionError(
            f"{exc}\nranges that resumed below a position already reached "
            f"(partition order): {stale or 'none'}"
        ) from None
    print(_summary(views))


# the error Tansu 0.6 (510f3e2) logs when txn_end's epoch check *after* writing the
# markers fails: the transaction's records are committed, its offsets are not
_TANSU_HALF_COMMIT = re.compile(r"tansu_storage::dynostore: 2638: err=Api\(ProducerFenced\)")


_PARTITION_COUNTS = re.compile(
    r"partition (\d+): source \d+ records, target \d+: \d+ duplicates, (\d+) missing, "
    r"(\d+) unknown"
)


def _tansu_faults(
    cluster_a: KafkaCluster, cluster_b: KafkaCluster, topic: str, failure: str, since: int
) -> str | None:
    """Why the embedded broker, not the mirror, is behind every partition the exactly-once
    check failed on, or None (the failure stands) when one partition lacks proof.

    Two mirrors fencing each other every half second race Tansu 0.6's (510f3e2)
    transaction coordinator, whose steps are not atomic (tansu-storage dynostore.rs),
    and each race leaves a trace Apache Kafka never does:

    * duplicates only, and either the broker's log holds the half-applied EndTxn
      (COMMIT markers written, then the epoch check fails and the offsets are never
      applied), or the target log holds a transaction a later epoch of its producer
      overtook with no marker: a fenced epoch's produce that landed after
      InitProducerId aborted its (then empty) transaction. That range never ends,
      and txn_end applies a transaction's offsets only when every transaction
      overlapping it on the partition is prepared, so no commit's position on the
      partition takes effect again: each new mirror process resumes from a stale one.
    * records missing, and an offset sync (the mirror writes a transaction's syncs
      only after commit_transaction returned) names a target offset of an aborted
      transaction: the EndTxn(COMMIT) raced InitProducerId's rollback, which wrote the
      ABORT markers while the EndTxn applied the offsets from the request's COMMIT
      flag and answered success.
    """
    if cluster_b.kind != "embedded":
        return None
    counts = {int(p): (int(m), int(u)) for p, m, u in _PARTITION_COUNTS.findall(failure)}
    if not counts or len(counts) != len(re.findall(r"^partition \d+:", failure, re.M)):
        return None
    target_topic = f"A.{topic}"
    half = _tansu_half_commits(cluster_b, since)
    syncs: list[Any] | None = None
    proof: list[str] = []
    for p, (missing, unknown) in sorted(counts.items()):
        if unknown:
            return None
        view = committed_view(read_log(cluster_b.bootstrap_servers, target_topic, p))
        if not missing:
            if view.overtaken:
                proof.append(f"partition {p}: overtaken with no marker: {view.overtaken}")
            elif half:
                proof.append(f"partition {p}: the broker logged {half[0]}")
            else:
                return None
            continue
        if syncs is None:
            syncs = read_offset_syncs(cluster_a.bootstrap_servers, "mm2-offset-syncs.B.internal")
        into_aborted = [
            (s.upstream_offset, s.downstream_offset)
            for s in syncs
            if s.topic == topic
            and s.partition == p
            and any(a <= s.downstream_offset <= b for a, b in view.aborted_spans)
        ]
        if not into_aborted:
            return None
        proof.append(
            f"partition {p}: offset syncs written after commit_transaction returned name "
            f"aborted target records: {into_aborted[:5]}"
        )
    return (
        "Tansu 0.6 (510f3e2) transaction coordinator raced by two mirrors fencing each "
        "other (see _tansu_faults): " + "; ".join(proof)
    )


def _log_size(cluster: KafkaCluster) -> int:
    path = cluster.log_path
    return path.stat().st_size if path is not None and path.exists() else 0


def _tansu_half_commits(cluster: KafkaCluster, since: int) -> list[str]:
    """The embedded broker's log lines of a half-applied EndTxn written after byte
    ``since`` (this test's time); [] for any other broker."""
    if cluster.kind != "embedded" or cluster.log_path is None or not cluster.log_path.exists():
        return []
    with cluster.log_path.open("rb") as f:
        f.seek(since)
        lines = f.read().decode(errors="replace").splitlines()
    return [line.strip() for line in lines if _TANSU_HALF_COMMIT.search(line)]


@pytest.mark.unit
def test_state_lock_refuses_a_second_mirror_of_a_flow(tmp_path: Path) -> None:
    """One mirror per flow and state dir; the refusal names the holder; a closed (or
    killed) holder frees it; another flow or another state dir is not blocked."""
    from mm.config import load_config
    from mm.errors import MirrorError
    from mm.source.job import lock_flow_state

    def config(state: str) -> Any:
        path = tmp_path / f"{state}.properties"
        path.write_text(
            "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n"
            f"A->B.enabled = true\nB->A.enabled = true\nmm.state.dir = {tmp_path / state}\n"
        )
        return load_config(path)

    cfg = config("s1")
    ab, ba = cfg.flow("A", "B"), cfg.flow("B", "A")
    held = lock_flow_state(cfg, ab)
    try:
        with pytest.raises(MirrorError, match=rf"A->B is already being mirrored.*{os.getpid()}"):
            lock_flow_state(cfg, ab)
        lock_flow_state(cfg, ba).close()  # another flow
        other = config("s2")
        lock_flow_state(other, other.flow("A", "B")).close()  # another state dir
    finally:
        held.close()
    lock_flow_state(cfg, ab).close()


@pytest.mark.unit
def test_committed_view_applies_transaction_markers() -> None:
    """The raw-log reader's read_committed rule: plain records always, a transaction's
    records when its producer's next marker is COMMIT, never when ABORT or still open."""

    def data(base: int, pid: int, n: int, txn: bool = True) -> LogBatch:
        recs = tuple((o, None, f"v{o}".encode()) for o in range(base, base + n))
        return LogBatch(base, base + n - 1, pid, txn, False, False, recs)

    def marker(offset: int, pid: int, abort: bool) -> LogBatch:
        return LogBatch(offset, offset, pid, True, True, abort, ())

    log = PartitionLog(
        [
            data(0, -1, 2, txn=False),  # 0-1 plain
            data(2, 7, 2),  # 2-3 pid 7 ...
            data(4, 8, 1),  # 4 pid 8 (interleaved) ...
            marker(5, 7, abort=False),  # ... committed
            marker(6, 8, abort=True),  # ... aborted
            data(7, 7, 1),  # 7 pid 7 ...
            data(8, -1, 1, txn=False),  # 8 plain
            marker(9, 7, abort=True),  # ... aborted
            data(10, 9, 2),  # 10-11 still open
        ],
        high_watermark=12,
        last_stable_offset=10,
        broker_aborted=[],
    )
    view = committed_view(log)
    assert [o for o, _, _ in view.records] == [0, 1, 2, 3, 8]
    assert (view.committed_txns, view.aborted_txns) == (1, 2)
    assert (view.aborted_records, view.open_records) == (2, 2)
    assert view.aborted_spans == [(4, 4), (7, 7)]
    assert view.overtaken == []


@pytest.mark.unit
def test_committed_view_names_a_transaction_a_later_epoch_overtook() -> None:
    """A fenced epoch's batches followed by its successor's data with no marker between
    (Apache Kafka aborts the fenced transaction first; Tansu 0.6 can accept a fenced
    epoch's late produce and never end it): not visible, and named as overtaken."""

    def data(base: int, n: int, epoch: int) -> LogBatch:
        recs = tuple((o, None, f"v{o}".encode()) for o in range(base, base + n))
        return LogBatch(base, base + n - 1, 5, True, False, False, recs, epoch)

    def commit(offset: int, epoch: int) -> LogBatch:
        return LogBatch(offset, offset, 5, True, True, False, (), epoch)

    log = PartitionLog(
        [data(0, 2, 14), commit(2, 14), data(3, 3, 15), data(6, 2, 16), commit(8, 16)],
        high_watermark=9,
        last_stable_offset=9,
        broker_aborted=[],
    )
    view = committed_view(log)
    assert [o for o, _, _ in view.records] == [0, 1, 6, 7]
    assert view.overtaken == ["pid5e15 3-5"]
    assert view.aborted_spans == [(3, 5)]
