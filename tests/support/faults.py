"""Helpers of the fault-injection tests (tests/mm/test_faults.py): long-running `mm`
jobs as subprocesses, consumer groups committing on the source, a watch of the
checkpoints a job writes, and the exactness of checkpoints judged from the logs.

Checkpoints are judged against the target's committed view (Kafka's read_committed
rule applied to the raw log, see :mod:`mm.kafka.rawlog`): a checkpoint
(upstream u, downstream d) is exact when the target's committed records below d
are as many as the source's records below u, so a consumer starting at d on the
target reads what the group had not read on the source.
"""

from __future__ import annotations

import bisect
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from mm_client.errors import RecordDecodeError
from mm_client.records import Checkpoint

from mm.kafka.rawlog import Connection, committed_view, fetch, read_log
from support.eos import MirrorProcess, Proc, kill_groups, process_tree, wait_all_gone


class Job(MirrorProcess):
    """`mm <command> -c config [args]` running in its own session (see MirrorProcess),
    with a name for its log files and what it printed, and ways to stop it."""

    def __init__(self, log_dir: Path, name: str, command: str, config: Path, *args: str) -> None:
        self.name = name
        self.started = time.monotonic()
        self.started_ms = time.time_ns() // 1_000_000
        super().__init__(config, log_dir, *args, command=command, name=name)

    def output(self, tail: int = 6000) -> str:
        return f"--- {self.name} (exit {self.proc.poll()})\n{super().output()[-tail:]}"

    def kill(self) -> list[Proc]:
        """kill -9 every process of the job (the PySpark daemon has a group of its own);
        returns those still running 30 s later (none expected)."""
        tree = process_tree(self.proc.pid) if self.running() else []
        kill_groups(tree)
        self.proc.wait(30)
        return wait_all_gone(tree, 30)

    def terminate(self, timeout: float = 60.0) -> int | None:
        """SIGTERM; the exit code, or None when it did not stop in time."""
        if self.running():
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def close(self) -> None:
        tree = process_tree(self.proc.pid) if self.running() else []
        kill_groups(tree)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait(30)


def log_ends(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """High watermarks from fetches (Tansu's ListOffsets(latest) under-reports)."""
    with Connection(bootstrap, 30.0, client_id="mm-test-fault-ends") as conn:
        out = {}
        for p in range(partitions):
            error, hw, _, _, _ = fetch(conn, topic, p, 0, 1, wait_ms=1)
            out[p] = hw if not error else 0
        return out


@dataclass
class GroupCommitter:
    """Consumer groups committing on the source, as consumers that keep up do.

    Every ``interval`` each group commits ``log end - lag`` per partition (never
    backwards): lag 0 is a group at the log end, usually ahead of the mirror.
    """

    bootstrap: str
    topic: str
    partitions: int
    lags: dict[str, int]
    interval: float = 0.3
    commits: int = 0
    committed: dict[str, dict[int, int]] = field(default_factory=dict)
    error: BaseException | None = None

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="group-committer", daemon=True)
        self.committed = {g: dict.fromkeys(range(self.partitions), 0) for g in self.lags}

    def start(self) -> GroupCommitter:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)
        assert not self._thread.is_alive(), "group committer did not stop"
        if self.error is not None:
            raise AssertionError(f"group committer failed: {self.error!r}")

    def _run(self) -> None:
        try:
            admin = AdminClient({"bootstrap.servers": self.bootstrap})
            while not self._stop.wait(self.interval):
                ends = log_ends(self.bootstrap, self.topic, self.partitions)
                for group, lag in self.lags.items():
                    offsets = self.committed[group]
                    for p, end in ends.items():
                        offsets[p] = max(offsets[p], end - lag)
                    tps = [TopicPartition(self.topic, p, o) for p, o in sorted(offsets.items())]
                    fut = admin.alter_consumer_group_offsets(
                        [ConsumerGroupTopicPartitions(group, tps)]
                    )[group]
                    fut.result(30)
                    self.commits += 1
        except BaseException as exc:
            self.error = exc


@dataclass(frozen=True)
class Seen:
    """A checkpoint as read from the checkpoints topic, with the target's log end
    per partition read right after it (it was written before that read)."""

    checkpoint: Checkpoint
    timestamp_ms: int
    target_end: int


class CheckpointWatch:
    """Tails ``<source>.checkpoints.internal`` on the target for ``groups``.

    Each :meth:`poll` reads the new checkpoint records, then the target topic's
    log end: a checkpoint is ahead of the mirror when its downstream offset is
    past that end (the target only grows, so this end is at least the one the
    checkpoint was written against). Tracks the newest checkpoint per group and
    partition and every step backwards.
    """

    def __init__(
        self, bootstrap: str, topic: str, groups: Iterable[str], target_topic: str, partitions: int
    ) -> None:
        self.bootstrap = bootstrap
        self.target_topic = target_topic
        self.partitions = partitions
        self.groups = set(groups)
        self.seen: list[Seen] = []
        self.newest: dict[tuple[str, int], Checkpoint] = {}
        self.backwards: list[str] = []
        self.ahead: list[str] = []
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"mm-test-ck-watch-{time.monotonic_ns()}",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "earliest",
            }
        )
        self._consumer.assign([TopicPartition(topic, 0, 0)])

    def poll(self, timeout: float = 10.0) -> list[Seen]:
        new: list[tuple[Checkpoint, int]] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msgs = self._consumer.consume(10_000, 0.5)
            eof = False
            for m in msgs:
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        eof = True
                        continue
                    if err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                        eof = True  # no checkpoint written yet
                        continue
                    raise KafkaException(err)
                try:
                    cp = Checkpoint.from_bytes(m.key(), m.value())
                except RecordDecodeError:
                    continue  # the topic is shared with tests that write garbage on purpose
                if cp.consumer_group in self.groups:
                    new.append((cp, m.timestamp()[1]))
            if eof or not msgs:
                break
        ends = log_ends(self.bootstrap, self.target_topic, self.partitions) if new else {}
        out = []
        for cp, ts in new:
            s = Seen(cp, ts, ends.get(cp.partition, 0))
            out.append(s)
            key = (cp.consumer_group, cp.partition)
            before = self.newest.get(key)
            if before is not None and cp.downstream_offset < before.downstream_offset:
                self.backwards.append(f"{before} then {cp}")
            if cp.downstream_offset > s.target_end:
                self.ahead.append(f"{cp} with the target's log end at {s.target_end}")
            self.newest[key] = cp
        self.seen += out
        return out

    def close(self) -> None:
        self._consumer.close()


def committed_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, list[int]]:
    """The offsets of the target's committed records (read_committed rule on the raw log)."""
    return {
        p: [r.offset for r in committed_view(read_log(bootstrap, topic, p)).records]
        for p in range(partitions)
    }


@dataclass
class Judged:
    """Checkpoints judged against the source and the target's committed view."""

    exact: int = 0
    behind: list[str] = field(default_factory=list)  # a consumer would re-read records
    ahead: list[str] = field(default_factory=list)  # a consumer would skip records

    @property
    def checked(self) -> int:
        return self.exact + len(self.behind) + len(self.ahead)


def judge_checkpoints(
    source_bootstrap: str,
    topic: str,
    target_bootstrap: str,
    target_topic: str,
    partitions: int,
    checkpoints: Iterable[Checkpoint],
) -> Judged:
    """Exact: as many committed target records below the downstream offset as source
    records below the upstream one (on a target holding the source's records in
    order, checked separately). Every checkpoint must be mirrored already (the
    downstream offset at most the target's end: :class:`CheckpointWatch`)."""
    cps = list(checkpoints)
    target = committed_offsets(target_bootstrap, target_topic, partitions)
    # the raw log, read to its end now (a consumer waiting for the end of a partition
    # being written to may never see it)
    source = committed_offsets(source_bootstrap, topic, partitions)
    out = Judged()
    for cp in cps:
        below_up = bisect.bisect_left(source[cp.partition], cp.upstream_offset)
        below_down = bisect.bisect_left(target[cp.partition], cp.downstream_offset)
        text = (
            f"{cp.consumer_group}[{cp.partition}] {cp.upstream_offset} -> "
            f"{cp.downstream_offset}: {below_up} source records below upstream, {below_down} "
            "target records below downstream"
        )
        if below_up == below_down:
            out.exact += 1
        elif below_down < below_up:
            out.behind.append(text)
        else:
            out.ahead.append(text)
    return out
