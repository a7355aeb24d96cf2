"""Continuous backup's pure decisions: the wait after a pass (interval, no wait after a
pass cut short with progress, backoff after failures), a report's outcome, and the
``backup.interval.ms`` key."""

from __future__ import annotations

from pathlib import Path

import pytest

from mm.backup.job import BackupReport, PartitionRow
from mm.backup.plan import PartitionPlan
from mm.backup.schedule import (
    BACKOFF_MAX_MS,
    PassOutcome,
    RunTotals,
    Schedule,
    pass_fields,
    pass_outcome,
)
from mm.backup.settings import DEFAULT_INTERVAL_MS, parse_backup_settings
from mm.backup.task import RangeSummary
from mm.errors import ConfigError

pytestmark = pytest.mark.unit

OK = PassOutcome()
FAILED = PassOutcome(failed=True)


def test_a_good_pass_waits_the_interval():
    s, delay = Schedule(2500).after(OK)
    assert delay == 2.5 and s.failures == 0
    # progress alone (a pass that reached its ends) still waits
    assert Schedule(2500).after(PassOutcome(progressed=True))[1] == 2.5


def test_a_pass_cut_short_with_progress_skips_the_wait():
    s, delay = Schedule(2500).after(PassOutcome(cut_short=True, progressed=True))
    assert delay == 0.0 and s.failures == 0


def test_a_pass_cut_short_without_progress_waits():
    # a partition that keeps stopping at the same offset must not spin the loop
    assert Schedule(2500).after(PassOutcome(cut_short=True))[1] == 2.5


def test_failures_back_off_from_the_interval_doubling_up_to_the_cap():
    s = Schedule(10_000)
    delays = []
    for _ in range(8):
        s, d = s.after(FAILED)
        delays.append(d)
    assert delays == [10, 20, 40, 80, 160, 300, 300, 300]
    assert s.failures == 8
    # a good pass resets the backoff
    s, d = s.after(OK)
    assert (s.failures, d) == (0, 10)
    assert s.after(FAILED)[1] == 10


def test_failure_beats_cut_short():
    s, delay = Schedule(1000).after(PassOutcome(failed=True, cut_short=True, progressed=True))
    assert delay == 1.0 and s.failures == 1


def test_an_interval_above_the_cap_is_the_backoff():
    s = Schedule(BACKOFF_MAX_MS * 2)
    for _ in range(3):
        s, d = s.after(FAILED)
        assert d == BACKOFF_MAX_MS * 2 / 1000


def test_a_long_outage_does_not_grow_numbers_without_bound():
    s = Schedule(1, failures=10_000)
    assert s.after(FAILED)[1] == BACKOFF_MAX_MS / 1000


@pytest.mark.parametrize("bad", [0, -1])
def test_schedule_refuses_a_non_positive_interval(bad):
    with pytest.raises(ValueError, match="interval_ms must be positive"):
        Schedule(bad)


def row(start: int, end: int, reached: int | None, error: str | None = None) -> PartitionRow:
    plan = PartitionPlan("t", 0, 0, end, start, start)
    if reached is None:
        return PartitionRow(plan, None)
    summary = RangeSummary("t", 0, start, end, reached, reached - start, 1, error=error)
    return PartitionRow(plan, summary)


def report(*rows: PartitionRow, group_errors: dict[str, str] | None = None) -> BackupReport:
    return BackupReport(
        "A", "A", "/b", "raw", rows=list(rows), group_errors=dict(group_errors or {})
    )


def test_outcome_of_a_complete_pass():
    assert pass_outcome(report(row(0, 10, 10), row(5, 5, None))) == PassOutcome(
        failed=False, cut_short=False, progressed=True
    )
    assert pass_outcome(report(row(5, 5, None))) == PassOutcome()


def test_outcome_of_a_range_stopped_below_its_planned_end():
    assert pass_outcome(report(row(0, 10, 7))) == PassOutcome(cut_short=True, progressed=True)
    assert pass_outcome(report(row(3, 10, 3))) == PassOutcome(cut_short=True)


def test_outcome_of_a_failed_task_or_group():
    # a range that failed part-way is a failure, not a pass cut short
    assert pass_outcome(report(row(0, 10, 4, error="BackupReadError: x"))) == PassOutcome(
        failed=True, progressed=True
    )
    assert pass_outcome(report(row(0, 10, 10), group_errors={"g": "timed out"})).failed


def test_pass_fields_and_totals():
    r = report(row(0, 10, 10), row(0, 4, 4))
    assert pass_fields(r) == {
        "partitions": 2,
        "records": 14,
        "segments": 2,
        "lost": 0,
        "failed": 0,
        "seconds": 0.0,
    }
    totals = RunTotals()
    totals.add(r, pass_outcome(r))
    totals.add(None, FAILED)
    assert (totals.passes, totals.failed, totals.records, totals.segments) == (2, 1, 14, 2)
    assert totals.stopped_line() == (
        "backup stopped: 2 passes (1 failed), 14 records in 2 segments backed up since start"
    )
    totals.abandoned = True
    assert totals.stopped_line().endswith("; the pass in flight was abandoned")


# --- backup.interval.ms ---------------------------------------------------------------


def parse(**raw: str):
    return parse_backup_settings(
        {"cluster": "A", "path": "/b", **raw}, {"A": None}, cwd=Path("/work")
    )


def test_interval_default_and_value():
    assert parse().interval_ms == DEFAULT_INTERVAL_MS == 10_000
    assert parse(**{"interval.ms": " 250 "}).interval_ms == 250


@pytest.mark.parametrize("bad", ["0", "-5", "1.5", "10s", ""])
def test_bad_interval_names_the_key(bad):
    with pytest.raises(ConfigError, match="positive whole number of milliseconds") as err:
        parse(**{"interval.ms": bad})
    assert err.value.key == "backup.interval.ms"
    assert str(err.value).startswith("invalid config backup.interval.ms=")
