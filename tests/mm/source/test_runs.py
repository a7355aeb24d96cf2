"""RunTracker: which offset syncs one mirrored batch writes (mm.source.runs).

Rule under test: a sync for the first and the last record of every run of
consecutive upstream offsets inside the batch (one sync for a one-record run);
downstream offsets are ``first_downstream + record index``. Every expected list
below was worked out by hand from that rule, not produced by the code.
"""

from __future__ import annotations

import random
from itertools import pairwise

import pytest

from mm.source.runs import RunTracker

pytestmark = pytest.mark.unit

Sync = tuple[int, int]


def _tracker(upstreams: list[int]) -> RunTracker:
    tracker = RunTracker()
    for u in upstreams:
        tracker.add(u)
    return tracker


def _reference_syncs(upstreams: list[int], first_downstream: int) -> list[Sync]:
    """Independent statement of the rule: endpoints of maximal +1 stretches."""
    syncs: list[Sync] = []
    for i, u in enumerate(upstreams):
        starts_run = i == 0 or upstreams[i - 1] != u - 1
        ends_run = i == len(upstreams) - 1 or upstreams[i + 1] != u + 1
        if starts_run or ends_run:
            syncs.append((u, first_downstream + i))
    return syncs


# (name, upstream offsets of one batch in order, first downstream offset, expected syncs)
BATCHES: list[tuple[str, list[int], int, list[Sync]]] = [
    ("empty", [], 0, []),
    ("single record", [5], 100, [(5, 100)]),
    ("single record at offset 0", [0], 0, [(0, 0)]),
    ("two contiguous", [7, 8], 3, [(7, 3), (8, 4)]),
    ("contiguous", [5, 6, 7, 8], 100, [(5, 100), (8, 103)]),
    ("contiguous from 0", list(range(10)), 0, [(0, 0), (9, 9)]),
    ("one gap in the middle", [0, 1, 2, 5, 6], 0, [(0, 0), (2, 2), (5, 3), (6, 4)]),
    ("gap of one (a marker)", [10, 11, 13, 14, 15], 40, [(10, 40), (11, 41), (13, 42), (15, 44)]),
    ("every record its own run", [0, 2, 4], 10, [(0, 10), (2, 11), (4, 12)]),
    ("one-record run after a run", [0, 1, 3], 0, [(0, 0), (1, 1), (3, 2)]),
    ("one-record run before a run", [0, 2, 3], 0, [(0, 0), (2, 1), (3, 2)]),
    (
        "one-record run in the middle",
        [0, 1, 5, 9, 10],
        0,
        [(0, 0), (1, 1), (5, 2), (9, 3), (10, 4)],
    ),
    (
        "several gaps",
        [10, 11, 12, 20, 30, 31],
        7,
        [(10, 7), (12, 9), (20, 10), (30, 11), (31, 12)],
    ),
    (
        "long gap (aborted transaction)",
        [3, 4, 1000, 1001, 1002],
        50,
        [(3, 50), (4, 51), (1000, 52), (1002, 54)],
    ),
    ("starts after log start", [1234, 1235, 1236], 0, [(1234, 0), (1236, 2)]),
    (
        "large offsets",
        [2**62, 2**62 + 1, 2**62 + 3],
        2**61,
        [(2**62, 2**61), (2**62 + 1, 2**61 + 1), (2**62 + 3, 2**61 + 2)],
    ),
]


@pytest.mark.parametrize(
    ("upstreams", "first_downstream", "expected"),
    [pytest.param(u, d, e, id=name) for name, u, d, e in BATCHES],
)
def test_syncs_of_a_batch(
    upstreams: list[int], first_downstream: int, expected: list[Sync]
) -> None:
    tracker = _tracker(upstreams)
    assert tracker.syncs(first_downstream) == expected
    assert tracker.count == len(upstreams)
    if upstreams:
        assert tracker.last_upstream == upstreams[-1]
    # the hand-written table and the independent reference agree (guards the table itself)
    assert _reference_syncs(upstreams, first_downstream) == expected


@pytest.mark.parametrize(
    ("upstreams", "expected"),
    [pytest.param(u, e, id=name) for name, u, d, e in BATCHES if d == 0],
)
def test_syncs_are_relative_to_first_downstream(upstreams: list[int], expected: list[Sync]) -> None:
    tracker = _tracker(upstreams)
    for base in (0, 1, 987_654_321):
        assert tracker.syncs(base) == [(u, d + base) for u, d in expected]


def test_contiguous_batch_gives_two_syncs_one_if_single() -> None:
    for first in (0, 1, 17, 10**12):
        for n in (1, 2, 3, 100, 10_000):
            tracker = RunTracker()
            tracker.add_contiguous(first, n)
            syncs = tracker.syncs(42)
            if n == 1:
                assert syncs == [(first, 42)]
            else:
                assert syncs == [(first, 42), (first + n - 1, 42 + n - 1)]


def test_syncs_on_both_sides_of_every_gap() -> None:
    upstreams = [0, 1, 2, 3, 7, 8, 9, 15, 20, 21]
    syncs = _tracker(upstreams).syncs(0)
    synced = {u for u, _ in syncs}
    for before, after in pairwise(upstreams):
        if after != before + 1:
            assert before in synced and after in synced, (before, after, syncs)
    # and nothing else: records strictly inside a run get no sync
    assert synced == {0, 3, 7, 9, 15, 20, 21}


def test_empty_tracker() -> None:
    tracker = RunTracker()
    assert tracker.syncs(0) == []
    assert tracker.syncs(123) == []
    assert tracker.count == 0
    tracker.add_contiguous(5, 0)
    tracker.add_contiguous(5, -3)
    assert tracker.syncs(0) == []
    assert tracker.count == 0


def test_syncs_does_not_change_the_tracker() -> None:
    tracker = _tracker([0, 1, 2, 5])
    first = tracker.syncs(10)
    assert tracker.syncs(10) == first
    # adding after a call to syncs() continues the same batch
    tracker.add(6)
    tracker.add(9)
    assert tracker.syncs(10) == [(0, 10), (2, 12), (5, 13), (6, 14), (9, 15)]


# (name, chunks (first, n) fed to add_contiguous, expected syncs at first_downstream 0)
CHUNKS: list[tuple[str, list[tuple[int, int]], list[Sync]]] = [
    ("one chunk", [(5, 4)], [(5, 0), (8, 3)]),
    ("one record chunk", [(5, 1)], [(5, 0)]),
    ("adjacent chunks merge into one run", [(0, 3), (3, 2), (5, 1)], [(0, 0), (5, 5)]),
    ("chunks with gaps", [(0, 3), (5, 2), (9, 1)], [(0, 0), (2, 2), (5, 3), (6, 4), (9, 5)]),
    (
        "empty chunks are ignored",
        [(0, 2), (2, 0), (2, 1), (10, 0), (4, 1)],
        [(0, 0), (2, 2), (4, 3)],
    ),
    ("single-record chunks", [(0, 1), (1, 1), (3, 1)], [(0, 0), (1, 1), (3, 2)]),
]


@pytest.mark.parametrize(
    ("chunks", "expected"), [pytest.param(c, e, id=name) for name, c, e in CHUNKS]
)
def test_add_contiguous_table(chunks: list[tuple[int, int]], expected: list[Sync]) -> None:
    tracker = RunTracker()
    for first, n in chunks:
        tracker.add_contiguous(first, n)
    assert tracker.syncs(0) == expected


def _mixed_feed(rng: random.Random, upstreams: list[int]) -> RunTracker:
    """Feed ``upstreams`` through a random mix of add and add_contiguous."""
    tracker = RunTracker()
    i = 0
    while i < len(upstreams):
        if rng.random() < 0.5:
            tracker.add(upstreams[i])
            i += 1
            continue
        # a contiguous chunk, possibly cut short of the end of its run
        j = i + 1
        while j < len(upstreams) and upstreams[j] == upstreams[j - 1] + 1:
            j += 1
        n = rng.randint(1, j - i)
        tracker.add_contiguous(upstreams[i], n)
        if rng.random() < 0.2:
            tracker.add_contiguous(upstreams[i] + n, 0)
        i += n
    return tracker


def _random_batch(rng: random.Random) -> list[int]:
    u = rng.choice([0, rng.randrange(1, 10**6)])
    out: list[int] = []
    for _ in range(rng.randint(0, 60)):
        out.append(u)
        u += 1 if rng.random() < rng.choice([0.3, 0.8, 0.97]) else rng.randint(2, 6)
    return out


@pytest.mark.parametrize("seed", range(200))
def test_add_contiguous_equivalent_to_add(seed: int) -> None:
    rng = random.Random(seed)
    upstreams = _random_batch(rng)
    base = rng.randrange(0, 10**6)
    one_by_one = _tracker(upstreams)
    mixed = _mixed_feed(rng, upstreams)
    assert mixed.syncs(base) == one_by_one.syncs(base) == _reference_syncs(upstreams, base)
    assert mixed.count == one_by_one.count == len(upstreams)
    assert mixed.last_upstream == one_by_one.last_upstream


# (name, offsets accepted first, the call that must fail)
BAD_ORDER: list[tuple[str, list[int], int]] = [
    ("repeat", [5], 5),
    ("repeat after run", [5, 6, 7], 7),
    ("back by one", [5, 6], 5),
    ("far back", [100, 200], 150),
    ("back to zero", [3], 0),
]


@pytest.mark.parametrize(
    ("accepted", "bad"), [pytest.param(a, b, id=name) for name, a, b in BAD_ORDER]
)
def test_decreasing_offsets_raise(accepted: list[int], bad: int) -> None:
    tracker = _tracker(accepted)
    before = tracker.syncs(0)
    with pytest.raises(ValueError, match="increase"):
        tracker.add(bad)
    with pytest.raises(ValueError, match="increase"):
        tracker.add_contiguous(bad, 3)
    # the failed calls left the tracker as it was, and it still accepts the next offset
    assert tracker.syncs(0) == before
    assert tracker.count == len(accepted)
    tracker.add(accepted[-1] + 1)
    assert tracker.syncs(0) == _reference_syncs([*accepted, accepted[-1] + 1], 0)


def test_decreasing_after_add_contiguous_raises() -> None:
    tracker = RunTracker()
    tracker.add_contiguous(0, 5)  # 0..4
    with pytest.raises(ValueError):
        tracker.add(4)
    with pytest.raises(ValueError):
        tracker.add_contiguous(3, 2)
    tracker.add_contiguous(5, 1)
    assert tracker.syncs(0) == [(0, 0), (5, 5)]


@pytest.mark.parametrize("bad", [-1, -2, -100])
def test_negative_offsets_raise(bad: int) -> None:
    # -1 used to slip past the order check (the "nothing yet" sentinel is -2)
    # and made syncs() fail with IndexError
    with pytest.raises(ValueError):
        RunTracker().add(bad)
    with pytest.raises(ValueError):
        RunTracker().add_contiguous(bad, 3)
