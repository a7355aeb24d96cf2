"""FlowCheckpointer's driver-side logic against fake Kafka clients (unit).

Tansu stores no commit metadata and never compacts, so the paths that depend on
those (the mirror's last-transaction syncs in the state group's metadata, holes
in a compacted offset-syncs topic) are tested here with fakes.
"""

from __future__ import annotations

import math
from collections.abc import MutableMapping
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from structlog.testing import capture_logs

from mm.checkpoint import snapshot
from mm.checkpoint.emitter import FlowCheckpointer
from mm.checkpoint.rules import GroupOffset
from mm.config import build_config
from mm.source.state import encode_state

pytestmark = pytest.mark.unit

SYNCS = "mm2-offset-syncs.B.internal"


def _done(value: Any) -> Future[Any]:
    f: Future[Any] = Future()
    f.set_result(value)
    return f


@dataclass
class _Offsets:
    topic_partitions: list[TopicPartition]


@dataclass
class _Entry:
    value: str | None


class FakeAdmin:
    """Committed offsets per group, topic configs and log starts; records calls."""

    def __init__(
        self,
        groups: dict[str, list[TopicPartition]] | None = None,
        configs: dict[str, dict[str, str]] | None = None,
        log_starts: dict[tuple[str, int], int] | None = None,
        gone: set[tuple[str, int]] | None = None,
    ) -> None:
        self.groups = groups or {}
        self.configs = configs or {}
        self.log_starts = log_starts or {}
        self.gone = gone or set()  # partitions whose log start the cluster refuses

    def list_consumer_group_offsets(self, reqs: list[Any], **_kw: Any) -> dict[str, Future[Any]]:
        return {r.group_id: _done(_Offsets(self.groups.get(r.group_id, []))) for r in reqs}

    def describe_configs(self, resources: list[Any], **_kw: Any) -> dict[Any, Future[Any]]:
        out: dict[Any, Future[Any]] = {}
        for r in resources:
            f: Future[Any] = Future()
            if r.name in self.configs:
                f.set_result({k: _Entry(v) for k, v in self.configs[r.name].items()})
            else:
                f.set_exception(RuntimeError("unknown topic"))
            out[r] = f
        return out

    def list_offsets(self, specs: dict[TopicPartition, Any], **_kw: Any) -> dict[Any, Any]:
        @dataclass
        class _Info:
            offset: int

        out: dict[Any, Any] = {}
        for tp in specs:
            if (tp.topic, tp.partition) in self.gone:
                f: Future[Any] = Future()
                f.set_exception(KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)))
                out[tp] = f
            else:
                out[tp] = _done(_Info(self.log_starts.get((tp.topic, tp.partition), 0)))
        return out


class FakeProducer:
    def __init__(self) -> None:
        self.records: list[tuple[str, bytes, bytes]] = []

    def produce(self, topic: str, value: bytes, key: bytes, **_kw: Any) -> None:
        self.records.append((topic, value, key))

    def flush(self, _timeout: float = 0) -> int:
        return 0


@dataclass
class Row:
    """A row of the offset-syncs data source (mm.checkpoint.reader.SYNC_ROW_SCHEMA)."""

    offset: int
    topic: str | None = "orders"
    partition: int | None = 0
    upstream: int | None = 0
    downstream: int | None = 0
    error: str | None = None
    syncs_partition: int = 0
    txn_first: bool | None = False
    # mm's own syncs (the mm.sync header); None for another writer's
    writer: str | None = "t"


def _rows(start: int, pairs: list[tuple[int, int]], first: bool = False) -> list[Row]:
    return [
        Row(start + i, upstream=u, downstream=d, txn_first=first and i == 0)
        for i, (u, d) in enumerate(pairs)
    ]


def _checkpointer(tmp_path: Path, **props: str) -> FlowCheckpointer:
    cfg = build_config(
        {
            "clusters": "A, B",
            "A.bootstrap.servers": "a:9092",
            "B.bootstrap.servers": "b:9092",
            "A->B.enabled": "true",
            "mm.state.dir": str(tmp_path),
            **props,
        }
    )
    w = FlowCheckpointer(cfg, cfg.enabled_flows()[0])
    w._target_admin = FakeAdmin()  # type: ignore[assignment]
    w._source_admin = FakeAdmin()  # type: ignore[assignment]
    w._producer = FakeProducer()  # type: ignore[assignment]
    return w


def _state(w: FlowCheckpointer, position: int, syncs: list[tuple[int, int]]) -> None:
    tp = TopicPartition("A.orders", 0, position, metadata=encode_state("b1", syncs))
    w._target_admin = FakeAdmin({w.state_group: [tp]})  # type: ignore[assignment]


# --- finding 1: the mirror's last transaction from the commit metadata ------------------


def test_commit_metadata_syncs_before_unread_history_never_translate_ahead(
    tmp_path: Path,
) -> None:
    w = _checkpointer(tmp_path)
    w.feed(_rows(0, [(0, 0), (99, 99)]))
    # the topic's (100, 101)..(199, 200) are not read yet; the metadata holds the
    # mirror's last transaction (200, 202)..(299, 301)
    _state(w, 300, [(200, 202), (299, 301)])
    w._read_positions()
    store = w.snap.store
    got = store.translate("orders", 0, 150)
    assert got is not None and got <= 151  # exact is 151; 202 would skip records
    assert store.translate("orders", 0, 250) == 252  # the transaction itself: exact
    # the topic catches up: exact, and the checkpoint can move forward to it
    w.feed(_rows(2, [(100, 101), (199, 200), (200, 202), (299, 301)], first=True))
    w._read_positions()
    assert store.translate("orders", 0, 150) == 151


# --- finding 2: holes in the offset-syncs topic -------------------------------------------


HOLE_ROWS = [*_rows(0, [(0, 0), (9, 9)]), *_rows(5, [(50, 60), (59, 69)])]  # 2..4 compacted


def test_offset_gap_in_the_syncs_topic_makes_translation_conservative(tmp_path: Path) -> None:
    w = _checkpointer(tmp_path)
    w.syncs_cleanup_policy = "compact"
    w.feed(HOLE_ROWS)
    w.snap.store.set_position("orders", 0, 70)
    # the missing syncs could be e.g. (10, 11), (30, 31), (31, 40): exact for 20 is
    # at most 21; the pairs alone say "gap" and would answer 60
    got = w.snap.store.lookup("orders", 0, 20)
    assert got is not None and got.offset == 10 and not got.exact
    assert w.snap.store.translate("orders", 0, 50) == 60
    assert w.stats.syncs_gaps == 1
    assert w.snap.store.holes() == 1


def test_gaps_across_micro_batches(tmp_path: Path) -> None:
    w = _checkpointer(tmp_path)
    w.feed(_rows(0, [(0, 0), (9, 9)]))
    w.feed(_rows(2, [(20, 21)]))
    assert w.snap.store.holes() == 0
    w.feed(_rows(4, [(30, 32)]))  # offset 3 missing: compacted or deleted
    assert w.snap.store.holes() == 1
    assert w.stats.syncs_gaps == 1


@pytest.mark.parametrize("location", ["source", "target"])
def test_a_corrupt_sync_is_a_hole_named_in_an_error_never_a_wrong_translation(
    tmp_path: Path, location: str
) -> None:
    w = _checkpointer(tmp_path, **{"A->B.offset-syncs.topic.location": location})
    w.syncs_cleanup_policy = "delete"  # gaps are no holes with syncs on the target
    # (10, 11) and (30, 40) were written; the record holding (10, 11) is corrupt.
    # Without it the pairs (9, 9)..(20, 21) read as the end of a run and a gap and
    # answer 15 -> 21, ahead of the exact 16 (a consumer would skip five records)
    rows = [*_rows(0, [(0, 0), (9, 9)]), Row(2, error="OffsetSync value: truncated")]
    with capture_logs() as logs:
        w.feed(rows)
        w.feed(_rows(3, [(20, 21), (30, 40)]))
    w.snap.store.set_position("orders", 0, 31)
    got = w.snap.store.lookup("orders", 0, 15)
    assert got is not None and got.offset == 10 and not got.exact  # conservative: sd + 1
    assert w.snap.store.translate("orders", 0, 9) == 9  # a known sync stays exact
    assert w.snap.store.lookup("orders", 0, 25) == (40, True)  # after the hole: exact again
    assert (w.stats.corrupt, w.stats.syncs_gaps, w.snap.store.holes()) == (1, 0, 1)
    errors = [e for e in logs if e["log_level"] == "error"]
    assert len(errors) == 1 and errors[0]["event"] == "corrupt offset sync skipped"
    assert (errors[0]["topic"], errors[0]["partition"], errors[0]["offset"]) == (
        w.syncs_topic,
        0,
        2,
    )
    assert "truncated" in errors[0]["error"] and "OffsetSync" in errors[0]["expected"]
    # the hole is kept in the snapshot: a restarted job stays conservative
    w._save()
    again = snapshot.load(w.snapshot_path, "A->B")
    assert again is not None
    again.store.set_position("orders", 0, 31)
    assert again.store.lookup("orders", 0, 15) == (10, False)


def test_transactional_syncs_on_a_delete_topic_have_gaps_that_are_markers(
    tmp_path: Path,
) -> None:
    w = _checkpointer(tmp_path, **{"A->B.offset-syncs.topic.location": "target"})
    w.syncs_cleanup_policy = "delete"
    w.feed(HOLE_ROWS)
    assert w.snap.store.holes() == 0
    w2 = _checkpointer(tmp_path / "c", **{"A->B.offset-syncs.topic.location": "target"})
    w2.syncs_cleanup_policy = "compact,delete"  # markers and compaction look alike
    w2.feed(HOLE_ROWS)
    assert w2.snap.store.holes() == 1
    w3 = _checkpointer(tmp_path / "u", **{"A->B.offset-syncs.topic.location": "target"})
    w3.feed(HOLE_ROWS)  # policy unknown: conservative
    assert w3.snap.store.holes() == 1


def test_a_compacted_syncs_topic_is_detected_and_named_in_a_warning(tmp_path: Path) -> None:
    w = _checkpointer(tmp_path)
    w._source_admin = FakeAdmin(configs={SYNCS: {"cleanup.policy": "compact"}})  # type: ignore[assignment]
    with capture_logs() as logs:
        w._check_syncs_topic()
    assert w.syncs_cleanup_policy == "compact"
    warning = [e for e in logs if e["log_level"] == "warning"]
    assert len(warning) == 1
    assert warning[0]["topic"] == SYNCS
    assert "cleanup.policy=delete" in warning[0]["fix"]
    w2 = _checkpointer(tmp_path / "d")
    w2._source_admin = FakeAdmin(configs={SYNCS: {"cleanup.policy": "delete"}})  # type: ignore[assignment]
    with capture_logs() as logs:
        w2._check_syncs_topic()
    assert w2.syncs_cleanup_policy == "delete"
    assert not [e for e in logs if e["log_level"] == "warning"]
    w3 = _checkpointer(tmp_path / "m")
    w3._check_syncs_topic()  # the topic does not exist yet: asked again later
    assert w3.syncs_cleanup_policy is None


def test_a_syncs_topic_policy_changed_while_the_job_runs_is_read_at_each_refresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The compaction warning's way out (cleanup.policy=delete) reaches the report that
    `mm status` reads without restarting a continuous job; a topic compacted again is
    warned about again, once."""
    w = _checkpointer(tmp_path)
    admin = FakeAdmin(configs={SYNCS: {"cleanup.policy": "compact"}})
    w._source_admin = admin  # type: ignore[assignment]
    w._check_syncs_topic()
    for step in ("_refresh_groups", "_refresh_log_starts", "_read_positions", "_prune"):
        monkeypatch.setattr(w, step, lambda *_a: None)
    monkeypatch.setattr(w, "_read_group_offsets", dict)

    def refresh_round() -> list[MutableMapping[str, Any]]:
        w._groups_at = -math.inf  # a group refresh is due
        with capture_logs() as logs:
            assert w.tick()
        return [e for e in logs if e["log_level"] == "warning"]

    admin.configs[SYNCS] = {"cleanup.policy": "delete"}
    assert refresh_round() == []
    report = snapshot.load_report(w.dir / snapshot.REPORT_FILE_NAME, "A->B")
    assert report is not None and report.syncs_cleanup_policy == "delete"
    admin.configs[SYNCS] = {"cleanup.policy": "compact"}
    assert [e["topic"] for e in refresh_round()] == [SYNCS]
    assert refresh_round() == []
    assert w.syncs_cleanup_policy == "compact"


def test_retention_past_the_snapshot_is_a_hole(tmp_path: Path) -> None:
    w = _checkpointer(tmp_path, **{"A->B.offset-syncs.topic.location": "target"})
    w.feed(_rows(0, [(0, 0), (9, 9)]))  # snapshot read up to offset 2
    w._target_admin = FakeAdmin(  # type: ignore[assignment]
        configs={"mm2-offset-syncs.A.internal": {"cleanup.policy": "delete"}},
        log_starts={("mm2-offset-syncs.A.internal", 0): 40},
    )
    w._check_syncs_topic()
    w.feed(_rows(40, [(500, 600)]))
    assert w.snap.store.holes() == 1


def test_a_deleted_source_topic_is_warned_about_once_not_at_every_refresh(
    tmp_path: Path,
) -> None:
    """Its syncs stay (kept until they can be judged); the warning is said when the
    log start becomes unknown, and again only after it was known in between."""
    w = _checkpointer(tmp_path)
    w.feed(_rows(0, [(0, 0), (9, 9)]))
    admin = FakeAdmin(gone={("orders", 0)})
    w._source_admin = admin  # type: ignore[assignment]

    def warnings() -> list[MutableMapping[str, Any]]:
        with capture_logs() as logs:
            w._refresh_log_starts()
        return [e for e in logs if e["log_level"] == "warning"]

    first = warnings()
    assert [(e["event"], e["topic"], e["partition"]) for e in first] == [
        ("log start unknown", "orders", 0)
    ]
    assert "UNKNOWN_TOPIC_OR_PART" in first[0]["error"]
    assert warnings() == [] and warnings() == []
    assert ("orders", 0) not in w._log_starts
    admin.gone.clear()
    admin.log_starts[("orders", 0)] = 3
    assert warnings() == [] and w._log_starts[("orders", 0)] == 3
    admin.gone.add(("orders", 0))
    assert len(warnings()) == 1
    assert ("orders", 0) in w.snap.store.partitions  # its history is kept


# --- reporting ----------------------------------------------------------------------------


def test_inexact_translations_are_counted_and_reported(tmp_path: Path) -> None:
    w = _checkpointer(tmp_path)
    w.syncs_cleanup_policy = "compact"
    w.feed(HOLE_ROWS)
    w.snap.store.set_position("orders", 0, 70)
    committed = {
        "g1": {("orders", 0): GroupOffset(20)},  # inside the hole
        "g2": {("orders", 0): GroupOffset(55)},  # exact
    }
    assert w._emit(committed) == 2
    assert w.stats.inexact == 1
    w._save()
    w._save_report()
    report = snapshot.load_report(w.dir / snapshot.REPORT_FILE_NAME, "A->B")
    assert report is not None
    assert report.inexact == {"g1": 1}
    assert report.holes == 1 and report.syncs_gaps == 1
    assert report.syncs_cleanup_policy == "compact"
    assert report.syncs_topic == SYNCS
    assert "inexact=1" in w.stats.summary() and "holes=1" in w.stats.summary()


# --- writing checkpoints: only what the target acknowledged counts ---------------------------


class _SlowProducer(FakeProducer):
    """Queue full on the first produce; at flush two records are still unanswered."""

    def __init__(self) -> None:
        super().__init__()
        self.full = True
        self.polls = 0

    def produce(self, topic: str, value: bytes, key: bytes, **kw: Any) -> None:
        if self.full:
            self.full = False
            raise BufferError("queue full")
        super().produce(topic, value, key, **kw)

    def poll(self, _timeout: float = 0) -> int:
        self.polls += 1
        return 0

    def flush(self, _timeout: float = 0) -> int:
        return 2


def test_unacknowledged_checkpoints_fail_the_round_and_are_not_counted(tmp_path: Path) -> None:
    from mm_client.records import Checkpoint

    from mm.errors import KafkaOperationError

    w = _checkpointer(tmp_path)
    producer = _SlowProducer()
    w._producer = producer  # type: ignore[assignment]
    cps = [Checkpoint("g", "A.orders", p, 10, 10, "") for p in (0, 1)]
    with pytest.raises(KafkaOperationError) as raised:
        w._produce(cps)
    assert str(raised.value) == (
        f"writing checkpoints to {w.checkpoints_topic} failed: 2 not acknowledged (code=_TIMED_OUT)"
    )
    assert raised.value.retriable
    assert producer.polls == 1 and len(producer.records) == 2  # the full queue was waited out
    assert w.last == {} and w.stats.checkpoints == 0
