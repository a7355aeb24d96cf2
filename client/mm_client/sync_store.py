"""Translation history for one flow: every offset sync the mirror wrote, per partition.

Pure (no I/O). The checkpoint job feeds it the offset-syncs topic and the
mirror's position, then asks it to translate group offsets.

Invariants, per source partition:

* syncs are kept sorted with strictly increasing upstream offsets and
  increasing downstream offsets, each with its writer (the mirror transaction
  id of a sync mm wrote under its run rule, from the ``mm.sync`` header; None
  for any other writer: MirrorMaker 2, an unknown one, an older mirror) and two
  flags: ``txn_first`` (it is the first sync of a mirror transaction, from the
  ``mm.txn.first`` header) and ``complete`` (every sync written between the
  previous kept sync and this one is known);
* **provenance**: an interval translates exactly only when it is complete and
  both its syncs are mm's (:mod:`mm_client.translation` says why); any other
  interval, and the stretch past a last sync that is not mm's, by MM2's rule:
  exact at the sync, ``sd + 1`` after it (never ahead);
* a sync is news unless it repeats a kept one exactly, writer included (the
  mirror re-writes a transaction's syncs after a crash; the repeat may add a
  ``txn_first`` flag). The same pair from another writer (or from one that
  names no transaction) keeps the pair but drops what followed it, and the
  interval before it is no longer complete. Any other sync whose downstream offset is not past the
  newest kept one means the target topic was replaced (deleted and mirrored
  anew: a log's offsets never go back): the whole history is dropped. Any
  other sync at or below the newest kept upstream offset is a **rewind** into
  the same target (mirrored again from there, e.g. a reset position):
  everything kept at or after its upstream offset is dropped. Either way the
  interval before the new sync is not complete. A repeated pair of a writer
  that names no transaction cannot be told from a re-mirror that happened to
  land on the same offsets, so it is taken as one (conservative);
* holes: the reader of the offset-syncs topic calls :meth:`OffsetSyncStore.mark_hole`
  when syncs may be missing (an offset gap where the writer leaves none: the
  topic was compacted, or retention deleted records before they were read).
  The next new sync of every partition then starts an interval that is not
  complete;
* the mirror's last transaction (its syncs, from the state group's commit
  metadata) is held aside as ``pending``, never inserted: the topic may not have
  delivered the syncs before it yet, and inserting would turn unread history
  into a gap (answering ahead). It is used only past the newest topic sync,
  through an interval that is complete only when that sync belongs to the
  pending transaction, and is dropped once the topic reaches its last sync;
* :meth:`PartitionHistory.lookup` answers only for offsets the mirror has
  passed: U must be at or below the mirror's position (the next source offset
  it will mirror), and at or above the oldest kept sync; otherwise None, so a
  checkpoint is never ahead of what the target holds. Where the interval is
  exact (see provenance) or at a sync the answer is exact; elsewhere, between
  syncs (su, sd) and (nu, nd), it is ``sd + 1``: never ahead (every record
  mirrored after s is at or after sd + 1) and exact only when ``nd == sd + 1``;
  the answer says which (``Translation.exact``), and :meth:`PartitionHistory.bound`
  gives the highest the exact answer can be (a checkpoint above it is ahead);
* :meth:`PartitionHistory.prune` drops history below a bound but keeps the
  newest sync at or below it, so the bound itself stays translatable. Memory is
  therefore O(runs between the lowest tracked group offset and the head), i.e.
  two syncs per stretch of consecutive source offsets in that window;
* after a prune, syncs below the oldest kept one are ignored (``floor``): they
  are replays of history already dropped (a re-read of the offset-syncs topic),
  and taking them as a rewind would wipe the history that is still needed.

:meth:`OffsetSyncStore.to_json` / :meth:`OffsetSyncStore.from_json` turn the
store into plain JSON-able data and back (the checkpoint job snapshots it);
``pending`` is not kept in the job's own snapshot (the job re-reads the commit
metadata every round); the history it publishes on the target keeps it
(``to_json(pending=True)``), for readers without that metadata.
Data without the flags (snapshot format 1) loads with every interval not
complete; data without writers (formats 1 and 2, written before syncs named
their writer) loads with every sync's writer unknown: that history is read by
MM2's rule, behind rather than ahead, until newer syncs cover the groups.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, NamedTuple

from mm_client.translation import follows_runs, translate_offset


class Translation(NamedTuple):
    """A translated offset; ``exact`` False when it may be below the exact answer."""

    offset: int
    exact: bool


@dataclass
class PartitionHistory:
    upstreams: list[int] = field(default_factory=list)
    downstreams: list[int] = field(default_factory=list)
    # next source offset the mirror will copy (from its committed state); -1 unknown
    position: int = -1
    # upstream offset of the oldest sync kept by the last prune; older syncs are ignored
    floor: int = -1
    # per sync: first of a mirror transaction (False: not, or unknown)
    txn_first: list[bool] = field(default_factory=list)
    # per sync: the interval from the previous sync to it is known complete
    # (the first entry has no interval; its value is meaningless)
    complete: list[bool] = field(default_factory=list)
    # syncs may be missing before the next new sync
    hole_next: bool = False
    # the mirror's last transaction from its commit metadata (not persisted)
    pending: list[tuple[int, int]] = field(default_factory=list)
    # per sync: the mirror transaction id of a sync mm wrote, None for other writers
    writers: list[str | None] = field(default_factory=list)
    # the pending transaction's id (None: unknown)
    pending_writer: str | None = None

    def __post_init__(self) -> None:
        n = len(self.upstreams)
        if not self.txn_first:
            self.txn_first = [False] * n
        if not self.complete:
            self.complete = [True] * n
        if not self.writers:
            self.writers = [None] * n

    def add(
        self, upstream: int, downstream: int, txn_first: bool = False, writer: str | None = None
    ) -> None:
        if upstream < self.floor:
            return  # history already pruned away: a replay, not news
        ups, downs = self.upstreams, self.downstreams
        if ups:
            i = bisect_left(ups, upstream)
            if i < len(ups) and ups[i] == upstream and downs[i] == downstream:
                if writer is not None and self.writers[i] == writer:
                    self.txn_first[i] = self.txn_first[i] or txn_first
                    return  # a re-written sync we already have
                # the same pair from another writer, or from one naming no transaction
                # (a re-write, or a re-mirror that landed on it): the pair holds, what
                # followed it and the stretch before it are not known to
                self._drop_from(i + 1)
                self.writers[i], self.txn_first[i] = writer, txn_first
                self.complete[i] = False
                self.hole_next = False
                return
            if downstream <= downs[-1]:
                # the target went backwards: a new target topic, mirrored again; no
                # kept sync describes it
                self._drop_from(0)
                self._append(upstream, downstream, txn_first, False, writer)
                return
            if upstream <= ups[-1]:
                # a rewind into the same target (mirrored again from `upstream`, e.g.
                # a position reset): what followed it is stale
                self._drop_from(i)
                self._append(upstream, downstream, txn_first, False, writer)
                return
        self._append(upstream, downstream, txn_first, not self.hole_next, writer)

    def _drop_from(self, i: int) -> None:
        del self.upstreams[i:]
        del self.downstreams[i:]
        del self.txn_first[i:]
        del self.complete[i:]
        del self.writers[i:]

    def _append(
        self, upstream: int, downstream: int, txn_first: bool, complete: bool, writer: str | None
    ) -> None:
        self.upstreams.append(upstream)
        self.downstreams.append(downstream)
        self.txn_first.append(txn_first)
        self.complete.append(complete)
        self.writers.append(writer)
        self.hole_next = False
        if self.pending and upstream >= self.pending[-1][0]:
            # the topic reached the end of the pending transaction (before that, the
            # rest of it is still needed past the newest topic sync: see _tail)
            self.pending = []
            self.pending_writer = None

    def mark_hole(self) -> None:
        """Syncs may be missing between the newest kept sync and the next new one."""
        if self.upstreams:
            self.hole_next = True

    def set_pending(self, syncs: list[tuple[int, int]], writer: str | None = None) -> None:
        """The syncs of the mirror's last transaction (from its commit metadata) and
        that transaction's id."""
        newest = self.upstreams[-1] if self.upstreams else -1
        if syncs and syncs[-1][0] > newest:
            self.pending, self.pending_writer = list(syncs), writer
        else:
            self.pending, self.pending_writer = [], None

    @property
    def holes(self) -> int:
        """Kept intervals that are not known complete."""
        return self.complete[1:].count(False)

    @property
    def last_mirrored(self) -> int:
        """Upstream offset of the last mirrored record known from syncs, -1 if none."""
        last = self.upstreams[-1] if self.upstreams else -1
        return max(last, self.pending[-1][0]) if self.pending else last

    @property
    def mirrored_to(self) -> int:
        """The source offset the mirror will copy next: every offset the history
        answers for lies at or below it (the position, or one past the last sync)."""
        return self._limit()

    @property
    def oldest(self) -> int | None:
        """Upstream offset of the oldest sync kept (None: no sync): offsets below it
        have no history here."""
        if self.upstreams:
            return self.upstreams[0]
        return self.pending[0][0] if self.pending else None

    def _tail(self) -> tuple[list[tuple[int, int]], bool]:
        """Pending syncs past the newest topic sync, and whether the interval up to
        them is complete (the newest topic sync is one of the pending transaction)."""
        if not self.pending:
            return [], False
        newest = (self.upstreams[-1], self.downstreams[-1]) if self.upstreams else None
        k = bisect_right([u for u, _ in self.pending], newest[0] if newest else -1)
        joined = (
            k > 0
            and self.pending[k - 1] == newest
            and self.pending_writer is not None
            and self.writers[-1] == self.pending_writer
        )
        return self.pending[k:], joined

    def all_syncs(
        self,
    ) -> tuple[list[int], list[int], list[bool], list[bool], list[str | None]]:
        """Every known sync, the pending tail included: (upstreams, downstreams,
        txn_first, complete, writers), as :meth:`lookup` reads them (failback reads
        them backwards, from a target offset)."""
        tail, joined = self._tail()
        ups, downs = list(self.upstreams), list(self.downstreams)
        first, complete = list(self.txn_first), list(self.complete)
        writers = list(self.writers)
        # the pending transaction's syncs are mm's own (its commit metadata); an
        # unknown id still stands for one transaction
        tail_writer = self.pending_writer or "pending"
        for k, (u, d) in enumerate(tail):
            ups.append(u)
            downs.append(d)
            # tail[0] opens the pending transaction unless the newest topic sync is
            # in it; the interval before it is known only when it is
            first.append(k == 0 and not joined)
            complete.append(k > 0 or joined or not self.upstreams)
            writers.append(tail_writer)
        return ups, downs, first, complete, writers

    def translate(self, upstream: int) -> int | None:
        t = self.lookup(upstream)
        return None if t is None else t.offset

    def _limit(self) -> int:
        return self.position if self.position >= 0 else self.last_mirrored + 1

    def lookup(self, upstream: int) -> Translation | None:
        """The translation of ``upstream`` and whether it is exact (see the invariants)."""
        got = self._lookup(upstream)
        return None if got is None else got[0]

    def bound(self, upstream: int) -> int | None:
        """The highest the exact translation of ``upstream`` can be, from this history;
        None when it gives no bound (no answer, or the records past a sync that is
        not mm's are unknown). A checkpoint above it is ahead."""
        got = self._lookup(upstream)
        return None if got is None else got[1]

    def _lookup(self, upstream: int) -> tuple[Translation, int | None] | None:
        ups, downs = self.upstreams, self.downstreams
        tail, joined = self._tail()
        oldest = ups[0] if ups else (tail[0][0] if tail else None)
        if oldest is None or upstream < oldest:
            return None
        if upstream > self._limit():
            return None  # the mirror has not got there yet
        i = bisect_right(ups, upstream) - 1
        if i >= 0 and upstream == ups[i]:
            return _known(downs[i])
        if i + 1 < len(ups):
            if self.complete[i + 1] and follows_runs(self.writers, i, i + 1):
                return _known(_exact(ups, downs, upstream, self.txn_first, self.writers))
            return _untrusted(downs[i], downs[i + 1])
        if tail and upstream >= tail[0][0]:
            # one transaction: equal widths inside it always mean one run
            t_ups, t_downs = [u for u, _ in tail], [d for _, d in tail]
            return _known(_exact(t_ups, t_downs, upstream, None, ["pending"] * len(tail)))
        if i < 0:  # unreachable: upstream >= oldest
            return None
        su, sd = ups[i], downs[i]
        if tail:
            nu, nd = tail[0]
            if not joined:
                return _untrusted(sd, nd)
            # the newest topic sync and tail[0] are in one transaction
            return _known(_exact([su, nu], [sd, nd], upstream, None, ["pending"] * 2))
        if self.writers[i] is not None and self.position >= 0:
            # mm's newest sync, its last transaction's syncs all read: it ends the last
            # run, U is in a gap or the next record to mirror. A bound only when the
            # position proves nothing follows (a broker that keeps no commit metadata
            # leaves no pending syncs for transactions the topic has not delivered yet)
            return Translation(sd + 1, True), (sd + 1 if self.position == su + 1 else None)
        # past another writer's sync (it mirrored on without a sync we have), or with
        # no mirror position: exact only when the mirror's position says nothing follows
        exact = self.position == su + 1
        return Translation(sd + 1, exact), (sd + 1 if exact else None)

    def prune(self, below: int) -> int:
        """Forget syncs no longer needed for offsets >= ``below``; returns how many."""
        i = bisect_right(self.upstreams, below) - 1
        if i <= 0:
            return 0
        # translating U >= below needs only the newest sync <= U and the one after it
        del self.upstreams[:i]
        del self.downstreams[:i]
        del self.txn_first[:i]
        del self.complete[:i]
        del self.writers[:i]
        self.floor = self.upstreams[0]
        return i


def _known(offset: int) -> tuple[Translation, int | None]:
    return Translation(offset, True), offset


def _exact(
    ups: list[int],
    downs: list[int],
    upstream: int,
    txn_first: list[bool] | None,
    writers: list[str | None],
) -> int:
    got = translate_offset(ups, downs, upstream, txn_first, writers)
    assert got is not None  # callers checked upstream >= ups[0]
    return got


def _untrusted(sd: int, nd: int) -> tuple[Translation, int | None]:
    # syncs may be missing between the two, or another writer mirrored between them
    # without one per run: every record mirrored after s is at or after sd + 1, the
    # exact answer is somewhere in [sd + 1, nd]
    return Translation(sd + 1, nd == sd + 1), nd


@dataclass
class OffsetSyncStore:
    partitions: dict[tuple[str, int], PartitionHistory] = field(default_factory=dict)

    def _history(self, topic: str, partition: int) -> PartitionHistory:
        key = (topic, partition)
        h = self.partitions.get(key)
        if h is None:
            h = self.partitions[key] = PartitionHistory()
        return h

    def add_sync(
        self,
        topic: str,
        partition: int,
        upstream: int,
        downstream: int,
        txn_first: bool = False,
        writer: str | None = None,
    ) -> None:
        self._history(topic, partition).add(upstream, downstream, txn_first, writer)

    def mark_hole(self) -> None:
        """Syncs of any partition may be missing before each partition's next new sync."""
        for h in self.partitions.values():
            h.mark_hole()

    def set_pending(
        self, topic: str, partition: int, syncs: list[tuple[int, int]], writer: str | None = None
    ) -> None:
        self._history(topic, partition).set_pending(syncs, writer)

    def set_position(self, topic: str, partition: int, position: int) -> None:
        self._history(topic, partition).position = position

    def translate(self, topic: str, partition: int, upstream: int) -> int | None:
        h = self.partitions.get((topic, partition))
        return None if h is None else h.translate(upstream)

    def lookup(self, topic: str, partition: int, upstream: int) -> Translation | None:
        h = self.partitions.get((topic, partition))
        return None if h is None else h.lookup(upstream)

    def bound(self, topic: str, partition: int, upstream: int) -> int | None:
        h = self.partitions.get((topic, partition))
        return None if h is None else h.bound(upstream)

    def prune(self, topic: str, partition: int, below: int) -> int:
        h = self.partitions.get((topic, partition))
        return 0 if h is None else h.prune(below)

    def size(self) -> int:
        return sum(len(h.upstreams) for h in self.partitions.values())

    def holes(self) -> int:
        """Kept intervals, over all partitions, that are not known complete."""
        return sum(h.holes for h in self.partitions.values())

    def history(self, topic: str, partition: int) -> PartitionHistory | None:
        return self.partitions.get((topic, partition))

    def to_json(self, *, pending: bool = False) -> list[dict[str, Any]]:
        """Plain data (lists, ints, strings); downstream offsets as deltas to stay small.

        Flags are lists of indexes: ``incomplete`` (intervals not known complete),
        ``txn_first``; ``hole_next`` as a boolean; ``writers`` as runs of
        ``[count, transaction id or null]`` (syncs of one transaction are adjacent).
        ``pending``: also the mirror's last transaction (``pending``, ``pending_writer``),
        for a reader that has no commit metadata to read it from (the published
        history, :mod:`mm_client.offset_history`); the job's own snapshot leaves it out.
        """
        out: list[dict[str, Any]] = []
        for (topic, partition), h in sorted(self.partitions.items()):
            extra: dict[str, Any] = {}
            if pending and h.pending:
                extra = {
                    "pending": [list(s) for s in h.pending],
                    "pending_writer": h.pending_writer,
                }
            out.append(
                {
                    **extra,
                    "topic": topic,
                    "partition": partition,
                    "position": h.position,
                    "floor": h.floor,
                    "upstreams": _deltas(h.upstreams),
                    "downstreams": _deltas(h.downstreams),
                    "incomplete": [i for i, c in enumerate(h.complete) if i and not c],
                    "txn_first": [i for i, f in enumerate(h.txn_first) if f],
                    "hole_next": h.hole_next,
                    "writers": _runs(h.writers),
                }
            )
        return out

    @classmethod
    def from_json(cls, data: list[dict[str, Any]]) -> OffsetSyncStore:
        """The store :meth:`to_json` described; ValueError when the data is malformed.

        Entries without ``incomplete`` (format 1) load with every interval not
        complete: whether that history was read without holes is unknown. Entries
        without ``writers`` (formats 1 and 2) load with every writer unknown.
        """
        store = cls()
        try:
            for entry in data:
                ups = _undeltas(entry["upstreams"])
                downs = _undeltas(entry["downstreams"])
                if len(ups) != len(downs) or any(b <= a for a, b in pairwise(ups)):
                    raise ValueError("upstream offsets must be strictly increasing")
                n = len(ups)
                if "incomplete" in entry:
                    incomplete = {int(i) for i in entry["incomplete"]}
                else:
                    incomplete = set(range(1, n))
                firsts = {int(i) for i in entry.get("txn_first", [])}
                if any(not 0 <= i < n for i in firsts | incomplete):
                    raise ValueError("flag index out of range")
                complete = [i not in incomplete for i in range(n)]
                writers = _unruns(entry.get("writers"), n)
                held = [(int(u), int(d)) for u, d in entry.get("pending", [])]
                writer = entry.get("pending_writer")
                store.partitions[(str(entry["topic"]), int(entry["partition"]))] = PartitionHistory(
                    ups,
                    downs,
                    int(entry["position"]),
                    int(entry["floor"]),
                    [i in firsts for i in range(n)],
                    complete,
                    bool(entry.get("hole_next", False)),
                    held,
                    writers=writers,
                    pending_writer=None if writer is None else str(writer),
                )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"malformed store data: {exc!r}") from exc
        return store


def _runs(writers: list[str | None]) -> list[list[Any]]:
    out: list[list[Any]] = []
    for w in writers:
        if out and out[-1][1] == w:
            out[-1][0] += 1
        else:
            out.append([1, w])
    return out


def _unruns(data: Any, n: int) -> list[str | None]:
    if data is None:
        return [None] * n
    out: list[str | None] = []
    for count, writer in data:
        if int(count) <= 0 or not (writer is None or isinstance(writer, str)):
            raise ValueError(f"malformed writers run {[count, writer]!r}")
        out.extend([writer] * int(count))
    if len(out) != n:
        raise ValueError(f"writers cover {len(out)} syncs, expected {n}")
    return out


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
