"""Offset ranges a backup covers without holding records for them (pure).

Two kinds, both inclusive ``[start, end]``:

* **gaps**, inside a segment's covered range: offsets with no record in the
  source log either (transaction markers, aborted records, records removed by
  log compaction). Nothing was missed; a restore has nothing to write for them;
* **lost** ranges, between two segments (or before the first): offsets whose
  records existed but were never backed up, typically deleted by the source's
  retention before the backup reached them. They are counted and reported; the
  segment that follows one records it (``lost_before``) so the catalog can be
  rebuilt from the files alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

Range = tuple[int, int]  # inclusive


@dataclass(frozen=True)
class LostRange:
    start: int
    end: int  # inclusive
    reason: str  # e.g. "retention": why the records were not backed up

    def __post_init__(self) -> None:
        if not 0 <= self.start <= self.end:
            raise ValueError(
                f"invalid lost range {self.start}-{self.end}: expected 0 <= start <= end"
            )

    @property
    def count(self) -> int:
        return self.end - self.start + 1


def compute_gaps(offsets: Iterable[int], start: int, end: int) -> tuple[Range, ...]:
    """The ranges of ``[start, end]`` holding none of ``offsets`` (strictly increasing).

    Raises ValueError naming the first offset that is out of order or out of range.
    """
    if start > end:
        raise ValueError(f"covered range {start}-{end}: expected start <= end")
    gaps: list[Range] = []
    expected = start  # the next offset with no gap before it
    for o in offsets:
        if o < expected or o > end:
            why = "out of order" if start <= o <= end else f"outside {start}-{end}"
            raise ValueError(f"offset {o} is {why}: expected strictly increasing offsets")
        if o > expected:
            gaps.append((expected, o - 1))
        expected = o + 1
    if expected <= end:
        gaps.append((expected, end))
    return tuple(gaps)


def gap_size(gaps: Iterable[Range]) -> int:
    return sum(b - a + 1 for a, b in gaps)
