"""`mm backup verify`: read a region's backup back and check it (the I/O; the
checks are :mod:`mm.backup.verify_checks`).

Per partition (:func:`verify_partition`): load the committed catalog, read every
visible segment file in full (every row, tallied by
:class:`~mm.backup.verify_checks.RowTally`), rebuild the index from the files
(:func:`mm.backup.rebuild.rebuild_catalog`) and list leftover ``_tmp`` files.

The reading runs on the driver, one file after another: no Spark job is
started, so verifying a large backup takes the time of reading it through one
process (network and Parquet decoding bound). The files are streamed one row
group at a time, never held whole.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

import pyarrow.fs as pafs

from mm.backup.catalog import PartitionCatalog
from mm.backup.errors import BackupError
from mm.backup.inventory import stored_partitions
from mm.backup.layout import TMP_DIR, PartitionRef, is_temp_key
from mm.backup.rebuild import Rebuilt, rebuild_catalog
from mm.backup.segment import iter_segment, read_segment_meta
from mm.backup.settings import backup_settings
from mm.backup.storage import Storage, open_storage
from mm.backup.verify_checks import (
    PartitionFacts,
    PartitionVerdict,
    RowTally,
    SegmentScan,
    judge_partition,
)
from mm.config import MirrorConfig


def scan_segment(fs: pafs.FileSystem, path: str) -> SegmentScan:
    """Reads the file at ``path`` in full; never raises for a bad or missing file."""
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.NotFound:
        return SegmentScan(path, None)
    size = info.size or 0
    try:
        meta = read_segment_meta(fs, path)
    except (OSError, BackupError) as exc:
        return SegmentScan(path, size, error=str(exc))
    tally = RowTally(meta.start, meta.end)
    try:
        for r in iter_segment(fs, path):
            tally.add(r.offset, r.timestamp)
    except (OSError, BackupError, ValueError) as exc:
        # pyarrow's errors derive from these (ArrowInvalid is a ValueError)
        return SegmentScan(path, size, meta, f"after {tally.rows} rows: {exc}")
    return SegmentScan.of_tally(path, size, meta, tally)


def temp_files(fs: pafs.FileSystem, ref: PartitionRef) -> tuple[str, ...]:
    """Files under the partition's ``_tmp`` directories (segments and catalog versions)."""
    out = []
    for base in (ref.directory, f"{ref.catalog_dir}/{TMP_DIR}"):
        selector = pafs.FileSelector(base, recursive=True, allow_not_found=True)
        out += [i.path for i in fs.get_file_info(selector) if i.is_file and is_temp_key(i.path)]
    return tuple(sorted(out))


def verify_partition(storage: Storage, ref: PartitionRef) -> PartitionVerdict:
    fs = storage.fs
    version = 0
    catalog: PartitionCatalog | None = None
    catalog_error = None
    try:
        version = storage.catalogs.latest_version(ref)
        version, catalog = storage.catalogs.load(ref)
    except (OSError, BackupError) as exc:
        catalog_error = str(exc)
    scans = {}
    if catalog is not None:
        for e in catalog.visible():
            scans[e.key] = scan_segment(fs, f"{ref.prefix}/{e.key}")
    rebuilt: Rebuilt | None = None
    rebuild_error = None
    try:
        rebuilt = rebuild_catalog(fs, ref)
    except (OSError, BackupError) as exc:
        rebuild_error = str(exc)
    facts = PartitionFacts(
        ref.topic,
        ref.partition,
        version,
        catalog,
        catalog_error,
        scans,
        rebuilt,
        rebuild_error,
        temp_files(fs, ref),
    )
    return judge_partition(facts)


@dataclass
class VerifyReport:
    region: str
    path: str
    partitions: list[PartitionVerdict] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(v.ok for v in self.partitions)

    def totals(self) -> dict[str, int]:
        vs = self.partitions
        return {
            "partitions": len(vs),
            "segments": sum(v.segments for v in vs),
            "records": sum(v.records for v in vs),
            "bytes": sum(v.bytes_checked for v in vs),
            "problems": sum(len(v.problems) for v in vs),
            "warnings": sum(len(v.warnings) for v in vs),
            "in_flight": sum(len(v.in_flight) for v in vs),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "region": self.region,
            "path": self.path,
            "seconds": round(self.seconds, 3),
            "partitions": [
                {
                    "topic": v.topic,
                    "partition": v.partition,
                    "version": v.version,
                    "segments": v.segments,
                    "records": v.records,
                    "bytes": v.bytes_checked,
                    "first_offset": v.first_offset,
                    "last_offset": v.last_offset,
                    "ok": v.ok,
                    "problems": list(v.problems),
                    "warnings": list(v.warnings),
                    "in_flight": list(v.in_flight),
                }
                for v in self.partitions
            ],
            "totals": self.totals(),
        }


def verify_backup(cfg: MirrorConfig, topics: re.Pattern[str] | None = None) -> VerifyReport:
    """Every stored partition of the region (``topics``: full match) checked."""
    started = time.monotonic()
    settings = backup_settings(cfg)
    storage = open_storage(settings.path)
    report = VerifyReport(settings.region, settings.path)
    for ref in stored_partitions(storage.fs, storage.prefix, settings.region, topics):
        report.partitions.append(verify_partition(storage, ref))
    report.seconds = time.monotonic() - started
    return report
