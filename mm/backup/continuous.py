"""Continuous `mm backup`: passes one after another on one Spark session.

Each pass is :func:`mm.backup.job.run_backup_once` (recovery, plan, one Spark task
per range, group offsets); :mod:`mm.backup.schedule` decides the wait before the
next one (``backup.interval.ms`` from the end of a pass, none after a pass cut
short, backoff after a failed one). A failed pass never ends the process: it is
logged and the next pass continues from what the catalogs hold. Only bad
configuration (ConfigError, UsageError) ends it, with exit 2.

**Stopping.** The first SIGTERM or SIGINT stops the loop: a wait ends at once; a
pass in flight finishes (it is bounded: its ranges end where the log ended when
it started) and no new one starts. A second signal during a pass abandons it:
its Spark jobs are cancelled; segments it committed stay, copies it started are
aborted by the next run's recovery, as after a crash. The pass in flight gets to
finish only while the backed-up cluster answers: one that does not (a frozen
broker) ends the stop within 10 s (:class:`mm.signals.StopBound`, patient), which
is as safe as the crash above. A pass that fails after
the stop request (Spark's JVM got the signal too) is abandoned the same way, not
retried. ``mm mirror`` also takes SIGINT as a clean stop (exit 0).

**Spark** starts once, before the first pass, and serves every pass. PySpark
installs its own SIGINT handler when the SparkContext starts (it cancels the
jobs and raises KeyboardInterrupt), so ours is installed again after that.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Any

from mm.backup.job import BackupReport, committed_filter, run_backup_once
from mm.backup.schedule import PassOutcome, RunTotals, Schedule, pass_fields, pass_outcome
from mm.backup.settings import backup_settings
from mm.config import MirrorConfig
from mm.errors import ConfigError, UsageError
from mm.logs import get_logger
from mm.signals import PATIENT_BOUND_SECONDS, PROBE_SECONDS, StopBound, off_the_main_thread

RunPass = Callable[..., BackupReport]
_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class _Session:
    """The run's one SparkSession, started on the first :meth:`get`."""

    def __init__(self, build: Callable[[], Any]) -> None:
        self._build = build
        self._spark: Any = None

    def get(self) -> Any:
        if self._spark is None:
            self._spark = self._build()
        return self._spark

    def cancel_jobs(self) -> None:
        if self._spark is not None:
            self._spark.sparkContext.cancelAllJobs()

    def stop(self, log: Any) -> None:
        if self._spark is None:
            return
        spark, self._spark = self._spark, None
        try:
            spark.stop()
        except Exception as exc:  # e.g. its JVM got the signal too and is gone
            log.warning("Spark did not stop cleanly", error=_one_line(exc))


class _Stopper:
    """SIGTERM/SIGINT: the first sets ``stop``; a second during a pass cancels it."""

    def __init__(
        self,
        stop: threading.Event,
        log: Any,
        cancel: Callable[[], None],
        requested: Callable[[], None] = lambda: None,
    ) -> None:
        self.stop = stop
        self.log = log
        self.cancel = cancel
        self.requested = requested  # starts the stop's bound (mm.signals.StopBound)
        self.in_pass = False
        self.cancelled = False

    def handle(self, signum: int, _frame: Any) -> None:
        name = signal.Signals(signum).name
        if not self.stop.is_set():
            self.stop.set()
            self.requested()
            if self.in_pass:
                self.log.info(
                    "stop requested: the pass in flight finishes first (signal again to "
                    "abandon it)",
                    signal=name,
                )
            else:
                self.log.info("stop requested", signal=name)
            return
        if self.in_pass and not self.cancelled:
            self.cancelled = True
            self.log.warning("abandoning the pass in flight", signal=name)
            # not from the handler itself: it interrupted a py4j call of this thread
            threading.Thread(target=self._cancel, name="mm-backup-cancel", daemon=True).start()

    def _cancel(self) -> None:
        try:
            self.cancel()
        except Exception as exc:  # Spark already stopping: nothing left to cancel
            self.log.warning("could not cancel the pass's Spark jobs", error=str(exc))

    def install(self) -> Callable[[], None]:
        """Installs the handlers; returns what restores the previous ones. Outside
        the main thread (Python takes signals there only) it does nothing."""
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        previous = {s: signal.signal(s, self.handle) for s in _SIGNALS}

        def restore() -> None:
            for s, prev in previous.items():
                signal.signal(s, prev)

        return restore

    def reclaim(self) -> None:
        """Takes the signals back from whoever replaced our handlers (PySpark)."""
        if threading.current_thread() is threading.main_thread():
            for s in _SIGNALS:
                signal.signal(s, self.handle)


def check_config(cfg: MirrorConfig) -> Schedule:
    """Everything a pass would refuse for bad configuration, before Spark starts;
    the schedule of ``backup.interval.ms``."""
    settings = backup_settings(cfg)
    committed_filter(cfg, settings)
    return Schedule(settings.interval_ms)


def run_backup_continuous(
    cfg: MirrorConfig,
    *,
    timeout: float = 60.0,
    stop: threading.Event | None = None,
    spark_factory: Callable[[], Any] | None = None,
    run_pass: RunPass = run_backup_once,
) -> RunTotals:
    """Passes until ``stop`` is set (by SIGTERM/SIGINT, or the caller); the totals.

    Raises ConfigError/UsageError for bad configuration (before the first pass,
    or from a pass); every other error of a pass is logged and retried."""
    log = get_logger("mm.backup")
    schedule = check_config(cfg)
    stop = stop or threading.Event()
    session = _Session(spark_factory or (lambda: _spark(cfg)))
    totals = RunTotals()
    # a pass in flight finishes while every cluster answers; one that does not (a
    # frozen broker) ends the stop within 10 s: segments are committed or not at all,
    # and the next run's recovery aborts the copies left open, as after a crash
    bound = StopBound(
        "backup",
        log,
        _backed_up_cluster_probe(cfg),
        seconds=PATIENT_BOUND_SECONDS,
        patient=True,
    )
    stopper = _Stopper(stop, log, session.cancel_jobs, bound.requested)
    # installed first: a signal while Spark starts is a stop, not a kill
    restore = stopper.install()
    try:
        session.get()
        stopper.reclaim()
        log.info("continuous backup started", interval_ms=schedule.interval_ms)
        while not stop.is_set():
            number = totals.passes + 1
            report: BackupReport | None = None
            error: Exception | None = None
            stopper.in_pass = True
            try:
                report = off_the_main_thread(
                    lambda: run_pass(cfg, timeout=timeout, spark_factory=session.get)
                )
            except (ConfigError, UsageError):
                raise
            except Exception as exc:  # the broker, the store, Spark: retried
                error = exc
            finally:
                stopper.in_pass = False
            if error is not None and stop.is_set():
                # cancelled by a second signal, or Spark got the signal too (a whole
                # process group signalled): nothing to retry, the next run continues
                totals.abandoned = True
                log.info("pass abandoned on request", number=number, error=_one_line(error))
                break
            outcome = pass_outcome(report) if report is not None else PassOutcome(failed=True)
            totals.add(report, outcome)
            schedule, delay = schedule.after(outcome)
            _log_pass(log, number, report, error, delay, stop.is_set())
            if stop.wait(delay):
                break
    finally:
        session.stop(log)
        restore()
        bound.finished()  # in time: else the bound's line is the run's last
    return totals


def _backed_up_cluster_probe(cfg: MirrorConfig) -> Callable[[], Any]:
    """The probe of the cluster a backup reads (``backup.cluster``)."""
    from mm.reach import unreachable

    alias = backup_settings(cfg).cluster
    return lambda: unreachable(cfg, [alias], PROBE_SECONDS)


def _one_line(exc: BaseException) -> str:
    """The exception's first line: a Spark failure's text is a whole JVM stack."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def _spark(cfg: MirrorConfig) -> Any:
    from mm.spark_session import build_spark

    return build_spark("mm-backup", cfg.spark, cfg.setting("spark.class.archive"))


def _log_pass(
    log: Any,
    number: int,
    report: BackupReport | None,
    error: Exception | None,
    delay: float,
    stopping: bool,
) -> None:
    after = {} if stopping else {"next_pass_in_seconds": round(delay, 3)}
    if report is None:
        log.error(
            "backup pass failed",
            number=number,
            error=_one_line(error) if error is not None else None,
            **after,
        )
        return
    for row in report.rows:
        log.debug("backup pass partition", number=number, **row.to_json())
    for key in report.recovered:
        log.info("aborted an unfinished copy of a crashed run", number=number, key=key)
    log.debug(
        "group offsets saved",
        number=number,
        offsets=report.group_offsets,
        key=report.groups_key,
        spark_tasks=report.spark_tasks,
    )
    for row in report.rows:
        s = row.summary
        if s is not None and (s.lost or s.lost_unrecorded):
            log.warning(
                "offsets deleted by retention before they were backed up",
                topic=row.plan.topic,
                partition=row.plan.partition,
                lost=s.lost,
                lost_unrecorded=s.lost_unrecorded,
            )
    if report.ok:
        log.info("backup pass", number=number, **pass_fields(report), **after)
        return
    errors = {f"{r.plan.topic}[{r.plan.partition}]": r.error for r in report.rows if r.error}
    errors.update({f"group {g}": e for g, e in report.group_errors.items()})
    log.error("backup pass failed", number=number, **pass_fields(report), errors=errors, **after)
