"""Translation history for one flow: every offset sync the mirror wrote, per partition.

Pure (no I/O). The checkpoint job feeds it the offset-syncs topic and the
mirror's position, then asks it to translate group offsets.

Invariants, per source partition:

* syncs are kept sorted with strictly increasing upstream offsets;
* a sync for an upstream offset already present replaces it when its
  downstream offset differs, and everything after it is dropped (the target was
  re-mirrored from there, so later pairs are stale); an identical pair is
  ignored (the mirror re-writes a transaction's syncs after a crash);
* :meth:`translate` answers only for offsets the mirror has passed: U must be
  at or below the mirror's position (the next source offset it will mirror),
  and at or above the oldest kept sync; otherwise it answers None, so a
  checkpoint is never ahead of what the target holds;
* :meth:`prune` drops history below a bound but keeps the newest sync at or
  below it, so the bound itself stays translatable. Memory is therefore
  O(runs between the lowest tracked group offset and the head), i.e. two syncs
  per stretch of consecutive source offsets in that window.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field

from mm_client.translation import translate_offset


@dataclass
class PartitionHistory:
    upstreams: list[int] = field(default_factory=list)
    downstreams: list[int] = field(default_factory=list)
    # next source offset the mirror will copy (from its committed state); -1 unknown
    position: int = -1

    def add(self, upstream: int, downstream: int) -> None:
        ups = self.upstreams
        if not ups or upstream > ups[-1]:
            ups.append(upstream)
            self.downstreams.append(downstream)
            return
        i = bisect_left(ups, upstream)
        if i < len(ups) and ups[i] == upstream and self.downstreams[i] == downstream:
            return  # a re-written sync we already have
        # a rewind: the target was re-mirrored from `upstream`; drop what follows
        del ups[i:]
        del self.downstreams[i:]
        ups.append(upstream)
        self.downstreams.append(downstream)

    @property
    def last_mirrored(self) -> int:
        """Upstream offset of the last mirrored record known from syncs, -1 if none."""
        return self.upstreams[-1] if self.upstreams else -1

    def translate(self, upstream: int) -> int | None:
        if not self.upstreams or upstream < self.upstreams[0]:
            return None
        limit = self.position if self.position >= 0 else self.last_mirrored + 1
        if upstream > limit:
            return None  # the mirror has not got there yet
        return translate_offset(self.upstreams, self.downstreams, upstream)

    def prune(self, below: int) -> int:
        """Forget syncs no longer needed for offsets >= ``below``; returns how many."""
        i = bisect_right(self.upstreams, below) - 1
        if i <= 0:
            return 0
        # translating U >= below needs only the newest sync <= U and the one after it
        del self.upstreams[:i]
        del self.downstreams[:i]
        return i


@dataclass
class OffsetSyncStore:
    partitions: dict[tuple[str, int], PartitionHistory] = field(default_factory=dict)

    def _history(self, topic: str, partition: int) -> PartitionHistory:
        key = (topic, partition)
        h = self.partitions.get(key)
        if h is None:
            h = self.partitions[key] = PartitionHistory()
        return h

    def add_sync(self, topic: str, partition: int, upstream: int, downstream: int) -> None:
        self._history(topic, partition).add(upstream, downstream)

    def set_position(self, topic: str, partition: int, position: int) -> None:
        self._history(topic, partition).position = position

    def translate(self, topic: str, partition: int, upstream: int) -> int | None:
        h = self.partitions.get((topic, partition))
        return None if h is None else h.translate(upstream)

    def prune(self, topic: str, partition: int, below: int) -> int:
        h = self.partitions.get((topic, partition))
        return 0 if h is None else h.prune(below)

    def size(self) -> int:
        return sum(len(h.upstreams) for h in self.partitions.values())
