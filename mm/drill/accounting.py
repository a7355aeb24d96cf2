"""A drill's figures from sequence numbers (pure, no I/O).

Every record the drill's producers write carries its producer id and a sequence
number, so a record is known by ``(producer, seq)`` wherever it is read: on the
source A, on the target B, or in a consumer group's processing log. From the
records acknowledged on A, those readable on B at the moment of the disaster (or
switchover) and what each group processed before and after it was moved, this
module counts what was lost (and the RPO in seconds), what each group processed
twice or never, and judges a scenario against its bounds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from mm.dr.failover_point import LOWER_BOUND, UNKNOWN, loss_sentence

RecordId = tuple[str, int]
"""(producer id, sequence number)."""


@dataclass(frozen=True)
class LossFigures:
    acked_records: int  # acknowledged (committed) on A
    mirrored_records: int  # acknowledged on A and readable on B
    lost_records: int  # acknowledged on A, never readable on B
    lost_seconds: float  # RPO: disaster time minus the oldest lost record's ack time


@dataclass(frozen=True)
class LossEstimate:
    """`mm failover`'s own loss figure, from its failover point (see
    :mod:`mm.dr.failover_point`): offsets, not records, so transaction markers count.

    ``kind``: ``exact`` (A answered at the failover), ``lower_bound`` (A was not read:
    the newest ends a job published, ``age_seconds`` before the failover) or
    ``unknown``. A lower bound is not comparable with the measured records either
    way (markers count in it, what A took after it was last seen does not): the drill
    reports both, and judges neither by the other."""

    offsets: int | None
    kind: str
    age_seconds: float | None
    seen_by: str | None


def loss_estimate(point: Mapping[str, Any]) -> LossEstimate:
    """The figure of the ``failover_point`` of `mm failover --json`."""
    kind = point.get("loss_kind")
    offsets = point.get("loss_offsets")
    if kind is None:  # an mm failover of before the figure had a kind: never exact
        kind = UNKNOWN if offsets is None else LOWER_BOUND
    age, by = point.get("ends_age_seconds"), point.get("ends_seen_by")
    return LossEstimate(offsets, str(kind), age, by)


def describe_estimate(estimate: LossEstimate, measured: LossFigures, source: str = "A") -> str:
    """The failover's figure in its own words, then what the drill measured."""
    figure = loss_sentence(
        estimate.kind, estimate.offsets, estimate.age_seconds, estimate.seen_by, source
    )
    return (
        f"failover point: {figure}; measured: {measured.lost_records} records "
        f"acknowledged on {source} never on B"
    )


@dataclass(frozen=True)
class GroupFigures:
    """What one consumer group processed, against what it was expected to process.

    ``processed`` counts distinct records; ``processed_before`` / ``processed_after``
    count deliveries (repeats included), so ``processed_before + processed_after ==
    processed + processed_twice``.
    """

    group: str
    expected: int  # records the group should have processed by the end, lost ones excluded
    processed: int
    processed_before: int  # deliveries before the move (on A)
    processed_after: int  # deliveries after the move (on B, or on A after failback)
    processed_twice: int  # extra deliveries: a record processed 3 times counts 2
    never_processed: int  # expected, not lost, and never processed


@dataclass(frozen=True)
class Verdict:
    passed: bool
    reasons: tuple[str, ...]  # one sentence per failed bound; empty when passed


def lost_ids(acked: Mapping[RecordId, float], on_target: AbstractSet[RecordId]) -> set[RecordId]:
    """Records acknowledged on A that never became readable on B."""
    return {r for r in acked if r not in on_target}


def loss_figures(
    acked: Mapping[RecordId, float], on_target: AbstractSet[RecordId], disaster_at: float
) -> LossFigures:
    """Loss at the disaster (or switchover) from what A acknowledged and B holds.

    Records on B that A never acknowledged (an aborted transaction's, or a producer
    retry's ack that never arrived) are not counted as mirrored: only acknowledged
    records are promised to a producer.
    """
    lost = lost_ids(acked, on_target)
    oldest = min((acked[r] for r in lost), default=None)
    # Clamped at 0: a record acknowledged between reading the disaster time and the
    # kill taking effect is lost, but spans no data before the disaster.
    seconds = 0.0 if oldest is None else max(0.0, disaster_at - oldest)
    return LossFigures(
        acked_records=len(acked),
        mirrored_records=len(acked) - len(lost),
        lost_records=len(lost),
        lost_seconds=seconds,
    )


def group_figures(
    group: str,
    before: Sequence[RecordId],
    after: Sequence[RecordId],
    expected: Iterable[RecordId],
    lost: AbstractSet[RecordId] = frozenset(),
) -> GroupFigures:
    """One group's figures from its processing log, split at the move.

    ``expected``: the records the group was supposed to have processed by the end
    (e.g. every acknowledged record for a group that keeps up); those in ``lost``
    are counted as lost by :func:`loss_figures`, not as unprocessed here.
    """
    counts = Counter(before)
    counts.update(after)
    expected_set = {r for r in expected if r not in lost}
    return GroupFigures(
        group=group,
        expected=len(expected_set),
        processed=len(counts),
        processed_before=len(before),
        processed_after=len(after),
        processed_twice=sum(n - 1 for n in counts.values()),
        never_processed=sum(1 for r in expected_set if r not in counts),
    )


def _never_reason(g: GroupFigures) -> str:
    return f"group {g.group} never processed {g.never_processed} of its {g.expected} records"


def _twice_reason(g: GroupFigures, allowed: int) -> str:
    return f"group {g.group} processed {g.processed_twice} records twice; allowed {allowed}"


def judge_switchover(loss: LossFigures, groups: Iterable[GroupFigures]) -> Verdict:
    """A planned switchover loses nothing and every group processes everything once."""
    reasons: list[str] = []
    if loss.lost_records:
        reasons.append(
            f"{loss.lost_records} acknowledged records never reached the target "
            f"({loss.lost_seconds:.1f} s of data); allowed 0"
        )
    for g in groups:
        if g.processed_twice:
            reasons.append(_twice_reason(g, 0))
        if g.never_processed:
            reasons.append(_never_reason(g))
    return Verdict(not reasons, tuple(reasons))


def judge_failover(groups: Iterable[GroupFigures], twice_allowed: Mapping[str, int]) -> Verdict:
    """An unplanned failover may lose what was not mirrored (counted, not judged), but
    every group must process every surviving record, and may repeat at most what it
    processed after its last checkpoint: ``twice_allowed[group]``.

    Also the rules for failing back, with the bounds of the checkpoints taken on B.
    Raises ValueError when a group has no bound, rather than judging it against 0.
    """
    reasons: list[str] = []
    for g in groups:
        if g.group not in twice_allowed:
            raise ValueError(f"no bound on records processed twice for group {g.group}")
        allowed = twice_allowed[g.group]
        if g.processed_twice > allowed:
            reasons.append(_twice_reason(g, allowed))
        if g.never_processed:
            reasons.append(_never_reason(g))
    return Verdict(not reasons, tuple(reasons))


def twice_bound(
    copies: Iterable[tuple[int, int] | None], resume_at: Mapping[int, int | None]
) -> int:
    """How many records a group may process twice after a failover: those it processed
    on the source whose copy on the target (``(partition, target offset)``; None: never
    copied, so it cannot come again) is at or past where the failover resumed it on
    that partition (``resume_at``: the committed target offset; None or absent: no
    checkpoint, so everything there may come again).

    A checkpoint taken while the group was ahead of the mirror is conservative (its
    target offset is the mirror's position then), so this counts from the target
    offset, not from the checkpoint's source offset."""
    count = 0
    for copy in copies:
        if copy is None:
            continue
        partition, offset = copy
        at = resume_at.get(partition)
        if at is None or offset >= at:
            count += 1
    return count
