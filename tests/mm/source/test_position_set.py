"""`mm position --set`: parsing and the check against the source log (pure)."""

from __future__ import annotations

import pytest

from mm.source.position_set import PositionChange, parse_sets, resolve_sets

pytestmark = pytest.mark.unit


def test_sets_are_parsed_per_partition() -> None:
    assert parse_sets(["0=1500", "3=start", " 2 = end"]) == {0: 1500, 3: "start", 2: "end"}
    assert parse_sets([]) == {}
    for bad, why in (
        ("1500", "expected PARTITION=OFFSET"),
        ("x=1", "expected PARTITION=OFFSET"),
        ("0=-1", "a number >= 0, 'start' or 'end'"),
        ("0=latest", "a number >= 0, 'start' or 'end'"),
    ):
        with pytest.raises(ValueError, match=why):
            parse_sets([bad])
    with pytest.raises(ValueError, match="names partition 0 twice"):
        parse_sets(["0=1", "0=2"])


def test_positions_are_checked_against_the_source_log_not_the_target() -> None:
    # a source with retention: its offsets are far above the target topic's
    ranges = {0: (5_000_000, 5_000_600), 1: (0, 300)}
    changes, errors = resolve_sets(
        "orders", {0: 5_000_450, 1: "start"}, ranges, {0: 5_000_600, 1: -1001}
    )
    assert errors == []
    assert changes == [PositionChange(0, 5_000_600, 5_000_450), PositionChange(1, None, 0)]
    changes, errors = resolve_sets("orders", {1: "end"}, ranges, {})
    assert changes == [PositionChange(1, None, 300)] and errors == []


def test_positions_outside_the_source_log_are_refused_naming_it() -> None:
    ranges = {0: (100, 300)}
    _changes, errors = resolve_sets("orders", {0: 301, 2: 5}, ranges, {})
    assert errors == [
        "position 301 for orders[0] is outside the source log [100, 300]: expected an offset "
        "in it (100: from the oldest record kept, 300: only records written from now on)",
        "orders has no partition 2 on the source: expected one of 0-0",
    ]
    _changes, errors = resolve_sets("orders", {0: 99}, ranges, {})
    assert len(errors) == 1 and "outside the source log [100, 300]" in errors[0]
