"""Divergence at failback (pure): what the old primary holds past the failover point.

After a failover, records the source (A) acknowledged at or after the mirror's
position (``mirrored_to`` in the failover point) never reached the target (B); the
applications moved on on B without them. When A comes back, those records are the
divergence: reported per partition (count, offset and time range) and kept in a
quarantine before anything else touches A. A partition whose end on A is now
below the failover point lost records B has (an unclean recovery of A): reported,
never "fixed" silently.

Offsets alone miss one history: A rebuilt from a copy older than the failover
point (a disk snapshot, an unclean election) and written again past it. Its
records below the point are then not the ones B copied. So A's committed records
below the point are compared with B's copies, by digest (:func:`content_divergence`),
scanning back until they agree (at most ``mm.failback.divergence.scan.records``
offsets); the divergence starts at the first record that differs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mm.dr.failover_point import FailoverPoint
from mm.verify.compare import first_difference
from mm.verify.digest import DigestSeq

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
    # content below the failover point, compared with B's copies: from this offset
    # (None: not compared), whether a record both hold in place was found, and the
    # first offset whose record B's copies do not hold there (None: all agree)
    compared_from: int | None = None
    agreement_found: bool | None = None
    content_differs_at: int | None = None

    @property
    def open_transaction(self) -> bool:
        return self.log_end is not None and self.log_end > self.end_now

    @property
    def start(self) -> int:
        """Where the divergence starts: the failover point, or the first record
        below it whose content B's copies do not hold."""
        if self.content_differs_at is not None:
            return min(self.content_differs_at, self.failover_at or 0)
        return self.failover_at or 0

    @property
    def depth_scanned(self) -> int:
        """Offsets below the failover point whose content was compared."""
        if self.compared_from is None:
            return 0
        return max(0, (self.failover_at or 0) - self.compared_from)

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
    def rewritten(self) -> list[PartitionDivergence]:
        """Partitions whose records below the failover point differ from B's copies:
        A lost records B has and took others at their offsets."""
        return [p for p in self.partitions if p.start < (p.failover_at or 0)]

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
            "rewritten_partitions": len(self.rewritten),
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
                    "divergence_starts_at": p.start,
                    "content_depth_scanned": p.depth_scanned,
                    "content_agreement_found": p.agreement_found,
                    "content_differs_at": p.content_differs_at,
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


def content_divergence(a: DigestSeq, b: DigestSeq) -> tuple[bool, int | None]:
    """A's committed records below the failover point (``a``, from the depth scanned
    up to the point) against the end of B's copies (``b``, a window that holds the
    copies of them): (agreement found, A's offset of the first record that differs).

    Agreement: ``a``'s first record is among B's copies; from there each record of
    ``a`` must be B's next one. The first that is not starts the divergence (None:
    all agree). Without agreement the whole range scanned differs (scan deeper).
    """
    if not len(a):
        return True, None  # nothing committed in the range: nothing can differ
    anchor = b.find(a.digest(0))
    if anchor is None:
        return False, a.offset(0)
    k, _diff = first_difference(a, b.slice(anchor))
    return True, (None if k == len(a) else a.offset(k))
