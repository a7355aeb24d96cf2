"""Helpers of the `mm run` tests: the properties file, one-shot commands."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from support.clusters import KafkaCluster
from support.mirror import mirror_properties, mm_env


def run_properties(
    tmp_path: Path, a: KafkaCluster, b: KafkaCluster, topic: str, **extra: str
) -> Path:
    return mirror_properties(
        tmp_path / "mm.properties",
        a.bootstrap_servers,
        b.bootstrap_servers,
        [topic],
        state_dir=tmp_path / "state",
        extra={
            "mm.mirror.trigger.seconds": "0.5",
            "emit.checkpoints.interval.seconds": "1",
            "emit.heartbeats.interval.seconds": "1",
            "sync.group.offsets.enabled": "false",
            **extra,
        },
    )


def mm_command(config: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mm", *args, "-c", str(config)],
        cwd=config.parent,
        env=mm_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
