"""One partition's compaction and retention on a local store (no Spark): the swap,
crashes at each step, a concurrent backup's commits, and the driver's report."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pyarrow.fs as pafs
import pytest

import mm.backup.compaction as compaction
from mm.backup.catalog import DELETED, DELETING, STARTED, PartitionCatalog
from mm.backup.catalog_store import FsCatalogStore
from mm.backup.compact_job import run_compact
from mm.backup.compact_render import compact_json, render_compact
from mm.backup.compaction import CompactContext, CompactTask, compact_partition
from mm.backup.compaction_plan import MergeRun
from mm.backup.job import recover_partition
from mm.backup.layout import PartitionRef
from mm.backup.listing import partition_listing
from mm.backup.ranges import LostRange
from mm.backup.rebuild import rebuild_catalog, segment_entry
from mm.backup.segment import (
    TIMESTAMP_CREATE,
    TIMESTAMP_LOG_APPEND,
    BackupRecord,
    read_segment,
    store_segment,
)
from mm.backup.settings import BackupSettings
from mm.backup.storage import Storage
from mm.config import build_config

pytestmark = pytest.mark.unit

FS = pafs.LocalFileSystem()
NOW = 10_000_000


def record(o: int) -> BackupRecord:
    return BackupRecord(
        offset=o,
        timestamp=1000 * o,
        timestamp_type=TIMESTAMP_CREATE if o % 2 else TIMESTAMP_LOG_APPEND,
        key=None if o % 5 == 0 else f"k{o}".encode(),
        value=None if o % 7 == 0 else f"v{o}".encode(),
        headers=(("h", b"1"), ("h", None)) if o % 3 == 0 else (),
    )


# (start, end, lost before): offsets divisible by 4 are gaps (markers, aborted records)
LAYOUT = [(5, 14, (0, 4)), (15, 19, None), (20, 31, None), (32, 32, None), (33, 40, None)]


def storage(tmp_path: Path) -> Storage:
    return Storage(FS, str(tmp_path), FsCatalogStore(FS))


def back_up(st: Storage, ref: PartitionRef, layout=LAYOUT) -> PartitionCatalog:
    """Level-0 segments as the backup commits them."""
    version, catalog = st.catalogs.load(ref)
    for start, end, lost in layout:
        lost_before = None if lost is None else LostRange(*lost, "retention")
        stored = store_segment(
            FS,
            ref.segment(0, start, end),
            [record(o) for o in range(start, end + 1) if o % 4],
            lost_before=lost_before,
        )
        catalog = catalog.finish_copy(segment_entry(stored))
        version = st.catalogs.commit(ref, version, catalog)
    return catalog


def visible_records(st: Storage, ref: PartitionRef) -> list[BackupRecord]:
    _v, catalog = st.catalogs.load(ref)
    return [r for e in catalog.visible() for r in read_segment(FS, f"{ref.prefix}/{e.key}")[1]]


def context(tmp_path: Path, level: int = 0, now_ms: int = NOW, **kw) -> dict:
    settings = BackupSettings(
        cluster="A", path=str(tmp_path), region="east", compact_min_segments=2, **kw
    )
    return CompactContext(settings.to_dict(), level, now_ms).to_dict()


@pytest.fixture
def ref(tmp_path: Path) -> PartitionRef:
    return PartitionRef(str(tmp_path), "east", "orders", 0)


def files(ref: PartitionRef, level: int) -> list[str]:
    d = Path(ref.level_dir(level))
    return sorted(p.name for p in d.glob("*.parquet")) if d.exists() else []


def test_runs_merge_into_the_next_level_record_for_record(tmp_path, ref):
    st = storage(tmp_path)
    before = back_up(st, ref)
    records = visible_records(st, ref)
    out = compact_partition(context(tmp_path), CompactTask("orders", 0), storage=st)
    assert out.error is None
    assert [(m.start, m.end, m.segments) for m in out.merges] == [(5, 40, 5)]
    assert out.records == before.record_count == len(records)
    assert out.bytes_before == sum(e.size_bytes for e in before.visible())
    assert out.deleted_files == 5 and files(ref, 0) == []

    _v, catalog = st.catalogs.load(ref)
    (merged,) = catalog.visible()
    assert (merged.level, merged.start, merged.end) == (1, 5, 40)
    assert merged.lost_before == LostRange(0, 4, "retention") and catalog.lost_count == 5
    assert out.bytes_after == merged.size_bytes > 0
    assert [e.key for e in catalog.in_state(DELETED)] == [e.key for e in before.visible()]
    assert visible_records(st, ref) == records  # key, value, headers, timestamps
    meta, _ = read_segment(FS, f"{ref.prefix}/{merged.key}")
    # the gaps of the five segments, joined where they meet
    assert meta.gaps == tuple((o, o) for o in range(8, 41, 4))
    assert rebuild_catalog(FS, ref).catalog == catalog.forget_deleted()
    # nothing left: a second run changes nothing
    again = compact_partition(context(tmp_path), CompactTask("orders", 0), storage=st)
    assert (again.error, again.merges, again.deleted_files) == (None, [], 0)
    # and level 1 to level 2 needs two level-1 segments
    assert compact_partition(context(tmp_path, level=1), CompactTask("orders", 0)).merges == []
    # two more backed up: their merge drops the previous run's DELETE_SEGMENT_FINISHED entries
    back_up(st, ref, [(41, 45, None), (46, 50, None)])
    third = compact_partition(context(tmp_path), CompactTask("orders", 0), storage=st)
    assert [(m.start, m.end) for m in third.merges] == [(41, 50)]
    _v, catalog = st.catalogs.load(ref)
    assert [(e.level, e.start, e.end) for e in catalog.visible()] == [(1, 5, 40), (1, 41, 50)]
    assert [(e.start, e.end) for e in catalog.in_state(DELETED)] == [(41, 45), (46, 50)]


def test_a_crash_between_the_swap_and_the_deletes(tmp_path, ref, monkeypatch):
    st = storage(tmp_path)
    before = back_up(st, ref)
    records = visible_records(st, ref)

    def crash(fs, path):
        raise OSError(f"simulated crash deleting {path}")

    monkeypatch.setattr(compaction, "_delete_file", crash)
    out = compact_partition(context(tmp_path), CompactTask("orders", 0), storage=st)
    assert out.error is not None and "simulated crash" in out.error
    assert len(out.merges) == 1  # the swap was committed before the failure
    _v, catalog = st.catalogs.load(ref)
    assert [(e.level, e.start, e.end) for e in catalog.visible()] == [(1, 5, 40)]
    assert len(catalog.in_state(DELETING)) == 5 and len(files(ref, 0)) == 5
    # consistent and readable: every offset once, the higher level wins on a rebuild
    assert visible_records(st, ref) == records
    rebuilt = rebuild_catalog(FS, ref)
    assert rebuilt.catalog == catalog.settled()
    assert rebuilt.shadowed == tuple(e.key for e in before.visible())
    assert partition_listing(catalog).levels == (1,)

    monkeypatch.undo()
    done = compact_partition(context(tmp_path), CompactTask("orders", 0), storage=st)
    assert done.error is None and done.merges == [] and done.deleted_files == 5
    _v, catalog = st.catalogs.load(ref)
    assert files(ref, 0) == [] and len(catalog.in_state(DELETED)) == 5
    assert visible_records(st, ref) == records
    assert rebuild_catalog(FS, ref).catalog == catalog.forget_deleted()


def test_a_crash_before_the_swap_is_cleaned_up_by_the_next_run(tmp_path, ref):
    st = storage(tmp_path)
    before = back_up(st, ref)
    records = visible_records(st, ref)
    # a run that registered its merge, moved the file into place and died
    run = MergeRun(before.visible())
    key = ref.segment(1, 5, 40)
    crashed = before.begin_compact(run.keys, run.merged_entry(key.relative))
    st.catalogs.commit(ref, len(LAYOUT), crashed)
    store_segment(FS, key, records, lost_before=run.lost_before)
    # the files are consistent on their own (the higher level wins)
    assert rebuild_catalog(FS, ref).catalog.visible()[0].level == 1
    assert visible_records(st, ref) == records  # the catalog still shows level 0
    assert partition_listing(crashed).in_flight == 1
    # the backup's recovery leaves a compaction's copy alone
    assert recover_partition(st, ref) == (crashed, [])

    out = compact_partition(context(tmp_path), CompactTask("orders", 0), storage=st)
    assert out.error is None and out.recovered == [key.relative]
    assert [(m.start, m.end) for m in out.merges] == [(5, 40)]
    _v, catalog = st.catalogs.load(ref)
    assert catalog.in_state(STARTED) == () and visible_records(st, ref) == records


def test_a_failed_write_leaves_the_catalog_as_it_was(tmp_path, ref, monkeypatch):
    st = storage(tmp_path)
    before = back_up(st, ref)

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(compaction, "store_segment", broken)
    out = compact_partition(context(tmp_path), CompactTask("orders", 0), storage=st)
    assert out.error == "OSError: disk full" and out.merges == []
    assert st.catalogs.load(ref)[1] == before  # the started entry was aborted
    assert files(ref, 1) == [] and len(files(ref, 0)) == 5


class _RacingStore:
    """A catalog store where another writer commits ``theirs(catalog)`` just before
    our commit that makes ``merged_key`` visible (the swap)."""

    def __init__(self, store, merged_key, theirs):
        self.store, self.merged_key, self.theirs = store, merged_key, theirs
        self.raced = False

    def load(self, ref):
        return self.store.load(ref)

    def commit(self, ref, expected, catalog):
        if not self.raced and any(e.key == self.merged_key for e in catalog.visible()):
            self.raced = True
            version, current = self.store.load(ref)
            self.store.commit(ref, version, self.theirs(current))
        return self.store.commit(ref, expected, catalog)


def test_a_backup_appending_meanwhile_does_not_stop_the_swap(tmp_path, ref):
    st = storage(tmp_path)
    back_up(st, ref)
    appended = store_segment(FS, ref.segment(0, 41, 45), [record(o) for o in range(41, 46)])
    racing = _RacingStore(
        st.catalogs,
        ref.segment(1, 5, 40).relative,
        lambda c: c.finish_copy(segment_entry(appended)),
    )
    out = compact_partition(
        context(tmp_path), CompactTask("orders", 0), storage=Storage(FS, st.prefix, racing)
    )
    assert racing.raced and out.error is None
    _v, catalog = st.catalogs.load(ref)
    assert [(e.level, e.start, e.end) for e in catalog.visible()] == [(1, 5, 40), (0, 41, 45)]
    assert rebuild_catalog(FS, ref).catalog == catalog.forget_deleted()


def test_a_change_inside_the_run_fails_the_partition_only(tmp_path, ref):
    st = storage(tmp_path)
    before = back_up(st, ref)
    merged_key = ref.segment(1, 5, 40).relative
    # another writer aborts our started merge (as an old backup's recovery would)
    racing = _RacingStore(st.catalogs, merged_key, lambda c: c.abort_copy(merged_key))
    out = compact_partition(
        context(tmp_path), CompactTask("orders", 0), storage=Storage(FS, st.prefix, racing)
    )
    assert out.error is not None and "CompactionConflict" in out.error
    assert "offsets 5-40" in out.error
    assert st.catalogs.load(ref)[1] == before  # theirs stands; our file is gone
    assert files(ref, 1) == []


def test_retention_expires_the_oldest_segments_and_ls_stays_honest(tmp_path, ref):
    st = storage(tmp_path)
    back_up(st, ref)
    # newest records: 14 000, 19 000, 31 000, 32 000 (a gap at 32: no record), 39 000 ms
    ctx = context(tmp_path, now_ms=100_000, retention_ms=100_000 - 20_000)
    out = compact_partition(ctx, CompactTask("orders", 0), storage=st)
    assert out.error is None
    assert (out.expired_segments, out.expired_records) == (2, 8 + 4)
    _v, catalog = st.catalogs.load(ref)
    listing = partition_listing(catalog)
    # the first offset held moves up; expired offsets are not "lost"
    assert listing.first_offset == 20 and listing.lost == 0
    assert out.deleted_files == 2 + 3 and files(ref, 0) == []
    # then compaction merged what stayed (three segments)
    assert [(e.level, e.start, e.end) for e in catalog.visible()] == [(1, 20, 40)]
    assert rebuild_catalog(FS, ref).catalog == catalog.forget_deleted()


def config(tmp_path: Path, **extra: str):
    props = {
        "clusters": "A",
        "A.bootstrap.servers": "localhost:1",
        "backup.cluster": "A",
        "backup.path": str(tmp_path),
        "backup.region": "east",
        "backup.compact.min.segments": "2",
        **{f"backup.{k}": v for k, v in extra.items()},
    }
    return build_config(props)


class _FakeRDD:
    def __init__(self, items):
        self.items = items

    def map(self, fn):
        # pickled both ways, as between the driver and a Spark Python worker
        fn = pickle.loads(pickle.dumps(fn))
        return _FakeRDD(
            [pickle.loads(pickle.dumps(fn(pickle.loads(pickle.dumps(x))))) for x in self.items]
        )

    def collect(self):
        return list(self.items)


class _FakeSpark:
    def __init__(self):
        self.sparkContext = self
        self.slices: list[int] = []

    def parallelize(self, items, slices):
        self.slices.append(slices)
        return _FakeRDD(items)


def test_the_driver_plans_dry_runs_and_reports(tmp_path):
    st = storage(tmp_path)
    refs = [PartitionRef(str(tmp_path), "east", "orders", p) for p in (0, 1)]
    back_up(st, refs[0])
    back_up(st, refs[1], LAYOUT[:1])  # one segment: nothing to do
    cfg = config(tmp_path)

    dry = run_compact(cfg, dry_run=True, now_ms=NOW)
    assert dry.ok and dry.checked == 2 and dry.spark_tasks == 0
    assert [(r.partition, r.segments_merged, r.records) for r in dry.rows] == [(0, 5, 27)]
    assert st.catalogs.load(refs[0])[0] == len(LAYOUT)  # nothing committed
    text = render_compact(dry)
    assert "dry run: nothing changed" in text and "5 segments would merge into 1" in text

    spark = _FakeSpark()
    report = run_compact(cfg, now_ms=NOW, spark_factory=lambda: spark)
    assert report.ok and spark.slices == [1] and report.spark_tasks == 1
    lines = render_compact(report).splitlines()
    assert lines[1].startswith("retention: none")
    header = lines[3].split()
    assert header[:4] == ["topic", "partition", "segments", "into"]
    row = lines[4].split()
    assert row[:6] == ["orders", "0", "5", "1", "0", "27"]
    assert "total: 2 partitions, 5 segments merged into 1 (27 records)" in lines[-1]
    doc = json.loads(compact_json(report))
    assert doc["totals"]["failed"] == 0 and doc["to_level"] == 1
    assert doc["partitions"][0]["merges"][0] == {
        "start": 5,
        "end": 40,
        "segments": 5,
        "records": 27,
        "bytes_before": report.rows[0].bytes_before,
        "bytes_after": report.rows[0].bytes_after,
    }
    assert run_compact(cfg, now_ms=NOW, spark_factory=_FakeSpark).rows == []


def test_a_failed_partition_is_reported_and_exits_1(tmp_path, monkeypatch, capsys):
    from mm.cli import main

    st = storage(tmp_path)
    back_up(st, PartitionRef(str(tmp_path), "east", "orders", 0))
    (tmp_path / "mm.properties").write_text(
        "\n".join(
            [
                "clusters = A",
                "A.bootstrap.servers = localhost:1",
                "backup.cluster = A",
                f"backup.path = {tmp_path}",
                "backup.region = east",
                "backup.compact.min.segments = 2",
            ]
        )
    )
    import mm.backup.compact_job as compact_job

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(compaction, "store_segment", broken)
    monkeypatch.setattr(
        compact_job,
        "_run_tasks",
        lambda cfg, ctx, tasks, f: [compact_partition(ctx.to_dict(), t) for t in tasks],
    )
    assert main(["backup", "compact", "-c", str(tmp_path / "mm.properties")]) == 1
    assert "failed: orders[0]: OSError: disk full" in capsys.readouterr().out
    assert main(["backup", "compact", "-c", str(tmp_path / "mm.properties"), "--level", "99"]) == 2
    assert "--level 99: expected 0 <= N < 99" in capsys.readouterr().err


class _LandsThenTimesOut:
    """A catalog store whose swap commit lands but reports a timeout."""

    def __init__(self, store, merged_key):
        self.store, self.merged_key = store, merged_key

    def load(self, ref):
        return self.store.load(ref)

    def commit(self, ref, expected, catalog):
        version = self.store.commit(ref, expected, catalog)
        if any(e.key == self.merged_key for e in catalog.visible()):
            raise TimeoutError("no answer from the store")
        return version


def test_a_swap_that_landed_despite_an_error_keeps_the_merged_file(tmp_path, ref):
    st = storage(tmp_path)
    back_up(st, ref)
    records = visible_records(st, ref)
    merged_key = ref.segment(1, 5, 40).relative
    flaky = Storage(FS, st.prefix, _LandsThenTimesOut(st.catalogs, merged_key))
    out = compact_partition(context(tmp_path), CompactTask("orders", 0), storage=flaky)
    assert out.error == "TimeoutError: no answer from the store"
    assert files(ref, 1) == [Path(merged_key).name]  # not undone: it is the data now
    assert visible_records(st, ref) == records
    done = compact_partition(context(tmp_path), CompactTask("orders", 0), storage=st)
    assert done.error is None and done.deleted_files == 5 and files(ref, 0) == []
    assert visible_records(st, ref) == records
