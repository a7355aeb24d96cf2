"""Which offset syncs a mirrored batch must write, so translation is exact.

Rule (the mirror writes exactly these syncs, per source partition):

* A *run* is a maximal stretch of consecutively mirrored records whose upstream
  offsets advance by exactly one per record. Inside one batch the records land
  on the target contiguously (one transactional producer per partition, nothing
  else writes there), so inside a run the downstream offsets advance by one too.
* Every batch starts a new run: the batch before it ended with a transaction
  marker on the target, so the downstream side is discontinuous there.
* The mirror writes a sync ``(upstream, downstream)`` for the **first** and the
  **last** record of every run (one sync when the run has one record).

Consequence, used by :mod:`mm_client.translation`: for any upstream offset U,
with ``s`` the newest sync whose upstream offset is <= U,

* ``U == s.upstream``: the answer is ``s.downstream``;
* the next sync exists and lies in the same run as ``s`` (equal upstream and
  downstream distance): U is inside that run, answer ``s.downstream + U - s.upstream``;
* otherwise ``s`` ends its run and U falls in a source gap (markers, aborted or
  compacted records): the answer is the downstream offset of the next sync, or
  ``s.downstream + 1`` when nothing after U has been mirrored yet.

MM2's readers, which take ``s.downstream`` (+1 when U is past it), can still read
the topic: they are just less precise.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class RunTracker:
    """Feeds on the upstream offsets of one batch, in order; yields run boundaries.

    Downstream offsets are not known while producing; they are ``d0 + index``
    once the first record's downstream offset ``d0`` is known, so the tracker
    stores record indexes and :meth:`syncs` turns them into pairs at the end.
    """

    # (upstream offset, record index) of run starts and run ends, in order
    _points: list[tuple[int, int]] = field(default_factory=list)
    _count: int = 0
    _last_upstream: int = -2

    def add(self, upstream: int) -> None:
        """Record the next mirrored record's upstream offset (strictly increasing)."""
        if upstream != self._last_upstream + 1 or upstream < 0:
            if upstream < 0:
                # -1 would pass as "next after the -2 sentinel" and start no run
                raise ValueError(f"upstream offsets are never negative: {upstream}")
            if upstream <= self._last_upstream:
                raise ValueError(
                    f"upstream offsets must increase: {upstream} after {self._last_upstream}"
                )
            if self._count:
                # close the previous run at its last record
                self._close_run()
            self._points.append((upstream, self._count))
        self._last_upstream = upstream
        self._count += 1

    def add_contiguous(self, first: int, n: int) -> None:
        """Record ``n`` records with upstream offsets ``first .. first+n-1``."""
        if n <= 0:
            return
        self.add(first)
        self._last_upstream = first + n - 1
        self._count += n - 1

    def _close_run(self) -> None:
        last_index = self._count - 1
        if self._points[-1][1] != last_index:
            self._points.append((self._last_upstream, last_index))

    @property
    def points(self) -> int:
        """Sync points so far, counting the end of the open run."""
        return len(self._points) + 1 if self._count else 0

    @property
    def count(self) -> int:
        return self._count

    @property
    def last_upstream(self) -> int:
        return self._last_upstream

    def syncs(self, first_downstream: int) -> list[tuple[int, int]]:
        """The (upstream, downstream) sync pairs of the batch, in upstream order."""
        if not self._count:
            return []
        points = list(self._points)
        last_index = self._count - 1
        if points[-1][1] != last_index:
            points.append((self._last_upstream, last_index))
        return [(u, first_downstream + i) for u, i in points]
