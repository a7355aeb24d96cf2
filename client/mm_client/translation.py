"""Exact offset translation from offset syncs (pure; no I/O).

The mirror writes a sync for the first and last record of every run of
consecutively mirrored records (see ``mm.source.runs`` for the rule). Given the
syncs of one partition sorted by upstream offset, :func:`translate_offset`
returns the exact downstream offset for a group's committed upstream offset U:
the downstream offset of the first mirrored record whose upstream offset is
>= U, or one past the last mirrored record when nothing at or after U has been
mirrored yet. Callers that must never run ahead of the mirror check that U is at or below
the mirror's position first (``mm.checkpoint.store`` does).

One case the pairs alone cannot decide: two consecutive syncs whose upstream
and downstream distances are equal are either one run, or the end of one
mirror transaction and the start of the next with a source gap exactly as wide
as the target's gap (its commit marker). Inside one transaction runs are
contiguous downstream (d advances by 1 where u jumps by >= 2), so equal widths
there always mean one run. The mirror therefore flags the first sync of every
transaction (header ``mm_client.records.TXN_FIRST_HEADER``); with those flags
the boundary case is a gap. Without them (MM2, older mirrors) the pairs are read
as one run, which answers at most the exact offset (a target offset that holds
no record, from which a consumer reads what it would read from the exact one).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence


def translate_offset(
    upstreams: Sequence[int],
    downstreams: Sequence[int],
    upstream: int,
    txn_first: Sequence[bool] | None = None,
) -> int | None:
    """Translate ``upstream`` with syncs given as two parallel, upstream-sorted lists.

    ``txn_first`` (optional, parallel): True where a sync is the first of a
    mirror transaction. Returns None when ``upstream`` is below the oldest sync
    (no history for it).
    """
    i = bisect_right(upstreams, upstream) - 1
    if i < 0:
        return None
    su, sd = upstreams[i], downstreams[i]
    if upstream == su:
        return sd
    if i + 1 < len(upstreams):
        nu, nd = upstreams[i + 1], downstreams[i + 1]
        if txn_first is not None and txn_first[i + 1]:
            # the next sync opens a transaction: s ended the previous one, so
            # nothing between them was mirrored
            return nd
        if nu - su == nd - sd:
            # the next sync is in the same run: U is a mirrored record inside it
            return sd + (upstream - su)
        # s ends its run; U falls in a source gap before the next run
        return nd
    return sd + 1
