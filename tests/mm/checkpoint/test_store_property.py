"""Property test: the store's translation against a brute-force model (hypothesis).

A source partition with offset gaps (markers, aborted or compacted records) is
mirrored in transactions (each a batch; the target has a commit marker, or a
larger jump, between them); the mirror's syncs (run endpoints, the first of each
transaction flagged) go to an offset-syncs topic with contiguous offsets, with a
second partition's syncs interleaved. The topic may then be compacted (records
removed, the newest per partition kept), read in micro-batches through
``FlowCheckpointer.feed`` (which detects offset gaps), snapshotted and restored
midway, and the mirror's last transaction may arrive from its commit metadata
before the topic delivered the syncs before it.

For every U the store answers for: never ahead of the exact offset; equal to it
where the store says exact; and everywhere exact when nothing was compacted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.checkpointer import offline_checkpointer
from support.mirrored_logs import Mirrored, mirrored

from mm.checkpoint.store import OffsetSyncStore

pytestmark = pytest.mark.unit

# the transaction id of mm-written syncs (one writer: transaction boundaries are
# told by the txn_first flags, as before syncs carried the id)
W = "t"


@dataclass
class Row:
    offset: int
    topic: str | None
    partition: int | None
    upstream: int | None
    downstream: int | None
    txn_first: bool | None
    error: str | None = None
    syncs_partition: int = 0
    writer: str | None = W


def _check(store: OffsetSyncStore, m: Mirrored, position: int, complete: bool) -> None:
    for upstream in range(0, position + 2):
        got = store.lookup("t", 0, upstream)
        if got is None:
            continue
        exact = m.exact(upstream)
        where = f"U={upstream} got={got} exact={exact} syncs={m.syncs}"
        assert upstream <= position, where  # never ahead of the mirror
        assert got.offset <= exact, where  # never ahead of the exact answer
        if got.exact or complete:
            assert got.offset == exact, where


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    m=mirrored(),
    other=mirrored(),
    data=st.data(),
)
def test_store_translation_never_ahead_and_exact_where_complete(
    tmp_path: Path, m: Mirrored, other: Mirrored, data: st.DataObject
) -> None:
    # the offset-syncs topic: t[0]'s syncs with t[1]'s interleaved, contiguous offsets
    mine = [("t", 0, s) for s in m.syncs]
    theirs = [("t", 1, s) for s in other.syncs]
    merged: list[tuple[str, int, tuple[int, int, bool]]] = []
    while mine or theirs:
        take_mine = bool(mine) and (not theirs or data.draw(st.booleans()))
        merged.append((mine if take_mine else theirs).pop(0))
    topic = [Row(o, t, p, u, d, f) for o, (t, p, (u, d, f)) in enumerate(merged)]

    compacted = data.draw(st.booleans())
    if compacted:
        newest = {(r.topic, r.partition): r.offset for r in topic}
        topic = [
            r
            for r in topic
            if r.offset == newest[(r.topic, r.partition)] or data.draw(st.booleans())
        ]

    w = offline_checkpointer(tmp_path)
    position = m.us[-1] + 1
    w.snap.store.set_position("t", 0, position)
    # the job reads a prefix first; the mirror's last transaction is known from its
    # commit metadata meanwhile
    cut = data.draw(st.integers(0, len(topic)))
    for start in range(0, cut, 3):
        w.feed(topic[start : min(start + 3, cut)])
    w.snap.store.set_pending("t", 0, m.last_txn, writer=W)
    _check(w.snap.store, m, position, complete=False)

    if data.draw(st.booleans()):  # restart from the snapshot
        restored = offline_checkpointer(tmp_path)
        restored.snap.store = OffsetSyncStore.from_json(
            json.loads(json.dumps(w.snap.store.to_json()))
        )
        restored.snap.syncs_next = dict(w.snap.syncs_next)
        w = restored
        w.snap.store.set_pending("t", 0, m.last_txn, writer=W)
    w.feed(topic[cut:])
    _check(w.snap.store, m, position, complete=not compacted)
