"""Divergence at failback (pure): what the old primary holds past the failover point.

After a failover, records the source (A) acknowledged at or after the mirror's
position (``mirrored_to`` in the failover point) never reached the target (B); the
applications moved on on B without them. When A comes back, those records are the
divergence: reported per partition (count, offset and time range) and kept in a
quarantine before anything else touches A. A partition whose end on A is now
below the failover point lost records B has (an unclean recovery of A): reported,
never "fixed" silently.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mm.dr.failover_point import FailoverPoint

Key = tuple[str, int]


@dataclass
class PartitionDivergence:
    topic: str
    partition: int
    failover_at: int | None  # the mirror's position at failover (None: never mirrored)
    end_now: int  # read_committed end on the source now
    records: int = 0
    first_offset: int | None = None
    last_offset: int | None = None
    first_ms: int | None = None
    last_ms: int | None = None
    # the source now ends below the failover point: it lost records the target has
    behind: int = 0
    # the log end (high watermark): above ``end_now`` while a transaction is open
    log_end: int | None = None

    @property
    def open_transaction(self) -> bool:
        return self.log_end is not None and self.log_end > self.end_now

    @property
    def start(self) -> int:
        return self.failover_at or 0

    def add(self, offset: int, timestamp_ms: int) -> None:
        self.records += 1
        if self.first_offset is None:
            self.first_offset, self.first_ms = offset, timestamp_ms
        self.last_offset, self.last_ms = offset, timestamp_ms


@dataclass
class DivergenceReport:
    flow: str
    source: str
    point_recorded_ms: int
    dry_run: bool
    partitions: list[PartitionDivergence] = field(default_factory=list)
    quarantine: str | None = None  # where the records were written

    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions)

    @property
    def behind(self) -> list[PartitionDivergence]:
        return [p for p in self.partitions if p.behind]

    @property
    def open(self) -> list[PartitionDivergence]:
        """Partitions with a transaction open past the failover point: what it holds
        cannot be told divergent or not (committed or aborted) until it ends."""
        return [p for p in self.partitions if p.open_transaction and (p.log_end or 0) > p.start]

    def to_json(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "source": self.source,
            "failover_point_recorded_ms": self.point_recorded_ms,
            "dry_run": self.dry_run,
            "divergent_records": self.records,
            "quarantine": self.quarantine,
            "partitions": [
                {
                    "topic": p.topic,
                    "partition": p.partition,
                    "failover_at": p.failover_at,
                    "end_now": p.end_now,
                    "records": p.records,
                    "first_offset": p.first_offset,
                    "last_offset": p.last_offset,
                    "first_timestamp_ms": p.first_ms,
                    "last_timestamp_ms": p.last_ms,
                    "source_behind_failover_point": p.behind,
                    "log_end": p.log_end,
                    "transaction_open": p in self.open,
                }
                for p in self.partitions
            ],
        }


def plan_divergence(
    point: FailoverPoint,
    ends_now: dict[Key, int],
    dry_run: bool,
    log_ends: dict[Key, int] | None = None,
) -> DivergenceReport:
    """One row per partition of the failover point, before the records are read: the
    range to read is ``[failover_at, end_now)``; ``behind`` where the end is lower.
    ``log_ends``: the high watermarks, to tell a transaction still open."""
    report = DivergenceReport(point.flow, point.source, point.recorded_ms, dry_run)
    for p in point.partitions:
        end = ends_now.get((p.topic, p.partition), 0)
        row = PartitionDivergence(p.topic, p.partition, p.mirrored_to, end)
        row.log_end = (log_ends or {}).get((p.topic, p.partition))
        row.behind = max(0, row.start - end)
        report.partitions.append(row)
    return report
