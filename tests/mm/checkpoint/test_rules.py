"""Checkpoint emission and group-offset-sync rules: tables of cases."""

import pytest
from mm_client.records import SYNC_WRITER_HEADER, TXN_FIRST_HEADER, Checkpoint, OffsetSync

from mm.checkpoint import rules
from mm.checkpoint.reader import decode_row
from mm.checkpoint.rules import GroupOffset
from mm.checkpoint.store import prune_bound

pytestmark = pytest.mark.unit


def cp(up: int, down: int, meta: str = "") -> Checkpoint:
    return Checkpoint("g", "A.t", 0, up, down, meta)


@pytest.mark.parametrize(
    ("last", "up", "down", "meta", "emit"),
    [
        (None, 5, 5, "", True),  # first checkpoint
        (cp(5, 5), 5, 5, "", False),  # unchanged: not written again
        (cp(5, 5), 5, 5, "m", True),  # metadata changed
        (cp(5, 5), 9, 10, "", True),  # group moved forward
        (cp(5, 5), 5, 6, "", True),  # same group offset, better translation (more syncs)
        (cp(9, 10), 9, 8, "", False),  # would go backwards, group did not: withheld
        (cp(9, 10), 12, 8, "", False),  # group forward but translation back: withheld
        (cp(9, 10), 3, 3, "", True),  # the group itself moved backwards on the source
    ],
)
def test_should_emit(last: Checkpoint | None, up: int, down: int, meta: str, emit: bool) -> None:
    assert rules.should_emit(last, up, down, meta) is emit


def test_next_checkpoint_never_without_translation() -> None:
    # None = ahead of the mirror or no history: no newer checkpoint, whatever the last one
    assert rules.next_checkpoint("g", "A.t", 0, GroupOffset(50), None, cp(5, 5)) is None
    assert rules.next_checkpoint("g", "A.t", 0, GroupOffset(50), None, None) is None
    got = rules.next_checkpoint("g", "A.t", 0, GroupOffset(7, "meta"), 8, cp(5, 5))
    assert got == Checkpoint("g", "A.t", 0, 7, 8, "meta")


def test_is_backwards() -> None:
    assert rules.is_backwards(cp(9, 10), 9, 8)
    assert not rules.is_backwards(cp(9, 10), 3, 3)
    assert not rules.is_backwards(None, 9, 8)
    assert not rules.is_backwards(cp(9, 10), 9, None)


@pytest.mark.parametrize(
    ("state", "idle"),
    [
        ("EMPTY", True),
        ("DEAD", True),
        ("empty", True),
        ("UNKNOWN", False),  # Tansu, while a consumer joins (0 members listed)
        ("STABLE", False),  # Tansu lists no members of a stable group
        ("PREPARING_REBALANCE", False),
        ("COMPLETING_REBALANCE", False),
        ("ASSIGNING", False),
        ("RECONCILING", False),
    ],
)
def test_group_is_idle(state: str, idle: bool) -> None:
    assert rules.group_is_idle(state) is idle


def test_plan_group_sync_forward_only_or_missing() -> None:
    want = {("A.t", 0): 10, ("A.t", 1): 10, ("A.t", 2): 10, ("A.t", 3): 10}
    have = {("A.t", 0): 5, ("A.t", 1): 10, ("A.t", 2): 99, ("A.t", 3): -1001}
    assert rules.plan_group_sync(want, have) == {("A.t", 0): 10, ("A.t", 3): 10}
    assert rules.plan_group_sync(want, {}) == want


@pytest.mark.parametrize(
    ("groups", "log_start", "bound"),
    [
        ([], None, None),  # log start unknown: keep everything
        ([], 40, 40),  # no group: what the source still holds
        ([100, 70], 40, 40),
        ([100, 20], 40, 20),  # a group below the log start keeps its history
        ([-1001, 100], 40, 40),  # no committed offset: ignored
    ],
)
def test_prune_bound(groups: list[int], log_start: int | None, bound: int | None) -> None:
    assert prune_bound(groups, log_start) == bound


def test_decode_row() -> None:
    s = OffsetSync("orders", 3, 17, 19)
    assert decode_row(0, 42, s.key_bytes(), s.value_bytes()) == (
        "orders",
        3,
        17,
        19,
        42,
        None,
        0,
        False,
        None,
    )
    topic, partition, up, down, offset, error, sp, first, writer = decode_row(
        1, 43, b"\x00", b"junk"
    )
    assert (topic, partition, up, down, offset, sp, first, writer) == (
        (None, None, None, None, 43, 1, None, None)
    )
    assert error and error.startswith("OffsetSync")
    assert decode_row(0, 44, s.key_bytes(), None)[5]


@pytest.mark.parametrize(
    ("headers", "first"),
    [
        ([(TXN_FIRST_HEADER, b"1")], True),
        ([("other", b"x"), (TXN_FIRST_HEADER, b"1")], True),
        ([(TXN_FIRST_HEADER, b"0")], False),
        ([("other", b"1")], False),
        ([], False),
        (None, False),
    ],
)
def test_decode_row_keeps_the_transaction_first_header(
    headers: list[tuple[str, bytes]] | None, first: bool
) -> None:
    s = OffsetSync("orders", 3, 17, 19)
    assert decode_row(0, 42, s.key_bytes(), s.value_bytes(), headers)[7] is first


@pytest.mark.parametrize(
    ("headers", "writer"),
    [
        ([(SYNC_WRITER_HEADER, b"3f9a0c1b2d4e")], "3f9a0c1b2d4e"),
        ([(TXN_FIRST_HEADER, b"1"), (SYNC_WRITER_HEADER, b"ab")], "ab"),
        ([(TXN_FIRST_HEADER, b"1")], None),  # a mirror older than the header
        ([(SYNC_WRITER_HEADER, b"")], None),
        ([(SYNC_WRITER_HEADER, None)], None),
        ([(SYNC_WRITER_HEADER, "caf\u00e9".encode())], None),  # not an id mm writes
        (None, None),  # MirrorMaker 2 writes no headers
    ],
)
def test_decode_row_keeps_the_writer_header(
    headers: list[tuple[str, bytes | None]] | None, writer: str | None
) -> None:
    s = OffsetSync("orders", 3, 17, 19)
    assert decode_row(0, 42, s.key_bytes(), s.value_bytes(), headers)[8] == writer


def test_tracked_groups_never_internal() -> None:
    from mm.checkpoint.emitter import tracked_group
    from mm.config import build_config

    cfg = build_config(
        {
            "clusters": "A, B",
            "A.bootstrap.servers": "a:9092",
            "B.bootstrap.servers": "b:9092",
            "A->B.enabled": "true",
            "A->B.groups": ".*",
            "A->B.groups.exclude": "skip-.*",
        }
    )
    flow = cfg.flow("A", "B")
    assert tracked_group(flow, "orders-app")
    assert not tracked_group(flow, "skip-me")
    # even when the user's filters let them through
    assert not tracked_group(flow, "__mm.mirror.A.B")
    assert not tracked_group(flow, "__consumer_offsets_like")


def test_a_checkpoint_the_history_proves_ahead_moves_back() -> None:
    # the old checkpoint 55 -> 60 came from a target since deleted and mirrored again,
    # where 55 translates exactly to 55: the old one would make the group skip 5
    last = Checkpoint("g", "A.t", 0, 55, 60, "")
    assert rules.is_backwards(last, 55, 55)  # without a bound: withheld, as before
    assert not rules.is_backwards(last, 55, 55, bound=55)
    cp = rules.next_checkpoint("g", "A.t", 0, rules.GroupOffset(55), 55, last, bound=55)
    assert cp is not None and cp.downstream_offset == 55
    # a conservative translation below an exact checkpoint does not move it back
    assert rules.next_checkpoint("g", "A.t", 0, rules.GroupOffset(55), 51, last, bound=62) is None
