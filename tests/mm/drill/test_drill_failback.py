"""The drill's reading of `mm failback`'s JSON: is each group's position on A exact."""

from __future__ import annotations

import pytest

from mm.drill.run import groups_back

pytestmark = pytest.mark.unit


def _group(name: str, status: str, *exact: bool) -> dict[str, object]:
    return {"group": name, "status": status, "partitions": [{"exact": e} for e in exact]}


def test_each_group_exact_or_why_not() -> None:
    doc = {
        "groups": [
            _group("moved", "moved", True, True),
            _group("there", "unchanged", True),
            _group("busy", "refused", True),
            _group("gaps", "not-exact", True, False),
            _group("odd", "moved", True, False),
        ]
    }
    assert groups_back(doc) == {
        "moved": None,
        "there": None,
        "busy": "not moved (refused)",
        "gaps": "not moved (not-exact)",
        "odd": "1 partition(s) not exact",
    }


def test_no_groups() -> None:
    assert groups_back({}) == {}
    assert groups_back({"groups": None}) == {}
