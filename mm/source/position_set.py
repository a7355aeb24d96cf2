"""Setting the mirror's positions by hand (`mm position --set`), decided here (pure).

A position is the next *source* offset to mirror for a target partition, committed
in the flow's state group on the target under the target topic's name. Kafka's
``kafka-consumer-groups.sh --reset-offsets`` cannot set it: the tool keeps every
offset inside the range of the topic the group's offsets are named for, here the
target topic, whose offsets are not the source's (a source with retention starts
far above 0; transaction markers make the target's grow faster). It would move a
position past the target's end back to that end, silently. So positions are set
against the source partition's log instead: any offset from its log start to its
end. Past the end is refused (the mirror would refuse the partition); below the
start too (those records are gone: name the start, and the mirror copies from it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

START, END = "start", "end"


@dataclass(frozen=True)
class PositionChange:
    partition: int
    before: int | None  # None: no position committed
    after: int


def parse_sets(values: Sequence[str]) -> dict[int, int | str]:
    """``PARTITION=OFFSET`` (OFFSET a number, ``start`` or ``end``) per value.

    Raises ValueError naming the value and the expected form."""
    out: dict[int, int | str] = {}
    for value in values:
        part, sep, offset = value.partition("=")
        if not sep or not part.strip().isdigit():
            raise ValueError(
                f"--set {value!r}: expected PARTITION=OFFSET, e.g. 0=1500, 3=start or 2=end"
            )
        p = int(part)
        o = offset.strip()
        if o in (START, END):
            wanted: int | str = o
        elif o.isdigit():
            wanted = int(o)
        else:
            raise ValueError(
                f"--set {value!r}: expected the offset as a number >= 0, 'start' or 'end'"
            )
        if p in out:
            raise ValueError(f"--set names partition {p} twice: expected one offset each")
        out[p] = wanted
    return out


def resolve_sets(
    topic: str,
    wanted: Mapping[int, int | str],
    ranges: Mapping[int, tuple[int, int]],
    committed: Mapping[int, int],
) -> tuple[list[PositionChange], list[str]]:
    """The changes for ``wanted`` against the source partitions' (log start, end)
    ``ranges``, and why any is refused (a request with a refusal changes nothing)."""
    changes: list[PositionChange] = []
    errors: list[str] = []
    for p, w in sorted(wanted.items()):
        if p not in ranges:
            errors.append(
                f"{topic} has no partition {p} on the source: expected one of 0-{len(ranges) - 1}"
            )
            continue
        low, high = ranges[p]
        offset = low if w == START else high if w == END else int(w)
        if not low <= offset <= high:
            errors.append(
                f"position {offset} for {topic}[{p}] is outside the source log "
                f"[{low}, {high}]: expected an offset in it ({low}: from the oldest record "
                f"kept, {high}: only records written from now on)"
            )
            continue
        before = committed.get(p)
        changes.append(PositionChange(p, before if before is not None and before >= 0 else None,
                                      offset))  # fmt: skip
    return changes, errors
