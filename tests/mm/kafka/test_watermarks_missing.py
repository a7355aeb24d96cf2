"""Batched end listings with a partition whose topic was deleted since it was listed."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from mm.errors import KafkaOperationError
from mm.kafka.watermarks import watermarks

pytestmark = pytest.mark.unit


class Listing:
    """An AdminClient whose ListOffsets answers ``ends`` and UNKNOWN_TOPIC_OR_PART for
    the topics in ``gone``."""

    def __init__(self, ends: dict[tuple[str, int], int], gone: set[str]) -> None:
        self.ends, self.gone = ends, gone
        self.asked: list[list[tuple[str, int]]] = []

    def list_offsets(self, specs: dict[TopicPartition, Any], **_: Any) -> dict[Any, Future[Any]]:
        self.asked.append(sorted((tp.topic, tp.partition) for tp in specs))
        out: dict[Any, Future[Any]] = {}
        for tp in specs:
            f: Future[Any] = Future()
            if tp.topic in self.gone:
                f.set_exception(KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)))
            else:
                end = self.ends[(tp.topic, tp.partition)]
                f.set_result(type("Info", (), {"offset": end})())
            out[tp] = f
        return out


def test_partitions_of_a_deleted_topic_are_named_and_left_out_when_asked() -> None:
    admin = Listing({("a", 0): 5, ("a", 1): 7}, gone={"b"})
    keys = [("a", 0), ("a", 1), ("b", 0)]
    missing: set[tuple[str, int]] = set()
    marks = watermarks({}, keys, admin=admin, missing=missing)
    assert missing == {("b", 0)}
    assert marks == {("a", 0): (5, 5), ("a", 1): (7, 7)}
    # the second listing (the ends) no longer asks for the missing partition
    assert admin.asked == [keys, [("a", 0), ("a", 1)]]


def test_a_deleted_topic_still_fails_a_listing_that_does_not_ask_for_missing_ones() -> None:
    admin = Listing({("a", 0): 5}, gone={"b"})
    with pytest.raises(KafkaOperationError, match=r"list offsets of b\[0\]") as err:
        watermarks({}, [("a", 0), ("b", 0)], admin=admin)
    assert err.value.code == "UNKNOWN_TOPIC_OR_PART"
