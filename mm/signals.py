"""Stopping long-running commands cleanly on SIGTERM/SIGINT (one helper for all),
and within a bound even when a cluster does not answer (:class:`StopBound`)."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

T = TypeVar("T")

DEFAULT_SIGNALS = (signal.SIGTERM, signal.SIGINT)

# What a stop request promises: the process has exited this many seconds later,
# a frozen cluster included (docs/reliability.md, "Stopping").
STOP_PROMISE_SECONDS = 10.0
# The jobs' own stop gets this long; then the blocked calls are abandoned. The
# rest of the promise is the probe naming the silent clusters, and the exit.
STOP_BOUND_SECONDS = 7.0
PROBE_SECONDS = 1.0
# A patient stop (see StopBound) probes before it silences Spark: one second sooner
PATIENT_BOUND_SECONDS = STOP_BOUND_SECONDS - PROBE_SECONDS
# The exit code of a bounded stop: nothing was lost (a SIGTERM'd service's usual 0)
BOUNDED_STOP_EXIT = 0

ABANDONED = (
    "calls still waiting on it were abandoned: a transaction they left open is never "
    "committed (the broker aborts it), and the next start resumes from the committed "
    "positions; nothing is lost"
)


def stop_on_signals(
    stop: threading.Event,
    log: Any = None,
    signals: tuple[signal.Signals, ...] = DEFAULT_SIGNALS,
    bound: StopBound | None = None,
) -> Callable[[], None]:
    """Set ``stop`` when one of ``signals`` arrives (and start ``bound``'s clock);
    returns a function restoring the previous handlers. Outside the main thread
    (where Python cannot take signals) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def handler(signum: int, _frame: Any) -> None:
        if log is not None:
            log.info("stop requested", signal=signal.Signals(signum).name)
        stop.set()
        if bound is not None:
            bound.requested()

    previous = {sig: signal.signal(sig, handler) for sig in signals}

    def restore() -> None:
        for sig, prev in previous.items():
            signal.signal(sig, prev)

    return restore


class terminate_as_interrupt:
    """Within the block, SIGTERM raises KeyboardInterrupt in the main thread, so a
    command that cleans up in ``finally`` on Ctrl-C (stopping the processes and
    brokers it started) does the same when a supervisor or ``kill`` stops it; the
    default action would end the process at once and leave its children running.
    Outside the main thread it does nothing."""

    def __enter__(self) -> terminate_as_interrupt:
        self._previous: Any = None
        if threading.current_thread() is threading.main_thread():

            def handler(_signum: int, _frame: Any) -> None:
                raise KeyboardInterrupt

            self._previous = signal.signal(signal.SIGTERM, handler)
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)


def bounded_stop_line(what: str, unanswered: Mapping[str, str]) -> tuple[str, dict[str, Any]]:
    """The event and fields of a stop that ran into the bound: which clusters did
    not answer (``{alias: why}``, from :func:`mm.reach.unreachable`) and what became
    of the abandoned calls."""
    event = f"{what} stopped on request within {STOP_PROMISE_SECONDS:g} s"
    if unanswered:
        names = ", ".join(f"cluster {a}" for a in sorted(unanswered))
        reason = f"{names} did not answer (frozen?): {ABANDONED}"
    else:
        reason = f"every cluster answers now, yet calls were still running: {ABANDONED}"
    fields: dict[str, Any] = {
        "reason": reason,
        "unanswered": [unanswered[a] for a in sorted(unanswered)],
        "exit_code": BOUNDED_STOP_EXIT,
    }
    return event, fields


class StopBound:
    """Bounds a long-running command's stop to :data:`STOP_BOUND_SECONDS` after the
    stop request, so the process exits within :data:`STOP_PROMISE_SECONDS`.

    A frozen broker keeps its sockets open and answers nothing: a flush, a
    transaction's commit, an admin call or a micro-batch waiting on it returns
    only after librdkafka's timeouts (30-60 s each, one after another: a stop
    took 88 s). When the command has not called :meth:`finished` by the bound, a
    watchdog thread probes the clusters (``probe``: alias -> why it did not
    answer), logs the one line of :func:`bounded_stop_line`, silences Spark and
    ends the process with :data:`BOUNDED_STOP_EXIT`, leaving the blocked calls.
    That keeps exactly-once: a transaction is committed by its task or never; an
    open one is aborted by the broker (timeout, or fenced by the next start's
    producer), and every job resumes from what was committed.
    """

    def __init__(
        self,
        what: str,
        log: Any,
        probe: Callable[[], Mapping[str, str]],
        *,
        seconds: float = STOP_BOUND_SECONDS,
        patient: bool = False,
        end: Callable[[int], None] = os._exit,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``patient``: at the bound, end the process only when a cluster does not
        answer; while every one answers, let the stop go on (probing again every
        :data:`PROBE_SECONDS`): `mm backup` finishes the pass in flight that way."""
        self.what, self._log, self._probe = what, log, probe
        self.seconds, self._end, self._clock = seconds, end, clock
        self.patient = patient
        self._lock = threading.Lock()
        self._requested_at: float | None = None
        self._done = threading.Event()
        self._overran = False
        self._ended = threading.Event()

    def requested(self) -> None:
        """The stop was requested (a signal handler calls it): start the clock once."""
        with self._lock:
            if self._requested_at is not None or self._done.is_set():
                return
            self._requested_at = self._clock()
        threading.Thread(target=self._watch, name="mm-stop-bound", daemon=True).start()

    def finished(self) -> None:
        """The command's own stop is over: it logs its own "stopped" line next. When
        the watchdog took over already, this waits for it to end the process (its
        line is the one)."""
        with self._lock:
            if not self._overran:
                self._done.set()
                return
        self._ended.wait()

    def _watch(self) -> None:
        wait = self.seconds
        while not self._done.wait(wait):
            silenced = None
            if not self.patient:  # alongside the probe: both are bounded
                silenced = threading.Thread(target=_silence_spark, daemon=True)
                silenced.start()
            unanswered = self._unanswered()
            if not unanswered and self.patient:
                wait = PROBE_SECONDS  # progress is possible: the stop goes on
                continue
            with self._lock:
                if self._done.is_set():
                    return
                self._overran = True
            try:
                self._overrun(unanswered, silenced)
            finally:
                self._ended.set()
            return

    def _unanswered(self) -> dict[str, str]:
        try:
            return dict(self._probe())
        except Exception as exc:  # the line matters more than the probe
            return {"?": f"the clusters could not be probed: {exc}"}

    def _overrun(self, unanswered: Mapping[str, str], silenced: threading.Thread | None) -> None:
        if silenced is None:
            silenced = threading.Thread(target=_silence_spark, daemon=True)
            silenced.start()
        silenced.join(PROBE_SECONDS)
        event, fields = bounded_stop_line(self.what, unanswered)
        self._log.warning(
            event, seconds=round(self._clock() - (self._requested_at or 0), 1), **fields
        )
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        # not sys.exit: it would wait for the threads and librdkafka clients still
        # blocked, and run the shutdown of a Spark whose queries cannot stop
        self._end(BOUNDED_STOP_EXIT)


def cluster_probe(cfg: Any, flows: Iterable[Any]) -> Callable[[], Mapping[str, str]]:
    """The probe of :class:`StopBound` for the clusters of ``flows`` (in parallel,
    each within :data:`PROBE_SECONDS`)."""
    wanted = sorted({alias for f in flows for alias in (f.source, f.target)})

    def probe() -> Mapping[str, str]:
        from mm.reach import unreachable

        answers: dict[str, str] = {}
        t = threading.Thread(
            target=lambda: answers.update(unreachable(cfg, wanted, PROBE_SECONDS)), daemon=True
        )
        t.start()
        t.join(PROBE_SECONDS + 0.5)  # each probe returns by its timeout; a safety net
        if t.is_alive():
            return {a: f"cluster {a}: the probe did not return" for a in wanted}
        return answers

    return probe


def _silence_spark() -> None:
    """Nothing Spark prints after the bounded-stop line (its JVM exits when this
    process does: PySpark's gateway ends on its stdin's end)."""
    pyspark = sys.modules.get("pyspark")
    context = getattr(pyspark, "SparkContext", None)
    sc = getattr(context, "_active_spark_context", None)
    if sc is None:
        return
    from types import SimpleNamespace

    from mm.logs import quiet_spark_shutdown

    quiet_spark_shutdown(SimpleNamespace(sparkContext=sc))


def off_the_main_thread(work: Callable[[], T]) -> T:
    """``work()`` in a thread; its result, or its exception raised here. Python runs
    signal handlers in the main thread between bytecodes only: work blocked in a
    Kafka call there (a frozen broker: up to a minute) would hold a stop request,
    and so the start of its :class:`StopBound`, until the call returned."""
    done: list[T] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            done.append(work())
        except BaseException as exc:  # handed to the caller as is
            failed.append(exc)

    worker = threading.Thread(target=run, name="mm-work", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(0.2)
    if failed:
        raise failed[0]
    return done[0]
