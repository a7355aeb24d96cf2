"""`mm backup verify` and `mm backup rebuild-index` on real files in a local directory
(segments and catalog versions written by the storage code, then damaged by hand);
the CLI in-process for exit codes and output. No broker, no Spark."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from mm.backup.catalog import SegmentEntry
from mm.backup.catalog_store import FsCatalogStore, version_name
from mm.backup.layout import PartitionRef
from mm.backup.ranges import LostRange
from mm.backup.rebuild import segment_entry
from mm.backup.reindex import COMMITTED, DRY_RUN, REFUSED, UNCHANGED, reindex_partition
from mm.backup.segment import TIMESTAMP_CREATE, BackupRecord, read_segment, store_segment
from mm.backup.storage import open_storage
from mm.backup.verify import verify_partition
from mm.cli import main

pytestmark = pytest.mark.unit

FS = pafs.LocalFileSystem()


def records(start: int, end: int, skip: int | None = None) -> list[BackupRecord]:
    return [
        BackupRecord(o, 1000 + o, TIMESTAMP_CREATE, b"k", f"v{o}".encode(), (("h", b"1"),))
        for o in range(start, end + 1)
        if o != skip
    ]


@pytest.fixture
def ref(tmp_path: Path) -> PartitionRef:
    """A partition with three committed segments: 0-9, 10-19 (offset 15 a gap), and
    25-29 after a lost range."""
    ref = PartitionRef(str(tmp_path / "bk"), "east", "orders", 0)
    store = FsCatalogStore(FS)
    version, cat = store.load(ref)
    for start, end, skip, lost in [
        (0, 9, None, None),
        (10, 19, 15, None),
        (25, 29, None, (20, 24)),
    ]:
        lost_before = LostRange(*lost, "retention") if lost else None
        stored = store_segment(
            FS, ref.segment(0, start, end), records(start, end, skip), lost_before=lost_before
        )
        cat = cat.begin_copy(segment_entry(stored))
        version = store.commit(ref, version, cat)
        cat = cat.finish_copy(segment_entry(stored))
        version = store.commit(ref, version, cat)
    return ref


def storage(ref: PartitionRef):
    return open_storage(ref.prefix)


def path(ref: PartitionRef, start: int, end: int, level: int = 0) -> str:
    return ref.segment(level, start, end).key


def test_a_backup_as_written_is_consistent(ref):
    v = verify_partition(storage(ref), ref)
    assert v.problems == () and v.warnings == () and v.in_flight == ()
    assert (v.segments, v.records, v.version) == (3, 10 + 9 + 5, 6)
    assert v.bytes_checked == sum(
        FS.get_file_info(path(ref, *r)).size for r in [(0, 9), (10, 19), (25, 29)]
    )


def test_corrupt_file(ref):
    p = path(ref, 10, 19)
    data = Path(p).read_bytes()
    Path(p).write_bytes(data[:100] + b"\0" * 50 + data[150:])  # same size, damaged pages
    problems = verify_partition(storage(ref), ref).problems
    assert any(
        f"segment {ref.segment(0, 10, 19).relative}: not readable in full" in x for x in problems
    ), problems


def test_truncated_file(ref):
    p = path(ref, 10, 19)
    Path(p).write_bytes(Path(p).read_bytes()[:-20])
    problems = verify_partition(storage(ref), ref).problems
    assert any(
        "not readable in full" in x and "not a readable Parquet file" in x for x in problems
    ), problems


def test_missing_file(ref):
    def missing(key: str) -> str:
        return (
            f"segment {key}: file missing at {ref.prefix}/{key} (the catalog lists it as visible)"
        )

    first = ref.segment(0, 0, 9).relative
    saved = Path(path(ref, 0, 9)).read_bytes()
    FS.delete_file(path(ref, 0, 9))
    # the files alone still make a catalog (from 10 on): only the missing file is named
    assert verify_partition(storage(ref), ref).problems == (missing(first),)
    Path(path(ref, 0, 9)).write_bytes(saved)
    # a missing middle file also leaves a hole the files cannot explain
    middle = ref.segment(0, 10, 19).relative
    FS.delete_file(path(ref, 10, 19))
    problems = verify_partition(storage(ref), ref).problems
    assert len(problems) == 2 and problems[0] == missing(middle), problems
    assert problems[1].startswith("the index cannot be rebuilt from the files")
    assert "expected lost range (10, 24)" in problems[1]


def rewrite_without(p: str, offset: int) -> None:
    """The file again with the row at ``offset`` left out and its footer unchanged."""
    table = pq.read_table(p)
    kv = pq.read_metadata(p).metadata
    keep = [o != offset for o in table.column("offset").to_pylist()]
    kept = table.filter(keep)
    mm_keys = {k: v for k, v in kv.items() if k.startswith(b"mm.backup.")}
    pq.write_table(kept.replace_schema_metadata({**(kept.schema.metadata or {}), **mm_keys}), p)


def test_undeclared_gap_and_wrong_count(ref):
    p = path(ref, 0, 9)
    rewrite_without(p, 4)
    key = ref.segment(0, 0, 9).relative
    problems = verify_partition(storage(ref), ref).problems
    assert f"segment {key}: holds 9 rows, its footer says 10 records" in problems
    assert (
        f"segment {key}: the offsets without a row are [4-4], the footer's gaps are [] "
        "(expected them to be the same)"
    ) in problems
    # the size changed too: the catalog's size_bytes is not the file's
    assert any(x.startswith(f"segment {key}: the catalog says size_bytes") for x in problems)


def write_version(ref: PartitionRef, version: int, entries: list[SegmentEntry]) -> None:
    from mm.backup.catalog import _entry_to_dict

    doc = {
        "version": version,
        "writer": "test",
        "catalog": {
            "format": 1,
            "region": ref.region,
            "topic": ref.topic,
            "partition": ref.partition,
            "segments": [_entry_to_dict(e) for e in entries],
        },
    }
    Path(ref.catalog_dir, version_name(version)).write_text(json.dumps(doc))


def test_overlapping_catalog(ref):
    _, cat = FsCatalogStore(FS).load(ref)
    first = cat.visible()[0]
    overlap = SegmentEntry(0, 5, 12, ref.segment(0, 5, 12).relative, 8, 1, 1, 1)
    write_version(ref, 7, [*cat.entries, overlap])
    (problem,) = verify_partition(storage(ref), ref).problems
    assert problem.startswith("catalog version 7 does not load:")
    assert f"segment {overlap.key} (5-12) overlaps {first.key} (0-9)" in problem
    assert "rebuild-index" in problem


def test_wrong_count_in_catalog(ref):
    _, cat = FsCatalogStore(FS).load(ref)
    a = cat.visible()[0]
    write_version(ref, 7, [SegmentEntry(**{**a.__dict__, "record_count": 8}), *cat.entries[1:]])
    problems = verify_partition(storage(ref), ref).problems
    assert f"segment {a.key}: the catalog says record_count 8, the footer says 10" in problems


def test_strays_and_temporary_files_are_warnings(ref):
    store_segment(FS, ref.segment(0, 30, 34), records(30, 34))  # beyond the catalog's end
    tmp = ref.temp_key(0)
    FS.open_output_stream(tmp).close()
    v = verify_partition(storage(ref), ref)
    assert v.problems == ()
    assert v.warnings == (
        f"leftover temporary file of an interrupted write: {tmp} (safe to delete when no "
        "backup, compaction or rebuild-index runs)",
        f"stray segment file not in the catalog: {ref.segment(0, 30, 34).relative} "
        "(rebuild-index would list it)",
    )
    # a stray that partly overlaps a visible segment breaks the rebuild: a problem
    store_segment(FS, ref.segment(1, 5, 14), records(5, 14))
    problems = verify_partition(storage(ref), ref).problems
    assert len(problems) == 1 and "partly overlaps" in problems[0]


def settled(ref):
    return FsCatalogStore(FS).load(ref)[1].settled()


def test_rebuild_index_after_the_catalog_is_lost(ref):
    before = settled(ref)
    shutil.rmtree(Path(ref.prefix) / "_catalog")
    st = storage(ref)
    dry = reindex_partition(st, ref, dry_run=True)
    assert dry.status == DRY_RUN and dry.diff is not None
    assert dry.diff.added == tuple(e.key for e in before.visible())
    assert FsCatalogStore(FS).latest_version(ref) == 0  # nothing committed
    done = reindex_partition(st, ref)
    assert (done.status, done.before_version, done.after_version) == (COMMITTED, 0, 1)
    assert done.next_offset == 30 and done.segments == 3
    assert FsCatalogStore(FS).load(ref) == (1, before)
    assert verify_partition(st, ref).problems == ()
    again = reindex_partition(st, ref)
    assert again.status == UNCHANGED and again.after_version is None


def test_rebuild_index_refuses_a_copy_in_flight(ref):
    store = FsCatalogStore(FS)
    version, cat = store.load(ref)
    started = SegmentEntry(0, 30, 39, ref.segment(0, 30, 39).relative, 10, 0, None, None)
    store.commit(ref, version, cat.begin_copy(started))
    refused = reindex_partition(storage(ref), ref)
    assert refused.status == REFUSED and not refused.ok
    assert refused.message is not None and str(ref) in refused.message
    assert started.key in refused.message and "--force" in refused.message
    assert store.latest_version(ref) == version + 1
    forced = reindex_partition(storage(ref), ref, force=True)
    assert forced.status == COMMITTED and forced.diff is not None
    assert forced.diff.removed == (started.key,)
    assert store.load(ref) == (version + 2, cat)


def test_rebuild_index_reports_shadowed_files(ref):
    merged = store_segment(
        FS,
        ref.segment(1, 0, 19),
        [r for s in (0, 10) for r in read_segment(FS, path(ref, s, s + 9))[1]],
    )
    result = reindex_partition(storage(ref), ref)
    assert result.status == COMMITTED and result.diff is not None
    assert result.shadowed == (ref.segment(0, 0, 9).relative, ref.segment(0, 10, 19).relative)
    assert result.diff.added == (merged.key.relative,)
    assert result.diff.removed == result.shadowed
    assert verify_partition(storage(ref), ref).warnings == tuple(
        f"stray segment file not in the catalog: {k} (a higher level covers it)"
        for k in result.shadowed
    )


def config(tmp_path: Path, ref: PartitionRef) -> Path:
    cfg = tmp_path / "mm.properties"
    cfg.write_text(
        "\n".join(
            [
                "clusters = A",
                "A.bootstrap.servers = localhost:1",
                "backup.cluster = A",
                f"backup.path = {ref.prefix}",
                "backup.region = east",
            ]
        )
        + "\n"
    )
    return cfg


def test_cli_exit_codes_and_output(ref, tmp_path, capsys):
    cfg = str(config(tmp_path, ref))
    assert main(["backup", "-c", cfg, "verify"]) == 0
    out = capsys.readouterr().out
    assert "orders  " in out and "consistent" in out
    assert "total: 1 partitions, 3 segments, 24 records" in out
    assert main(["backup", "verify", "-c", cfg, "--topics", "other.*", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["partitions"] == []
    FS.delete_file(path(ref, 25, 29))
    assert main(["backup", "verify", "-c", cfg, "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is False and doc["totals"]["problems"] == 1
    assert main(["backup", "verify", "-c", cfg, "--topics", "("]) == 2
    assert "--topics '(' is not a regular expression" in capsys.readouterr().err
    assert main(["backup", "rebuild-index", "-c", cfg, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would commit" in out and f"removed: orders[0]: {ref.segment(0, 25, 29).relative}" in out
    assert main(["backup", "rebuild-index", "-c", cfg, "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["partitions"]
    assert (row["status"], row["next_offset"], row["after_version"]) == ("committed", 20, 7)
    assert main(["backup", "-c", cfg, "verify"]) == 0
