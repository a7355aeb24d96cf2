"""What an embedded cluster is, as the commands and the drill see it, and what its two
launchers (Apache Kafka, the embedded broker) share."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from mm.embedded import procs
from mm.errors import MirrorError


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


class LocalCluster:
    """One broker process on a loopback port; the port is pinned once it has run, so
    a restart keeps the address clients know."""

    name: str
    profile: str
    storage_engine: str
    log_path: Path

    def __init__(self) -> None:
        self._port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def port(self) -> int:
        if self._port is None:
            raise MirrorError(f"embedded cluster {self.name} has not been started")
        return self._port

    @property
    def bootstrap_servers(self) -> str:
        return f"{procs.LOOPBACK}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        return self._proc

    def info(self) -> ClusterInfo:
        return ClusterInfo(
            name=self.name,
            bootstrap_servers=self.bootstrap_servers,
            log_path=self.log_path,
            pid=self.pid,
            port=self.port,
            storage_engine=self.storage_engine,
            profile=self.profile,
        )

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def release(self) -> None:
        """Forget the process without stopping it (``mm embedded up --detach``)."""
        self._proc = None
