"""OffsetSyncStore: exact, never ahead of the mirror, bounded by pruning."""

import random

import pytest

from mm.checkpoint.store import OffsetSyncStore, PartitionHistory, Translation
from mm.source.runs import RunTracker

pytestmark = pytest.mark.unit

# the transaction id of mm-written syncs (one writer: transaction boundaries are
# told by the txn_first flags, as before syncs carried the id)
W = "t"


def _mirror(
    layout: list[int], batch_sizes: list[int]
) -> tuple[list[tuple[int, int]], dict[int, int]]:
    """Mirror source record offsets `layout` in batches; returns (syncs, u -> d)."""
    syncs: list[tuple[int, int]] = []
    mapping: dict[int, int] = {}
    d = 0
    i = 0
    for size in batch_sizes:
        batch = layout[i : i + size]
        if not batch:
            break
        tracker = RunTracker()
        for u in batch:
            tracker.add(u)
        first = d
        for j, u in enumerate(batch):
            mapping[u] = first + j
        syncs += tracker.syncs(first)
        d = first + len(batch) + 1  # commit marker on the target
        i += size
    return syncs, mapping


def _exact(mapping: dict[int, int], u: int) -> int:
    later = [d for s, d in mapping.items() if s >= u]
    if later:
        return min(later)
    return max(mapping.values()) + 1


def test_translate_table() -> None:
    h = PartitionHistory()
    for u, d in [(0, 0), (4, 4), (6, 6), (10, 10), (20, 12)]:
        h.add(u, d, writer=W)
    h.position = 21
    assert h.translate(0) == 0
    assert h.translate(3) == 3
    # 5 is a source gap; (4,4) and (6,6) have equal distance, so the store answers 5,
    # a target offset holding no record: a consumer there reads from 6, as exact
    assert h.translate(5) == 5
    assert h.translate(15) == 12  # gap after run 6..10, next run starts at 20 -> 12
    assert h.translate(20) == 12
    assert h.translate(21) == 13  # at the mirror's position: one past the last record
    assert h.translate(22) is None  # beyond what has been mirrored: no answer


def test_never_ahead_without_known_position() -> None:
    h = PartitionHistory()
    h.add(0, 0, writer=W)
    h.add(9, 9, writer=W)
    assert h.translate(10) == 10
    assert h.translate(11) is None


def test_duplicates_ignored_and_rewind_drops_stale() -> None:
    h = PartitionHistory()
    for pair in [(0, 0), (9, 9), (10, 11), (19, 20)]:
        h.add(*pair, writer=W)
    h.add(10, 11, writer=W)  # re-written after a crash: no change
    assert h.upstreams == [0, 9, 10, 19]
    h.add(10, 30, writer=W)  # target re-mirrored from 10: later pairs are stale
    assert list(zip(h.upstreams, h.downstreams, strict=True)) == [(0, 0), (9, 9), (10, 30)]


@pytest.mark.parametrize("seed", range(60))
def test_random_layouts_exact_and_prune_keeps_exactness(seed: int) -> None:
    rng = random.Random(seed)
    layout: list[int] = []
    u = rng.randrange(0, 5)
    while len(layout) < 300:
        if rng.random() < 0.1:
            u += rng.randrange(1, 4)  # markers / aborted / compacted
        layout.append(u)
        u += 1
    sizes = [rng.randrange(1, 40) for _ in range(200)]
    syncs, mapping = _mirror(layout, sizes)
    store = OffsetSyncStore()
    for s_u, s_d in syncs:
        store.add_sync("t", 0, s_u, s_d, writer=W)
    store.set_position("t", 0, layout[-1] + 1)
    for q in range(layout[0], layout[-1] + 2):
        got = store.translate("t", 0, q)
        exact = _exact(mapping, q)
        assert got is not None
        # equal, or an equivalent target offset from which a consumer reads the same records
        assert got <= exact and not any(got <= d < exact for d in mapping.values()), (q, got)
    bound = rng.randrange(layout[0], layout[-1])
    before = store.size()
    store.prune("t", 0, bound)
    assert store.size() <= before
    for q in range(bound, layout[-1] + 2):
        got = store.translate("t", 0, q)
        exact = _exact(mapping, q)
        assert got is not None and got <= exact
        assert not any(got <= d < exact for d in mapping.values())


# --- trust: metadata syncs, holes in the history, transaction flags ---------------------


def _history(syncs: list[tuple[int, int]], position: int) -> PartitionHistory:
    h = PartitionHistory()
    for u, d in syncs:
        h.add(u, d, writer=W)
    h.position = position
    return h


def test_commit_metadata_syncs_never_make_a_gap_out_of_unread_history() -> None:
    # topic read up to (99, 99); the mirror's last transaction (from the state
    # group's commit metadata) is (200, 202)..(299, 301); the topic's syncs
    # (100, 101)..(199, 200) in between are not read yet
    h = _history([(0, 0), (99, 99)], 300)
    h.set_pending([(200, 202), (299, 301)], writer=W)
    got = h.lookup(150)
    assert got is not None
    assert got.offset == 100 and not got.exact  # conservative; exact is 151, not 202
    assert h.translate(200) == 202  # the metadata transaction itself is exact
    assert h.translate(250) == 252
    assert h.translate(300) == 302
    assert h.translate(301) is None  # past the mirror's position
    # the topic catches up: exact everywhere, nothing was taken for a rewind
    for u, d in [(100, 101), (199, 200), (200, 202), (299, 301)]:
        h.add(u, d, writer=W)
    assert list(zip(h.upstreams, h.downstreams, strict=True)) == [
        (0, 0),
        (99, 99),
        (100, 101),
        (199, 200),
        (200, 202),
        (299, 301),
    ]
    assert h.lookup(150) == Translation(151, True)
    assert h.pending == []


def test_commit_metadata_syncs_continue_a_transaction_read_in_part() -> None:
    # the topic holds the transaction's first sync already: the interval to the
    # next metadata sync is inside one transaction, so exact
    h = _history([(0, 0), (99, 99), (101, 101)], 300)
    h.set_pending([(101, 101), (199, 199), (250, 200), (299, 249)], writer=W)
    assert h.lookup(150) == Translation(150, True)
    assert h.lookup(220) == Translation(200, True)
    # metadata of an older transaction than the topic's head: ignored
    h.set_pending([(0, 0), (99, 99)], writer=W)
    assert h.translate(150) == 102  # one past (101, 101): the topic's head


def test_commit_metadata_syncs_on_an_empty_history() -> None:
    h = PartitionHistory(position=11)
    h.set_pending([(5, 7), (10, 12)], writer=W)
    assert h.translate(4) is None
    assert h.translate(5) == 7
    assert h.translate(8) == 10
    assert h.translate(11) == 13


# (syncs with a hole before index 2, U) -> expected (offset, exact)
HOLE = [(0, 0), (9, 9), (50, 60), (59, 69)]
HOLE_TABLE = [
    (0, (0, True)),
    (5, (5, True)),  # a complete interval: exact
    (9, (9, True)),
    (10, (10, False)),  # strictly inside the hole: one past the older sync
    (30, (10, False)),
    (49, (10, False)),
    (50, (60, True)),  # at the newer sync: exact
    (55, (65, True)),
    (60, (70, True)),
]


@pytest.mark.parametrize(("upstream", "expected"), HOLE_TABLE)
def test_translation_in_a_hole_is_conservative(upstream: int, expected: tuple[int, bool]) -> None:
    h = PartitionHistory()
    h.add(0, 0, writer=W)
    h.add(9, 9, writer=W)
    h.mark_hole()
    h.add(50, 60, writer=W)
    h.add(59, 69, writer=W)
    h.position = 60
    assert h.complete == [True, True, False, True]
    assert h.holes == 1
    assert h.lookup(upstream) == Translation(*expected)


def test_a_hole_of_width_one_is_still_exact() -> None:
    h = PartitionHistory()
    h.add(0, 0, writer=W)
    h.mark_hole()
    h.add(5, 1, writer=W)  # nothing fits between downstream 0 and 1: sd + 1 is exact
    assert h.lookup(3) == Translation(1, True)


def test_hole_flag_survives_replayed_syncs_and_applies_to_the_next_new_one() -> None:
    h = PartitionHistory()
    h.add(0, 0, writer=W)
    h.add(9, 9, writer=W)
    h.mark_hole()
    h.add(9, 9, writer=W)  # a re-written sync: not new, the hole is still ahead
    h.add(20, 30, writer=W)
    assert h.complete == [True, True, False]


def test_rewind_is_not_trusted() -> None:
    h = _history([(0, 0), (9, 9), (19, 19)], 30)
    h.add(9, 40, writer=W)  # target re-mirrored from 9
    assert h.complete == [True, False]
    assert h.lookup(5) == Translation(1, False)


def test_store_level_holes_reach_every_partition_and_prune_keeps_flags() -> None:
    s = OffsetSyncStore()
    s.add_sync("t", 0, 0, 0, writer=W)
    s.add_sync("t", 1, 0, 0, writer=W)
    s.mark_hole()
    s.add_sync("t", 0, 10, 20, writer=W)
    s.add_sync("t", 1, 10, 10, writer=W)  # the interval is untrusted even if it looks like a run
    s.add_sync("t", 2, 0, 0, writer=W)  # a partition first seen after the hole: nothing before it
    assert s.holes() == 2
    assert s.lookup("t", 1, 5) == Translation(1, False)
    s.add_sync("t", 0, 30, 40, txn_first=True, writer=W)
    assert s.prune("t", 0, 15) == 1
    h = s.history("t", 0)
    assert h is not None
    assert (h.upstreams, h.complete, h.txn_first) == ([10, 30], [False, True], [False, True])
    assert s.holes() == 1  # the interval before the oldest kept sync no longer counts


def test_transaction_flags_kept_and_used() -> None:
    h = PartitionHistory()
    h.add(0, 0, txn_first=True, writer=W)
    h.add(2, 2, txn_first=True, writer=W)  # source marker at 1, target marker at 1
    h.position = 3
    assert h.translate(1) == 2
    h.add(2, 2, writer=W)  # re-read without the header (a copy MM2 tools wrote): flag kept
    assert h.txn_first == [True, True]


# --- histories mm did not write alone (issue: never ahead in every history) -------------


def test_takeover_from_mirrormaker2_reads_its_syncs_conservatively() -> None:
    # MM2 mirrored 1000..1099 with one sync (it syncs on skips, after offset.lag.max,
    # at commits, and drops some); mm took over at 1100 (its syncs name their writer)
    h = PartitionHistory(position=1200)
    h.add(1000, 1000)
    h.add(1100, 1100, txn_first=True, writer="b1")
    h.add(1199, 1199, writer="b1")
    got = h.lookup(1050)
    assert got is not None and got.offset == 1001 and not got.exact  # was 1100: 50 ahead
    assert h.bound(1050) == 1100
    assert h.lookup(1000) == Translation(1000, True)  # exact at MM2's own sync
    assert h.lookup(1150) == Translation(1150, True)  # mm's syncs cover it: exact


def test_mm2_syncs_around_a_skip_are_not_read_as_mm_runs() -> None:
    # MM2 at-least-once: source 0..9, marker 10, 11.. -> target 0..; syncs at 0 and 11
    h = PartitionHistory(position=12)
    h.add(0, 0)
    h.add(11, 10)
    assert h.translate(5) == 1  # was 10 (the exact answer is 5)


def test_a_remirror_whose_first_sync_equals_an_old_one_replaces_the_history() -> None:
    # transactions of 10 records and a marker: (0,0)(9,9) (10,11)(19,20) ... (90,99)(99,108)
    h = PartitionHistory(position=100)
    for t in range(10):
        h.add(10 * t, 11 * t, txn_first=True, writer=f"old{t}")
        h.add(10 * t + 9, 11 * t + 9, writer=f"old{t}")
    assert h.translate(55) == 60
    # the target deleted and mirrored again as one transaction: its first sync is (0, 0)
    h.add(0, 0, txn_first=True, writer="new")
    got = h.lookup(55)
    assert got is not None and got.offset <= 55  # was 60: the old syncs were kept
    h.add(99, 99, writer="new")
    assert h.lookup(55) == Translation(55, True)
    assert (h.upstreams, h.downstreams) == ([0, 99], [0, 99])


def test_a_target_that_went_backwards_drops_the_old_history() -> None:
    h = PartitionHistory(position=60)
    h.add(0, 0, txn_first=True, writer="a")
    h.add(49, 49, writer="a")
    # a new target topic mirrored from source offset 50 on: downstream restarts at 0
    h.add(50, 0, txn_first=True, writer="b")
    assert h.lookup(40) is None  # the old copies are gone: no answer rather than a stale one
    assert (h.upstreams, h.downstreams) == ([50], [0])


def test_an_older_mirrors_restart_rewrite_keeps_the_pair() -> None:
    # syncs without the writer header re-written after a restart: kept, read conservatively
    h = PartitionHistory(position=20)
    for u, d in [(0, 0), (9, 9), (0, 0), (9, 9)]:
        h.add(u, d, txn_first=u == 0)
    assert (h.upstreams, h.downstreams) == ([0, 9], [0, 9])
    assert h.lookup(9) == Translation(9, True)
    got = h.lookup(5)
    assert got is not None and got.offset == 1 and not got.exact


def test_the_pending_transaction_is_kept_until_the_topic_delivers_its_last_sync() -> None:
    # the topic delivered the first sync of the mirror's last transaction (one run
    # 11..30) but not the rest yet: the pending syncs still answer past it. Before,
    # they were dropped there and 20 answered 12 "exactly", which moved an exact
    # checkpoint back (a checkpoint job killed between micro-batches)
    h = PartitionHistory(position=31)
    h.add(0, 0, txn_first=True, writer="w1")
    h.add(9, 9, writer="w1")
    h.set_pending([(11, 11), (30, 30)], "w2")
    h.add(11, 11, txn_first=True, writer="w2")
    assert h.lookup(20) == Translation(20, True)
    assert h.bound(20) == 20
    h.add(30, 30, writer="w2")
    assert h.pending == [] and h.lookup(20) == Translation(20, True)
