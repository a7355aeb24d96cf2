"""Planning a backup pass (pure): one range per partition from where the backup stands."""

from __future__ import annotations

import pytest

from mm.backup.plan import plan_backup, plan_partition, select_topics

pytestmark = pytest.mark.unit


def test_first_backup_starts_at_the_log_start():
    p = plan_partition("t", 0, (40, 100), None)
    assert (p.start, p.end, p.has_data, p.problem) == (40, 100, True, None)


def test_continues_where_the_backup_stands():
    p = plan_partition("t", 0, (0, 100), 70)
    assert (p.start, p.end, p.has_data) == (70, 100, True)


def test_retention_past_the_backup_still_starts_at_its_next_offset():
    # the task finds the log start moved and records 50..79 as lost
    p = plan_partition("t", 0, (80, 100), 50)
    assert (p.start, p.end, p.has_data) == (50, 100, True)


@pytest.mark.parametrize(("bounds", "next_offset"), [((0, 100), 100), ((7, 7), None), ((0, 0), 0)])
def test_nothing_new(bounds, next_offset):
    p = plan_partition("t", 0, bounds, next_offset)
    assert not p.has_data and p.problem is None and p.start == p.end


def test_a_log_below_the_backup_is_a_problem_not_a_range():
    p = plan_partition("t", 3, (0, 10), 50)
    assert not p.has_data
    assert p.problem is not None and "ends at 10, below the backup's next offset 50" in p.problem
    # the way out names where the topic's backup lives, when the caller says
    named = plan_partition("t", 3, (0, 10), 50, ("b/east/t", "b/_catalog/east/t"))
    assert "move the topic's old backup aside: b/east/t and b/_catalog/east/t, both" in str(
        named.problem
    )


def test_plan_backup_covers_every_partition_in_order():
    plans = plan_backup(
        {"b": 1, "a": 2},
        {("a", 0): (0, 5), ("a", 1): (0, 0), ("b", 0): (3, 9)},
        {("a", 0): 2, ("b", 0): None},
    )
    assert [(p.topic, p.partition, p.start, p.end, p.has_data) for p in plans] == [
        ("a", 0, 2, 5, True),
        ("a", 1, 0, 0, False),
        ("b", 0, 3, 9, True),
    ]


def test_missing_bounds_are_a_problem():
    (p,) = plan_backup({"a": 1}, {}, {})
    assert p.problem == "no log bounds read" and not p.has_data


def test_select_topics():
    assert select_topics({"x": 1, "a": 2, "__c": 1}, lambda t: not t.startswith("_")) == ["a", "x"]
