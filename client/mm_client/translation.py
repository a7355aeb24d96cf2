"""Offset translation from offset syncs (pure; no I/O): exact where proven, never ahead.

For a group's committed upstream offset U the exact answer is the downstream
offset of the first mirrored record whose upstream offset is >= U, or one past
the last mirrored record when nothing at or after U has been mirrored yet.
Callers that must never run ahead of the mirror check that U is at or below the
mirror's position first (``mm.checkpoint.store`` does).

Two kinds of syncs, told apart by the writer (header
``mm_client.records.SYNC_WRITER_HEADER``, the id of the mirror transaction):

* **mm's syncs** follow the run rule (``mm.source.runs``): a sync for the first
  and the last record of every run of consecutively mirrored records, every
  transaction starting a run. Between two of them, with nothing missing in
  between, the answer is exact: inside one transaction equal upstream and
  downstream distances mean one run (the target is contiguous there), unequal
  ones a source gap after the first sync's run; across two transactions the
  first sync ended its transaction, so nothing between them was mirrored.
* **Every other sync** (MirrorMaker 2's, which it writes sparsely: on a skip,
  after ``offset.lag.max`` records, at commits, and not always then; an
  unknown writer's; a mirror version older than the header) is exact only at
  itself. Past it the answer is MM2's: its downstream offset + 1. That is never
  ahead (every record mirrored after the sync's record lies at or after it) and
  re-delivers what lies between.

An interval between an mm sync and another writer's (a takeover from MM2, or
MM2 taking over from mm) is read by the conservative rule too: nothing proves
who wrote what between them.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence


def follows_runs(writers: Sequence[str | None] | None, i: int, j: int) -> bool:
    """Both syncs ``i`` and ``j`` were written by mm under its run rule."""
    return writers is not None and writers[i] is not None and writers[j] is not None


def translate_offset(
    upstreams: Sequence[int],
    downstreams: Sequence[int],
    upstream: int,
    txn_first: Sequence[bool] | None = None,
    writers: Sequence[str | None] | None = None,
    complete: Sequence[bool] | None = None,
) -> int | None:
    """Translate ``upstream`` with syncs given as parallel, upstream-sorted lists.

    ``writers`` (parallel): the mirror transaction id of each sync mm wrote, None
    for a sync of any other writer; absent, every sync is read conservatively.
    ``txn_first`` (parallel, optional): True where a sync is the first of a
    mirror transaction (also implied by a change of transaction id).
    ``complete`` (parallel, optional): False where syncs may be missing before
    that sync (a compacted or truncated syncs topic); such an interval is read
    conservatively. Returns None when ``upstream`` is below the oldest sync (no
    history for it).
    """
    i = bisect_right(upstreams, upstream) - 1
    if i < 0:
        return None
    su, sd = upstreams[i], downstreams[i]
    if upstream == su:
        return sd
    if (
        i + 1 < len(upstreams)
        and follows_runs(writers, i, i + 1)
        and (complete is None or complete[i + 1])
    ):
        assert writers is not None
        nu, nd = upstreams[i + 1], downstreams[i + 1]
        if writers[i] != writers[i + 1] or (txn_first is not None and txn_first[i + 1]):
            # the next sync opens a transaction: s ended the previous one, so
            # nothing between them was mirrored
            return nd
        if nu - su == nd - sd:
            # the next sync is in the same run: U is a mirrored record inside it
            return sd + (upstream - su)
        # s ends its run; U falls in a source gap before the next run
        return nd
    # past an mm sync with none after it: s ended the last run, U is in a gap or not
    # mirrored yet (exact); past any other sync: MM2's rule (never ahead)
    return sd + 1
