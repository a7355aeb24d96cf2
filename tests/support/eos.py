"""Helpers for the exactly-once mirror tests: the raw log reader (from
:mod:`mm.kafka.rawlog`, which says why a consumer's view of a Tansu target
cannot be trusted after a crash), a background producer with offset gaps, and
whole-run process control (kill -9, leftovers).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

# The raw log reader lives in the product (`mm verify` judges logs with it);
# re-exported here for the tests that use it.
from mm.kafka.rawlog import (
    CommittedView,
    Connection,
    LogBatch,
    LogRecord,
    PartitionLog,
    committed_view,
    fetch,
    read_log,
)

__all__ = [
    "CommittedView",
    "LogBatch",
    "LogRecord",
    "PartitionLog",
    "TailWatch",
    "committed_view",
    "read_log",
]


class TailWatch:
    """Watches the tails of a topic's partitions: which have a transaction open now
    (last stable offset below the high watermark). One connection, cheap fetches."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self._conn = Connection(bootstrap, 30.0, client_id="mm-test-log-reader")
        self._bootstrap = bootstrap
        self._topic = topic
        self._hw = dict.fromkeys(range(partitions), 0)

    def tails(self) -> dict[int, tuple[int, int]]:
        """(last stable offset, high watermark) of each partition that answers."""
        out = {}
        for p, hw in self._hw.items():
            error, new_hw, lso, _, _ = fetch(self._conn, self._topic, p, hw, 1, wait_ms=1)
            if error:
                continue  # e.g. the target topic does not exist yet
            self._hw[p] = max(hw, new_hw)
            out[p] = (lso, new_hw)
        return out

    def open_transactions(self) -> list[int]:
        return [p for p, (lso, hw) in self.tails().items() if 0 <= lso < hw]

    def ongoing(self) -> set[int] | None:
        """The partitions of the topic inside a transaction its coordinator holds as
        Ongoing (no EndTxn asked for: a commit's markers are not on their way), from
        ListTransactions and DescribeTransactions (kafka-python); None where the
        cluster cannot say (a broker without those requests)."""
        from kafka.admin import KafkaAdminClient
        from kafka.errors import KafkaError as PythonKafkaError

        try:
            admin = KafkaAdminClient(
                bootstrap_servers=self._bootstrap, client_id="mm-test-transactions"
            )
        except PythonKafkaError:
            return None
        try:
            listed = admin.list_transactions(state_filters=["Ongoing"])
            ids = sorted({t.transactional_id for ts in listed.values() for t in ts})
            described = admin.describe_transactions(ids) if ids else {}
        except PythonKafkaError:
            return None
        finally:
            admin.close()
        return {
            tp.partition
            for d in described.values()
            if str(getattr(d.state, "value", d.state)) == "Ongoing"
            for tp in d.topic_partitions
            if tp.topic == self._topic
        }

    def first_transactions_open(self) -> list[int]:
        """Partitions whose first transaction is open: records, none committed yet."""
        return [p for p, (lso, hw) in self.tails().items() if lso == 0 < hw]

    def close(self) -> None:
        self._conn.close()


# --- a producer that keeps writing, with offset gaps -----------------------------------------


def record_value(partition: int, seq: int) -> bytes:
    return f"p{partition}-{seq:08d}".encode()


@dataclass
class BackgroundProducer:
    """Produces unique records to every partition of ``topic`` until stopped.

    Rounds alternate at random between a plain (idempotent) producer and a
    committed transaction, so the source has transaction markers (offset gaps)
    between runs of plain records. Keys and values carry a per-partition
    sequence number, so a duplicate or a reordering in the target is visible.
    """

    bootstrap: str
    topic: str
    partitions: int
    rate_per_partition: float = 800.0  # records/s, roughly
    seed: int = 0
    transactional_share: float = 0.4  # of the rounds; 0: a plain idempotent producer only
    prefill: int = 0  # records per partition written at once (plain) before the paced rounds
    produced: dict[int, int] = field(default_factory=dict)
    transactions: int = 0
    error: BaseException | None = None

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="eos-producer", daemon=True)
        self.produced = dict.fromkeys(range(self.partitions), 0)

    def start(self) -> BackgroundProducer:
        self._thread.start()
        return self

    def stop(self, timeout: float = 60.0) -> None:
        self._stop.set()
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise AssertionError("background producer did not stop")
        if self.error is not None:
            raise AssertionError(f"background producer failed: {self.error!r}")

    @property
    def total(self) -> int:
        return sum(self.produced.values())

    def wait_produced(self, records: int, timeout: float = 60.0) -> None:
        """Until at least ``records`` were produced: on a fresh Apache Kafka broker
        the first transaction waits for __transaction_state, seconds of nothing."""
        deadline = time.monotonic() + timeout
        while self.total < records:
            if self.error is not None or not self._thread.is_alive():
                raise AssertionError(f"background producer stopped early: {self.error!r}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.total} of {records} records produced in {timeout:g}s")
            time.sleep(0.05)

    def _run(self) -> None:
        try:
            self._produce()
        except BaseException as exc:
            self.error = exc

    def _produce(self) -> None:
        rng = random.Random(self.seed)
        plain = Producer(
            {"bootstrap.servers": self.bootstrap, "linger.ms": 5, "enable.idempotence": True}
        )
        txn = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "linger.ms": 5,
                "transactional.id": f"eos-test-producer-{uuid.uuid4().hex[:8]}",
            }
        )
        txn.init_transactions(30)
        failures: list[KafkaError] = []

        def on_delivery(err: KafkaError | None, _msg: Any) -> None:
            if err is not None:
                failures.append(err)

        for p in range(self.partitions):
            for seq in range(self.prefill):
                v = record_value(p, seq)
                plain.produce(self.topic, v, b"k-" + v, partition=p, on_delivery=on_delivery)
                plain.poll(0)
            self.produced[p] = self.prefill
        if plain.flush(60):
            raise AssertionError("prefilled records not acknowledged within 60s")
        if failures:
            raise KafkaException(failures[0])
        round_seconds = 0.1
        per_round = max(1, int(self.rate_per_partition * round_seconds))
        while not self._stop.is_set():
            started = time.monotonic()
            transactional = rng.random() < self.transactional_share
            if transactional:
                txn.begin_transaction()
            for p in range(self.partitions):
                n = rng.randint(per_round // 2, per_round * 3 // 2)
                producer = txn if transactional else plain
                for _ in range(n):
                    seq = self.produced[p]
                    v = record_value(p, seq)
                    producer.produce(self.topic, v, b"k-" + v, partition=p, on_delivery=on_delivery)
                    self.produced[p] = seq + 1
            if transactional:
                txn.commit_transaction(60)
                self.transactions += 1
            else:
                if plain.flush(60):
                    raise AssertionError("plain records not acknowledged within 60s")
            if failures:
                raise KafkaException(failures[0])
            time.sleep(max(0.0, round_seconds - (time.monotonic() - started)))
        plain.flush(60)


# --- processes: a whole `mm mirror` run, killed like a crash ---------------------------------


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    pgid: int
    started: int
    cmd: str


def _stat(pid: int) -> Proc | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmd = (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] == "Z":
        return None  # a zombie is dead; it only waits to be reaped
    return Proc(pid, int(fields[1]), int(fields[2]), int(fields[19]), cmd.strip()[:200])


def all_processes() -> list[Proc]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            p = _stat(int(entry))
            if p is not None:
                out.append(p)
    return out


def process_tree(root: int) -> list[Proc]:
    """``root`` and all its live descendants (by parent pid), plus every process in
    their process groups (a forked worker whose parent already exited)."""
    procs = all_processes()
    children: dict[int, list[Proc]] = {}
    for p in procs:
        children.setdefault(p.ppid, []).append(p)
    found: dict[int, Proc] = {}
    todo = [p for p in procs if p.pid == root]
    while todo:
        p = todo.pop()
        if p.pid in found:
            continue
        found[p.pid] = p
        todo += children.get(p.pid, [])
    groups = {p.pgid for p in found.values()}
    for p in procs:
        if p.pgid in groups and p.pid not in found:
            found[p.pid] = p
            todo.append(p)
    return sorted(found.values(), key=lambda p: p.pid)


def survivors(procs: Iterable[Proc]) -> list[Proc]:
    """Those of ``procs`` still running (same pid and start time)."""
    out = []
    for p in procs:
        now = _stat(p.pid)
        if now is not None and now.started == p.started:
            out.append(now)
    return out


def kill_groups(procs: Iterable[Proc]) -> None:
    """SIGKILL the process groups of those of ``procs`` still running, then each of them.

    Only live processes (same pid and start time) name a group: a group whose
    members are all gone may have had its id reused by someone else's process.
    """
    procs = survivors(procs)
    for pgid in {p.pgid for p in procs}:
        if pgid > 1:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    for p in survivors(procs):
        try:
            os.kill(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def signal_all(procs: Iterable[Proc], sig: int) -> None:
    """Signal those of ``procs`` still running (same pid and start time)."""
    for p in survivors(procs):
        try:
            os.kill(p.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def freeze_tree(root: int) -> list[Proc]:
    """SIGSTOP ``root``'s whole tree (twice: a process forked meanwhile is caught by the
    second pass). Stopped processes send nothing more; requests already on the wire
    still complete at the broker."""
    frozen: dict[int, Proc] = {}
    for _ in range(2):
        tree = process_tree(root)
        signal_all([p for p in tree if p.pid not in frozen], signal.SIGSTOP)
        frozen.update({p.pid: p for p in tree})
    return list(frozen.values())


def wait_all_gone(procs: Iterable[Proc], timeout: float) -> list[Proc]:
    """Wait until none of ``procs`` runs; returns those still running at the deadline."""
    procs = list(procs)
    deadline = time.monotonic() + timeout
    while True:
        left = survivors(procs)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def tree_description(procs: Iterable[Proc]) -> str:
    return "\n".join(f"  pid {p.pid} pgid {p.pgid} ppid {p.ppid}: {p.cmd}" for p in procs)


# --- a continuous `mm mirror` run -------------------------------------------------------------


class MirrorProcess:
    """`mm mirror -c config [args]` (or another long-running ``command``: `mm run`) in its
    own session, stdout and stderr in files (``<name>.stdout``, ``<name>.stderr``)."""

    def __init__(
        self,
        config: Path,
        log_dir: Path,
        *args: str,
        env: Mapping[str, str] | None = None,
        command: str = "mirror",
        name: str = "mirror",
    ) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        self.stdout_path = log_dir / f"{name}.stdout"
        self.stderr_path = log_dir / f"{name}.stderr"
        env = dict(os.environ)
        env.update(
            {
                "PYSPARK_PYTHON": sys.executable,
                "PYSPARK_DRIVER_PYTHON": sys.executable,
                "MM_LOG_FORMAT": "json",
                **(env or {}),
            }
        )
        with open(self.stdout_path, "w") as out, open(self.stderr_path, "w") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "mm", command, "-c", str(config), *args],
                cwd=config.parent,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )

    def running(self) -> bool:
        return self.proc.poll() is None

    def output(self) -> str:
        return self.stdout_path.read_text(errors="replace") + self.stderr_path.read_text(
            errors="replace"
        )

    def tree(self) -> list[Proc]:
        """Its processes now ([] once it exited: its pid may be anyone's by then)."""
        return process_tree(self.proc.pid) if self.running() else []


# --- reading what a run logged ----------------------------------------------------------------


def log_events(path: Path, event: str) -> list[dict[str, Any]]:
    """The JSON log lines of ``path`` whose event is ``event``."""
    out: list[dict[str, Any]] = []
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return out
    for line in text.splitlines():
        if event not in line or not line.startswith("{"):
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # a line cut short by kill -9
        if rec.get("event") == event:
            out.append(rec)
    return out


def mirrored_batches(path: Path) -> list[dict[str, Any]]:
    """The run's "micro-batch mirrored" events that moved at least one record."""
    return [e for e in log_events(path, "micro-batch mirrored") if e.get("records", 0) > 0]


def wait_for_batches(path: Path, count: int, timeout: float, alive: Any = None) -> int:
    """Wait until the run logged ``count`` batches with records; returns how many it has.

    ``alive`` (a callable) stops the wait early when the run exits.
    """
    deadline = time.monotonic() + timeout
    while True:
        n = len(mirrored_batches(path))
        if n >= count or time.monotonic() > deadline or (alive is not None and not alive()):
            return n
        time.sleep(0.2)


def stale_starts(runs: Mapping[str, Path], partition: int) -> list[str]:
    """Ranges of ``partition`` (from the runs' debug logs, "range mirrored") that
    resumed below a position some range had already reached: a stale mirror state
    read. One line each, with the range before it that went further."""
    ranges = []
    for name, path in runs.items():
        for e in log_events(path, "range mirrored"):
            if e.get("partition") == partition and "resumed_from" in e:
                ranges.append((e["timestamp"], name, e["resumed_from"], e["position"], e))
    ranges.sort(key=lambda r: r[0])
    out, best = [], None
    for ts, name, start, end, _e in ranges:
        if best is not None and start < best[3]:
            out.append(
                f"[{partition}] {ts} {name} resumed at {start} after {best[1]} had reached "
                f"{best[3]} "
                f"({best[0]}); this range went to {end}"
            )
        if best is None or end > best[3]:
            best = (ts, name, start, end)
    return out
