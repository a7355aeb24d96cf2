"""Continuous `mm backup -c FILE` on a real broker, real Spark, the real CLI: two bursts
of records are backed up by passes of one running process, SIGTERM (to the process, as
a supervisor sends it) or SIGINT (to its whole process group, as Ctrl-C in a terminal)
stops it cleanly (exit 0, one stopped line, no traceback), and the store holds every
offset exactly once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import pytest
from confluent_kafka import Producer
from support.backup import backup_config
from support.clusters import KafkaCluster
from support.groups import run_mm
from support.mirror import MirrorRun, create_topic, kill_group, mm_env, read_partition

from mm.backup.catalog_store import FsCatalogStore
from mm.backup.layout import PartitionRef
from mm.backup.segment import read_segment

pytestmark = pytest.mark.integration

FS = pafs.LocalFileSystem()
PARTITIONS = 2
WAIT = 240.0


def produce(bootstrap: str, topic: str, tag: str, per_partition: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for part in range(PARTITIONS):
        for i in range(per_partition):
            p.produce(
                topic,
                f"{tag}-{part}-{i}".encode(),
                f"k{i % 3}".encode(),
                partition=part,
                headers=[("tag", tag.encode()), ("i", str(i).encode())],
            )
    assert p.flush(30) == 0


def backed_up_offsets(prefix: Path, region: str, topic: str, partition: int) -> list[int]:
    """Offsets of the records the partition's visible segments hold, in segment order;
    checks each segment starts right after the previous one."""
    ref = PartitionRef(str(prefix), region, topic, partition)
    _version, catalog = FsCatalogStore(FS).load(ref)
    offsets: list[int] = []
    previous_end: int | None = None
    for e in catalog.visible():
        assert previous_end is None or e.start == previous_end + 1, catalog.visible()
        meta, records = read_segment(FS, f"{prefix}/{e.key}")
        assert (meta.start, meta.end) == (e.start, e.end)
        offsets += [r.offset for r in records]
        previous_end = e.end
    return offsets


def segments_of(prefix: Path, region: str, topic: str, partition: int) -> int:
    _v, catalog = FsCatalogStore(FS).load(PartitionRef(str(prefix), region, topic, partition))
    return len(catalog.visible())


class Backup:
    """`mm backup -c config` (continuous) in its own session, output to files."""

    def __init__(self, config: Path) -> None:
        self.out_path = config.parent / "backup.out"
        self.err_path = config.parent / "backup.err"
        self._out = self.out_path.open("w")
        self._err = self.err_path.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mm", "backup", "-c", str(config)],
            cwd=config.parent,
            env=mm_env(),
            stdout=self._out,
            stderr=self._err,
            start_new_session=True,
        )
        self.started = time.monotonic()

    def run(self) -> MirrorRun:
        self._out.flush()
        self._err.flush()
        return MirrorRun(
            -1 if self.proc.returncode is None else self.proc.returncode,
            self.out_path.read_text(),
            self.err_path.read_text(),
            time.monotonic() - self.started,
        )

    def close(self) -> None:
        kill_group(self.proc)  # a JVM or Python worker left behind
        if self.proc.poll() is None:
            self.proc.wait(30)
        self._out.close()
        self._err.close()


def wait_backed_up(
    backup: Backup, prefix: Path, topic: str, expected: dict[int, list[int]]
) -> None:
    deadline = time.monotonic() + WAIT
    while True:
        assert backup.proc.poll() is None, backup.run().describe()
        got = {p: backed_up_offsets(prefix, "east", topic, p) for p in expected}
        if got == expected:
            return
        assert time.monotonic() < deadline, (
            f"not backed up within {WAIT:.0f}s: have {got}, expected {expected}\n"
            + backup.run().describe()
        )
        time.sleep(0.5)


def send_stop(proc: subprocess.Popen[Any], how: str) -> None:
    if how == "sigterm":
        proc.send_signal(signal.SIGTERM)
    else:  # Ctrl-C: the terminal signals the foreground process group, Spark's JVM too
        os.killpg(proc.pid, signal.SIGINT)


@pytest.mark.parametrize("how", ["sigterm", "ctrl-c"])
def test_continuous_backup_follows_two_bursts_and_stops_on_a_signal(
    cluster_a: KafkaCluster, unique_topic: Any, tmp_path: Path, how: str
) -> None:
    bootstrap = cluster_a.bootstrap_servers
    topic = unique_topic("bkc")
    create_topic(bootstrap, topic, PARTITIONS)
    prefix = tmp_path / "bk"
    config = backup_config(tmp_path, bootstrap, topic, "backup.interval.ms = 300", prefix=prefix)

    def committed_offsets() -> dict[int, list[int]]:
        return {
            p: [r.offset for r in read_partition(bootstrap, topic, p)] for p in range(PARTITIONS)
        }

    produce(bootstrap, topic, "one", 12)
    backup = Backup(config)
    try:
        first = committed_offsets()
        assert all(len(v) == 12 for v in first.values())
        wait_backed_up(backup, prefix, topic, first)

        produce(bootstrap, topic, "two", 7)
        second = committed_offsets()
        assert all(len(v) == 19 for v in second.values())
        wait_backed_up(backup, prefix, topic, second)

        send_stop(backup.proc, how)
        try:
            backup.proc.wait(90)
        except subprocess.TimeoutExpired:
            pytest.fail(f"mm backup did not exit within 90s of {how}\n" + backup.run().describe())
        run = backup.run()
    finally:
        backup.close()

    assert run.returncode == 0, run.describe()
    stopped = [line for line in run.stdout.splitlines() if "stopped" in line]
    assert len(stopped) == 1 and stopped[0].startswith("backup stopped: "), run.describe()
    assert "Traceback" not in run.stderr, run.describe()

    # every offset exactly once, in segments that follow each other
    for p in range(PARTITIONS):
        offsets = backed_up_offsets(prefix, "east", topic, p)
        assert offsets == second[p] and len(set(offsets)) == len(offsets)
        # the second burst came in a later pass than the first
        assert segments_of(prefix, "east", topic, p) >= 2

    passes = run.events("backup pass")
    assert sum(1 for e in passes if e["records"] > 0) >= 2, run.describe()
    assert sum(e["records"] for e in passes) == PARTITIONS * 19
    for e in passes:
        assert {"number", "partitions", "records", "segments", "seconds"} <= set(e)
    assert not run.events("backup pass failed"), run.describe()
    assert f"{PARTITIONS * 19} records" in stopped[0]

    listed = run_mm(config, "backup", "ls", "--json", timeout=120)
    assert listed.returncode == 0, listed.describe()
    rows = {r["partition"]: r for r in json.loads(listed.stdout)["partitions"]}
    assert {p: (rows[p]["records"], rows[p]["next_offset"]) for p in rows} == {
        p: (19, second[p][-1] + 1) for p in range(PARTITIONS)
    }
