"""Long-running jobs stop cleanly on Ctrl-C and on SIGTERM.

Ctrl-C is what a terminal sends: SIGINT to the whole foreground process group
(the job's Spark JVM and Python processes too); a supervisor's stop is SIGTERM
to the process. Either way: exit 0, exactly one "stopped" line, no Python
traceback, no Java stack, no py4j noise, and no process of the job left. The
mirror is stopped with records flowing (micro-batches in flight), and a run
afterwards still makes the target exactly the source.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient
from support.clusters import KafkaCluster
from support.eos import (
    BackgroundProducer,
    log_events,
    process_tree,
    tree_description,
    wait_all_gone,
    wait_for_batches,
)
from support.mirror import (
    assert_same_records,
    create_topic,
    kill_group,
    mirror_properties,
    mm_env,
    read_topic,
    read_topic_committed,
    run_mirror_once,
)

pytestmark = pytest.mark.integration

PARTITIONS = 3
ORDINARY = re.compile(r" WARN ProcessingTimeExecutor: Current batch is falling behind\.")
WAIT = 180.0
SETTINGS = {
    "mm.mirror.trigger.seconds": "0.5",
    "mm.mirror.max.records.per.partition.per.batch": "2000",
    "A->B.emit.checkpoints.interval.seconds": "1",
    "A->B.refresh.groups.interval.seconds": "1",
    "A->B.emit.heartbeats.interval.seconds": "1",
    "spark.master": "local[1]",
}


class Job:
    """`mm <command> -c config` in its own session (as a terminal runs it), output in files."""

    def __init__(self, config: Path, command: str) -> None:
        self.command = command
        self.err_path = config.parent / f"{command}.err"
        self.out_path = config.parent / f"{command}.out"
        with self.out_path.open("w") as out, self.err_path.open("w") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "mm", command, "-c", str(config)],
                cwd=config.parent,
                env=mm_env(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )

    def wait_for(self, event: str, check: Any = lambda _e: True) -> None:
        deadline = time.monotonic() + WAIT
        while not any(check(e) for e in log_events(self.err_path, event)):
            assert self.proc.poll() is None, self.stderr()[-6000:]
            assert time.monotonic() < deadline, f"no {event!r} within {WAIT:.0f}s"
            time.sleep(0.2)

    def stop(self, how: str) -> float:
        """Signal as a terminal's Ctrl-C or a supervisor would; seconds until it exited."""
        started = time.monotonic()
        if how == "ctrl-c":
            os.killpg(self.proc.pid, signal.SIGINT)
        else:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(90)
        except subprocess.TimeoutExpired:
            pytest.fail(f"mm {self.command} did not exit within 90s of {how}\n{self.stderr()}")
        return time.monotonic() - started

    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")


def assert_clean_stop(job: Job, tree: list[Any], stopped_event: str) -> None:
    err = job.stderr()
    tail = err[-8000:]
    assert job.proc.returncode == 0, f"exit {job.proc.returncode}\n{tail}"
    stopped = [line for line in err.splitlines() if "stopped" in line.lower()]
    assert len(stopped) == 1 and stopped_event in stopped[0], "\n".join(stopped) or tail
    assert "Traceback" not in err, tail
    noise = [
        line
        for line in err.splitlines()
        if "java." in line or "py4j" in line.lower() or "\tat " in line
    ]
    assert not noise, "\n".join(noise[:40])
    # from the signal on, nothing but the job's own structured log events; Spark's
    # start-up banner before it is not ours to judge, nor the one line of ordinary
    # operation a micro-batch that ended just as the signal came may still log
    lines = err.splitlines()
    first = next((i for i, line in enumerate(lines) if '"stop requested"' in line), None)
    assert first is not None, tail
    after = [
        line
        for line in lines[first:]
        if line.strip() and not line.startswith("{") and not ORDINARY.search(line)
    ]
    assert not after, "\n".join(after[:40])
    left = wait_all_gone(tree, 30)
    assert not left, "left running:\n" + tree_description(left)


def commit(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tps = [TopicPartition(topic, p, o) for p, o in sorted(offsets.items())]
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, tps)])[group].result(30)


def _config(
    tmp_path: Path,
    a: KafkaCluster,
    b: KafkaCluster,
    topics: list[str],
    extra: dict[str, str] | None = None,
) -> Path:
    return mirror_properties(
        tmp_path / "mm.properties",
        a.bootstrap_servers,
        b.bootstrap_servers,
        topics,
        state_dir=tmp_path / "state",
        extra={**SETTINGS, **(extra or {})},
    )


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_mirror_stops_cleanly_mid_stream(
    cluster_a: KafkaCluster, cluster_b: KafkaCluster, unique_topic: Any, tmp_path: Path, how: str
) -> None:
    topic = unique_topic("stop")
    create_topic(cluster_a.bootstrap_servers, topic, PARTITIONS)
    config = _config(
        tmp_path,
        cluster_a,
        cluster_b,
        [topic],
        {"mm.mirror.max.records.per.partition.per.batch": "20000"},
    )
    # A backlog, then records keep coming: micro-batches of up to 3 x 20,000 records
    # one after another, so the signal lands in the middle of one (the case that
    # printed a thousand lines of Java stack)
    producer = BackgroundProducer(
        cluster_a.bootstrap_servers, topic, PARTITIONS, rate_per_partition=3000
    ).start()
    time.sleep(3.0)
    job = Job(config, "mirror")
    try:
        assert (
            wait_for_batches(job.err_path, 1, WAIT, alive=lambda: job.proc.poll() is None) >= 1
        ), job.stderr()[-6000:]
        tree = process_tree(job.proc.pid)
        assert any("java" in p.cmd for p in tree), tree_description(tree)
        seconds = job.stop(how)
    finally:
        producer.stop()
        kill_group(job.proc)
    assert_clean_stop(job, tree, "mirror stopped on request")
    assert seconds < 60, seconds

    # nothing lost, nothing twice: a run after the stop completes the mirror exactly
    run = run_mirror_once(config)
    assert run.returncode == 0, run.describe()
    source = read_topic(cluster_a.bootstrap_servers, topic, PARTITIONS)
    assert sum(len(v) for v in source.values()) == producer.total
    target = read_topic_committed(cluster_b.bootstrap_servers, f"A.{topic}", PARTITIONS)
    assert_same_records(source, target)


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_checkpoint_stops_cleanly(
    cluster_a: KafkaCluster,
    cluster_b: KafkaCluster,
    unique_topic: Any,
    unique_group: Any,
    tmp_path: Path,
    how: str,
) -> None:
    topic = unique_topic("stopck")
    create_topic(cluster_a.bootstrap_servers, topic, PARTITIONS)
    config = _config(tmp_path, cluster_a, cluster_b, [topic])
    producer = BackgroundProducer(cluster_a.bootstrap_servers, topic, PARTITIONS).start()
    producer.wait_produced(PARTITIONS * 200)
    producer.stop()
    run = run_mirror_once(config)  # the offset syncs the checkpoint job reads
    assert run.returncode == 0, run.describe()
    commit(cluster_a.bootstrap_servers, unique_group("stopck"), topic, dict.fromkeys(range(3), 1))

    job = Job(config, "checkpoint")
    try:
        # a micro-batch read the syncs and a round translated the group
        job.wait_for("checkpoint round", lambda e: e.get("emitted", 0) > 0)
        tree = process_tree(job.proc.pid)
        assert any("java" in p.cmd for p in tree), tree_description(tree)
        seconds = job.stop(how)
    finally:
        kill_group(job.proc)
    assert_clean_stop(job, tree, "checkpoint stopped on request")
    assert seconds < 60, seconds


def test_heartbeat_stops_cleanly_on_ctrl_c(
    cluster_a: KafkaCluster, cluster_b: KafkaCluster, tmp_path: Path
) -> None:
    config = _config(tmp_path, cluster_a, cluster_b, ["none"])
    job = Job(config, "heartbeat")
    try:
        job.wait_for("heartbeats starting")
        tree = process_tree(job.proc.pid)
        job.stop("ctrl-c")
    finally:
        kill_group(job.proc)
    assert_clean_stop(job, tree, "heartbeats stopped on request")


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_run_stops_cleanly_mid_stream(
    cluster_a: KafkaCluster,
    cluster_b: KafkaCluster,
    unique_topic: Any,
    tmp_path: Path,
    how: str,
) -> None:
    """`mm run` (mirror, checkpoint, heartbeat in one process) stopped with records
    flowing: one "run stopped on request" line, exit 0, one summary line per job."""
    topic = unique_topic("stoprun")
    create_topic(cluster_a.bootstrap_servers, topic, PARTITIONS)
    config = _config(tmp_path, cluster_a, cluster_b, [topic])
    producer = BackgroundProducer(
        cluster_a.bootstrap_servers, topic, PARTITIONS, rate_per_partition=2000
    ).start()
    job = Job(config, "run")
    try:
        job.wait_for("micro-batch mirrored", lambda e: e.get("records", 0) > 0)
        job.wait_for("checkpoint round")
        job.wait_for("heartbeats starting")
        tree = process_tree(job.proc.pid)
        seconds = job.stop(how)
    finally:
        producer.stop()
        kill_group(job.proc)
    assert_clean_stop(job, tree, "run stopped on request")
    assert seconds < 60, seconds
    summary = job.out_path.read_text().splitlines()
    assert sorted(line.split(" ", 1)[0] for line in summary) == [
        "checkpoint",
        "heartbeat",
        "mirror",
    ], summary
    assert all(": stopped, 0 restart(s)" in line for line in summary), summary
