"""`mm backup --once` killed with SIGKILL (the whole process tree: driver, JVM, Python
workers) at seeded random moments while it copies, then passes run to completion:
every source offset is stored exactly once with its record, `mm backup verify`
finds the store consistent, and each catalog equals the index rebuilt from the files.
"""

from __future__ import annotations

import random
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.fs as pafs
import pytest
from support.backup import assert_backup_equals_source, backup_config, produce_numbered
from support.clusters import KafkaCluster
from support.eos import kill_groups, process_tree, wait_all_gone
from support.groups import run_mm
from support.mirror import create_topic, mm_env

from mm.backup.catalog import STARTED
from mm.backup.catalog_store import FsCatalogStore
from mm.backup.layout import PartitionRef
from mm.backup.rebuild import rebuild_catalog

pytestmark = pytest.mark.integration

FS = pafs.LocalFileSystem()
PARTITIONS = 3
# per partition: enough that a pass still copies after several kills (a pass of 3 x
# 4,000 finished before its third kill on a loaded CI machine)
RECORDS = 12_000
REGION = "east"
KILLS = 5
SEED = 12
FIRST_COMMIT_WITHIN = 180


def catalog_versions(prefix: Path) -> int:
    return sum(1 for _ in (prefix / "_catalog").rglob("v*.json"))


def backed_up_to(prefix: Path, topic: str) -> dict[int, int | None]:
    store = FsCatalogStore(FS)
    return {
        p: store.load(PartitionRef(str(prefix), REGION, topic, p))[1].next_offset
        for p in range(PARTITIONS)
    }


def kill_during_copy(config: Path, prefix: Path, delay: float, n: int) -> bool:
    """Starts a pass; once it committed a catalog version, waits ``delay`` seconds and
    SIGKILLs its whole tree. False when the pass ended by itself first."""
    out = (config.parent / f"killed-{n}.out").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "mm", "backup", "-c", str(config), "--once"],
        cwd=config.parent,
        env=mm_env(),
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        seen = catalog_versions(prefix)
        # a loaded CI host (four workers on two cores) took 60 s from the command's
        # start to its first catalog version, and 188 s for the whole pass
        deadline = time.monotonic() + FIRST_COMMIT_WITHIN
        while catalog_versions(prefix) == seen:
            assert time.monotonic() < deadline, (
                f"the pass committed nothing within {FIRST_COMMIT_WITHIN}s"
            )
            if proc.poll() is not None:
                return False
            time.sleep(0.02)
        time.sleep(delay)
        if proc.poll() is not None:
            return False
        tree = process_tree(proc.pid)
        kill_groups(tree)
        left = wait_all_gone(tree, 10)
        assert not left, f"processes survived SIGKILL: {left}"
        return True
    finally:
        if proc.poll() is None:  # the deadline's assertion failed: not left running
            kill_groups(process_tree(proc.pid))
        proc.wait(30)
        out.close()


def test_backup_killed_at_random_moments_then_completed(
    cluster_a: KafkaCluster, unique_topic, tmp_path: Path
) -> None:
    bootstrap = cluster_a.bootstrap_servers
    topic = unique_topic("bkkill")
    create_topic(bootstrap, topic, PARTITIONS)
    produce_numbered(bootstrap, topic, PARTITIONS, RECORDS, "k")
    prefix = tmp_path / "bk"
    config = backup_config(
        tmp_path,
        bootstrap,
        topic,
        "backup.segment.records = 20",
        region=REGION,
        prefix=prefix,
        spark_master="local[2]",
    )
    rng = random.Random(SEED)
    interrupted = []
    for n in range(KILLS):
        if not kill_during_copy(config, prefix, rng.uniform(0.0, 1.5), n):
            break
        interrupted.append(backed_up_to(prefix, topic))
    # the kills landed while the backup was still copying
    assert len(interrupted) >= 3, interrupted
    assert any(o != RECORDS for at in interrupted for o in at.values()), interrupted

    done = run_mm(config, "backup", "--once")
    assert done.returncode == 0, done.describe()
    assert backed_up_to(prefix, topic) == dict.fromkeys(range(PARTITIONS), RECORDS)
    stored = assert_backup_equals_source(FS, str(prefix), REGION, bootstrap, topic, PARTITIONS)
    assert stored == PARTITIONS * RECORDS

    verified = run_mm(config, "backup", "verify")
    assert verified.returncode == 0, verified.describe()
    store = FsCatalogStore(FS)
    for p in range(PARTITIONS):
        ref = PartitionRef(str(prefix), REGION, topic, p)
        _, catalog = store.load(ref)
        assert not catalog.in_state(STARTED)  # the last pass aborted the killed copies
        assert rebuild_catalog(FS, ref).catalog == catalog
