"""The fast checkpoints reader keeps exactly what Checkpoint.from_bytes accepts, newest wins.

No broker: a fake consumer hands the reader's loop messages, so the decoding
shortcuts (key parsed once, values of other groups never read, a byte test for
well-formed version-0 values) are checked against the plain definition, which
decodes every record with ``Checkpoint.from_bytes`` and keeps the last one per
(group, topic, partition).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pytest
from confluent_kafka import KafkaError
from mm_client import Checkpoint, TopicPartition
from mm_client.checkpoints_reader import (
    SKIPPED_NAMED,
    CheckpointSnapshot,
    _Reader,
    group_matcher,
)
from mm_client.connection import Deadline, ErrorTrail
from mm_client.errors import RecordDecodeError

pytestmark = pytest.mark.unit

Record = tuple[bytes | None, bytes | None]


@dataclass
class FakeMessage:
    _key: bytes | None
    _value: bytes | None
    _offset: int
    _error: KafkaError | None = None
    _partition: int = 0

    def error(self) -> KafkaError | None:
        return self._error

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset


class FakeConsumer:
    """Hands out the records in batches, then the end-of-partition event."""

    def __init__(self, records: Sequence[Record], batch: int = 7) -> None:
        msgs = [FakeMessage(k, v, i) for i, (k, v) in enumerate(records)]
        msgs.append(FakeMessage(None, None, len(records), KafkaError(KafkaError._PARTITION_EOF)))
        self._batches = [msgs[i : i + batch] for i in range(0, len(msgs), batch)]
        self.assigned: list[object] = []

    def assign(self, partitions: list[object]) -> None:
        self.assigned = partitions

    def consume(self, num_messages: int, timeout: float) -> list[FakeMessage]:
        return self._batches.pop(0) if self._batches else []


def run_reader(
    records: Sequence[Record], groups: str | Callable[[str], bool] = ".*"
) -> CheckpointSnapshot:
    reader = _Reader(group_matcher(groups))
    ends = reader.read(
        FakeConsumer(records),  # type: ignore[arg-type]
        "A.checkpoints.internal",
        [0],
        Deadline(10),
        "fake:9092",
        ErrorTrail(),
    )
    assert ends == {0: len(records)}
    return CheckpointSnapshot(
        "A.checkpoints.internal",
        "fake:9092",
        reader.latest,
        records=reader.records,
        skipped=reader.skipped,
        end_offsets=ends,
        skipped_at=reader.skipped_at,
    )


_VALID_VALUE = Checkpoint("g", "t", 0, 0, 0).value_bytes()


def reference(
    records: Sequence[Record], match: Callable[[str], bool]
) -> dict[str, dict[TopicPartition, Checkpoint]]:
    """The definition: decode everything with Checkpoint.from_bytes, last one wins."""
    out: dict[str, dict[TopicPartition, Checkpoint]] = {}
    for key, value in records:
        if value is None:  # tombstone: deletes a valid key's checkpoint
            try:
                probe = Checkpoint.from_bytes(key, _VALID_VALUE)
            except RecordDecodeError:
                continue
            if match(probe.consumer_group):
                out.get(probe.consumer_group, {}).pop(
                    TopicPartition(probe.topic, probe.partition), None
                )
            continue
        try:
            cp = Checkpoint.from_bytes(key, value)
        except RecordDecodeError:
            continue
        if match(cp.consumer_group):
            out.setdefault(cp.consumer_group, {})[TopicPartition(cp.topic, cp.partition)] = cp
    return {g: v for g, v in out.items() if v}


def rec(cp: Checkpoint) -> Record:
    return cp.key_bytes(), cp.value_bytes()


def test_newest_checkpoint_per_partition_wins_and_other_groups_are_ignored() -> None:
    records = [
        rec(Checkpoint("g1", "A.orders", 0, 10, 7)),
        rec(Checkpoint("g1", "A.orders", 1, 5, 5)),
        rec(Checkpoint("g2", "A.orders", 0, 99, 98)),
        rec(Checkpoint("g1", "A.orders", 0, 20, 17, "meta")),  # newer, with metadata
        rec(Checkpoint("g10", "A.orders", 0, 1, 1)),  # a prefix of g1 must not match "g1"
    ]
    snap = run_reader(records, "g1")
    assert snap.all_offsets() == {"g1": {("A.orders", 0): 17, ("A.orders", 1): 5}}
    assert snap.checkpoints("g1")[TopicPartition("A.orders", 0)] == Checkpoint(
        "g1", "A.orders", 0, 20, 17, "meta"
    )
    assert snap.records == 5 and snap.skipped == 0
    assert snap.groups == ["g1"]
    assert snap.offsets("nope") == {}


def test_garbage_is_skipped_and_counted_and_never_replaces_a_valid_checkpoint() -> None:
    good = Checkpoint("g", "A.t", 0, 4, 3)
    records: list[Record] = [
        rec(good),
        (good.key_bytes(), b"\x00\x00\x01"),  # truncated value for the same key
        (good.key_bytes(), good.value_bytes() + b"x"),  # trailing byte (version 0)
        (good.key_bytes(), b"\xff\xff" + good.value_bytes()[2:]),  # negative version
        (b"\x00", b"junk"),  # truncated key
        (None, good.value_bytes()),  # null key
        (b"\x00\x01\xff" + good.key_bytes()[3:], good.value_bytes()),  # invalid UTF-8 group
        (Checkpoint("g", "A.t", 1, 0, 0).key_bytes()[:-4] + b"\xff\xff\xff\xff", _VALID_VALUE),
    ]
    snap = run_reader(records)
    assert snap.all_offsets() == {"g": {("A.t", 0): 3}}
    assert snap.skipped == 7
    assert snap.records == 8
    # each skipped record is named by partition and offset, with the decoder's reason
    assert [(s.partition, s.offset) for s in snap.skipped_at] == [(0, i) for i in range(1, 8)]
    reasons = [s.reason for s in snap.skipped_at]
    assert all(r.startswith("Checkpoint") for r in reasons), reasons
    assert "negative version -1" in reasons[2]
    assert "null" in reasons[4]
    assert str(snap.skipped_at[0]).startswith("[0]@1: Checkpoint value")


def test_only_the_first_skipped_records_are_named_all_are_counted() -> None:
    snap = run_reader([(b"\x00", b"junk")] * (SKIPPED_NAMED + 5))
    assert snap.skipped == SKIPPED_NAMED + 5
    assert [s.offset for s in snap.skipped_at] == list(range(SKIPPED_NAMED))


def test_newer_value_versions_are_read_by_their_v0_fields() -> None:
    cp = Checkpoint("g", "A.t", 2, 40, 30, "m")
    v1 = b"\x00\x01" + cp.value_bytes()[2:] + b"future-field"
    snap = run_reader([rec(Checkpoint("g", "A.t", 2, 1, 1)), (cp.key_bytes(), v1)])
    assert snap.checkpoints("g") == {TopicPartition("A.t", 2): cp}


def test_tombstone_deletes_the_key() -> None:
    cp = Checkpoint("g", "A.t", 0, 4, 3)
    other = Checkpoint("g", "A.t", 1, 4, 3)
    snap = run_reader([rec(cp), rec(other), (cp.key_bytes(), None)])
    assert snap.all_offsets() == {"g": {("A.t", 1): 3}}
    assert snap.skipped == 0


def test_group_selector_forms() -> None:
    records = [rec(Checkpoint(g, "A.t", 0, 1, 1)) for g in ("app-1", "app-2", "other")]
    assert set(run_reader(records, "app-.*").groups) == {"app-1", "app-2"}
    assert run_reader(records, lambda g: g.endswith("2")).groups == ["app-2"]
    assert set(group_matcher(re.compile("app-1|other"))("app-1") for _ in "x") == {True}
    with pytest.raises(TypeError):
        group_matcher(42)  # type: ignore[arg-type]


def _mutate(rng: random.Random, data: bytes) -> bytes:
    choice = rng.randrange(6)
    b = bytearray(data)
    if choice == 0 and b:  # flip a byte
        i = rng.randrange(len(b))
        b[i] = rng.randrange(256)
    elif choice == 1:  # truncate
        del b[rng.randrange(len(b) + 1) :]
    elif choice == 2:  # append
        b += bytes(rng.randrange(256) for _ in range(rng.randrange(1, 4)))
    elif choice == 3 and len(b) >= 2:  # set a length/version prefix to something odd
        i = rng.randrange(len(b) - 1)
        b[i : i + 2] = rng.choice([b"\xff\xff", b"\x80\x00", b"\x00\x00", b"\x00\x01", b"\x7f\xff"])
    elif choice == 4:  # invalid UTF-8 somewhere
        i = rng.randrange(len(b) + 1)
        b[i:i] = b"\xc3"
    # choice 5: unchanged
    return bytes(b)


@pytest.mark.parametrize("seed", range(40))
def test_fast_reader_equals_from_bytes_definition_on_random_and_mutated_records(seed: int) -> None:
    rng = random.Random(seed)
    groups = ["g", "grp-1", "grp-2", "ü-group", "x" * 300]
    topics = ["A.orders", "A.payments", "B.A.t", "é"]
    records: list[Record] = []
    for _ in range(400):
        cp = Checkpoint(
            rng.choice(groups),
            rng.choice(topics),
            rng.randrange(4),
            rng.randrange(0, 2**63),
            rng.choice([rng.randrange(0, 1000), rng.randrange(0, 2**63)]),
            rng.choice(["", "", "", "meta", "ü"]),
        )
        key, value = cp.key_bytes(), cp.value_bytes()
        roll = rng.random()
        if roll < 0.15:
            key = _mutate(rng, key)
        elif roll < 0.35:
            value = _mutate(rng, value)
        elif roll < 0.38:
            value = None  # type: ignore[assignment]
        records.append((key, value))
    for selector in (".*", "grp-.*", "g"):
        match = group_matcher(selector)
        snap = run_reader(records, selector)
        expected = reference(records, match)
        assert {g: snap.checkpoints(g) for g in snap.groups} == expected
        assert snap.all_offsets() == {
            g: {tp: cp.downstream_offset for tp, cp in v.items()} for g, v in expected.items()
        }
