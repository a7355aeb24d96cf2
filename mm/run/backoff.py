"""When ``mm run`` restarts a failed job (pure logic).

A job that fails is restarted after a delay that doubles with each failure in a
row, from ``initial`` up to ``maximum`` seconds, so an unreachable cluster is not
hammered. A job that ran at least ``healthy_after`` seconds before failing counts
as recovered: its next failure starts from ``initial`` again, so a job that fails
once a day is never made to wait a minute.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Backoff:
    initial: float = 1.0
    maximum: float = 60.0
    healthy_after: float = 60.0

    def __post_init__(self) -> None:
        if not 0 < self.initial <= self.maximum:
            raise ValueError(
                f"backoff initial {self.initial} s must be > 0 and <= maximum {self.maximum} s"
            )

    def failures_in_a_row(self, before: int, ran_seconds: float) -> int:
        """Failures in a row after one more, given how long the job ran this time."""
        return 1 if ran_seconds >= self.healthy_after else before + 1

    def delay(self, failures_in_a_row: int) -> float:
        """Seconds to wait before the next start (``failures_in_a_row`` >= 1)."""
        if failures_in_a_row < 1:
            return 0.0
        # capped exponent: 2**n would overflow a float long before any real run ends
        return min(self.maximum, self.initial * 2.0 ** min(failures_in_a_row - 1, 62))
