"""Consumer-group offsets saved with each backup run, and where a group resumes
after a restore (pure).

**Record**: each run saves the groups' committed offsets on the source as JSON
lines (one object per line: ``group``, ``topic``, ``partition``, ``offset``,
``time_ms``, the time the offset was read), sorted by group, topic, partition,
at ``<prefix>/_groups/<region>/<20-digit time_ms>.jsonl``. JSON lines because a
run saves few of them, people read them, and ``spark.read.json`` reads them.

**Restore**: restored records get new offsets; the restore keeps, per partition,
the mapping original offset -> restored offset as runs (:class:`OffsetRun`, one
per stretch where both advance by one, so a segment without gaps is one run). A
group committed at source offset ``U`` had read every record below ``U`` and none
at or above it; on the restored topic it resumes at the restored offset of the
first restored record whose original offset is ``>= U`` (or the restored end when
there is none): it re-reads nothing below ``U`` and skips nothing at or above.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

from mm.backup.layout import check_region

GROUPS_DIR = "_groups"


@dataclass(frozen=True)
class GroupOffset:
    group: str
    topic: str
    partition: int
    offset: int  # the next offset the group reads on the source
    time_ms: int  # when it was read


def group_offsets_key(prefix: str, region: str, time_ms: int) -> str:
    return f"{prefix.rstrip('/')}/{GROUPS_DIR}/{check_region(region)}/{time_ms:020d}.jsonl"


def encode_group_offsets(offsets: Iterable[GroupOffset]) -> bytes:
    rows = sorted(offsets, key=lambda g: (g.group, g.topic, g.partition))
    return b"".join(json.dumps(asdict(g), separators=(",", ":")).encode() + b"\n" for g in rows)


def decode_group_offsets(data: bytes) -> list[GroupOffset]:
    """Raises ValueError naming the line that is not a group offset."""
    out = []
    for n, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            out.append(
                GroupOffset(
                    str(d["group"]),
                    str(d["topic"]),
                    int(d["partition"]),
                    int(d["offset"]),
                    int(d["time_ms"]),
                )
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"line {n} is not a group offset ({exc!r}): {line[:80]!r}") from None
    return out


@dataclass(frozen=True)
class OffsetRun:
    """Original offsets ``original .. original+count-1`` restored at ``restored ..``."""

    original: int
    restored: int
    count: int

    @property
    def original_last(self) -> int:
        return self.original + self.count - 1


def offset_runs(pairs: Iterable[tuple[int, int]]) -> tuple[OffsetRun, ...]:
    """The runs of (original, restored) pairs, both strictly increasing."""
    runs: list[OffsetRun] = []
    last: tuple[int, int] | None = None
    for o, r in pairs:
        if last is not None and (o <= last[0] or r <= last[1]):
            raise ValueError(
                f"pair ({o}, {r}) after ({last[0]}, {last[1]}): expected both offsets to increase"
            )
        if runs and last is not None and (o, r) == (last[0] + 1, last[1] + 1):
            runs[-1] = OffsetRun(runs[-1].original, runs[-1].restored, runs[-1].count + 1)
        else:
            runs.append(OffsetRun(o, r, 1))
        last = (o, r)
    return tuple(runs)


def resume_offset(runs: Sequence[OffsetRun], source_offset: int, restored_end: int) -> int:
    """Where a group at ``source_offset`` resumes on the restored partition.

    ``restored_end``: the restored partition's end offset (past its last record).
    """
    if runs and restored_end <= runs[-1].restored + runs[-1].count - 1:
        raise ValueError(
            f"restored end {restored_end}: expected it past the last restored offset "
            f"{runs[-1].restored + runs[-1].count - 1}"
        )
    i = bisect_left([r.original_last for r in runs], source_offset)
    if i == len(runs):
        return restored_end  # every restored record is below the group's offset
    run = runs[i]
    return run.restored + max(0, source_offset - run.original)
