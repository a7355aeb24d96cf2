"""The judgement of one mirrored partition, from digests (pure; no I/O).

Inputs: the source's committed records and the target's (``DigestSeq``, as
Apache Kafka's read_committed consumer would see them), both logs' bounds, the
mirror's position (the state group's committed offset: next source offset to
mirror), the partition's offset syncs and its checkpoints.

What is decided:

* **records** — the source records below the position, in order, must be the
  target's records, in order. The first difference is classified: *missing on
  target*, *extra on target*, *content differs* (same place, other digest) or
  *reordered*; totals of missing and extra records come from comparing the two
  multisets of digests.
* **position** — at the source end: complete. Behind it: the records in
  between are *not yet mirrored* (incomplete). Ahead of it: wrong.
* **offset syncs** — every sync ``(u, d)`` is a true pair: the committed source
  record at ``u`` and the target record at ``d`` have the same digest.
* **translations** — every matched source offset, and the first and last offset
  of every source gap (markers, aborted records), translates with
  :func:`mm_client.translation.translate_offset` to the exact target offset: the
  target offset of the first mirrored record at or after it (one past the last
  mirrored record at the head). Where the syncs prove nothing more (another
  writer's, such as MirrorMaker 2's, or syncs missing) a translation behind the
  exact offset is *conservative*, counted, not wrong; ahead is always wrong.
* **checkpoints** — a checkpoint's downstream offset is at most the exact
  translation of its upstream offset: *exact*, *conservative* (behind), or
  *ahead* (a failed-over group would skip records).

What cannot be compared is said, not guessed: target records mirrored from
source offsets the source has since deleted (below its log start), source
records whose target copy the target's retention deleted, syncs and
translations of deleted offsets or of offsets below the oldest sync (a
compacted offset-syncs topic keeps only the newest ones), checkpoints that
point before the compared part or past a difference.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mm_client.translation import follows_runs, translate_offset

from mm.verify.digest import DIGEST_SIZE, DigestSeq

MISSING = "missing on target"
EXTRA = "extra on target"
CONTENT = "content differs"
REORDERED = "reordered"

EXACT = "exact"
CONSERVATIVE = "conservative"
AHEAD = "ahead"


@dataclass(frozen=True)
class Difference:
    """The first place where the two sides part, and how."""

    kind: str
    source_offset: int | None
    target_offset: int | None
    # for CONTENT: the fields that differ (filled in by whoever can read the records)
    fields: tuple[str, ...] = ()

    def describe(self) -> str:
        src = "-" if self.source_offset is None else str(self.source_offset)
        tgt = "-" if self.target_offset is None else str(self.target_offset)
        what = f"{self.kind} ({', '.join(self.fields)})" if self.fields else self.kind
        return f"{what} at source offset {src}, target offset {tgt}"


def first_difference(a: DigestSeq, b: DigestSeq) -> tuple[int, Difference | None]:
    """(records equal before the first difference, that difference or None).

    ``a`` is what the target should hold (source side), ``b`` what it holds.
    """
    n = min(len(a), len(b))
    da, db = a.digests, b.digests
    if da[: n * DIGEST_SIZE] == db[: n * DIGEST_SIZE]:
        k = n
    else:
        # bisect on equal prefixes: O(log n) slice comparisons
        lo, hi = 0, n  # prefix of length lo is equal, of length hi is not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if da[: mid * DIGEST_SIZE] == db[: mid * DIGEST_SIZE]:
                lo = mid
            else:
                hi = mid
        k = lo
    if k == len(a) == len(b):
        return k, None
    if k == len(b):
        return k, Difference(MISSING, a.offset(k), None)
    if k == len(a):
        return k, Difference(EXTRA, None, b.offset(k))
    return k, Difference(_classify(a, b, k), a.offset(k), b.offset(k))


def _classify(a: DigestSeq, b: DigestSeq, k: int) -> str:
    ak, bk = a.digest(k), b.digest(k)
    a_next = a.digest(k + 1) if k + 1 < len(a) else None
    b_next = b.digest(k + 1) if k + 1 < len(b) else None
    if a_next == bk and b_next == ak:
        return REORDERED  # a swapped pair
    ak_later_in_b = b.find(ak, k + 1) is not None
    bk_later_in_a = a.find(bk, k + 1) is not None
    if ak_later_in_b and bk_later_in_a:
        return REORDERED
    if ak_later_in_b:
        return EXTRA  # b[k] was inserted before what a expects next
    if bk_later_in_a:
        return MISSING  # a[k] never came
    return CONTENT


def multiset_difference(a: DigestSeq, b: DigestSeq) -> tuple[int, int]:
    """(records of ``a`` that ``b`` lacks, records of ``b`` that ``a`` lacks), counting
    duplicates: how many records are missing on the target and how many are extra."""
    step = DIGEST_SIZE
    ca = Counter(bytes(a.digests[i : i + step]) for i in range(0, len(a.digests), step))
    cb = Counter(bytes(b.digests[i : i + step]) for i in range(0, len(b.digests), step))
    return sum((ca - cb).values()), sum((cb - ca).values())


# --- offset syncs ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Sync:
    upstream: int
    downstream: int
    # True when the mirror flagged the sync as its transaction's first
    txn_first: bool = False
    # the mirror transaction id of a sync mm wrote (mm.sync header); None otherwise
    writer: str | None = None
    # syncs may be missing before this one (an offset gap in the offset-syncs topic)
    hole_before: bool = False


@dataclass
class SyncTable:
    """A partition's syncs as :func:`translate_offset` takes them (upstream-sorted)."""

    upstreams: list[int]
    downstreams: list[int]
    txn_first: list[bool]
    # upstream offsets synced to more than one downstream offset: (u, [d, ...])
    conflicts: list[tuple[int, list[int]]]
    # per sync: mm's transaction id (None: another writer), and whether no sync can
    # be missing before it
    writers: list[str | None] = field(default_factory=list)
    complete: list[bool] = field(default_factory=list)

    def translate(self, upstream: int) -> int | None:
        return translate_offset(
            self.upstreams,
            self.downstreams,
            upstream,
            self.txn_first,
            self.writers or None,
            self.complete or None,
        )

    def proven(self, upstream: int) -> bool:
        """Whether the syncs around ``upstream`` prove its translation exact (mm's run
        rule at both ends, nothing missing between); elsewhere a conservative
        translation (behind) is what the syncs allow."""
        ups = self.upstreams
        i = bisect_right(ups, upstream) - 1
        if i < 0:
            return False
        if ups[i] == upstream:
            return True
        writers = self.writers or None
        if i + 1 == len(ups):
            return writers is not None and writers[i] is not None
        return follows_runs(writers, i, i + 1) and (not self.complete or self.complete[i + 1])


def sync_table(syncs: Sequence[Sync]) -> SyncTable:
    """The syncs that describe the target as it is now, read in the order they were
    written and kept as the checkpoint job keeps them
    (:class:`mm.checkpoint.store.PartitionHistory`): a sync written again collapses
    into the one kept; a later sync at or below the kept ones is the partition
    mirrored again (a position moved back, the target topic deleted and mirrored
    anew), and what it supersedes is dropped. Upstream offsets synced to several
    downstream offsets over the whole topic are listed in ``conflicts``."""
    from mm.checkpoint.store import PartitionHistory

    history = PartitionHistory()
    seen: dict[int, list[int]] = {}
    for s in syncs:
        if s.hole_before:
            history.mark_hole()
        history.add(s.upstream, s.downstream, s.txn_first, s.writer)
        ds = seen.setdefault(s.upstream, [])
        if s.downstream not in ds:
            ds.append(s.downstream)
    return SyncTable(
        list(history.upstreams),
        list(history.downstreams),
        list(history.txn_first),
        [(u, ds) for u, ds in sorted(seen.items()) if len(ds) > 1],
        list(history.writers),
        list(history.complete),
    )


@dataclass
class SyncCheck:
    checked: int = 0
    false: int = 0
    # (upstream, downstream, why) of the first false sync
    first_false: tuple[int, int, str] | None = None
    not_checkable: int = 0
    # not true pairs now, written for a copy the partition was mirrored again over
    superseded: int = 0


def check_syncs(
    syncs: Sequence[Sync],
    source: DigestSeq,
    target: DigestSeq,
    source_start: int,
    target_start: int,
    current: SyncTable | None = None,
) -> SyncCheck:
    """Every distinct sync is a true pair: same digest at ``u`` (source) and ``d`` (target).

    Syncs into deleted parts of either log (below ``source_start`` or
    ``target_start``) cannot be checked. With ``current`` (:func:`sync_table`), a
    pair that is not true and not among the syncs it keeps counts as superseded,
    not false: it was written for an earlier copy of the partition (mirrored again
    since), and no translation uses it.
    """
    kept = None
    if current is not None:
        kept = set(zip(current.upstreams, current.downstreams, strict=True))
    out = SyncCheck()
    for s in sorted({(s.upstream, s.downstream) for s in syncs}):
        u, d = s
        if u < source_start or d < target_start:
            out.not_checkable += 1
            continue
        out.checked += 1
        i, j = source.index_of(u), target.index_of(d)
        why = None
        if i is None:
            why = f"no committed source record at offset {u}"
        elif j is None:
            why = f"no committed target record at offset {d}"
        elif source.digest(i) != target.digest(j):
            why = f"source record {u} and target record {d} differ"
        if why is not None:
            if kept is not None and (u, d) not in kept:
                out.superseded += 1
                continue
            out.false += 1
            if out.first_false is None:
                out.first_false = (u, d, why)
    return out


# --- translations ----------------------------------------------------------------------------


@dataclass
class TranslationCheck:
    checked: int = 0
    wrong: int = 0
    # (source offset, exact target offset, translated) of the first wrong one
    first_wrong: tuple[int, int, int | None] | None = None
    # offsets below the oldest sync: no history to translate them with
    not_checkable: int = 0
    # behind the exact offset where the syncs prove nothing more (another writer's
    # syncs, syncs missing): what MM2's rule gives, not a fault
    conservative: int = 0


def check_translations(
    pairs_u: Sequence[int],
    pairs_t: Sequence[int],
    table: SyncTable,
    *,
    gap_floor: int | None,
    head: int | None,
) -> TranslationCheck:
    """Translate every matched source offset ``pairs_u[i]`` (expect ``pairs_t[i]``) and
    the first and last offset of every source gap before it (expect the same).

    ``gap_floor``: the lowest source offset whose gap before ``pairs_u[0]`` is checked
    (None: not that gap). ``head``: the mirror's position when every record up to it
    matched; then offsets after the last record up to ``head`` translate to one
    past the last mirrored target record.
    """
    out = TranslationCheck()
    ups = table.upstreams

    oldest = ups[0] if ups else 0

    def expect_gap(u: int, t: int) -> None:
        # before the oldest sync nothing was mirrored to translate from: no claim
        if u >= oldest:
            expect(u, t)

    def expect(u: int, t: int) -> None:
        got = table.translate(u)
        if got is None:
            out.not_checkable += 1
            return
        out.checked += 1
        if got < t and not table.proven(u):
            out.conservative += 1
        elif got != t:
            out.wrong += 1
            if out.first_wrong is None:
                out.first_wrong = (u, t, got)

    prev = None if gap_floor is None else gap_floor - 1
    for u, t in zip(pairs_u, pairs_t, strict=True):
        if prev is not None and u - prev > 1:
            expect_gap(prev + 1, t)
            if u - 1 > prev + 1:
                expect_gap(u - 1, t)
        expect(u, t)
        prev = u
    if head is not None and pairs_u:
        last_u, after = pairs_u[-1], pairs_t[-1] + 1
        for u in sorted({last_u + 1, head - 1, head}):
            if u > last_u:
                expect(u, after)
    return out


def exact_translation(
    pairs_u: Sequence[int], pairs_t: Sequence[int], upstream: int, *, complete: bool
) -> int | None:
    """The target offset of the first matched record at or after ``upstream``; past
    them, one past the last (only when ``complete``: nothing differs after them)."""
    i = bisect_left(pairs_u, upstream)
    if i < len(pairs_u):
        return pairs_t[i]
    if complete and pairs_t:
        return pairs_t[-1] + 1
    return None


# --- checkpoints -----------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckpointIn:
    group: str
    upstream: int
    downstream: int


@dataclass
class CheckpointCheck:
    exact: int = 0
    conservative: int = 0
    ahead: int = 0
    not_checkable: int = 0
    # (group, upstream, downstream, exact translation) of the first checkpoint ahead
    first_ahead: tuple[str, int, int, int] | None = None


# --- one partition ---------------------------------------------------------------------------


@dataclass
class PartitionInput:
    topic: str
    partition: int
    target_topic: str
    source: DigestSeq
    target: DigestSeq
    source_start: int
    source_end: int
    target_start: int
    target_end: int
    # the state group's committed offset (None: the mirror committed nothing)
    position: int | None
    syncs: Sequence[Sync] = ()
    checkpoints: Sequence[CheckpointIn] = ()
    target_exists: bool = True


@dataclass
class PartitionReport:
    topic: str
    partition: int
    target_topic: str
    source_start: int
    source_end: int
    target_start: int
    target_end: int
    position: int | None
    source_records: int
    target_records: int
    compared: int = 0
    matched: int = 0
    not_yet_mirrored: int = 0
    difference: Difference | None = None
    missing_total: int = 0
    extra_total: int = 0
    syncs: SyncCheck = field(default_factory=SyncCheck)
    sync_conflicts: list[tuple[int, list[int]]] = field(default_factory=list)
    translations: TranslationCheck = field(default_factory=TranslationCheck)
    checkpoints: CheckpointCheck = field(default_factory=CheckpointCheck)
    # what is wrong (each fails the verification)
    problems: list[str] = field(default_factory=list)
    # what could not be compared, and why (does not fail it)
    not_compared: list[str] = field(default_factory=list)
    # raw-read facts worth showing (aborted and open transactions, ...)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def complete(self) -> bool:
        """Every committed source record is below the mirror's position."""
        return not self.not_yet_mirrored and (
            self.position is None or self.position <= self.source_end
        )

    def to_json(self) -> dict[str, Any]:
        d = self.difference
        s, t, c = self.syncs, self.translations, self.checkpoints
        return {
            "topic": self.topic,
            "partition": self.partition,
            "target_topic": self.target_topic,
            "ok": self.ok,
            "source": {"log_start": self.source_start, "end": self.source_end},
            "target": {"log_start": self.target_start, "end": self.target_end},
            "position": self.position,
            "source_records": self.source_records,
            "target_records": self.target_records,
            "records_compared": self.compared,
            "records_matched": self.matched,
            "not_yet_mirrored": self.not_yet_mirrored,
            "first_difference": None
            if d is None
            else {
                "kind": d.kind,
                "source_offset": d.source_offset,
                "target_offset": d.target_offset,
                "fields": list(d.fields),
            },
            "missing_on_target": self.missing_total,
            "extra_on_target": self.extra_total,
            "syncs": {
                "checked": s.checked,
                "false": s.false,
                "first_false": None
                if s.first_false is None
                else dict(zip(("upstream", "downstream", "why"), s.first_false, strict=True)),
                "not_checkable": s.not_checkable,
                "superseded": s.superseded,
                "conflicts": [{"upstream": u, "downstream": ds} for u, ds in self.sync_conflicts],
            },
            "translations": {
                "checked": t.checked,
                "wrong": t.wrong,
                "conservative": t.conservative,
                "first_wrong": None
                if t.first_wrong is None
                else dict(
                    zip(("source_offset", "exact", "translated"), t.first_wrong, strict=True)
                ),
                "not_checkable": t.not_checkable,
            },
            "checkpoints": {
                "exact": c.exact,
                "conservative": c.conservative,
                "ahead": c.ahead,
                "not_checkable": c.not_checkable,
                "first_ahead": None
                if c.first_ahead is None
                else dict(
                    zip(("group", "upstream", "downstream", "exact"), c.first_ahead, strict=True)
                ),
            },
            "problems": list(self.problems),
            "not_compared": list(self.not_compared),
            "notes": list(self.notes),
        }


def _anchor_target(inp: PartitionInput, src: DigestSeq, table: SyncTable) -> int:
    """Index of the target record that mirrors ``src[0]`` when the source has deleted
    its beginning: the target records before it came from deleted source offsets."""
    if not len(src):
        return len(inp.target)
    if table.upstreams:
        d = table.translate(src.offset(0))
        if d is not None:
            return inp.target.first_at_or_after(d)
    found = inp.target.find(src.digest(0))
    return 0 if found is None else found


def _anchor_source(inp: PartitionInput, src: DigestSeq, table: SyncTable) -> int:
    """Index of the first source record whose copy the target still holds, when the
    target's retention deleted its beginning."""
    if table.upstreams:
        # translation is monotonic in the source offset: bisect for the first >= target start
        lo, hi = 0, len(src)
        while lo < hi:
            mid = (lo + hi) // 2
            d = table.translate(src.offset(mid))
            if d is not None and d >= inp.target_start:
                hi = mid
            else:
                lo = mid + 1
        if lo < len(src) or not len(inp.target):
            return lo
    if not len(inp.target):
        return 0
    found = src.find(inp.target.digest(0))
    return 0 if found is None else found


def compare_partition(inp: PartitionInput) -> PartitionReport:
    """Judge one partition (see the module docstring)."""
    rep = PartitionReport(
        inp.topic,
        inp.partition,
        inp.target_topic,
        inp.source_start,
        inp.source_end,
        inp.target_start,
        inp.target_end,
        inp.position,
        len(inp.source),
        len(inp.target),
    )
    where = f"{inp.topic}[{inp.partition}]"
    table = sync_table(inp.syncs)
    rep.sync_conflicts = table.conflicts
    for u, ds in table.conflicts:
        # mirrored again over an earlier copy: the records' own comparison finds any
        # record the target holds twice; the newest copy's syncs are judged below
        rep.notes.append(
            f"source offset {u} synced to several target offsets {ds}: mirrored again "
            "from there; the newest syncs are used"
        )

    if not inp.target_exists:
        rep.problems.append(f"target topic {inp.target_topic} has no partition {inp.partition}")

    # --- position: which source records should be on the target
    pos = inp.position
    mirrored_upto = inp.source_start if pos is None else pos
    cut = inp.source.first_at_or_after(mirrored_upto)
    rep.not_yet_mirrored = len(inp.source) - cut
    # a position behind the end over markers and aborted records only is not a
    # failure: the mirror commits its position with records, so it stays there
    # until the next record comes (then the gap is crossed)
    if pos is None:
        if rep.not_yet_mirrored:
            rep.problems.append(
                f"no mirror position: the mirror committed nothing for "
                f"{inp.target_topic}[{inp.partition}] ({rep.not_yet_mirrored} committed "
                "source records not yet mirrored)"
            )
        elif inp.source_end > inp.source_start:
            rep.notes.append(
                "no mirror position, but the source holds no committed record to mirror"
            )
    elif pos > inp.source_end:
        rep.problems.append(f"mirror position {pos} is past the source end {inp.source_end}")
    elif pos < inp.source_end:
        if rep.not_yet_mirrored:
            rep.problems.append(
                f"not yet mirrored: {rep.not_yet_mirrored} committed records at source "
                f"offsets {pos}-{inp.source_end - 1} (position {pos}, source end "
                f"{inp.source_end})"
            )
        else:
            rep.notes.append(
                f"position {pos} is behind the source end {inp.source_end} over transaction "
                "markers or aborted records only: nothing to mirror there"
            )
    src = inp.source.slice(0, cut)

    # --- what cannot be compared: deleted beginnings
    i0 = j0 = 0
    if inp.source_start > 0:
        j0 = _anchor_target(inp, src, table)
        if j0:
            rep.not_compared.append(
                f"{j0} target records (offsets {inp.target.offset(0)}-"
                f"{inp.target.offset(j0 - 1)}) mirrored from source offsets below the "
                f"source log start {inp.source_start} (deleted on the source)"
            )
        rep.not_compared.append(
            f"source offsets 0-{inp.source_start - 1}: deleted by the source's retention"
        )
    if inp.target_start > 0:
        i0 = _anchor_source(inp, src, table)
        if i0:
            rep.not_compared.append(
                f"{i0} source records (offsets {src.offset(0)}-{src.offset(i0 - 1)}) whose "
                f"target copy is below the target log start {inp.target_start} (deleted "
                "on the target)"
            )
    a, b = src.slice(i0), inp.target.slice(j0)

    # --- records
    k, diff = first_difference(a, b)
    rep.matched = k
    rep.compared = min(len(a), len(b))
    rep.difference = diff
    if diff is not None:
        rep.missing_total, rep.extra_total = multiset_difference(a, b)
        rep.problems.append(diff.describe())
    pairs_u, pairs_t = a.offsets[:k], b.offsets[:k]
    complete_match = diff is None

    # --- syncs
    rep.syncs = check_syncs(
        inp.syncs, inp.source, inp.target, inp.source_start, inp.target_start, table
    )
    if rep.syncs.false:
        u, d, why = rep.syncs.first_false or (0, 0, "")
        rep.problems.append(f"{rep.syncs.false} false offset syncs; first ({u}, {d}): {why}")

    # --- translations
    if k and not table.upstreams:
        rep.problems.append(f"no offset syncs for {where}: no mirrored offset can be translated")
    elif k:
        nothing_skipped = i0 == 0 and j0 == 0
        rep.translations = check_translations(
            pairs_u,
            pairs_t,
            table,
            gap_floor=inp.source_start if nothing_skipped else None,
            head=pos if complete_match and pos is not None else None,
        )
        t = rep.translations
        if t.wrong:
            u, exact, got = t.first_wrong or (0, 0, None)
            rep.problems.append(
                f"{t.wrong} offsets translate wrongly; first: source offset {u} -> {got}, "
                f"exact {exact}"
            )
        if t.not_checkable:
            rep.not_compared.append(
                f"{t.not_checkable} source offsets below the oldest offset sync "
                f"({table.upstreams[0]}): not translatable (compacted or deleted syncs)"
            )
    if diff is not None and len(a) > k:
        rep.not_compared.append(
            f"translations and checkpoints from source offset {a.offset(k)} on: "
            "after the first difference"
        )

    # --- checkpoints
    first_compared = a.offset(0) if len(a) else None
    skipped = i0 > 0 or j0 > 0 or inp.source_start > 0
    cc = rep.checkpoints
    for cp in inp.checkpoints:
        upstream = cp.upstream if pos is None else min(cp.upstream, pos)
        want: int | None
        if skipped and (first_compared is None or upstream < first_compared):
            want = None  # the records it points at were deleted on one side
        elif not len(a) and not len(b) and complete_match:
            want = inp.target_end  # nothing mirrored: the target's end
        else:
            want = exact_translation(pairs_u, pairs_t, upstream, complete=complete_match)
        if want is None:
            cc.not_checkable += 1
        elif cp.downstream == want:
            cc.exact += 1
        elif cp.downstream < want:
            cc.conservative += 1
        else:
            cc.ahead += 1
            if cc.first_ahead is None:
                cc.first_ahead = (cp.group, cp.upstream, cp.downstream, want)
    if cc.ahead:
        g, u, d, e = cc.first_ahead or ("", 0, 0, 0)
        rep.problems.append(
            f"{cc.ahead} checkpoints ahead of their group; first: group {g!r} at source "
            f"offset {u} checkpointed to {d}, exact translation {e}"
        )
    if cc.not_checkable:
        rep.not_compared.append(
            f"{cc.not_checkable} checkpoints point at records not compared (deleted, or "
            "after the first difference)"
        )
    return rep
