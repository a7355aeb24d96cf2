"""Continuous backup's driver loop with a fake pass and a fake Spark session: one
session for every pass, waits as the schedule says, failed passes retried, bad
configuration ends the run, SIGTERM/SIGINT stop it (a second signal cancels the
pass in flight). The signals are real: sent to this process."""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import pytest

from mm.backup.continuous import run_backup_continuous
from mm.backup.job import BackupReport, PartitionRow
from mm.backup.plan import PartitionPlan
from mm.backup.task import RangeSummary
from mm.config import build_config
from mm.errors import ConfigError, MirrorError

pytestmark = pytest.mark.unit

PROPS = {
    "clusters": "A",
    "A.bootstrap.servers": "127.0.0.1:1",
    "backup.cluster": "A",
    "backup.path": "/nowhere/backup",
    "backup.interval.ms": "2000",
}
QUICK = {**PROPS, "backup.interval.ms": "50"}


class RecordingStop(threading.Event):
    """A stop event whose waits return at once, recording how long they were asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(-1.0 if timeout is None else timeout)
        return self.is_set()


class FakeSpark:
    def __init__(self) -> None:
        self.stopped = 0
        self.cancelled = threading.Event()
        self.sparkContext = self

    def cancelAllJobs(self) -> None:  # PySpark's name
        self.cancelled.set()

    def stop(self) -> None:
        self.stopped += 1


def good_report(records: int, *, reached_end: bool = True) -> BackupReport:
    end = records if reached_end else records + 5
    plan = PartitionPlan("t", 0, 0, end, 0, 0)
    summary = RangeSummary("t", 0, 0, end, records, records, 1)
    return BackupReport("A", "A", "/b", "raw", rows=[PartitionRow(plan, summary)])


def failed_task_report() -> BackupReport:
    plan = PartitionPlan("t", 0, 0, 9, 0, 0)
    summary = RangeSummary("t", 0, 0, 9, 0, error="BackupReadError: no data")
    return BackupReport("A", "A", "/b", "raw", rows=[PartitionRow(plan, summary)])


class Passes:
    """Plays ``script`` (reports, exceptions, or callables run during the pass)."""

    def __init__(self, stop: threading.Event, *script: Any) -> None:
        self.stop = stop
        self.script = list(script)
        self.sessions: list[Any] = []

    def __call__(self, _cfg: Any, *, timeout: float, spark_factory: Any) -> BackupReport:
        assert timeout == 7.0
        self.sessions.append(spark_factory())
        step = self.script.pop(0)
        if not self.script:
            self.stop.set()  # the last scripted pass ends the run
        if callable(step):
            step = step()
        if isinstance(step, BaseException):
            raise step
        assert isinstance(step, BackupReport)
        return step


def run(stop: threading.Event, passes: Passes, spark: FakeSpark, props: Any = None) -> Any:
    return run_backup_continuous(
        build_config(props or PROPS),
        timeout=7.0,
        stop=stop,
        spark_factory=lambda: spark,
        run_pass=passes,
    )


def test_passes_share_one_session_and_wait_as_scheduled():
    stop, spark = RecordingStop(), FakeSpark()
    passes = Passes(
        stop,
        good_report(10),
        good_report(3, reached_end=False),  # cut short with progress: no wait
        MirrorError("the Spark job failed: lost executor"),
        good_report(0),
        good_report(2),
    )
    totals = run(stop, passes, spark)
    assert len(passes.sessions) == 5 and all(s is spark for s in passes.sessions)
    assert spark.stopped == 1  # once, at the end
    # interval, none, backoff 1 (the interval), interval, then the stop
    assert stop.waits == [2.0, 0.0, 2.0, 2.0, 2.0]
    assert (totals.passes, totals.failed, totals.records, totals.segments) == (5, 1, 15, 4)


def test_failures_in_a_row_back_off_and_a_good_pass_resets():
    stop, spark = RecordingStop(), FakeSpark()
    passes = Passes(
        stop,
        OSError("store unreachable"),
        failed_task_report(),
        RuntimeError("unexpected"),
        good_report(1),
    )
    totals = run(stop, passes, spark)
    assert stop.waits == [2.0, 4.0, 8.0, 2.0]
    assert (totals.passes, totals.failed) == (4, 3)


def test_bad_configuration_ends_the_run_before_spark_starts():
    stop, spark = RecordingStop(), FakeSpark()
    passes = Passes(stop, good_report(1))
    with pytest.raises(ConfigError, match=r"backup\.interval\.ms"):
        run(stop, passes, spark, {**PROPS, "backup.interval.ms": "soon"})
    assert passes.sessions == [] and spark.stopped == 0
    with pytest.raises(ConfigError, match=r"backup\.committed\.filter"):
        run(
            stop,
            passes,
            spark,
            {**PROPS, "backup.committed.filter": "raw", "A.security.protocol": "SSL"},
        )


def test_a_configuration_error_from_a_pass_ends_the_run():
    stop, spark = RecordingStop(), FakeSpark()
    passes = Passes(stop, ConfigError("backup.path", "s3://x", "a reachable bucket"), None)
    with pytest.raises(ConfigError):
        run(stop, passes, spark)
    assert spark.stopped == 1


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_a_pass_lets_it_finish_then_stops(sig):
    stop, spark = threading.Event(), FakeSpark()
    before = signal.getsignal(sig)

    def signalled_pass() -> BackupReport:
        os.kill(os.getpid(), sig)
        time.sleep(0.2)  # the handler runs in this (main) thread meanwhile
        assert stop.is_set()
        return good_report(4)

    passes = Passes(stop, good_report(1), signalled_pass, good_report(99))
    passes.stop = threading.Event()  # only the signal may stop this run
    totals = run(stop, passes, spark, QUICK)
    # the signalled pass finished and counted; the third never ran
    assert (totals.passes, totals.records, totals.abandoned) == (2, 5, False)
    assert not spark.cancelled.is_set()
    assert signal.getsignal(sig) is before  # handlers restored


def test_a_second_signal_abandons_the_pass_in_flight():
    stop, spark = threading.Event(), FakeSpark()

    def cancelled_pass() -> BaseException:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.1)
        os.kill(os.getpid(), signal.SIGTERM)
        # as collect() returns when Spark cancels the job
        assert spark.cancelled.wait(10), "the second signal did not cancel the Spark jobs"
        return MirrorError("the Spark job failed: Job 3 cancelled")

    passes = Passes(stop, good_report(2), cancelled_pass, good_report(99))
    passes.stop = threading.Event()
    totals = run(stop, passes, spark, QUICK)
    assert (totals.passes, totals.records, totals.abandoned) == (1, 2, True)
    assert totals.stopped_line().endswith("the pass in flight was abandoned")
    assert spark.stopped == 1


def test_a_signal_during_the_wait_stops_at_once():
    stop, spark = threading.Event(), FakeSpark()
    props = {**PROPS, "backup.interval.ms": "600000"}  # ten minutes: must not be waited out
    passes = Passes(threading.Event(), good_report(1), good_report(99))
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGTERM))
    started = time.monotonic()
    timer.start()
    try:
        totals = run(stop, passes, spark, props)
    finally:
        timer.cancel()
    assert time.monotonic() - started < 30
    assert totals.passes == 1 and len(passes.script) == 1


def test_sigint_stays_a_clean_stop_after_spark_installs_its_own_handler():
    stop = threading.Event()

    def pyspark_like_handler(_signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt  # PySpark's SIGINT handler cancels the jobs and raises this

    def start_spark() -> FakeSpark:
        signal.signal(signal.SIGINT, pyspark_like_handler)
        return FakeSpark()

    def interrupted_pass() -> BackupReport:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.1)
        return good_report(3)

    passes = Passes(threading.Event(), interrupted_pass, good_report(99))
    before = signal.getsignal(signal.SIGINT)
    try:
        totals = run_backup_continuous(
            build_config(QUICK), timeout=7.0, stop=stop, spark_factory=start_spark, run_pass=passes
        )
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, before)
        pytest.fail("SIGINT reached the handler Spark installed instead of the backup's")
    assert (totals.passes, totals.records) == (1, 3) and stop.is_set()
    assert signal.getsignal(signal.SIGINT) is before


def test_a_signal_while_spark_starts_stops_before_the_first_pass():
    stop, spark = threading.Event(), FakeSpark()

    def slow_start() -> FakeSpark:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.1)
        return spark

    passes = Passes(threading.Event(), good_report(1))
    totals = run_backup_continuous(
        build_config(QUICK), timeout=7.0, stop=stop, spark_factory=slow_start, run_pass=passes
    )
    assert totals.passes == 0 and passes.sessions == [] and spark.stopped == 1


def test_spark_failing_to_stop_is_a_warning_not_an_error():
    class Dying(FakeSpark):
        def stop(self) -> None:
            raise ConnectionRefusedError("the JVM is gone")

    stop = RecordingStop()
    passes = Passes(stop, good_report(1))
    totals = run_backup_continuous(
        build_config(QUICK), timeout=7.0, stop=stop, spark_factory=Dying, run_pass=passes
    )
    assert totals.passes == 1


def test_a_pass_failing_after_the_stop_request_is_abandoned_not_retried():
    # a whole process group signalled: Spark's JVM stops too and the pass fails
    stop, spark = threading.Event(), FakeSpark()

    def pass_whose_spark_died() -> BaseException:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.1)
        return MirrorError("the Spark job failed: SparkContext was shut down")

    passes = Passes(threading.Event(), good_report(2), pass_whose_spark_died, good_report(99))
    totals = run(stop, passes, spark, QUICK)
    assert (totals.passes, totals.failed, totals.abandoned) == (1, 0, True)
    assert not spark.cancelled.is_set() and len(passes.script) == 1
