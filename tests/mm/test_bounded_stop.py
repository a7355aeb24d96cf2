"""A long-running job stops within 10 s of SIGTERM even with its source cluster frozen.

Cluster A, an Apache Kafka broker of the test's own, is frozen (SIGSTOP: its
sockets stay open, nothing answers) while the job works on it; then the job is
sent SIGTERM. It must exit within 10 s, exit 0, with exactly one "stopped" line
saying the stop was bounded and naming A, no librdkafka line (``REQTMOUT``, ...)
and no traceback. After A resumes (SIGCONT), a restart leaves the target exactly
the source, judged by read_committed on B: the transaction left open by the stop
was never committed, and the restart resumed from the committed positions.

Before the bound, `mm run` took 88 s to stop this way (4 s with A healthy).
"""

from __future__ import annotations

import contextlib
import os
import re
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from support.apache_kafka import KRaftBroker
from support.backup import backup_config
from support.clusters import KafkaCluster
from support.eos import kill_groups, log_events, process_tree, tree_description, wait_all_gone
from support.faults import Job
from support.groups import commit_admin, run_mm
from support.mirror import (
    assert_same_records,
    create_topic,
    mirror_properties,
    produce_batch,
    read_topic,
    read_topic_committed,
    run_mirror_once,
)

pytestmark = pytest.mark.integration

PARTITIONS = 2
BACKLOG = 3000  # per partition: more micro-batches than the job gets to run before the freeze
STOP_BOUND = 10.0  # seconds, the promise
STOP_WAIT = 120.0  # how long the test waits to measure a stop that breaks it
STARTUP = 240.0  # Spark on a busy 2-core machine
# a librdkafka line ("%3|1712345678.123|REQTMOUT|rdkafka#producer-1| ...")
RAW_LIBRDKAFKA = re.compile(r"%\d\|\d+\.\d+\||REQTMOUT|rdkafka#")
SETTINGS = {
    "mm.mirror.trigger.seconds": "0.5",
    "mm.mirror.max.records.per.partition.per.batch": "100",
    # global flow keys: each test names its source cluster anew (see _alias)
    "emit.checkpoints.interval.seconds": "1",
    "refresh.groups.interval.seconds": "1",
    "emit.heartbeats.interval.seconds": "1",
    "spark.master": "local[1]",
}


@contextmanager
def frozen(broker: KRaftBroker) -> Iterator[None]:
    """Broker frozen for the block (its JVM has a session of its own), resumed after
    even when the test fails, so the fixture can stop it."""
    broker.freeze()
    try:
        yield
    finally:
        broker.thaw()


def wait_for(job: Job, event: str, check: Callable[[dict[str, object]], bool]) -> None:
    deadline = time.monotonic() + STARTUP
    while not any(check(e) for e in log_events(job.stderr_path, event)):
        assert job.running(), job.output()
        assert time.monotonic() < deadline, f"no {event!r} within {STARTUP:.0f}s\n{job.output()}"
        time.sleep(0.2)


def _tcp_rows() -> list[list[str]]:
    rows: list[list[str]] = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        rows += [row.split() for row in Path(table).read_text().splitlines()[1:]]
    return rows


def _port(address: str) -> int:
    return int(address.rsplit(":", 1)[1], 16)


def _socket_inodes(pid: int) -> set[str]:
    """The inodes of the sockets process ``pid`` holds open."""
    inodes: set[str] = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            link = os.readlink(fd)
            if link.startswith("socket:["):
                inodes.add(link[len("socket:[") : -1])
    return inodes


def unread_requests(port: int, sender: int | None = None) -> int:
    """Bytes clients sent to the listener on ``port`` that it has not read (a frozen
    broker's sockets fill in the kernel): a request waits on it. With ``sender``,
    only the bytes process ``sender`` itself sent (not its children's)."""
    rows = _tcp_rows()
    # the broker's end of each connection: (client's port, bytes not read yet)
    unread = [(_port(r[2]), int(r[4].split(":")[1], 16)) for r in rows if _port(r[1]) == port]
    if sender is None:
        return sum(n for _, n in unread)
    inodes = _socket_inodes(sender)
    theirs = {_port(r[1]) for r in rows if _port(r[2]) == port and r[9] in inodes}
    return sum(n for client, n in unread if client in theirs)


def stop_frozen(job: Job, broker: KRaftBroker, *, from_driver: bool = False) -> float:
    """Freeze ``broker``; once a request of the job (with ``from_driver``, of the
    job's own process, not of its Spark workers) waits on it, SIGTERM the job.
    Returns the seconds until it exited (``STOP_WAIT`` when it did not). Every process
    of the job must be gone within 30 s, the broker still frozen (the Spark JVM and
    its Python workers end with the job)."""
    tree = process_tree(job.proc.pid)
    with frozen(broker):
        deadline = time.monotonic() + 60
        sender = job.proc.pid if from_driver else None
        while not unread_requests(broker.port, sender):
            assert job.running(), job.output()
            assert time.monotonic() < deadline, "the job sent cluster A nothing in 60s"
            time.sleep(0.1)
        started = time.monotonic()
        code = job.terminate(STOP_WAIT)
        seconds = time.monotonic() - started if code is not None else STOP_WAIT
        left = wait_all_gone(tree, 30)
    kill_groups(left)
    assert not left, f"left running {seconds:.1f}s after SIGTERM:\n" + tree_description(left)
    return seconds


def assert_bounded_stop(
    job: Job, seconds: float, what: str, alias: str, *, bounded: bool = True
) -> None:
    """Exit 0 within the bound; one "stopped" line, which names the frozen cluster
    ``alias`` when the stop ran into the bound (``bounded``: it must have)."""
    err = job.stderr_path.read_text(errors="replace")
    tail = err[-6000:]
    print(f"mm {job.name}: stopped {seconds:.1f}s after SIGTERM with cluster A frozen")
    assert seconds < STOP_BOUND, f"{seconds:.1f}s to stop\n{tail}"
    assert job.proc.returncode == 0, f"exit {job.proc.returncode}\n{tail}"
    stopped = [line for line in err.splitlines() if "stopped" in line.lower()]
    assert len(stopped) == 1, "\n".join(stopped) or tail
    line = stopped[0]
    assert f"{what} stopped on request" in line, line
    if bounded or "within" in line:
        assert f"within {STOP_BOUND:g} s" in line, line
        assert f"cluster {alias} did not answer" in line, line
    assert "Traceback" not in err, tail
    raw = [x for x in err.splitlines() if RAW_LIBRDKAFKA.search(x) and '"librdkafka"' not in x]
    assert not raw, "\n".join(raw[:20])


def _alias() -> str:
    """A source alias of the test's own: its A is new, but B is shared, and MM2's
    policy mirrors every flow's ``heartbeats``: under one alias, the mirror's
    position for ``A.heartbeats`` on B would be another test's A's."""
    return f"A{uuid.uuid4().hex[:6]}"


def _config(tmp_path: Path, a: str, b: KafkaCluster, topic: str, alias: str) -> Path:
    return mirror_properties(
        tmp_path / "mm.properties",
        a,
        b.bootstrap_servers,
        [topic],
        state_dir=tmp_path / "state",
        extra=SETTINGS,
        source_alias=alias,
    )


def _backlog(bootstrap: str, topic: str) -> None:
    create_topic(bootstrap, topic, PARTITIONS)
    for p in range(PARTITIONS):
        produce_batch(bootstrap, topic, p, BACKLOG, f"p{p}")


def _assert_target_is_source(a: str, b: KafkaCluster, topic: str, alias: str) -> None:
    source = read_topic(a, topic, PARTITIONS)
    assert sum(len(v) for v in source.values()) == PARTITIONS * BACKLOG
    target = read_topic_committed(b.bootstrap_servers, f"{alias}.{topic}", PARTITIONS)
    assert_same_records(source, target)


@pytest.mark.parametrize("command", ["run", "mirror"])
def test_mirroring_job_stops_within_bound_with_source_frozen(
    own_kafka: Callable[..., KRaftBroker],
    cluster_b: KafkaCluster,
    unique_topic: Callable[..., str],
    tmp_path: Path,
    command: str,
) -> None:
    """`mm run` / `mm mirror` frozen mid-backlog (micro-batches in flight on A).

    `mm run`'s checkpoint and heartbeat jobs (threads of its own process) wait on
    A: SIGTERM comes once one of their requests does, and the stop runs into the
    bound. (A SIGTERM while only the Spark workers wait on A, the driver's jobs
    between rounds, can stop in time: seen once in a full suite, 2.2 s.) `mm
    mirror` alone may stop in time (its micro-batch's tasks are interrupted), then
    with its usual line."""
    a = own_kafka()
    topic = unique_topic("frozen")
    _backlog(a.bootstrap, topic)
    alias = _alias()
    config = _config(tmp_path, a.bootstrap, cluster_b, topic, alias)
    job = Job(tmp_path / "jobs", command, command, config)
    try:
        wait_for(job, "micro-batch mirrored", lambda e: int(str(e.get("records", 0))) > 0)
        if command == "run":
            wait_for(job, "checkpoint round", lambda _e: True)
        seconds = stop_frozen(job, a, from_driver=command == "run")
    finally:
        job.close()
    assert_bounded_stop(job, seconds, command, alias, bounded=command == "run")

    # A answers again (thawed, it may take a while: a fresh-clone run's restart waited
    # 30 s on its first describe): a restart resumes from the committed positions,
    # exactly once
    a.wait_ready()
    run = run_mirror_once(config)
    assert run.returncode == 0, run.describe()
    _assert_target_is_source(a.bootstrap, cluster_b, topic, alias)


def test_checkpoint_job_stops_within_bound_with_source_frozen(
    own_kafka: Callable[..., KRaftBroker],
    cluster_b: KafkaCluster,
    unique_topic: Callable[..., str],
    unique_group: Callable[..., str],
    tmp_path: Path,
) -> None:
    """`mm checkpoint` frozen while it reads A's offset syncs and groups each second
    (a round's admin call waits 30 s on a frozen A: the stop runs into the bound,
    unless the signal came between two rounds: then its usual line)."""
    a = own_kafka()
    topic = unique_topic("frozenck")
    _backlog(a.bootstrap, topic)
    alias = _alias()
    config = _config(tmp_path, a.bootstrap, cluster_b, topic, alias)
    run = run_mirror_once(config)  # the offset syncs the checkpoint job reads
    assert run.returncode == 0, run.describe()
    group = unique_group("frozenck")
    commit_admin(a.bootstrap, group, topic, dict.fromkeys(range(PARTITIONS), BACKLOG // 2))
    job = Job(tmp_path / "jobs", "checkpoint", "checkpoint", config)
    try:
        wait_for(job, "checkpoint round", lambda e: int(str(e.get("emitted", 0))) > 0)
        seconds = stop_frozen(job, a)
    finally:
        job.close()
    assert_bounded_stop(job, seconds, "checkpoint", alias, bounded=False)

    # A answers again: the job starts from its snapshot, and its round succeeds
    again = run_mm(config, "checkpoint", "--once")
    assert again.returncode == 0, again.describe()
    assert "failed_rounds=0" in again.stdout, again.describe()


@pytest.mark.parametrize("command", ["heartbeat", "status", "backup"])
def test_the_other_jobs_stop_within_bound_with_their_cluster_frozen(
    own_kafka: Callable[..., KRaftBroker],
    cluster_b: KafkaCluster,
    unique_topic: Callable[..., str],
    tmp_path: Path,
    command: str,
) -> None:
    """`mm heartbeat` (writes to A each second), `mm status --serve` (reads A each
    second) and continuous `mm backup` (reads A in passes one after another, a pass in
    flight finishing first while A answers) with A frozen under one of their requests:
    each exits 0 within the bound, with one "stopped" line (the bound's names A; a
    backup's usual one is on stdout). Then, A answering again, a `--once` run of the
    same job succeeds from what the stopped one left."""
    a = own_kafka()
    topic = unique_topic("frozen" + command[:2])
    _backlog(a.bootstrap, topic)
    alias = _alias()
    if command == "backup":
        config = backup_config(
            tmp_path, a.bootstrap, topic, "backup.interval.ms = 100", spark_master="local[1]"
        )
        args: tuple[str, ...] = ()
        ready, what = "backup pass", "backup"
    else:
        config = _config(tmp_path, a.bootstrap, cluster_b, topic, alias)
        args = (
            ("--serve", "0", "--bind", "127.0.0.1", "--interval", "1")
            if command == "status"
            else ()
        )
        ready = "heartbeats starting" if command == "heartbeat" else "status collected"
        what = "heartbeats" if command == "heartbeat" else "status"
    job = Job(tmp_path / "jobs", command, command, config, *args)
    try:
        wait_for(job, ready, lambda _e: True)
        seconds = stop_frozen(job, a)
    finally:
        job.close()
    err = job.stderr_path.read_text(errors="replace")
    print(f"mm {command}: stopped {seconds:.1f}s after SIGTERM with cluster A frozen")
    assert seconds < STOP_BOUND, f"{seconds:.1f}s to stop\n{err[-6000:]}"
    assert job.proc.returncode == 0, f"exit {job.proc.returncode}\n{err[-6000:]}"
    out = job.output()
    stopped = [x for x in out.splitlines() if "stopped" in x.lower()]
    assert len(stopped) == 1, "\n".join(stopped) or out
    if f"within {STOP_BOUND:g} s" in stopped[0]:
        assert f"{what} stopped on request" in stopped[0], stopped[0]
        name = "A" if command == "backup" else alias  # a backup's config has only A
        assert f"cluster {name} did not answer" in stopped[0], stopped[0]
    assert "Traceback" not in out, out
    raw = [x for x in err.splitlines() if RAW_LIBRDKAFKA.search(x) and '"librdkafka"' not in x]
    assert not raw, "\n".join(raw[:20])

    again = run_mm(config, command, *(("--once",) if command != "status" else ()))
    assert again.returncode in ((0, 1) if command == "status" else (0,)), again.describe()
    assert "Traceback" not in again.output, again.describe()
