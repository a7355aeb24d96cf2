"""Property test: translation over histories mm did not write alone (hypothesis).

One source partition (offset gaps: markers, aborted or compacted records) is
mirrored into one target partition by a sequence of writers, each continuing
where the previous one stopped:

* **mm**: transactions of random sizes, a commit marker (or none, or more)
  between them, syncs by the run rule, each naming its transaction (the
  ``mm.sync`` header) and the first flagged; a restart may write the last
  transaction's syncs again;
* **an older mm**: the same syncs without the writer header;
* **MirrorMaker 2**: at-least-once or exactly-once (markers every few
  records), syncs as its OffsetSyncWriter chooses them: the first record, a
  skip upstream, ``offset.lag.max`` passed, the last record at a commit; any
  of them may be dropped (MM2 drops syncs while too many are in flight);
* **a re-mirror**: the target topic deleted and mirrored again from an
  earlier source offset (the log start or later), by any of the writers above,
  with other transaction sizes.

The syncs go to an offset-syncs topic with contiguous offsets, which may be
compacted (records removed, the newest kept), read in micro-batches through
``FlowCheckpointer.feed`` (offset gaps become holes), snapshotted and restored
midway; the mirror's last transaction may arrive from its commit metadata
first.

Properties, for every offset the store answers for, against a brute-force
model of the target as it stands (the last lineage only):

* never ahead: the checkpoint store's translation, and failback's inverse
  (target offset -> source offset), are at or behind the exact answer, and
  equal to it where they say exact; the store's ``bound`` is at or above it;
* exact where the syncs prove it: with nothing compacted, every offset inside
  a stretch mm's own syncs cover translates exactly.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.checkpointer import offline_checkpointer

from mm.checkpoint.store import OffsetSyncStore
from mm.dr.failback import inverse_offset
from mm.source.runs import RunTracker

pytestmark = pytest.mark.unit

MM, OLD_MM, MM2 = "mm", "older mm", "MirrorMaker 2"


@dataclass
class Row:
    """A row of the offset-syncs data source (mm.checkpoint.reader.SYNC_ROW_SCHEMA)."""

    offset: int
    topic: str | None
    partition: int | None
    upstream: int | None
    downstream: int | None
    txn_first: bool | None
    writer: str | None
    error: str | None = None
    syncs_partition: int = 0


@dataclass
class History:
    source: list[int]  # source offsets holding records
    # the target as it stands: (upstream, downstream) of each mirrored record
    us: list[int] = field(default_factory=list)
    ds: list[int] = field(default_factory=list)
    # the offset-syncs topic in write order: (upstream, downstream, first, writer)
    syncs: list[tuple[int, int, bool, str | None]] = field(default_factory=list)
    # index in ``syncs`` of the first sync written for the target as it stands
    lineage_start: int = 0
    # upstream spans [first sync, last sync] of mm's own segments on the target
    mm_spans: list[tuple[int, int]] = field(default_factory=list)
    last_writer: str = ""
    last_txn: tuple[str, list[tuple[int, int]]] | None = None
    steps: list[str] = field(default_factory=list)
    next_txn: int = 0

    def exact(self, upstream: int) -> int:
        i = bisect_left(self.us, upstream)
        return self.ds[i] if i < len(self.ds) else self.ds[-1] + 1

    def exact_back(self, downstream: int) -> int:
        """The source offset of the first record a consumer at ``downstream`` reads."""
        return self.us[bisect_left(self.ds, downstream)]


def _source(draw: st.DrawFn) -> list[int]:
    offset = draw(st.integers(0, 3))
    out: list[int] = []
    for _ in range(draw(st.integers(2, 14))):
        n = draw(st.integers(1, 8))
        out.extend(range(offset, offset + n))
        offset += n + draw(st.sampled_from([0, 0, 1, 1, 2, 5]))
    return out


def _mm_segment(draw: st.DrawFn, h: History, records: list[int], d: int, named: bool) -> int:
    first_u = None
    i = 0
    while i < len(records):
        batch = records[i : i + draw(st.integers(1, 9))]
        i += len(batch)
        tracker = RunTracker()
        for u in batch:
            tracker.add(u)
        pairs = tracker.syncs(d)
        txn = f"x{h.next_txn}"
        h.next_txn += 1
        writer = txn if named else None
        h.syncs += [(u, dd, k == 0, writer) for k, (u, dd) in enumerate(pairs)]
        if draw(st.integers(0, 5)) == 0:  # a restart writes the last syncs again
            h.syncs += [(u, dd, k == 0, writer) for k, (u, dd) in enumerate(pairs)]
        h.last_txn = (txn, pairs)
        first_u = pairs[0][0] if first_u is None else first_u
        for u in batch:
            h.us.append(u)
            h.ds.append(d)
            d += 1
        d += draw(st.sampled_from([1, 1, 1, 0, 2]))  # its commit marker, or none, or more
    if named and first_u is not None:
        h.mm_spans.append((first_u, records[-1]))
    return d


def _mm2_segment(draw: st.DrawFn, h: History, records: list[int], d: int) -> int:
    lag = draw(st.integers(1, 12))
    eos_every = draw(st.sampled_from([0, 0, 3, 10]))  # exactly once: a marker every n
    last_sync_d = -1
    prev_u = -2
    for k, u in enumerate(records):
        if eos_every and k and k % eos_every == 0:
            d += 1
        h.us.append(u)
        h.ds.append(d)
        due = last_sync_d < 0 or u != prev_u + 1 or d - (last_sync_d + 1) >= lag
        at_commit = k == len(records) - 1 or (eos_every and (k + 1) % eos_every == 0)
        # some are dropped while others are in flight; never a task's first (nothing is
        # in flight yet)
        if (due or at_commit) and (k == 0 or draw(st.integers(0, 3)) > 0):
            h.syncs.append((u, d, False, None))
            last_sync_d = d
        prev_u = u
        d += 1
    h.last_txn = None
    return d + (1 if eos_every else 0)


@st.composite
def histories(draw: st.DrawFn) -> History:
    h = History(source=_source(draw))
    pos = 0  # index into h.source of the next record to mirror
    d = draw(st.integers(0, 3))
    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from([MM, MM, MM2, MM2, OLD_MM, "re-mirror"]))
        if kind == "re-mirror":
            # the target topic deleted and mirrored again from an earlier offset
            pos = draw(st.integers(0, pos)) if pos else 0
            h.us, h.ds, h.mm_spans, d = [], [], [], 0
            h.lineage_start = len(h.syncs)
            h.steps.append(f"re-mirror from {h.source[pos] if pos < len(h.source) else 'end'}")
            kind = draw(st.sampled_from([MM, MM2, OLD_MM]))
        if pos >= len(h.source):
            break
        n = draw(st.integers(1, len(h.source) - pos))
        records = h.source[pos : pos + n]
        pos += n
        if kind == MM2:
            d = _mm2_segment(draw, h, records, d)
        else:
            d = _mm_segment(draw, h, records, d, named=kind == MM)
        h.last_writer = kind
        h.steps.append(f"{kind}: {records[0]}..{records[-1]}")
    return h


def _covered(h: History, upstream: int) -> bool:
    """Inside a stretch of the current target that mm's own syncs cover."""
    return any(lo <= upstream <= hi for lo, hi in h.mm_spans)


def _check(store: OffsetSyncStore, h: History, settled: bool) -> int:
    """The properties; returns how many offsets translated exactly."""
    exact_count = 0
    top = (h.source[-1] if h.source else 0) + 2
    for upstream in range(0, top):
        got = store.lookup("t", 0, upstream)
        where = f"U={upstream} got={got} steps={h.steps} syncs={h.syncs}"
        if got is None:
            assert not (settled and _covered(h, upstream)), where
            continue
        assert h.us, where  # an answer needs a mirrored record
        exact = h.exact(upstream)
        assert got.offset <= exact, where  # never ahead
        bound = store.bound("t", 0, upstream)
        assert bound is None or bound >= exact, f"bound={bound} {where}"
        if got.exact:
            assert got.offset == exact, where
        if settled and _covered(h, upstream):
            assert got.exact and got.offset == exact, where  # exact where proven
        exact_count += got.offset == exact
    hist = store.history("t", 0)
    if hist is not None and h.ds:
        ups, downs, first, complete, writers = hist.all_syncs()
        for downstream in range(h.ds[0], (downs[-1] if downs else -1) + 1):
            back = inverse_offset(
                ups, downs, downstream, txn_first=first, complete=complete, writers=writers
            )
            if back.offset is None:
                continue
            want = h.exact_back(downstream)
            where = f"D={downstream} back={back} want={want} steps={h.steps}"
            assert back.offset <= want, where  # never ahead on the source either
            if back.exact:
                assert back.offset == want, where
    return exact_count


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(h=histories(), data=st.data())
def test_mixed_histories_never_ahead_and_exact_where_mm_syncs_prove_it(
    tmp_path: Path, h: History, data: st.DataObject
) -> None:
    topic = [Row(o, "t", 0, u, d, f, w) for o, (u, d, f, w) in enumerate(h.syncs)]
    compacted = bool(topic) and data.draw(st.booleans())
    if compacted:
        # the cleaner passed offset c: before it only the newest sync of the (one)
        # key is left, after it everything
        c = data.draw(st.integers(1, len(topic)))
        topic = topic[c - 1 :]

    w = offline_checkpointer(tmp_path)
    if h.us and h.last_writer in (MM, OLD_MM):
        # mm's state group: the next source offset after its last record
        w.snap.store.set_position("t", 0, h.us[-1] + 1)
    # its last transaction's syncs, from the state group's commit metadata (an older
    # mm wrote the same metadata)
    pending = h.last_txn if h.last_writer in (MM, OLD_MM) else None
    cut = data.draw(st.integers(0, len(topic)))
    for start in range(0, cut, 4):
        w.feed(topic[start : min(start + 4, cut)])
    if pending is not None:
        w.snap.store.set_pending("t", 0, pending[1], pending[0])
    if any(r.offset >= h.lineage_start for r in topic[:cut]):
        # judged against the target as it stands once the job has read a sync of it
        # (before that, its answers are about the deleted target: see the docs)
        _check(w.snap.store, h, settled=False)

    if data.draw(st.booleans()):  # the job restarts from its snapshot
        restored = offline_checkpointer(tmp_path)
        restored.snap.store = OffsetSyncStore.from_json(
            json.loads(json.dumps(w.snap.store.to_json()))
        )
        restored.snap.syncs_next = dict(w.snap.syncs_next)
        w = restored
        if pending is not None:
            w.snap.store.set_pending("t", 0, pending[1], pending[0])
    w.feed(topic[cut:])
    if any(r.offset >= h.lineage_start for r in topic):
        _check(w.snap.store, h, settled=not compacted)
