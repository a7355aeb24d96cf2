"""A backup task's read loop against scripted consumers (no broker, no Spark):
segments and gaps, retention losses, the raw committed filter, early stops that
keep what was read, and recovery of a crashed run's started copy."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow.fs as pafs
import pytest
from confluent_kafka import KafkaError
from support.fake_kafka import FakeError, FakeMessage

from mm.backup.catalog import STARTED, SegmentEntry
from mm.backup.job import recover_partition
from mm.backup.layout import PartitionRef
from mm.backup.ranges import LostRange
from mm.backup.rebuild import rebuild_catalog
from mm.backup.segment import TIMESTAMP_CREATE, BackupRecord, read_segment
from mm.backup.settings import BackupSettings
from mm.backup.storage import open_storage
from mm.backup.task import BROKER, RAW, RangeTask, TaskContext, backup_range

pytestmark = pytest.mark.unit

FS = pafs.LocalFileSystem()
TOPIC = "orders"


def rec(offset: int, value: bytes | None = b"v") -> BackupRecord:
    return BackupRecord(
        offset,
        1_700_000_000_000 + offset,
        TIMESTAMP_CREATE,
        f"k{offset}".encode(),
        value,
        (("h", b"1"), ("h", None)),
    )


@dataclass
class ScriptedConsumer:
    """Serves ``records`` (what the broker returns: on Tansu, aborted ones too) from
    the assigned offset, two at a time, then EOF at ``eof``; ``stall_at``: stops
    answering there (no EOF), as a broker that went away."""

    records: list[BackupRecord]
    eof: int
    log_start: int = 0
    stall_at: int | None = None
    conf: dict[str, Any] = field(default_factory=dict)
    pos: int = 0
    eof_sent: bool = False
    closed: bool = False

    def __call__(self, conf: dict[str, Any]) -> ScriptedConsumer:
        self.conf = conf
        return self

    def assign(self, tps: list[Any]) -> None:
        self.pos = max(tps[0].offset, self.log_start)  # auto.offset.reset=earliest

    def consume(self, num_messages: int, timeout: float) -> list[FakeMessage]:
        out: list[FakeMessage] = []
        for r in self.records:
            if r.offset >= self.pos and len(out) < 2:
                if self.stall_at is not None and r.offset >= self.stall_at:
                    break
                out.append(FakeMessage(TOPIC, 0, r.offset, r))  # a BackupRecord serves as Rec
        if out:
            self.pos = out[-1].offset() + 1
            return out
        if self.stall_at is not None or self.eof_sent:
            return []
        self.eof_sent = True
        return [FakeMessage(TOPIC, 0, self.eof, None, FakeError(KafkaError._PARTITION_EOF))]

    def get_watermark_offsets(self, tp: Any, timeout: float = 0, cached: bool = False) -> Any:
        return (self.log_start, self.eof)

    def unassign(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


@dataclass
class RawStats:
    open_records: int = 0


def raw(committed: list[int], open_records: int = 0) -> Any:
    """A raw-reader factory whose committed view holds ``committed`` offsets."""

    def factory(task: RangeTask, start: int, ctx: TaskContext) -> Any:
        offsets = [o for o in committed if start <= o < task.end]
        it = iter([rec(o) for o in offsets])
        return it, RawStats(open_records), lambda: None

    return factory


def ctx(tmp_path, mode=BROKER, timeout=5.0, **settings: Any) -> dict[str, Any]:
    s = BackupSettings(cluster="A", path=str(tmp_path), region="east", **settings)
    return TaskContext(s.to_dict(), {"bootstrap.servers": "x:1"}, mode, timeout).to_dict()


def stored(tmp_path, partition=0):
    ref = PartitionRef(str(tmp_path), "east", TOPIC, partition)
    storage = open_storage(str(tmp_path))
    _v, catalog = storage.catalogs.load(ref)
    segments = [read_segment(FS, f"{tmp_path}/{e.key}") for e in catalog.visible()]
    return ref, catalog, segments


def test_records_gaps_and_a_trailing_marker(tmp_path):
    records = [rec(0), rec(1, value=None), rec(3), rec(4), rec(7)]  # 2, 5, 6, 8: markers
    consumer = ScriptedConsumer(records, eof=9)
    out = backup_range(ctx(tmp_path), RangeTask(TOPIC, 0, 0, 9), consumer_factory=consumer)
    assert out.error is None
    assert (out.records, out.segments, out.next_offset, out.lost) == (5, 1, 9, 0)
    assert consumer.conf["isolation.level"] == "read_committed"
    assert consumer.conf["enable.partition.eof"] is True
    assert consumer.conf["auto.offset.reset"] == "earliest"
    assert consumer.closed
    ref, catalog, ((meta, got),) = stored(tmp_path)
    assert got == records
    assert (meta.start, meta.end, meta.gaps) == (0, 8, ((2, 2), (5, 6), (8, 8)))
    assert catalog.next_offset == 9
    assert rebuild_catalog(FS, ref).catalog == catalog


def test_rotation_and_a_second_run_continue_without_gap_or_overlap(tmp_path):
    records = [rec(o) for o in range(6)]
    c = ctx(tmp_path, segment_records=4)
    out = backup_range(c, RangeTask(TOPIC, 0, 0, 6), consumer_factory=ScriptedConsumer(records, 6))
    assert (out.segments, out.next_offset) == (2, 6)
    records += [rec(6), rec(7)]
    out = backup_range(c, RangeTask(TOPIC, 0, 6, 9), consumer_factory=ScriptedConsumer(records, 9))
    assert (out.records, out.segments, out.next_offset) == (2, 1, 9)
    _ref, catalog, segments = stored(tmp_path)
    assert [(e.start, e.end) for e in catalog.visible()] == [(0, 3), (4, 5), (6, 8)]
    assert [r for _m, rs in segments for r in rs] == records


def test_the_plan_must_match_the_catalog(tmp_path):
    records = [rec(o) for o in range(3)]
    backup_range(
        ctx(tmp_path), RangeTask(TOPIC, 0, 0, 3), consumer_factory=ScriptedConsumer(records, 3)
    )
    out = backup_range(
        ctx(tmp_path), RangeTask(TOPIC, 0, 1, 3), consumer_factory=ScriptedConsumer(records, 3)
    )
    assert out.error is not None and "catalog's next offset is 3" in out.error


def test_records_deleted_by_retention_are_lost_not_gaps(tmp_path):
    # planned from 2 (where the backup stood), the log now starts at 6
    records = [rec(6), rec(8)]
    consumer = ScriptedConsumer(records, eof=9, log_start=6)
    out = backup_range(ctx(tmp_path), RangeTask(TOPIC, 0, 2, 9), consumer_factory=consumer)
    assert (out.error, out.lost, out.next_offset) == (None, 4, 9)
    _ref, catalog, ((meta, _got),) = stored(tmp_path)
    assert meta.lost_before == LostRange(2, 5, "retention")
    assert (meta.start, meta.gaps) == (6, ((7, 7),))
    assert catalog.lost_count == 4


def test_a_gap_at_the_start_is_not_a_loss(tmp_path):
    consumer = ScriptedConsumer([rec(3)], eof=4, log_start=0)
    out = backup_range(ctx(tmp_path), RangeTask(TOPIC, 0, 0, 4), consumer_factory=consumer)
    assert (out.lost, out.next_offset) == (0, 4)
    _ref, _catalog, ((meta, _),) = stored(tmp_path)
    assert meta.lost_before is None and meta.gaps == ((0, 2),)


def test_raw_filter_drops_aborted_records_a_broker_served(tmp_path):
    served = [rec(0), rec(1), rec(2), rec(4), rec(5)]  # 1, 2 aborted; 3 its marker
    out = backup_range(
        ctx(tmp_path, RAW),
        RangeTask(TOPIC, 0, 0, 7, "x:1"),
        consumer_factory=ScriptedConsumer(served, eof=7),
        raw_factory=raw([0, 4, 5]),
    )
    assert (out.error, out.records, out.aborted_dropped, out.next_offset) == (None, 3, 2, 7)
    _ref, _c, ((meta, got),) = stored(tmp_path)
    assert [r.offset for r in got] == [0, 4, 5]
    assert meta.gaps == ((1, 3), (6, 6))


def test_a_committed_record_the_consumer_skipped_stops_the_task(tmp_path):
    served = [rec(0), rec(1), rec(4)]  # the consumer skipped 2 (the raw view has it)
    out = backup_range(
        ctx(tmp_path, RAW),
        RangeTask(TOPIC, 0, 0, 5, "x:1"),
        consumer_factory=ScriptedConsumer(served, eof=5),
        raw_factory=raw([0, 1, 2, 4]),
    )
    assert out.error is not None and "committed record at offset 2" in out.error
    # what was read before it is kept, and the backup stands right before it
    assert (out.records, out.next_offset) == (2, 2)
    _ref, catalog, ((_meta, got),) = stored(tmp_path)
    assert [r.offset for r in got] == [0, 1] and catalog.next_offset == 2


def test_an_open_transaction_in_range_writes_no_tail(tmp_path):
    out = backup_range(
        ctx(tmp_path, RAW),
        RangeTask(TOPIC, 0, 0, 3, "x:1"),
        consumer_factory=ScriptedConsumer([rec(0), rec(1), rec(2)], eof=3),
        raw_factory=raw([0], open_records=2),
    )
    assert out.error is not None and "still open" in out.error
    assert (out.segments, out.next_offset) == (0, 0)


def test_a_read_that_stops_early_keeps_what_it_read(tmp_path):
    records = [rec(o) for o in range(10)]
    consumer = ScriptedConsumer(records, eof=10, stall_at=5)
    out = backup_range(
        ctx(tmp_path, timeout=0.5), RangeTask(TOPIC, 0, 0, 10), consumer_factory=consumer
    )
    assert out.error is not None and "no data from orders[0] at offset 5" in out.error
    assert (out.records, out.next_offset) == (5, 5)
    _ref, catalog, segments = stored(tmp_path)
    assert [r.offset for _m, rs in segments for r in rs] == [0, 1, 2, 3, 4]
    assert catalog.next_offset == 5


def test_eof_below_the_planned_end_stops_there(tmp_path):
    out = backup_range(
        ctx(tmp_path),
        RangeTask(TOPIC, 0, 0, 10),
        consumer_factory=ScriptedConsumer([rec(0), rec(1)], eof=3),
    )
    assert (out.error, out.next_offset) == (None, 3)


def test_recovery_aborts_a_crashed_copy_and_deletes_its_file(tmp_path):
    records = [rec(0), rec(1)]
    backup_range(
        ctx(tmp_path), RangeTask(TOPIC, 0, 0, 2), consumer_factory=ScriptedConsumer(records, 2)
    )
    storage = open_storage(str(tmp_path))
    ref = PartitionRef(str(tmp_path), "east", TOPIC, 0)
    version, catalog = storage.catalogs.load(ref)
    key = ref.segment(0, 2, 4)
    crashed = SegmentEntry(0, 2, 4, key.relative, 3, 0, None, None, STARTED)
    storage.catalogs.commit(ref, version, catalog.begin_copy(crashed))
    FS.create_dir(ref.level_dir(0), recursive=True)
    FS.open_output_stream(key.key).close()  # moved into place, never finished
    recovered, aborted = recover_partition(storage, ref)
    assert aborted == [key.relative] and recovered == catalog
    assert storage.catalogs.load(ref)[1] == catalog
    assert FS.get_file_info(key.key).type == pafs.FileType.NotFound
    assert recover_partition(storage, ref) == (catalog, [])
