"""Source topic IDs (mm.source.topic_ids): pure comparison and the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from mm.source.topic_ids import (
    NO_ID,
    adopt_recreated,
    compare,
    load,
    recreated_message,
    save,
    topic_ids_file,
)

pytestmark = pytest.mark.unit


def test_new_topics_are_recorded_and_a_changed_id_is_a_recreated_topic() -> None:
    keep, recreated = compare({"orders": "id-1", "gone": "id-9"}, {"orders": "id-2", "new": "n"})
    assert recreated == {"orders": ("id-1", "id-2")}
    # the recreated topic keeps its recorded ID (refused until an operator acts); a
    # topic not seen now (deleted, maybe to come back) stays known
    assert keep == {"orders": "id-1", "gone": "id-9", "new": "n"}


def test_brokers_without_topic_ids_record_nothing() -> None:
    assert compare({}, {"orders": NO_ID, "x": ""}) == ({}, {})
    assert compare({"orders": "id-1"}, {"orders": NO_ID}) == ({"orders": "id-1"}, {})


def test_file_round_trip_and_a_foreign_file_is_named(tmp_path: Path) -> None:
    path = topic_ids_file(tmp_path, "A", "B")
    assert path == tmp_path / "mirror" / "A-B.topic-ids.json"
    assert load(path) == {}
    save(path, {"b": "2", "a": "1"})
    assert load(path) == {"a": "1", "b": "2"}
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="is not a topic-ID file; expected a JSON object"):
        load(path)
    path.write_text("{broken")
    with pytest.raises(ValueError, match=r"topic-ids.json is not a topic-ID file"):
        load(path)


def test_the_message_names_what_happened_and_the_way_out(tmp_path: Path) -> None:
    msg = recreated_message(
        "orders",
        "id-1",
        "id-2",
        source="A",
        target="B",
        target_topic="A.orders",
        state_group="__mm.mirror.A.B",
        path=tmp_path / "ids.json",
    )
    assert "orders on A was deleted and recreated" in msg and "topic ID id-1, now id-2" in msg
    assert "--group __mm.mirror.A.B --topic A.orders --delete-offsets" in msg
    assert "then topic A.orders on B, then run the mirror again: it records the new" in msg
    assert str(tmp_path / "ids.json") in msg


def test_a_recreated_topic_whose_target_is_gone_takes_its_new_id() -> None:
    keep, still, adopted = adopt_recreated(
        {"orders": "id-1", "pay": "p-1", "x": "x-1"},
        {"orders": ("id-1", "id-2"), "pay": ("p-1", "p-2")},
        ["orders", "other"],
    )
    assert keep == {"orders": "id-2", "pay": "p-1", "x": "x-1"}
    assert still == {"pay": ("p-1", "p-2")} and adopted == ["orders"]
