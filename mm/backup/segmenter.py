"""Cutting one partition's read into segments (pure).

A backup task feeds a :class:`Segmenter` what its read proves, in offset order:

* :meth:`Segmenter.record`: a committed record at an offset;
* :meth:`Segmenter.gap_to`: offsets up to one that hold no record;
* :meth:`Segmenter.lost`: offsets whose records existed but were deleted before
  the read reached them (the source's retention);
* :meth:`Segmenter.close`: everything below an offset is accounted for (the
  range's end, or how far the read got before it stopped).

Offsets between records that are neither records nor lost are gaps
(transaction markers, aborted or compacted records): a segment covers them.

A segment is cut when it holds ``max_records`` records or ``max_bytes`` bytes
(keys, values, header keys and values), ending at its last record so the next
segment starts right after it; before a record whose timestamp is ``max_age_ms``
or more past the segment's oldest (the segment ends just before that record); at
a lost range (a segment never spans one: the catalog records a lost range
*before* a segment); and at :meth:`close`, which
ends the last segment at the offset before the one given, so a range that ends
with a transaction marker or aborted records is covered to its end. Cut
segments go to ``emit`` at once: a task holds one segment's records at most.
Nothing is cut that the read did not prove: a read that stops early closes at
the first offset it has not accounted for, and the next run starts there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mm.backup.ranges import LostRange
from mm.backup.segment import BackupRecord


@dataclass(frozen=True)
class SegmentCut:
    start: int  # first offset covered
    end: int  # last offset covered (inclusive)
    records: list[BackupRecord]
    lost_before: LostRange | None


def record_bytes(r: BackupRecord) -> int:
    size = len(r.key or b"") + len(r.value or b"")
    return size + sum(len(k.encode()) + len(v or b"") for k, v in r.headers)


class Segmenter:
    def __init__(
        self,
        start: int,
        emit: Callable[[SegmentCut], None],
        *,
        max_records: int,
        max_bytes: int,
        max_age_ms: int | None = None,
        lost_reason: str = "retention",
    ) -> None:
        if max_records <= 0 or max_bytes <= 0:
            raise ValueError("max_records and max_bytes must be positive")
        self._emit = emit
        self._max_records = max_records
        self._max_bytes = max_bytes
        self._max_age = max_age_ms
        self._oldest: int | None = None  # the open segment's oldest timestamp (>= 0)
        self._reason = lost_reason
        self.start = start  # first offset of the segment being filled
        self.next = start  # first offset not accounted for yet
        self._records: list[BackupRecord] = []
        self._bytes = 0
        self._lost: LostRange | None = None

    @property
    def pending_records(self) -> int:
        return len(self._records)

    def record(self, r: BackupRecord) -> None:
        if r.offset < self.next:
            raise ValueError(
                f"record at offset {r.offset}: expected offsets from {self.next} on, increasing"
            )
        if self._max_age is not None and r.timestamp >= 0:
            if self._oldest is not None and r.timestamp - self._oldest >= self._max_age:
                self._cut(r.offset - 1)  # the gaps before r stay with the older segment
            if self._oldest is None or r.timestamp < self._oldest:
                self._oldest = r.timestamp
        self._records.append(r)
        self._bytes += record_bytes(r)
        self.next = r.offset + 1
        if len(self._records) >= self._max_records or self._bytes >= self._max_bytes:
            self._cut(r.offset)

    def gap_to(self, offset: int) -> None:
        """Offsets from :attr:`next` to ``offset - 1`` hold no record: gaps the open
        segment covers (nothing to do when ``offset <= next``)."""
        self.next = max(self.next, offset)

    def lost(self, first: int, last: int) -> None:
        """Offsets ``first..last`` (inclusive) were deleted before the read; ``first``
        must be the first offset not accounted for."""
        if first != self.next or last < first:
            raise ValueError(
                f"lost range {first}-{last}: expected it to start at {self.next} and not be empty"
            )
        if self.start < first:
            self._cut(first - 1)  # what precedes the loss is a segment of its own
        if self._lost is not None:
            self._lost = LostRange(self._lost.start, last, self._reason)
        else:
            self._lost = LostRange(first, last, self._reason)
        self.start = self.next = last + 1

    def close(self, end: int) -> None:
        """Offsets below ``end`` are accounted for: the open segment ends at ``end - 1``."""
        if end < self.next:
            raise ValueError(f"close at {end}: offsets up to {self.next - 1} are already read")
        if self.start < end:
            self._cut(end - 1)

    @property
    def unrecorded_lost(self) -> LostRange | None:
        """A lost range with no offset after it yet (retention emptied the partition
        to its end): no segment carries it, so the catalog's next offset stays before
        it and the next run that finds a record after it records it."""
        return self._lost

    def _cut(self, end: int) -> None:
        cut = SegmentCut(self.start, end, self._records, self._lost)
        self._records = []
        self._bytes = 0
        self._oldest = None
        self._lost = None
        self.start = self.next = end + 1
        self._emit(cut)
