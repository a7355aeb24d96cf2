"""What an embedded cluster is, as the commands and the drill see it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ClusterInfo:
    name: str
    bootstrap_servers: str
    log_path: Path
    pid: int | None
    port: int
    storage_engine: str
    # the broker profile (mm.kafka.profile) the cluster's clients must declare
    profile: str = "kafka"
