"""Which partitions the planner asks to look at again: committed position below the plan."""

from __future__ import annotations

import pytest

from mm.source.keepalive import REFRESH_PREFIX
from mm.source.moved import behind_plan

pytestmark = pytest.mark.unit

TARGETS = {"orders": "A.orders", "pay": "A.pay"}


def test_a_position_reset_backwards_or_deleted_is_behind_the_plan() -> None:
    planned = {"orders:0": 600, "orders:1": 600, "orders:2": 600, "pay:0": 40}
    committed = {("A.orders", 0): 600, ("A.orders", 1): 100, ("A.pay", 0): 40}
    # orders:1 reset backwards, orders:2 has no position any more (deleted)
    assert behind_plan(planned, {}, TARGETS, committed) == ["orders:1", "orders:2"]


def test_nothing_planned_past_the_log_start_needs_no_position() -> None:
    planned = {"orders:0": 0, "orders:1": 500, "orders:2": 501}
    starts = {"orders:0": 0, "orders:1": 500, "orders:2": 500}  # retention moved 1 and 2
    assert behind_plan(planned, starts, TARGETS, {}) == ["orders:2"]


def test_ahead_refresh_keys_and_topics_no_longer_mirrored_are_left_alone() -> None:
    planned = {"orders:0": 600, REFRESH_PREFIX + "orders:0": 3, "gone:0": 70}
    committed = {("A.orders", 0): 900}  # forward: the next range's task resumes there
    assert behind_plan(planned, {}, TARGETS, committed) == []
