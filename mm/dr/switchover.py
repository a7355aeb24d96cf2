"""A planned switchover's decisions and report (pure: no I/O).

A switchover moves consumer groups from the source cluster to the target while
the source is healthy, and proves nothing is lost or read twice:

1. **producers stopped**: the source end offsets did not move during a settle
   time (:func:`grown`), and no transaction is open on a mirrored partition
   (:mod:`mm.dr.transactions`: what it commits later would stay on the source);
2. **mirror caught up**: the mirror's committed position equals the source end on
   every mirrored partition (:func:`unmirrored`);
3. **checkpoints current**: every selected group's committed offset on the source
   has a checkpoint for exactly that offset (:func:`uncovered`);
4. **translations exact**: each checkpoint's target offset holds the copy of the
   record the group would read next on the source, or both are at their log
   ends (:func:`translation_verdict`). A group resuming there on the target
   reads every record it had not read, once.

Only then are the translated offsets committed into the groups on the target.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mm.kafka.rawlog import LogRecord

Key = tuple[str, int]

# phases a switchover can stop in (the report's "stopped_at")
SETTLE = "producers"
CATCH_UP = "mirror"
CHECKPOINTS = "checkpoints"
PROOF = "proof"
GROUPS = "groups"


def grown(before: Mapping[Key, int], after: Mapping[Key, int]) -> dict[Key, tuple[int, int]]:
    """Partitions whose end offset moved between two reads: (before, after)."""
    return {k: (before.get(k, 0), e) for k, e in after.items() if e != before.get(k, 0)}


class Stillness:
    """How long what a running mirror moves (its committed positions, the target's
    read_committed ends of its copies) has stayed the same: a mirror copying moves
    one or the other within seconds, a long micro-batch included (each of its
    transactions moves the target's ends)."""

    def __init__(self, now: float) -> None:
        self._seen: object = None
        self._since = now

    def still_for(self, now: float, seen: object) -> float:
        """Seconds ``seen`` has been unchanged at ``now`` (0 when it just changed)."""
        if seen != self._seen:
            self._seen, self._since = seen, now
        return now - self._since


def unmirrored(ends: Mapping[Key, int], positions: Mapping[Key, int]) -> dict[Key, int]:
    """Per source partition, offsets between the mirror's position and the source end
    (a partition the mirror never committed a position for counts from 0; markers
    and gaps included: a position equal to the end is what proves completeness)."""
    return {k: end - positions.get(k, 0) for k, end in ends.items() if positions.get(k, 0) < end}


@dataclass(frozen=True)
class GroupPartition:
    """One group's position on one mirrored partition, and its checkpoint."""

    group: str
    topic: str
    partition: int
    offset: int  # committed on the source
    upstream: int | None = None  # the newest checkpoint's source offset
    downstream: int | None = None  # ... and its translation on the target

    @property
    def covered(self) -> bool:
        return self.upstream == self.offset and self.downstream is not None


def uncovered(rows: list[GroupPartition]) -> list[GroupPartition]:
    """Group partitions whose newest checkpoint is not for the group's current offset."""
    return [r for r in rows if not r.covered]


def translation_verdict(
    translated: int,
    target_end: int,
    source_next: LogRecord | None,
    target_next: LogRecord | None,
) -> str | None:
    """None when resuming at ``translated`` on the target reads exactly what resuming
    at ``offset`` on the source would; otherwise why not.

    ``source_next`` / ``target_next``: the first committed record at or after each
    offset (None when there is none before the end).
    """
    if source_next is None:
        # nothing committed from the group's offset on (markers or aborted records
        # at most): it has read everything, and must have on the target too
        if target_next is not None:
            return (
                f"the group has read everything on the source but target offset {translated} "
                f"is followed by record {target_next.offset} (it would be read again)"
            )
        if translated > target_end:
            return f"target offset {translated} is past the target's end {target_end}"
        return None
    if target_next is None:
        return (
            f"source record {source_next.offset} is next for the group, but nothing follows "
            f"target offset {translated} (it would be skipped)"
        )
    if record_content(source_next) != record_content(target_next):
        return (
            f"source record {source_next.offset} is next for the group, but target offset "
            f"{translated} is followed by record {target_next.offset}, which is not its copy"
        )
    return None


def record_content(r: LogRecord) -> tuple[Any, ...]:
    """What a copy keeps of a record: key, value, headers, timestamp."""
    return (r.key, r.value, tuple(r.headers), r.timestamp)


@dataclass
class PartitionRow:
    topic: str
    partition: int
    target_topic: str
    source_end: int
    position: int | None  # the mirror's committed position; None: never mirrored

    @property
    def unmirrored(self) -> int:
        return max(0, self.source_end - (self.position or 0))


@dataclass
class GroupRow:
    group: str
    topic: str  # target topic
    partition: int
    source_offset: int
    before: int | None  # committed on the target before the switchover
    after: int | None  # translated offset (None: no checkpoint for the current offset)
    exact: bool | None  # None: not checked
    reason: str | None = None
    note: str = ""


@dataclass
class SwitchoverReport:
    flow: str
    source: str
    target: str
    dry_run: bool
    forced: bool
    settle_seconds: float
    partitions: list[PartitionRow] = field(default_factory=list)
    groups: list[GroupRow] = field(default_factory=list)
    # group -> moved / unchanged / dry-run / refused / failed
    group_status: dict[str, str] = field(default_factory=dict)
    grown: dict[Key, tuple[int, int]] = field(default_factory=dict)
    # partition -> (read_committed end, log end) where a transaction is open
    open_transactions: dict[Key, tuple[int, int]] = field(default_factory=dict)
    open_transactions_checked: bool = True  # False: the source's broker does not show them
    stopped_at: str | None = None
    problems: list[str] = field(default_factory=list)
    waited_seconds: float = 0.0

    @property
    def records_unmirrored(self) -> int:
        return sum(p.unmirrored for p in self.partitions)

    @property
    def translations_inexact(self) -> int:
        return sum(1 for g in self.groups if g.exact is False)

    @property
    def translations_unchecked(self) -> int:
        return sum(1 for g in self.groups if g.exact is None)

    @property
    def ok(self) -> bool:
        """Zero loss and zero duplicates proven, and every group moved (or already there)."""
        return (
            self.stopped_at is None
            and not self.problems
            and self.records_unmirrored == 0
            and self.translations_inexact == 0
            and self.translations_unchecked == 0
            and all(s in ("moved", "unchanged", "dry-run") for s in self.group_status.values())
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "source": self.source,
            "target": self.target,
            "ok": self.ok,
            "dry_run": self.dry_run,
            "forced": self.forced,
            "settle_seconds": self.settle_seconds,
            "waited_seconds": round(self.waited_seconds, 3),
            "stopped_at": self.stopped_at,
            "problems": list(self.problems),
            "proof": {
                "records_unmirrored": self.records_unmirrored,
                "translations_exact": sum(1 for g in self.groups if g.exact),
                "translations_inexact": self.translations_inexact,
                "translations_unchecked": self.translations_unchecked,
            },
            "grown_while_settling": [
                {"topic": t, "partition": p, "before": b, "after": a}
                for (t, p), (b, a) in sorted(self.grown.items())
            ],
            "open_transactions_checked": self.open_transactions_checked,
            "open_transactions": [
                {"topic": t, "partition": p, "read_committed_end": end, "log_end": log_end}
                for (t, p), (end, log_end) in sorted(self.open_transactions.items())
            ],
            "partitions": [
                {
                    "topic": p.topic,
                    "partition": p.partition,
                    "target_topic": p.target_topic,
                    "source_end": p.source_end,
                    "mirrored_position": p.position,
                    "unmirrored": p.unmirrored,
                }
                for p in self.partitions
            ],
            "groups": [
                {
                    "group": g,
                    "status": self.group_status.get(g),
                    "partitions": [
                        {
                            "topic": r.topic,
                            "partition": r.partition,
                            "source_offset": r.source_offset,
                            "before": r.before,
                            "after": r.after,
                            "exact": r.exact,
                            "reason": r.reason,
                            "note": r.note,
                        }
                        for r in self.groups
                        if r.group == g
                    ],
                }
                for g in sorted({r.group for r in self.groups} | set(self.group_status))
            ],
        }
