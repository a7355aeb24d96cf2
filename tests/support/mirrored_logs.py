"""A hypothesis strategy for mirrored partitions: a source log with offset gaps
copied in transactions, with the syncs mm writes for it (its run rule) and the
exact translation computed from both logs (the brute-force model of the store's
property tests)."""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field

from hypothesis import strategies as st

from mm.source.runs import RunTracker


@dataclass
class Mirrored:
    us: list[int] = field(default_factory=list)
    ds: list[int] = field(default_factory=list)
    # (upstream, downstream, first of its transaction), in write order
    syncs: list[tuple[int, int, bool]] = field(default_factory=list)
    last_txn: list[tuple[int, int]] = field(default_factory=list)

    def exact(self, upstream: int) -> int:
        i = bisect_left(self.us, upstream)
        return self.ds[i] if i < len(self.ds) else self.ds[-1] + 1


@st.composite
def mirrored(draw: st.DrawFn) -> Mirrored:
    offset = draw(st.integers(0, 5))
    records: list[int] = []
    for _ in range(draw(st.integers(1, 12))):
        n = draw(st.integers(1, 6))
        records.extend(range(offset, offset + n))
        # a marker, an aborted transaction, a compacted stretch, or nothing
        offset += n + draw(st.sampled_from([0, 0, 1, 1, 2, 3, 7]))
    m = Mirrored()
    d = draw(st.integers(0, 3))
    i = 0
    while i < len(records):
        batch = records[i : i + draw(st.integers(1, 8))]
        i += len(batch)
        if m.us:
            d += draw(st.sampled_from([1, 1, 1, 0, 2, 3]))  # commit marker, or none, or more
        tracker = RunTracker()
        for u in batch:
            tracker.add(u)
        pairs = tracker.syncs(d)
        m.syncs += [(u, dd, k == 0) for k, (u, dd) in enumerate(pairs)]
        m.last_txn = pairs
        for u in batch:
            m.us.append(u)
            m.ds.append(d)
            d += 1
    return m
