"""OffsetSyncStore: exact, never ahead of the mirror, bounded by pruning."""

import random

import pytest

from mm.checkpoint.store import OffsetSyncStore, PartitionHistory
from mm.source.runs import RunTracker

pytestmark = pytest.mark.unit


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
        h.add(u, d)
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
    h.add(0, 0)
    h.add(9, 9)
    assert h.translate(10) == 10
    assert h.translate(11) is None


def test_duplicates_ignored_and_rewind_drops_stale() -> None:
    h = PartitionHistory()
    for pair in [(0, 0), (9, 9), (10, 11), (19, 20)]:
        h.add(*pair)
    h.add(10, 11)  # re-written after a crash: no change
    assert h.upstreams == [0, 9, 10, 19]
    h.add(10, 30)  # target re-mirrored from 10: later pairs are stale
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
        store.add_sync("t", 0, s_u, s_d)
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
