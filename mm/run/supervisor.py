"""Runs ``mm run``'s jobs side by side, restarting each one that fails.

Each job is a function that runs until the shared stop event is set (it returns
then) or fails (it raises). A supervisor thread per job calls it again after the
:class:`~mm.run.backoff.Backoff` delay when it fails, without touching the other
jobs; the failure, the delay and the restart count go to the log and to the
:class:`~mm.run.state.RunState`. A job that returns although no stop was
requested counts as a failure too: a long-running job has no reason to end.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mm.run.backoff import Backoff
from mm.run.state import RunState


@dataclass(frozen=True)
class Job:
    name: str
    flows: list[str]
    run: Callable[[threading.Event], Any]


def _text(exc: BaseException) -> str:
    """The exception's message; a Py4J error builds its message by asking the JVM,
    which fails once the JVM is gone (a signal to the process group stops both)."""
    try:
        return str(exc)
    except Exception as unreadable:
        return f"(message unreadable: {type(unreadable).__name__}: {unreadable})"


def describe(exc: BaseException) -> str:
    text = _text(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


class Supervisor:
    def __init__(
        self,
        jobs: list[Job],
        state: RunState,
        stop: threading.Event,
        log: Any,
        backoff: Backoff | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.jobs = jobs
        self.state = state
        self.stop = stop
        self.backoff = backoff or Backoff()
        self._log = log
        self._clock = clock
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        for job in self.jobs:
            t = threading.Thread(target=self._supervise, args=(job,), name=f"mm-run-{job.name}")
            t.daemon = True  # a job stuck in a blocking call must not keep the process alive
            t.start()
            self._threads.append(t)

    def alive(self) -> list[str]:
        return [t.name.removeprefix("mm-run-") for t in self._threads if t.is_alive()]

    def join(self, timeout: float) -> list[str]:
        """Wait up to ``timeout`` seconds for every job to stop; the names still running."""
        deadline = self._clock() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - self._clock()))
        return self.alive()

    def _supervise(self, job: Job) -> None:
        failures = 0
        log = self._log.bind(job=job.name)
        while not self.stop.is_set():
            started = self._clock()
            self.state.running(job.name)
            log.info("job started", flows=job.flows)
            try:
                job.run(self.stop)
                if self.stop.is_set():
                    break
                error = "the job ended without a stop request"
            except Exception as exc:  # every failure is logged, counted and retried
                if self.stop.is_set():
                    # e.g. Spark's JVM already shut down by a signal to the process group
                    log.debug("job ended with an error while stopping", error=_text(exc)[:4000])
                    break
                error = describe(exc)
            failures = self.backoff.failures_in_a_row(failures, self._clock() - started)
            delay = self.backoff.delay(failures)
            log.error(
                "job failed; restarting",
                error=error,
                failures_in_a_row=failures,
                retry_in_seconds=delay,
            )
            self.state.failed(job.name, error, failures, delay)
            if self.stop.wait(delay):
                break
            self.state.restarting(job.name)
        self.state.stopped(job.name)
        log.debug("job stopped")  # "run stopped on request" is the run's one line
