"""The mirror's shard map (mm.source.shard_map): partitions never move within a
generation, a new count is a new generation that fences every id of the last one."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mm.errors import MirrorError
from mm.source.shard_map import (
    ShardMap,
    TopicPartition,
    balanced,
    default_shard_count,
    extended,
    legacy_transactional_id,
    parse_shard_map,
    transition,
)

pytestmark = pytest.mark.unit

PREFIX = "mm.A.B"

partitions = st.sets(
    st.tuples(st.sampled_from(["A.orders", "A.pay", "A.t-1", "A.z"]), st.integers(0, 40)),
    max_size=120,
)


def spread(m: ShardMap) -> int:
    loads = m.loads()
    return max(loads) - min(loads)


def test_the_default_count_is_two_per_core_within_the_partitions() -> None:
    assert default_shard_count(cores=2, partitions=96) == 4
    assert default_shard_count(cores=16, partitions=1000) == 32
    assert default_shard_count(cores=8, partitions=3) == 3
    assert default_shard_count(cores=2, partitions=0) == 1
    assert default_shard_count(cores=0, partitions=5) == 2


def test_ids_name_the_flow_the_generation_and_the_shard() -> None:
    m = ShardMap(3, 2, {("A.orders", 0): 0, ("A.orders", 1): 1})
    assert m.transactional_ids(PREFIX) == ["mm.A.B.g3.s0", "mm.A.B.g3.s1"]
    assert legacy_transactional_id(PREFIX, "A.orders", 7) == "mm.A.B.A.orders.7"
    assert m.members(1) == [("A.orders", 1)]
    with pytest.raises(ValueError, match=r"outside 0\.\.1"):
        ShardMap(1, 2, {("A.orders", 0): 2})
    with pytest.raises(ValueError, match=">= 1"):
        ShardMap(0, 2, {})


def test_the_first_map_fences_every_per_partition_id_of_the_mirror_before_shards() -> None:
    t = transition(None, [("A.orders", 1), ("A.orders", 0), ("A.pay", 0)], 2, PREFIX)
    assert t.new_generation and t.changed
    assert t.map.generation == 1
    assert t.fence == ("mm.A.B.A.orders.0", "mm.A.B.A.orders.1", "mm.A.B.A.pay.0")
    assert t.map.assignment == {("A.orders", 0): 0, ("A.orders", 1): 1, ("A.pay", 0): 0}


def test_a_new_topic_joins_the_least_loaded_shards_and_nothing_moves() -> None:
    first = transition(None, [("A.orders", p) for p in range(3)], 2, PREFIX).map
    assert first.loads() == [2, 1]
    t = transition(first, [("A.orders", p) for p in range(3)] + [("A.new", 0), ("A.new", 1)], 2,
                   PREFIX)  # fmt: skip
    assert not t.new_generation and t.fence == () and t.changed
    assert t.map.generation == 1
    assert t.map.assignment == {**first.assignment, ("A.new", 0): 1, ("A.new", 1): 0}
    # the same partitions again: nothing to record
    same = transition(t.map, list(t.map.assignment), 2, PREFIX)
    assert same.map is t.map and not same.changed and not same.new_generation


def test_a_deleted_topic_keeps_its_shard_for_when_it_comes_back() -> None:
    first = transition(None, [("A.gone", 0), ("A.stay", 0), ("A.stay", 1)], 3, PREFIX).map
    without = transition(first, [("A.stay", 0), ("A.stay", 1)], 3, PREFIX)
    assert without.map is first and not without.changed
    back = transition(without.map, [("A.gone", 0), ("A.stay", 0), ("A.stay", 1)], 3, PREFIX)
    assert back.map.assignment[("A.gone", 0)] == first.assignment[("A.gone", 0)]


def test_another_count_is_the_next_generation_fencing_all_ids_of_the_last() -> None:
    first = transition(None, [("A.orders", p) for p in range(8)], 4, PREFIX).map
    t = transition(first, [("A.orders", p) for p in range(6)], 2, PREFIX)
    assert t.new_generation and t.map.generation == 2
    assert t.fence == tuple(f"mm.A.B.g1.s{s}" for s in range(4))
    # every partition the last generation knew is in the new map, balanced
    assert set(t.map.assignment) == {("A.orders", p) for p in range(8)}
    assert t.map.loads() == [4, 4]
    assert not set(t.map.transactional_ids(PREFIX)) & set(t.fence)


@settings(max_examples=200, deadline=None)
@given(st.lists(partitions, min_size=1, max_size=6), st.integers(1, 9))
def test_with_one_count_a_partition_stays_on_its_shard_whatever_arrives(
    batches: list[set[TopicPartition]], shards: int
) -> None:
    stored: ShardMap | None = None
    seen: dict[TopicPartition, int] = {}
    for batch in batches:
        t = transition(stored, batch, shards, PREFIX)
        assert t.new_generation is (stored is None)
        assert t.map.generation == 1
        assert batch <= set(t.map.assignment)
        for tp, shard in seen.items():
            assert t.map.assignment[tp] == shard, tp
        seen = dict(t.map.assignment)
        # growth never unbalances more than the last map already was
        assert spread(t.map) <= max(1, spread(stored) if stored else 0)
        stored = t.map


@settings(max_examples=200, deadline=None)
@given(partitions, partitions, st.integers(1, 9), st.integers(1, 9))
def test_a_new_generation_is_balanced_and_covers_every_known_partition(
    before: set[TopicPartition], now: set[TopicPartition], old: int, new: int
) -> None:
    first = transition(None, before, old, PREFIX).map
    assert spread(first) <= 1
    t = transition(first, now, new, PREFIX)
    if new == old:
        assert not t.new_generation and t.map.generation == first.generation
        return
    assert t.new_generation and t.map.generation == first.generation + 1
    assert set(t.map.assignment) == before | now
    assert spread(t.map) <= 1
    assert t.fence == tuple(first.transactional_ids(PREFIX))


@given(partitions, st.integers(1, 9))
def test_the_map_reads_back_as_written(parts: set[TopicPartition], shards: int) -> None:
    m = ShardMap(5, shards, balanced(parts, shards))
    assert parse_shard_map(m.to_json(), "here") == m
    assert extended(m, parts) is m


@pytest.mark.parametrize(
    "text",
    ["", "[]", '{"format": 2}', '{"format": 1, "generation": 1, "shards": 2}',
     '{"format": 1, "generation": 1, "shards": 2, "topics": {"t": {"0": 5}}}',
     '{"format": 1, "generation": "x", "shards": 2, "topics": {}}'],
)  # fmt: skip
def test_a_map_that_cannot_be_read_is_named_with_what_was_expected(text: str) -> None:
    with pytest.raises(MirrorError) as err:
        parse_shard_map(text, "mm-shards.A.B.internal")
    message = str(err.value)
    assert "mm-shards.A.B.internal" in message and "format 1" in message
