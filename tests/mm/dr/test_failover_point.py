"""The failover point (pure) and the mirror's published source ends."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from mm.dr.failover_point import (
    EXACT,
    LOWER_BOUND,
    SEEN_AT_FAILOVER,
    UNKNOWN,
    FailoverPoint,
    ends_age,
    failover_point,
    loss_sentence,
    point_loss_sentence,
)
from mm.source.ends import (
    MIRROR,
    STATUS,
    EndsPublisher,
    EndsRefresher,
    decode_ends,
    encode_ends,
    ends_key,
    newest_seen,
)

pytestmark = pytest.mark.unit


def remote(t: str) -> str:
    return f"A.{t}"


def test_loss_is_the_ends_seen_minus_the_mirrored_positions() -> None:
    point = failover_point(
        "A->B",
        "A",
        "B",
        1_000_000,
        # ("w", 0): a topic the flow no longer mirrors
        positions={("t", 0): 100, ("t", 1): 40, ("u", 0): 7, ("w", 0): 5},
        # ("z", 0): published by a mirror of another topic list
        ends_seen={("t", 0): 100, ("t", 1): 55, ("u", 0): 9, ("v", 0): 3, ("z", 0): 8},
        ends_seen_ms=990_000,
        newest_ms={("t", 0): 980_000, ("t", 1): 960_000, ("u", 0): None, ("v", 0): None},
        remote=remote,
        mirrored=lambda t: t in "tuv",
    )
    rows = {(p.topic, p.partition): p for p in point.partitions}
    assert sorted(rows) == [("t", 0), ("t", 1), ("u", 0), ("v", 0)]
    assert (rows[("t", 0)].loss_offsets, rows[("t", 0)].loss_seconds) == (0, 0.0)
    # 15 offsets behind; the newest mirrored record is 30 s older than the end seen
    assert (rows[("t", 1)].loss_offsets, rows[("t", 1)].loss_seconds) == (15, 30.0)
    # behind, with no timestamp to measure the span: unknown seconds
    assert (rows[("u", 0)].loss_offsets, rows[("u", 0)].loss_seconds) == (2, None)
    # never mirrored: everything the source held
    assert rows[("v", 0)].mirrored_to is None and rows[("v", 0)].loss_offsets == 3
    assert rows[("v", 0)].target_topic == "A.v"
    assert point.loss_offsets == 20
    assert point.loss_seconds is None  # one span unknown


def test_without_published_ends_the_loss_is_unknown_not_zero() -> None:
    point = failover_point("A->B", "A", "B", 5, {("t", 0): 10}, None, None, {("t", 0): 1}, remote)
    (row,) = point.partitions
    assert row.mirrored_to == 10 and row.source_end_seen is None
    assert row.loss_offsets is None and point.loss_offsets is None


def test_a_mirrored_partition_the_ends_miss_is_kept_with_its_loss_unknown() -> None:
    """A publication older than a partition's position (the newest one lost, or from a
    run of another topic list) must not drop the partition: failback needs its
    position to know what diverged."""
    point = failover_point(
        "A->B",
        "A",
        "B",
        5,
        positions={("t", 0): 60, ("t", 1): 60, ("old", 0): 99},
        ends_seen={("old", 0): 99},
        ends_seen_ms=4,
        newest_ms={},
        remote=remote,
        mirrored=lambda t: t == "t",
    )
    rows = {(p.topic, p.partition): p for p in point.partitions}
    assert sorted(rows) == [("t", 0), ("t", 1)]
    assert [(r.mirrored_to, r.source_end_seen, r.loss_offsets) for r in rows.values()] == [
        (60, None, None),
        (60, None, None),
    ]
    assert point.loss_offsets is None


def test_failover_point_round_trip() -> None:
    point = failover_point(
        "A->B", "A", "B", 7, {("t", 0): 4}, {("t", 0): 9}, 6, {("t", 0): 1}, remote
    )
    key, value = point.encode()
    assert key == b"A->B"
    back = FailoverPoint.decode(value)
    assert back == point and back.to_json()["loss_offsets"] == 5
    for bad in (b'{"flow": "A->B"}', None, b"\xff\xfe", b"[1]"):
        with pytest.raises(ValueError, match="not a failover point"):
            FailoverPoint.decode(bad)


def test_ends_round_trip_and_bad_records() -> None:
    key, value = encode_ends("A->B", 42, {("t", 0): 5, ("t", 1): 6, ("x.y", 0): 0})
    assert key == b"A->B"
    seen = decode_ends(value)
    assert (seen.flow, seen.time_ms) == ("A->B", 42)
    assert seen.ends == {("t", 0): 5, ("t", 1): 6, ("x.y", 0): 0}
    for bad in (b"", b"[]", b'{"flow": "f", "time_ms": 1, "ends": {"t": {"x": 1}}}', None):
        with pytest.raises(ValueError, match="not a mirror-ends record"):
            decode_ends(bad)


class FakeProducer:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes, bytes]] = []
        self.callbacks: list[Any] = []

    def produce(self, topic: str, value: bytes, key: bytes, on_delivery: Any) -> None:
        self.sent.append((topic, key, value))
        self.callbacks.append(on_delivery)

    def poll(self, _timeout: float) -> int:
        return 0

    def flush(self, _timeout: float) -> int:
        return 0


def test_publisher_publishes_at_most_every_interval_and_logs_failures() -> None:
    now = [100.0]
    logged: list[Any] = []
    producer = FakeProducer()
    pub = EndsPublisher(
        producer,
        "mm-mirror-ends.A.internal",
        "A->B",
        5.0,
        log=lambda *a, **kw: logged.append(kw),
        clock=lambda: now[0],
    )
    assert pub.seen({("t", 0): 1})
    now[0] = 103.0
    assert not pub.seen({("t", 0): 2})  # too soon
    now[0] = 105.0
    assert not pub.seen({})  # nothing to say
    assert pub.seen({("t", 0): 3})
    assert [decode_ends(v).ends for _t, _k, v in producer.sent] == [{("t", 0): 1}, {("t", 0): 3}]
    assert decode_ends(producer.sent[1][2]).time_ms == 105_000
    producer.callbacks[0]("BROKER_NOT_AVAILABLE", None)
    producer.callbacks[1](None, None)
    assert logged == [{"topic": "mm-mirror-ends.A.internal", "error": "BROKER_NOT_AVAILABLE"}]


def test_the_refresher_publishes_fresh_ends_while_a_batch_runs() -> None:
    """The planner reads ends once per micro-batch; during a long batch the refresher
    reads and publishes them whenever a publication is due, and a source that stops
    answering only costs a log line (the last publication stays)."""
    now = [100.0]
    producer = FakeProducer()
    pub = EndsPublisher(producer, "ends", "A->B", 5.0, clock=lambda: now[0])
    source_end = [10]
    reads: list[tuple[Any, ...]] = []
    logged: list[Any] = []

    def read(tps: Any) -> dict[tuple[str, int], int]:
        reads.append(tuple(tps))
        if source_end[0] < 0:
            raise RuntimeError("source down")
        return {tp: source_end[0] for tp in tps}

    refresher = EndsRefresher(pub, read, log=lambda *a, **kw: logged.append(kw), step=0.01)
    assert pub.seen({("t", 0): 5})  # the planner's own publication
    refresher.watch([("t", 0), ("t", 1)])
    refresher.start()
    try:
        time.sleep(0.1)
        assert reads == []  # not due yet: the planner just published
        now[0] = 105.0
        deadline = time.monotonic() + 5
        while len(producer.sent) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert decode_ends(producer.sent[1][2]).ends == {("t", 0): 10, ("t", 1): 10}
        assert reads[0] == (("t", 0), ("t", 1))
        source_end[0] = -1
        now[0] = 111.0
        while not logged and time.monotonic() < deadline:
            time.sleep(0.01)
        assert logged and logged[0]["error"] == "source down"
        assert len(producer.sent) == 2
    finally:
        refresher.halt()
        refresher.join(5)
    assert not refresher.is_alive()


def test_divergence_is_planned_from_the_point_and_the_ends_now() -> None:
    from mm.dr.divergence import plan_divergence

    point = failover_point(
        "A->B",
        "A",
        "B",
        77,
        {("t", 0): 10, ("t", 1): 40},
        {("t", 0): 15, ("t", 1): 40, ("u", 0): 3},
        70,
        {},
        remote,
    )
    report = plan_divergence(point, {("t", 0): 18, ("t", 1): 35, ("u", 0): 3}, dry_run=True)
    rows = {(p.topic, p.partition): p for p in report.partitions}
    assert (rows[("t", 0)].start, rows[("t", 0)].end_now, rows[("t", 0)].behind) == (10, 18, 0)
    # A came back shorter than what B has: an unclean recovery, reported
    assert rows[("t", 1)].behind == 5 and report.behind == [rows[("t", 1)]]
    # never mirrored: everything on A diverged
    assert (rows[("u", 0)].failover_at, rows[("u", 0)].start) == (None, 0)
    rows[("t", 0)].add(10, 1_000)
    rows[("t", 0)].add(12, 1_500)
    assert report.records == 2
    doc = report.to_json()
    assert doc["divergent_records"] == 2 and doc["failover_point_recorded_ms"] == 77
    first = doc["partitions"][0]
    assert (first["first_offset"], first["last_offset"]) == (10, 12)
    assert (first["first_timestamp_ms"], first["last_timestamp_ms"]) == (1_000, 1_500)
    assert report.open == [] and first["transaction_open"] is False
    # with the log ends: a transaction open past the point (log end above the
    # read_committed end) on t[0]; none on t[1] or u[0]
    ends = {("t", 0): 18, ("t", 1): 40, ("u", 0): 3}
    later = plan_divergence(point, ends, False, {("t", 0): 21, ("t", 1): 40, ("u", 0): 3})
    assert [(p.topic, p.partition) for p in later.open] == [("t", 0)]
    assert [p["transaction_open"] for p in later.to_json()["partitions"]] == [True, False, False]


def _digests(records: dict[int, str]) -> Any:
    from mm.verify.digest import DigestSeq, record_digest

    return DigestSeq.of(
        (o, record_digest(b"k", v.encode(), [], 1_000 + o)) for o, v in sorted(records.items())
    )


@pytest.mark.unit
def test_content_divergence_finds_the_first_record_b_does_not_hold_in_place() -> None:
    """A rebuilt from a copy older than the failover point (40): offsets 30-39 were
    written again with other records; B's copies (at other offsets: B's own log) hold
    the old ones. The divergence starts at 30, where the contents part."""
    from mm.dr.divergence import content_divergence

    old = {o: f"r{o}" for o in range(20, 40)}
    b = _copies_on_b(old, shift=7)  # B's copies: same records, B's offsets
    a_same = _digests(old)
    assert content_divergence(a_same, b) == (True, None)
    rebuilt = {**{o: f"r{o}" for o in range(20, 30)}, **{o: f"new{o}" for o in range(30, 40)}}
    assert content_divergence(_digests(rebuilt), b) == (True, 30)
    # gaps on A (transaction markers) do not matter: only committed records compare
    gappy = {o: v for o, v in rebuilt.items() if o % 5}
    assert content_divergence(_digests(gappy), _copies_on_b(gappy, shift=3)) == (True, None)
    # A's first record scanned already differs: no agreement within this depth
    assert content_divergence(_digests({o: f"new{o}" for o in range(30, 40)}), b) == (False, 30)
    # A holds more records below the point than B has copies after the agreement
    longer = {**old, 40: "r40-not-mirrored"}
    assert content_divergence(_digests(longer), b) == (True, 40)
    # B's copies run on past the point (the mirror ran on): still agreement
    assert content_divergence(a_same, _copies_on_b({**old, 40: "r40"}, shift=7)) == (True, None)
    assert content_divergence(_digests({}), b) == (True, None)


def _copies_on_b(records: dict[int, str], shift: int) -> Any:
    """B's copies of ``records``: the same digests (timestamps kept by the mirror) at
    B's offsets (``shift`` further on, one marker after every fourth record)."""
    from mm.verify.digest import DigestSeq, record_digest

    seq = DigestSeq()
    offset = shift
    for i, (o, v) in enumerate(sorted(records.items())):
        seq.append(offset, record_digest(b"k", v.encode(), [], 1_000 + o))
        offset += 2 if i % 4 == 3 else 1
    return seq


@pytest.mark.unit
def test_the_divergence_starts_where_the_content_differs() -> None:
    from mm.dr.divergence import plan_divergence

    point = failover_point("A->B", "A", "B", 77, {("t", 0): 40}, {("t", 0): 40}, 70, {}, remote)
    report = plan_divergence(point, {("t", 0): 55}, dry_run=True)
    (row,) = report.partitions
    assert (row.start, row.depth_scanned) == (40, 0)
    row.compared_from, row.agreement_found, row.content_differs_at = 20, True, 30
    assert (row.start, row.depth_scanned) == (30, 20)
    doc = report.to_json()["partitions"][0]
    assert doc["divergence_starts_at"] == 30 and doc["content_differs_at"] == 30
    assert doc["content_depth_scanned"] == 20 and doc["content_agreement_found"] is True


@pytest.mark.unit
def test_a_failover_translation_is_proven_conservative_or_unprovable() -> None:
    from mm.dr.failover_proof import (
        CONSERVATIVE,
        PROVEN,
        UNPROVABLE,
        FailoverProof,
        MirroredEnd,
        classify,
    )
    from mm.dr.failover_proof import PartitionProof as P

    assert classify(None, 10, 10)[0] == PROVEN
    assert classify(None, 10, None)[0] == PROVEN  # no offset on the source now
    status, reason = classify(None, 10, 14)
    assert status == CONSERVATIVE and "reads up to 4 offsets again" in reason
    assert classify("copy not found", 10, 10) == (UNPROVABLE, "copy not found")
    # not exact, but the target's next record is the copy of source offset 7: behind
    status, reason = classify("not its copy", 10, 10, copy_from=7)
    assert status == CONSERVATIVE and "reads source offsets 7-9 again" in reason
    # the copy of a later record: it would skip, never conservative
    assert classify("not its copy", 10, 10, copy_from=12)[0] == UNPROVABLE
    # nothing after the translation on the target, whose last record is the copy of
    # source offset 8, the group's next (10) never mirrored: exact at the mirrored end
    # (seen in a drill on user clusters: a checkpoint newer than the mirror's last copy)
    nothing_follows = "source record 10 is next for the group, but nothing follows"
    status, reason = classify(nothing_follows, 10, 12, mirrored_end=MirroredEnd(8, 10))
    assert status == PROVEN, reason
    assert "copy of source offset 8" in reason and "from 10 on never reached" in reason
    assert classify(nothing_follows, 10, 10)[0] == UNPROVABLE  # no such copy found
    proof = FailoverProof(
        True, None, [P("g", "A.t", 0, PROVEN, "x"), P("g", "A.t", 1, UNPROVABLE, "y")]
    )
    assert proof.counts() == {PROVEN: 1, CONSERVATIVE: 0, UNPROVABLE: 1}
    doc = proof.to_json()
    assert (doc["proven"], doc["unprovable"]) == (1, 1) and doc["partitions"][1]["reason"] == "y"


def _point(by: str | None, ends: dict[tuple[str, int], int] | None) -> FailoverPoint:
    return failover_point(
        "A->B",
        "A",
        "B",
        10_000,
        {("t", 0): 20},
        ends,
        None if ends is None else 7_500,
        {("t", 0): 1},
        remote,
        ends_seen_by=by or "mirror",
    )


def test_the_figure_is_exact_only_when_the_source_was_read_at_the_failover() -> None:
    exact = _point(SEEN_AT_FAILOVER, {("t", 0): 30})
    assert (exact.loss_kind, exact.loss_offsets, exact.ends_age_seconds) == (EXACT, 10, 2.5)
    published = _point("mirror", {("t", 0): 20})
    assert (published.loss_kind, published.loss_offsets) == (LOWER_BOUND, 0)
    assert published.ends_age_seconds == 2.5
    none = _point(None, None)
    assert (none.loss_kind, none.ends_seen_by, none.ends_age_seconds) == (UNKNOWN, None, None)
    doc = published.to_json()
    assert (doc["loss_kind"], doc["ends_age_seconds"], doc["ends_seen_by"]) == (
        LOWER_BOUND,
        2.5,
        "mirror",
    )
    # ends of a clock a little ahead: seen "now", never a negative age
    assert ends_age(1_000, 1_200) == 0.0


def test_a_lower_bound_is_never_a_bare_zero() -> None:
    """The finding: "0 offsets not mirrored" while 10 acknowledged records were lost."""
    text = loss_sentence(LOWER_BOUND, 0, 0.8, "mirror", "A")
    assert text == (
        "loss: at least 0 offsets not mirrored (0 known), a lower bound: A was last seen "
        "0.8 s before the failover (by the mirror); records A acknowledged after that are "
        "not counted"
    )
    assert loss_sentence(EXACT, 0, 0.0, SEEN_AT_FAILOVER, "A").startswith(
        "loss: 0 offsets not mirrored, exact: A answered"
    )
    assert loss_sentence(UNKNOWN, None, None, None, "A").startswith("loss: unknown: ")
    assert "do not cover every mirrored partition" in loss_sentence(UNKNOWN, None, 3.0, "status")
    assert point_loss_sentence(_point("status", {("t", 0): 25})).startswith(
        "loss: at least 5 offsets not mirrored (5 known), a lower bound: A was last seen 2.5 s "
        "before the failover (by the status)"
    )


def test_points_recorded_before_the_figure_had_a_kind_still_load() -> None:
    old = {
        "flow": "A->B",
        "source": "A",
        "target": "B",
        "recorded_ms": 9_000,
        "ends_seen_ms": 8_000,
        "loss_offsets": 3,
        "loss_seconds": 1.0,
        "partitions": [
            {
                "topic": "t",
                "partition": 0,
                "target_topic": "A.t",
                "mirrored_to": 4,
                "source_end_seen": 7,
                "newest_mirrored_ms": 7_000,
                "loss_offsets": 3,
                "loss_seconds": 1.0,
            }
        ],
    }
    point = FailoverPoint.decode(json.dumps(old).encode())
    # those were always taken against the mirror's published ends: a lower bound
    assert (point.loss_kind, point.ends_seen_by, point.ends_age_seconds) == (
        LOWER_BOUND,
        "mirror",
        1.0,
    )
    never = FailoverPoint.decode(
        json.dumps({**old, "ends_seen_ms": None, "partitions": []}).encode()
    )
    assert (never.loss_kind, never.ends_seen_by) == (UNKNOWN, None)
    # and a point of now round-trips with its kind and age
    point = _point(SEEN_AT_FAILOVER, {("t", 0): 30})
    point.source_unread = None
    back = FailoverPoint.decode(point.encode()[1])
    assert back == point and back.loss_kind == EXACT


def test_each_job_publishes_under_its_own_key_and_the_newest_read_wins() -> None:
    key, value = encode_ends("A->B", 50, {("t", 0): 9}, by=STATUS)
    assert key == b"A->B@status" and ends_key("A->B") == b"A->B"
    status = decode_ends(value)
    assert (status.by, status.time_ms) == (STATUS, 50)
    # the mirror's records are as before, without "by"
    key, value = encode_ends("A->B", 40, {("t", 0): 8})
    assert key == b"A->B" and b'"by"' not in value
    mirror = decode_ends(value)
    assert mirror.by == MIRROR
    assert newest_seen({MIRROR: mirror, STATUS: status}) == status
    assert newest_seen({MIRROR: mirror, STATUS: None}) == mirror
    assert newest_seen({}) is None


def test_publisher_stamps_the_time_the_read_started() -> None:
    producer = FakeProducer()
    pub = EndsPublisher(producer, "topic", "A->B", 1.0, clock=lambda: 200.0, by=STATUS)
    assert pub.seen({("t", 0): 1}, read_at=197.5)
    [(_t, key, value)] = producer.sent
    assert key == b"A->B@status"
    assert (decode_ends(value).time_ms, decode_ends(value).by) == (197_500, STATUS)
