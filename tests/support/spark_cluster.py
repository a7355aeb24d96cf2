"""A Spark standalone cluster (one master, one worker) run from the pyspark wheel.

Both daemons are started with ``bin/spark-class`` in sessions of their own
(their process group ids are their pids) and die with the test process
(PR_SET_PDEATHSIG, see mm.embedded.procs). :meth:`StandaloneCluster.stop`
SIGTERMs then SIGKILLs every process group of both trees, executors and their
PySpark daemons included (a PySpark daemon moves itself into a group of its
own), and reports anything that survived.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mm.embedded import procs
from support.eos import Proc, kill_groups, process_tree, survivors, wait_all_gone

LOOPBACK = "127.0.0.1"


def pyspark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def spark_env(work: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "SPARK_HOME": str(pyspark_home()),
            "SPARK_LOCAL_IP": LOOPBACK,
            "SPARK_LOCAL_DIRS": str(work / "local"),
            "SPARK_LOG_DIR": str(work / "logs"),
            "SPARK_WORKER_DIR": str(work / "worker"),
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
        }
    )
    return env


@dataclass
class StandaloneCluster:
    """``spark://127.0.0.1:<port>`` with one worker of ``cores`` cores and ``memory``."""

    work: Path
    cores: int = 2
    memory: str = "1g"
    start_timeout: float = 120.0
    port: int = 0
    ui_port: int = 0
    master_log: Path = field(init=False)
    worker_log: Path = field(init=False)
    _master: Any = None
    _worker: Any = None
    _seen: dict[int, Proc] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.master_log = self.work / "master.log"
        self.worker_log = self.work / "worker.log"

    @property
    def url(self) -> str:
        return f"spark://{LOOPBACK}:{self.port}"

    def start(self) -> StandaloneCluster:
        for sub in ("local", "logs", "worker"):
            (self.work / sub).mkdir(parents=True, exist_ok=True)
        spark_class = str(pyspark_home() / "bin" / "spark-class")
        env = spark_env(self.work)
        self.port, self.ui_port = procs.free_port(), procs.free_port()
        self._master = procs.spawn(
            [
                spark_class,
                "org.apache.spark.deploy.master.Master",
                "--host",
                LOOPBACK,
                "--port",
                str(self.port),
                "--webui-port",
                str(self.ui_port),
            ],
            log_path=self.master_log,
            env=env,
        )
        self._wait(lambda: self.status() is not None, "master web UI to answer", self._master)
        self._worker = procs.spawn(
            [
                spark_class,
                "org.apache.spark.deploy.worker.Worker",
                self.url,
                "--host",
                LOOPBACK,
                "--cores",
                str(self.cores),
                "--memory",
                self.memory,
                "--webui-port",
                str(procs.free_port()),
                "--work-dir",
                str(self.work / "worker"),
            ],
            log_path=self.worker_log,
            env=env,
        )
        self._wait(lambda: self.alive_workers() >= 1, "the worker to register", self._worker)
        return self

    def _wait(self, ready: Any, what: str, proc: Any) -> None:
        deadline = time.monotonic() + self.start_timeout
        while not ready():
            if proc.poll() is not None:
                raise RuntimeError(
                    f"Spark daemon exited ({proc.returncode}) waiting for {what}:\n{self.logs()}"
                )
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out waiting for {what}:\n{self.logs()}")
            self.track()
            time.sleep(0.3)
        self.track()

    def status(self) -> dict[str, Any] | None:
        """The master's JSON status (``/json``), None while it does not answer."""
        try:
            with urllib.request.urlopen(f"http://{LOOPBACK}:{self.ui_port}/json", timeout=2) as r:
                data: dict[str, Any] = json.loads(r.read())
                return data
        except (OSError, ValueError):
            return None

    def alive_workers(self) -> int:
        st = self.status() or {}
        return int(st.get("aliveworkers", 0))

    def completed_apps(self) -> list[dict[str, Any]]:
        return list((self.status() or {}).get("completedapps", []))

    def track(self) -> list[Proc]:
        """Remember every process of both daemons' trees (executors come and go)."""
        for proc in (self._master, self._worker):
            if proc is not None and proc.poll() is None:
                for p in process_tree(proc.pid):
                    self._seen.setdefault(p.pid, p)
        return list(self._seen.values())

    def logs(self) -> str:
        return "\n".join(
            f"--- {path.name}\n{procs.log_tail(path, 40)}"
            for path in (self.master_log, self.worker_log)
        )

    def stop(self, grace: float = 5.0) -> list[Proc]:
        """Stop both daemons and everything they started; returns survivors (should be [])."""
        seen = self.track()
        # SIGTERM first (the worker then stops its executors), SIGKILL what is left;
        # executors' PySpark daemons sit in process groups of their own
        for pgid in {p.pgid for p in survivors(seen)}:
            try:
                os.killpg(pgid, signal.SIGTERM)
            except (ProcessLookupError, PermissionError):
                pass
        kill_groups(wait_all_gone(seen, grace))
        for child in (self._worker, self._master):
            if child is not None:
                child.wait(30)  # reap
        return wait_all_gone(seen, 15)
