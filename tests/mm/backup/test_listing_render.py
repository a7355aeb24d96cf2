"""What `mm backup ls` and `mm backup --once` show (pure)."""

from __future__ import annotations

import json

import pytest

from mm.backup.catalog import PartitionCatalog, SegmentEntry
from mm.backup.job import BackupReport, PartitionRow
from mm.backup.listing import partition_listing
from mm.backup.plan import plan_partition
from mm.backup.ranges import LostRange
from mm.backup.render import ls_json, render_ls, render_once
from mm.backup.task import RangeSummary

pytestmark = pytest.mark.unit


def seg(start, end, level=0, *, ts=(1_000, 2_000), lost=None, state=None, records=None):
    key = f"east/t/partition=0/level={level}/{start:020d}-{end:020d}.parquet"
    n = end - start + 1 if records is None else records
    kw = {} if state is None else {"state": state}
    return SegmentEntry(level, start, end, key, n, 10 * n, ts[0], ts[1], lost_before=lost, **kw)


def test_listing_of_the_visible_segments():
    catalog = PartitionCatalog(
        "east",
        "t",
        0,
        (
            seg(5, 9, lost=LostRange(0, 4, "retention"), ts=(3_000, 4_000)),
            seg(10, 19, level=1, records=8, ts=(1_000, 5_000)),
        ),
    ).begin_copy(seg(20, 29))
    x = partition_listing(catalog)
    assert (x.first_offset, x.last_offset, x.segments, x.records) == (5, 19, 2, 13)
    assert (x.min_timestamp, x.max_timestamp, x.size_bytes) == (1_000, 5_000, 130)
    assert (x.levels, x.lost, x.in_flight) == ((0, 1), 5, 1)
    doc = x.to_json()
    assert doc["next_offset"] == 20 and doc["levels"] == [0, 1]
    text = render_ls("east", "/b", [x])
    assert "1970-01-01T00:00:01.000Z" in text and "in flight: t[0]: 1 copies" in text
    assert json.loads(ls_json("east", "/b", [x]))["partitions"][0]["lost"] == 5


def test_listing_of_an_empty_catalog():
    x = partition_listing(PartitionCatalog("east", "t", 3).begin_copy(seg(0, 1)))
    assert (x.first_offset, x.last_offset, x.records, x.levels) == (None, None, 0, ())
    assert x.to_json()["next_offset"] is None
    assert "(no backed-up partition)" in render_ls("east", "/b", [])
    assert x.in_flight == 1


def test_once_table_totals_and_failures():
    done = plan_partition("t", 0, (0, 100), 40)
    idle = plan_partition("t", 1, (0, 7), 7)
    bad = plan_partition("t", 2, (0, 5), 9)
    report = BackupReport("A", "east", "/b", "raw")
    report.rows = [
        PartitionRow(done, RangeSummary("t", 0, 40, 100, 100, 55, 2, 3, 0, 1)),
        PartitionRow(idle, None),
        PartitionRow(bad, None),
    ]
    report.groups_key, report.group_offsets = "/b/_groups/east/x.jsonl", 4
    text = render_once(report)
    lines = text.splitlines()
    assert lines[2].split() == ["topic", "partition", "from", "to", "records", "segments", "lost"]
    assert lines[3].split() == ["t", "0", "40", "100", "55", "2", "3"]
    assert lines[4].split() == ["t", "1", "7", "7", "0", "0", "0"]
    assert "total: 3 partitions, 55 records in 2 new segments, 3 offsets lost" in text
    assert "1 failed" in text and "failed: t[2]: the log ends at 5" in text
    assert "1 records of aborted transactions" in text
    assert not report.ok
    doc = report.to_json()
    assert doc["partitions"][0]["to"] == 100 and doc["totals"]["failed"] == 1
    report.rows = report.rows[:2]
    assert report.ok


class _FakeRDD:
    def __init__(self, items, slices):
        self.items, self.slices = items, slices

    def map(self, fn):
        return _FakeRDD([fn(x) for x in self.items], self.slices)

    def collect(self):
        return list(self.items)


class _FakeSpark:
    def __init__(self):
        self.sparkContext = self
        self.slices = None

    def parallelize(self, items, slices):
        self.slices = slices
        return _FakeRDD(items, slices)


def test_run_ranges_one_task_per_range_with_a_plain_dict_context(tmp_path, monkeypatch):
    import mm.backup.job as job
    from mm.backup.settings import BackupSettings
    from mm.backup.task import RangeTask, TaskContext

    seen = []

    def fake_backup_range(ctx, task):
        seen.append(ctx)
        return RangeSummary(task.topic, task.partition, task.start, task.end, task.end)

    monkeypatch.setattr(job, "backup_range", fake_backup_range)
    settings = BackupSettings(cluster="A", path=str(tmp_path), region="east")
    ctx = TaskContext(settings.to_dict(), {"bootstrap.servers": "x:1"}, "raw")
    spark = _FakeSpark()
    tasks = [RangeTask("t", 0, 0, 5), RangeTask("t", 1, 3, 4)]
    out = job.run_ranges(spark, ctx, tasks)
    assert spark.slices == 2
    assert [(s.partition, s.next_offset) for s in out] == [(0, 5), (1, 4)]
    assert seen == [ctx.to_dict(), ctx.to_dict()]
    assert json.loads(json.dumps(seen[0])) == seen[0]  # plain values only
