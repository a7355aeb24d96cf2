"""Failback, steps 2 and 3 (pure): where each group on the target resumes on the source.

After a failover A->B the applications ran on B. Failing back moves each group's
offsets on B to A. A group on B reads two kinds of topics:

* **remote** topics the A->B flow mirrored from A (``A.orders`` on B with the
  default policy): the group returns to A's own topic (``orders``) at the source
  offset its offset on B corresponds to, from the A->B offset syncs read
  backwards (:func:`inverse_offset`). Past the last mirrored record, the answer is
  the failover point's position: on A the group resumes at the first divergent
  record, which nobody processed (those records are also in the quarantine);
* **local** topics written on B since the failover (``orders`` on B), which the
  B->A flow mirrors to A (``B.orders`` with the default policy): the group's offset
  is translated forwards with the B->A offset syncs, by the checkpoint job's own
  exact rule (:meth:`mm.checkpoint.store.PartitionHistory.lookup`, see
  :func:`forward_offset`).

A group is moved only when every one of its partitions translates exactly: half a
group back on A would be neither here nor there.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mm_client.translation import follows_runs

from mm.checkpoint.store import PartitionHistory
from mm.dr.divergence import DivergenceReport
from mm.verify.compare import Sync

Key = tuple[str, int]

REMOTE = "remote"  # a topic of A mirrored to B: back to A's own topic
LOCAL = "local"  # a topic written on B, mirrored to A by the reverse flow

NOT_EXACT = "not-exact"  # a group left alone: some partition has no exact translation
AT_FAILOVER_POINT = "past the last mirrored record: the failover point"
AHEAD_ON_A = (
    "kept: at the failover point on the target, and already past it here (processed "
    "before the disaster)"
)
# dry run: a local topic's offset the reverse mirror has not copied yet
AFTER_STEP_2 = "known after step 2 (the reverse mirror)"


@dataclass(frozen=True)
class Back:
    """A translated offset on A; ``offset`` None when there is none, ``how`` says why."""

    offset: int | None
    exact: bool
    how: str


def history(syncs: Iterable[Sync]) -> PartitionHistory:
    """A partition's syncs in the order the syncs topic holds them, as the checkpoint
    job keeps them (a re-mirrored range replaces what followed it; a sync the topic
    may have lost records before starts an interval that is not complete)."""
    h = PartitionHistory()
    for s in syncs:
        if s.hole_before:
            h.mark_hole()
        h.add(s.upstream, s.downstream, s.txn_first, s.writer)
    return h


def inverse_offset(
    upstreams: Sequence[int],
    downstreams: Sequence[int],
    downstream: int,
    *,
    txn_first: Sequence[bool] | None = None,
    complete: Sequence[bool] | None = None,
    writers: Sequence[str | None] | None = None,
    position: int | None = None,
) -> Back:
    """The source offset a group at ``downstream`` on the target resumes at on the source.

    Syncs as :mod:`mm.source.runs` writes them (first and last record of every run),
    upstream-sorted, downstream offsets increasing with them. The answer is the
    source offset of the first mirrored record at or after ``downstream`` on the
    target, so the group reads on the source exactly what it would have read next
    on the target. Past the last sync it is ``position`` (the mirror's position at
    the failover point: the first offset never mirrored), which is right only when
    the syncs end at the last mirrored record; :func:`inverse_with_tail` checks that.

    ``complete`` (parallel, optional): False where syncs may be missing before that
    sync; ``writers`` (parallel): the mirror transaction id of each sync mm wrote,
    None for syncs of other writers (MirrorMaker 2's), which say nothing about the
    records between them; absent, no sync is taken as mm's. Inside an interval
    that is not complete or not mm's at both ends the answer is the lowest it can
    be (the group re-reads rather than skips) and not exact unless nothing can lie
    between.
    """
    n = len(upstreams)
    if n == 0:
        return Back(None, False, "no offset syncs for this partition")
    if downstream < downstreams[0]:
        return Back(None, False, f"below the oldest offset sync (target offset {downstreams[0]})")
    j = bisect_left(downstreams, downstream)
    if j < n and downstreams[j] == downstream:
        return Back(upstreams[j], True, "at an offset sync")
    if j < n:
        su, sd, nu, nd = upstreams[j - 1], downstreams[j - 1], upstreams[j], downstreams[j]
        if complete is not None and not complete[j]:
            return Back(su + 1, nu == su + 1, "between offset syncs that may have gaps")
        if not follows_runs(writers, j - 1, j):
            return Back(su + 1, nu == su + 1, "between offset syncs of another writer")
        assert writers is not None
        first = (txn_first is not None and txn_first[j]) or writers[j] != writers[j - 1]
        if not first and nu - su == nd - sd:
            return Back(su + (downstream - sd), True, "inside a mirrored run")
        # s ends its run: the target holds no copy between the two (markers only),
        # so the next record the group reads is the copy of the next sync's record
        return Back(nu, True, "in a target gap before the next mirrored run")
    if position is None:
        return Back(None, False, "past the last mirrored record, and no failover point for it")
    if position <= upstreams[-1]:
        return Back(
            None,
            False,
            f"the failover point ({position}) is not past the last mirrored source "
            f"offset {upstreams[-1]}",
        )
    return Back(position, True, AT_FAILOVER_POINT)


def tail_offset(
    copies: Sequence[int], originals: Sequence[int], position: int | None, downstream: int
) -> Back:
    """Where a group past the last offset sync resumes, counted record by record.

    The mirror's last transaction's syncs can be missing: written to the source
    after the commit, they die with it when the disaster strikes in between, and a
    broker that keeps no commit metadata (the mirror also stores them there) cannot
    give them back. What follows the last sync is still exact without them:

    * ``copies``: the target offsets of the committed records after the last sync
      (up to the target's end);
    * ``originals``: the source offsets of the committed records after the last
      sync's upstream offset, below ``position`` (the failover point: everything
      below it was mirrored, in order).

    Only the mirror writes a remote topic, so when the counts are equal the k-th
    copy is the k-th original, and a group at ``downstream`` resumes at the
    original of the first copy at or after it, or at ``position`` past all of them.
    Different counts (another writer, a mirror still running, records copied that
    the source no longer serves) give no answer.
    """
    if position is None:
        return Back(None, False, "past the last offset sync, and no failover point for it")
    if len(copies) != len(originals):
        return Back(
            None,
            False,
            f"past the last offset sync the target holds {len(copies)} records and the "
            f"source {len(originals)} below the failover point ({position}): not a copy "
            "of each other",
        )
    k = bisect_left(copies, downstream)
    if k == len(originals):
        return Back(position, True, AT_FAILOVER_POINT)
    return Back(originals[k], True, "after the last offset sync, counted record by record")


def inverse_with_tail(
    h: PartitionHistory | None,
    downstream: int,
    position: int | None,
    tail: Callable[[int, int], tuple[Sequence[int], Sequence[int]]],
) -> Back:
    """:func:`inverse_offset` with a partition's history (its pending syncs included);
    past the last sync, :func:`tail_offset` with ``tail(last upstream, last
    downstream)`` -> (copies, originals), read only then."""
    if h is None:
        return Back(None, False, "no offset syncs for this partition")
    ups, downs, first, complete, writers = h.all_syncs()
    if downs and downstream > downs[-1] and position is not None and position > ups[-1]:
        copies, originals = tail(ups[-1], downs[-1])
        return tail_offset(copies, originals, position, downstream)
    return inverse_offset(
        ups,
        downs,
        downstream,
        txn_first=first,
        complete=complete,
        writers=writers,
        position=position,
    )


def forward_offset(h: PartitionHistory | None, upstream: int) -> Back:
    """The target offset of a source offset, by the checkpoint job's rule; ``h`` must
    have the mirror's position set (nothing past it is answered)."""
    if h is None or not (h.upstreams or h.pending):
        return Back(None, False, "no offset syncs of the reverse flow for it: nothing mirrored")
    t = h.lookup(upstream)
    if t is not None:
        how = "translated" if t.exact else "offset syncs may be missing here"
        return Back(t.offset, t.exact, how)
    if h.position >= 0 and upstream > h.position:
        return Back(
            None,
            False,
            f"not mirrored yet: the reverse mirror is at {h.position}, the group at {upstream}",
        )
    return Back(None, False, "below the oldest offset sync of the reverse flow")


@dataclass
class BackRow:
    """One partition of one group: from where it is on B to where it goes on A."""

    group: str
    from_topic: str  # on B
    partition: int
    from_offset: int
    kind: str  # REMOTE or LOCAL
    topic: str  # on A
    after: int | None
    exact: bool
    how: str
    before: int | None = None  # the group's offset on A before
    note: str = ""


def plan_group(
    group: str,
    offsets_on_b: Mapping[Key, int],
    routes: Mapping[str, tuple[str, str]],
    answer: Any,
) -> list[BackRow]:
    """Rows for the group's partitions on routed topics (``routes``: topic on B ->
    (kind, topic on A)); ``answer(kind, topic, partition, offset) -> Back``."""
    rows = []
    for (topic, p), off in sorted(offsets_on_b.items()):
        route = routes.get(topic)
        if route is None:
            continue
        kind, a_topic = route
        back = answer(kind, topic, p, off)
        rows.append(BackRow(group, topic, p, off, kind, a_topic, back.offset, back.exact, back.how))
    return rows


def not_exact(rows: Iterable[BackRow]) -> list[BackRow]:
    return [r for r in rows if not r.exact or r.after is None]


def keep_ahead(rows: Iterable[BackRow]) -> None:
    """A group that consumed everything mirrored goes back to the failover point, unless
    its offset on A is already past it: before the disaster it processed (and
    committed) records there that never reached the target. Moving it back would
    have it process them again, so it keeps that offset."""
    for r in rows:
        if (
            r.kind == REMOTE
            and r.how == AT_FAILOVER_POINT
            and r.after is not None
            and r.before is not None
            and r.before > r.after
        ):
            r.after, r.how = r.before, AHEAD_ON_A


def translations(rows: Iterable[BackRow]) -> dict[Key, tuple[int, int | None]]:
    """What :func:`mm.dr.groups.move_groups` commits: (topic on A, partition) ->
    (offset, the offset on B it came from). Only for a group whose rows are all exact."""
    out: dict[Key, tuple[int, int | None]] = {}
    for r in rows:
        assert r.after is not None
        out[(r.topic, r.partition)] = (r.after, r.from_offset)
    return out


def identity_overlap(remote_topics: Iterable[str], reverse_topics: Iterable[str]) -> list[str]:
    """Topics of B that are both copies of A's (A->B) and mirrored back to A by the
    reverse flow under the same name: only possible with the identity policy, and
    the reverse mirror would then append B's copies of A's records (and B's own) to
    A's topic after the divergent records."""
    return sorted(set(remote_topics) & set(reverse_topics))


@dataclass
class ReversePartition:
    topic: str  # on B
    partition: int
    target_topic: str  # on A
    end: int  # read_committed end on B
    position: int | None  # the reverse mirror's position (next offset of B to copy)

    @property
    def unmirrored(self) -> int:
        return max(0, self.end - (self.position or 0))


@dataclass
class Reverse:
    """Step 2: the reverse flow's catch-up."""

    flow: str
    how: str  # "ran once", "a running mirror", "dry run"
    partitions: list[ReversePartition] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def unmirrored(self) -> int:
        return sum(p.unmirrored for p in self.partitions)

    def to_json(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "how": self.how,
            "seconds": round(self.seconds, 3),
            "unmirrored": self.unmirrored,
            "errors": self.errors,
            "partitions": [
                {
                    "topic": p.topic,
                    "partition": p.partition,
                    "target_topic": p.target_topic,
                    "end": p.end,
                    "position": p.position,
                    "unmirrored": p.unmirrored,
                }
                for p in self.partitions
            ],
        }


@dataclass
class FailbackReport:
    """Steps 1-3 of `mm failback`; ``problems`` non-empty means exit code 1."""

    flow: str
    reverse_flow: str | None
    dry_run: bool
    divergence: DivergenceReport
    reverse: Reverse | None = None
    rows: list[BackRow] = field(default_factory=list)
    group_status: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {
            **self.divergence.to_json(),
            "reverse_flow": self.reverse_flow,
            "ok": self.ok,
            "message": "; ".join(self.problems) or None,
            "problems": self.problems,
            "reverse": None if self.reverse is None else self.reverse.to_json(),
            "groups": [
                {
                    "group": g,
                    "status": status,
                    "partitions": [
                        {
                            "topic": r.topic,
                            "partition": r.partition,
                            "before": r.before,
                            "after": r.after,
                            "from_topic": r.from_topic,
                            "from_offset": r.from_offset,
                            "kind": r.kind,
                            "exact": r.exact,
                            "how": r.how,
                            "note": r.note,
                        }
                        for r in self.rows
                        if r.group == g
                    ],
                }
                for g, status in sorted(self.group_status.items())
            ],
        }
