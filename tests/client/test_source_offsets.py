"""Source offsets kept outside Kafka groups, translated from a published history
(pure: the store, its publication record, the answer per offset)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mm_client.offset_history import MAGIC, decode_history, encode_history
from mm_client.source_offsets import parse_source_offsets, translate_with
from mm_client.sync_store import OffsetSyncStore
from support.mirrored_logs import Mirrored, mirrored

pytestmark = pytest.mark.unit


def _remote(topic: str) -> str:
    return f"A.{topic}"


def _published(store: OffsetSyncStore) -> OffsetSyncStore:
    """The store as a reader of the target gets it (encoded, then decoded)."""
    _, value = encode_history("A->B", 1, store)
    return decode_history(value).store


@settings(max_examples=150, deadline=None)
@given(m=mirrored(), trailing=st.integers(0, 2), held=st.booleans())
def test_every_offset_translates_exactly_or_behind_and_counts_what_was_not_mirrored(
    m: Mirrored, trailing: int, held: bool
) -> None:
    """Built from mm's syncs of a log with gaps and read back from its publication:
    every offset at or above the oldest sync gets the exact answer (the last
    transaction held aside as the commit metadata gives it: never ahead, exact where
    it says so); past the mirror's position, the end of what was mirrored and how
    many source offsets lie past the position."""
    store = OffsetSyncStore()
    syncs = m.syncs[: len(m.syncs) - len(m.last_txn)] if held else m.syncs
    for u, d, first in syncs:
        store.add_sync("t", 0, u, d, first, "w")
    position = m.us[-1] + 1 + trailing
    store.set_position("t", 0, position)
    if held:
        store.set_pending("t", 0, m.last_txn, "w")
    store = _published(store)
    oldest = syncs[0][0] if syncs else m.last_txn[0][0]
    asked = [("t", 0, u) for u in range(0, position + 6)]
    for r in translate_with(store, asked, _remote):
        where = f"{r} syncs={m.syncs} held={held} position={position}"
        assert r.target_topic == "A.t"
        if r.offset < oldest:
            assert r.target_offset is None and r.problem and "reaches back" in r.problem, where
            continue
        exact = m.exact(min(r.offset, position))
        assert r.target_offset is not None and r.target_offset <= exact, where
        if r.exact or not held:
            assert r.target_offset == exact, where
        assert r.not_mirrored == max(0, r.offset - position), where


def test_a_partition_without_history_and_an_offset_below_it_are_named() -> None:
    store = OffsetSyncStore()
    store.add_sync("orders", 0, 100, 0, True, "w")
    store.add_sync("orders", 0, 109, 9, False, "w")
    store.set_position("orders", 0, 110)
    got = translate_with(store, [("orders", 0, 99), ("orders", 1, 5), ("orders", 0, 104)], _remote)
    assert [r.target_offset for r in got] == [None, None, 4]
    assert got[0].problem is not None and "reaches back to offset 100" in got[0].problem
    assert "translate_by_timestamp" in got[0].problem
    assert got[1].problem is not None and "no offset history for orders/1" in got[1].problem
    assert got[2].exact and got[2].problem is None and got[2].not_mirrored == 0


def test_parse_source_offsets() -> None:
    assert parse_source_offsets("orders:0:12, a:b:1:7,,x:2:0") == [
        ("orders", 0, 12),
        ("a:b", 1, 7),
        ("x", 2, 0),
    ]
    for bad, says in [
        ("orders:0", "expected TOPIC:PARTITION:OFFSET"),
        ("orders:zero:1", "whole numbers"),
        ("orders:0:-1", "must not be negative"),
        (" , ", "no offsets given"),
    ]:
        with pytest.raises(ValueError, match=says):
            parse_source_offsets(bad)


def test_a_record_that_is_not_a_history_is_refused_naming_what_it_holds() -> None:
    with pytest.raises(ValueError, match="not an offset-history record"):
        decode_history(b'{"flow": "A->B"}')
    with pytest.raises(ValueError, match="malformed offset-history record"):
        decode_history(MAGIC + b"not zlib")
    with pytest.raises(ValueError, match="not an offset-history record"):
        decode_history(None)
