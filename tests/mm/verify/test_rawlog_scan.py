"""The streaming read_committed rule (:func:`scan_committed`) agrees with the whole-log
one (:func:`committed_view`) on every offset range, without a broker."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mm.kafka import rawlog
from mm.kafka.rawlog import LogBatch, LogRecord, PartitionLog, ScanStats, committed_view

pytestmark = pytest.mark.unit


def _log(draw: Any) -> list[LogBatch]:
    """A random log: plain batches, transactional batches of 3 producers, markers, and
    fences (a producer's epoch bumped with no marker for its open transaction, as
    Tansu leaves it when ``init_transactions`` fences the previous holder)."""
    batches: list[LogBatch] = []
    offset = 0
    open_pids: set[int] = set()
    epochs = {1: 0, 2: 0, 3: 0}
    for _ in range(draw(st.integers(0, 25))):
        kind = draw(st.sampled_from(["plain", "txn", "marker", "fence"]))
        if kind == "fence":
            pid = draw(st.integers(1, 3))
            epochs[pid] += 1
            open_pids.discard(pid)
            continue
        if kind == "marker" and open_pids:
            pid = draw(st.sampled_from(sorted(open_pids)))
            open_pids.discard(pid)
            abort = draw(st.booleans())
            batches.append(LogBatch(offset, offset, pid, True, True, abort, (), epochs[pid]))
            offset += 1
            continue
        n = draw(st.integers(1, 4))
        txn = kind == "txn"
        pid = draw(st.integers(1, 3)) if txn else -1
        if txn:
            open_pids.add(pid)
        recs = tuple(
            LogRecord(o, b"k", f"v{o}".encode(), (("h", None),), 1000 + o)
            for o in range(offset, offset + n)
        )
        epoch = epochs[pid] if txn else -1
        batches.append(LogBatch(offset, offset + n - 1, pid, txn, False, False, recs, epoch))
        offset += n
    return batches


@st.composite
def logs(draw: Any) -> list[LogBatch]:
    return _log(draw)


@settings(max_examples=300, deadline=None)
@given(batches=logs(), data=st.data())
def test_scan_matches_committed_view_on_any_range(
    batches: list[LogBatch], data: st.DataObject
) -> None:
    hw = batches[-1].last_offset + 1 if batches else 0
    start = data.draw(st.integers(0, hw))
    end = data.draw(st.integers(start, hw + 2))

    def fake_iter(
        _conn: Any, _topic: str, _partition: int, begin: int = 0, **kw: Any
    ) -> Iterator[LogBatch]:
        stats = kw.get("stats")
        if stats is not None:
            stats["high_watermark"] = hw
        for b in batches:
            if b.last_offset >= begin:
                yield LogBatch(
                    b.base_offset,
                    b.last_offset,
                    b.producer_id,
                    b.transactional,
                    b.control,
                    b.abort,
                    tuple(r for r in b.records if r.offset >= begin),
                    b.producer_epoch,
                )

    real = rawlog.iter_batches
    rawlog.iter_batches = fake_iter  # type: ignore[assignment]
    try:
        stats = ScanStats()
        got = list(rawlog.scan_committed(None, "t", 0, start, end, stats))  # type: ignore[arg-type]
    finally:
        rawlog.iter_batches = real
    view = committed_view(PartitionLog(batches, hw, hw, []))
    want = [r for r in view.records if start <= r.offset < end]
    assert got == want
    # every transactional record of the range is committed, aborted or open
    in_range = [r for b in batches if b.transactional for r in b.records if start <= r.offset < end]
    committed_txn = [r for r in got if any(r in b.records for b in batches if b.transactional)]
    assert len(in_range) == len(committed_txn) + stats.aborted_records + stats.open_records


def test_a_fenced_writers_open_transaction_is_not_committed_by_the_new_epoch() -> None:
    """Writer one (epoch 0) leaves a transaction open; writer two takes the
    transactional.id (epoch 1, no ABORT marker written, as on Tansu) and commits its
    own. Only writer two's records are committed; a marker of an older epoch ends
    nothing of a newer one."""

    def data(offset: int, epoch: int, tag: str) -> LogBatch:
        rec = LogRecord(offset, b"k", tag.encode(), (), 1)
        return LogBatch(offset, offset, 7, True, False, False, (rec,), epoch)

    batches = [
        data(0, 0, "one-committed"),
        LogBatch(1, 1, 7, True, True, False, (), 0),
        data(2, 0, "one-abandoned"),
        data(3, 1, "two"),
        # a fenced writer's late COMMIT (a broker not enforcing the fence) ends only
        # its own epoch's batches: none are left
        LogBatch(4, 4, 7, True, True, False, (), 0),
        data(5, 1, "two-more"),
        LogBatch(6, 6, 7, True, True, False, (), 1),
    ]
    view = committed_view(PartitionLog(batches, 7, 7, []))
    assert [r.value for r in view.records] == [b"one-committed", b"two", b"two-more"]
    assert view.aborted_records == 1 and view.open_records == 0


def _batch_bytes(base: int, deltas: list[int]) -> bytes:
    """One v2 record batch at ``base`` holding records at ``base + delta``."""
    import struct

    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    for d in deltas:
        builder.append(d, 1000 + d, f"k{d}".encode(), f"v{d}".encode(), [("h", b"1")])
    data = bytearray(builder.build())
    data[0:8] = struct.pack(">q", base)  # the CRC does not cover the base offset
    return bytes(data)


def test_offsets_only_skips_decoding_but_not_a_compacted_batchs_holes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A batch with contiguous offsets comes back as offsets alone; one with holes
    (compaction removed records inside it) is decoded, so its offsets stay exact."""
    page = _batch_bytes(0, [0, 1, 2]) + _batch_bytes(3, [0, 2, 4])  # 3, 5, 7 kept
    answer = rawlog.FetchResult(0, 8, 8, [], page)
    monkeypatch.setattr(rawlog, "fetch", lambda *a, **kw: answer)
    full = list(rawlog.iter_batches(None, "t", 0, 1))  # type: ignore[arg-type]
    light = list(rawlog.iter_batches(None, "t", 0, 1, offsets_only=True))  # type: ignore[arg-type]
    assert [[r.offset for r in b.records] for b in full] == [[1, 2], [3, 5, 7]]
    assert [[r.offset for r in b.records] for b in light] == [[1, 2], [3, 5, 7]]
    assert [r.value for r in full[0].records] == [b"v1", b"v2"]
    assert [r.value for r in light[0].records] == [None, None]  # not decoded
    assert [r.value for r in light[1].records] == [b"v0", b"v2", b"v4"]  # decoded
