"""What each job of ``mm run`` is doing, for ``mm status`` and the metrics.

The run keeps one :class:`JobState` per job and writes them all, with its pid and
the time, to ``<mm.state.dir>/run/jobs.json`` whenever one changes and every few
seconds besides (atomically: a temporary file renamed over the old one, so a
reader never sees half a file). ``mm status`` on the same host reads it: a file
not refreshed within :data:`STALE_AFTER_MS` means the run is not running.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mm.state_dir import StateDirError, write_atomically

# states of a job
STARTING = "starting"
RUNNING = "running"
BACKOFF = "backoff"  # failed, waiting to restart
STOPPED = "stopped"

JOB_STATES = (STARTING, RUNNING, BACKOFF, STOPPED)

WRITE_EVERY_SECONDS = 5.0
STALE_AFTER_MS = 30_000


def jobs_file(state_dir: str | Path) -> Path:
    return Path(state_dir) / "run" / "jobs.json"


@dataclass
class JobState:
    job: str
    flows: list[str]
    state: str = STARTING
    since_ms: int = 0  # when it entered ``state``
    restarts: int = 0
    failures_in_a_row: int = 0
    last_error: str | None = None
    last_error_ms: int | None = None
    retry_at_ms: int | None = None


@dataclass
class RunSnapshot:
    """The content of jobs.json, as read back."""

    pid: int
    updated_ms: int
    started_ms: int
    jobs: list[JobState] = field(default_factory=list)

    def stale(self, now_ms: int) -> bool:
        return now_ms - self.updated_ms > STALE_AFTER_MS

    def to_json(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "started_ms": self.started_ms,
            "updated_ms": self.updated_ms,
            "jobs": [asdict(j) for j in self.jobs],
        }


class RunState:
    """The run's job states; thread-safe (each job's supervisor thread updates its own)."""

    def __init__(
        self,
        jobs: dict[str, list[str]],
        path: Path | None,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self._clock = clock_ms
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()  # writers share the temporary file's name
        now = clock_ms()
        self._started = now
        self._jobs = {name: JobState(name, flows, since_ms=now) for name, flows in jobs.items()}
        self._path = path
        self.write_error: str | None = None

    def jobs(self) -> list[JobState]:
        with self._lock:
            return [JobState(**asdict(j)) for j in self._jobs.values()]

    def running(self, job: str) -> None:
        self._set(job, RUNNING, retry_at_ms=None)

    def failed(self, job: str, error: str, failures_in_a_row: int, delay: float) -> None:
        now = self._clock()
        self._set(
            job,
            BACKOFF,
            last_error=error,
            last_error_ms=now,
            failures_in_a_row=failures_in_a_row,
            retry_at_ms=now + int(delay * 1000),
        )

    def restarting(self, job: str) -> None:
        with self._lock:
            self._jobs[job].restarts += 1
        self._set(job, STARTING)

    def stopped(self, job: str) -> None:
        self._set(job, STOPPED, retry_at_ms=None)

    def _set(self, job: str, state: str, **changes: Any) -> None:
        with self._lock:
            j = self._jobs[job]
            if j.state != state:
                j.state, j.since_ms = state, self._clock()
            for k, v in changes.items():
                setattr(j, k, v)
        try:
            self.write()
        except StateDirError as exc:
            # the jobs keep running; the run's own loop writes again and reports it
            self.write_error = str(exc)

    def snapshot(self) -> RunSnapshot:
        return RunSnapshot(os.getpid(), self._clock(), self._started, self.jobs())

    def write(self) -> None:
        """Write jobs.json atomically (no-op without a path); StateDirError naming it."""
        if self._path is None:
            return
        data = json.dumps(self.snapshot().to_json(), indent=1)
        with self._write_lock:  # one writer at a time: each rename carries a whole file
            write_atomically(self._path, data)
            self.write_error = None


def read_run_state(path: Path) -> RunSnapshot | None:
    """jobs.json as written by a run, or None when there is none.

    Raises ValueError naming the file when it is not a run state document."""
    try:
        raw = path.read_text()
    except FileNotFoundError:
        return None
    try:
        doc = json.loads(raw)
        return RunSnapshot(
            pid=int(doc["pid"]),
            updated_ms=int(doc["updated_ms"]),
            started_ms=int(doc["started_ms"]),
            jobs=[JobState(**j) for j in doc["jobs"]],
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(
            f"{path} is not an mm run state file ({exc}); expected the JSON document "
            "`mm run` writes (delete it if no run uses this state dir)"
        ) from None
