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
  per stretch of consecutive source offsets in that window;
* after a prune, syncs below the oldest kept one are ignored (``floor``): they
  are replays of history already dropped (a re-read of the offset-syncs topic),
  and taking them as a rewind would wipe the history that is still needed.

:meth:`OffsetSyncStore.to_json` / :meth:`OffsetSyncStore.from_json` turn the
store into plain JSON-able data and back (the checkpoint job snapshots it).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from mm_client.translation import translate_offset


@dataclass
class PartitionHistory:
    upstreams: list[int] = field(default_factory=list)
    downstreams: list[int] = field(default_factory=list)
    # next source offset the mirror will copy (from its committed state); -1 unknown
    position: int = -1
    # upstream offset of the oldest sync kept by the last prune; older syncs are ignored
    floor: int = -1

    def add(self, upstream: int, downstream: int) -> None:
        if upstream < self.floor:
            return  # history already pruned away: a replay, not news
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
        self.floor = self.upstreams[0]
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

    def history(self, topic: str, partition: int) -> PartitionHistory | None:
        return self.partitions.get((topic, partition))

    def to_json(self) -> list[dict[str, Any]]:
        """Plain data (lists, ints, strings); downstream offsets as deltas to stay small."""
        out: list[dict[str, Any]] = []
        for (topic, partition), h in sorted(self.partitions.items()):
            out.append(
                {
                    "topic": topic,
                    "partition": partition,
                    "position": h.position,
                    "floor": h.floor,
                    "upstreams": _deltas(h.upstreams),
                    "downstreams": _deltas(h.downstreams),
                }
            )
        return out

    @classmethod
    def from_json(cls, data: list[dict[str, Any]]) -> OffsetSyncStore:
        """The store :meth:`to_json` described; ValueError when the data is malformed."""
        store = cls()
        try:
            for entry in data:
                ups = _undeltas(entry["upstreams"])
                downs = _undeltas(entry["downstreams"])
                if len(ups) != len(downs) or any(b <= a for a, b in pairwise(ups)):
                    raise ValueError("upstream offsets must be strictly increasing")
                store.partitions[(str(entry["topic"]), int(entry["partition"]))] = PartitionHistory(
                    ups, downs, int(entry["position"]), int(entry["floor"])
                )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"malformed store data: {exc!r}") from exc
        return store


def _deltas(values: list[int]) -> list[int]:
    prev = 0
    out = []
    for v in values:
        out.append(v - prev)
        prev = v
    return out


def _undeltas(values: list[Any]) -> list[int]:
    out = []
    acc = 0
    for v in values:
        acc += int(v)
        out.append(acc)
    return out


def prune_bound(group_offsets: Iterable[int], log_start: int | None) -> int | None:
    """Below which offset a partition's history can go: min(lowest group offset, log start).

    Every group offset and every offset still in the source log (where a new
    group may start) stays translatable. None (prune nothing) while the log
    start is unknown.
    """
    if log_start is None or log_start < 0:
        return None
    return min([log_start, *(u for u in group_offsets if u >= 0)])
