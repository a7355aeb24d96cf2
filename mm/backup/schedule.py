"""When continuous `mm backup` runs its next pass (pure: no clock, no I/O).

The driver loop (:mod:`mm.backup.continuous`) runs a pass, turns its report into
a :class:`PassOutcome` (:func:`pass_outcome`) and asks :meth:`Schedule.after` how
long to wait before the next one:

* a pass that went well: ``backup.interval.ms``, counted from the end of the pass
  (a slow pass never makes passes overlap or run back to back);
* a pass cut short, without an error, after making progress: no wait. A range
  that stops below the end the pass planned (the read reached the end of what
  the broker serves before the planned end) leaves data the pass knew about;
  waiting a whole interval for it would only add lag. A cut-short pass that
  made no progress waits the interval, so a partition that keeps stopping at the
  same place never turns the loop into a busy one;
* a failed pass (a task, a group's offsets, or the pass itself failed): the
  interval, doubled for each failure in a row, at most :data:`BACKOFF_MAX_MS`
  (or the interval, when that is longer). The first good pass resets it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mm.backup.job import BackupReport

# a broker or store that is down is asked again at least every 5 minutes
BACKOFF_MAX_MS = 300_000


@dataclass(frozen=True)
class PassOutcome:
    failed: bool = False  # a task, a group's offsets or the pass itself failed
    cut_short: bool = False  # a range stopped below its planned end without an error
    progressed: bool = False  # some partition's backup moved forward


@dataclass(frozen=True)
class Schedule:
    interval_ms: int
    failures: int = 0  # failed passes in a row

    def __post_init__(self) -> None:
        if self.interval_ms <= 0:
            raise ValueError(f"interval_ms must be positive, got {self.interval_ms}")

    def backoff_ms(self, failures: int) -> int:
        """The wait after ``failures`` (>= 1) failed passes in a row."""
        cap = max(self.interval_ms, BACKOFF_MAX_MS)
        # 2**20 intervals is past any cap: no huge ints for a long outage
        return min(cap, self.interval_ms * 2 ** min(failures - 1, 20))

    def after(self, outcome: PassOutcome) -> tuple[Schedule, float]:
        """The schedule after a pass with ``outcome``, and the seconds to wait."""
        if outcome.failed:
            failures = self.failures + 1
            return replace(self, failures=failures), self.backoff_ms(failures) / 1000
        ok = replace(self, failures=0)
        if outcome.cut_short and outcome.progressed:
            return ok, 0.0
        return ok, self.interval_ms / 1000


def pass_outcome(report: BackupReport) -> PassOutcome:
    """What the loop needs to know of a finished pass."""
    cut_short = progressed = False
    for row in report.rows:
        s = row.summary
        if s is None:
            continue
        if s.next_offset > row.plan.start:
            progressed = True
        if row.error is None and s.next_offset < row.plan.end:
            cut_short = True
    return PassOutcome(failed=not report.ok, cut_short=cut_short, progressed=progressed)


def pass_fields(report: BackupReport) -> dict[str, Any]:
    """The pass's figures for its one info line."""
    t = report.totals()
    return {
        "partitions": t["partitions"],
        "records": t["records"],
        "segments": t["segments"],
        "lost": t["lost"],
        "failed": t["failed"],
        "seconds": round(report.seconds, 3),
    }


@dataclass
class RunTotals:
    """What a continuous run did, for the line it prints when it stops."""

    passes: int = 0
    failed: int = 0
    records: int = 0
    segments: int = 0
    abandoned: bool = False  # the pass in flight was cancelled by a second signal

    def add(self, report: BackupReport | None, outcome: PassOutcome) -> None:
        self.passes += 1
        self.failed += outcome.failed
        if report is not None:
            t = report.totals()
            self.records += t["records"]
            self.segments += t["segments"]

    def stopped_line(self) -> str:
        how = "; the pass in flight was abandoned" if self.abandoned else ""
        return (
            f"backup stopped: {self.passes} passes ({self.failed} failed), {self.records} "
            f"records in {self.segments} segments backed up since start{how}"
        )
