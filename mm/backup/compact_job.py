"""`mm backup compact` on the driver: which partitions have work, the Spark job, the report.

Every partition with a catalog under the region is looked at (also topics no
longer selected by ``backup.topics``: their backup still ages and expires). The
driver reads the catalogs only and plans each partition
(:func:`mm.backup.compaction_plan.plan_partition_work`); partitions with work
get one Spark Python task each (:func:`mm.backup.compaction.compact_partition`),
which loads the catalog again and does the work: records never leave the
Python workers. ``--dry-run`` reports the plan without starting Spark.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mm.backup.compaction import (
    CompactContext,
    CompactTask,
    MergeResult,
    PartitionCompaction,
    compact_partition,
    limits_of,
)
from mm.backup.compaction_plan import PartitionWork, plan_partition_work
from mm.backup.job import catalog_refs
from mm.backup.settings import backup_settings
from mm.backup.storage import open_storage
from mm.config import MirrorConfig
from mm.spark_tasks import map_tasks, run_python_tasks


@dataclass
class CompactReport:
    region: str
    path: str
    level: int  # merged from level to level + 1
    dry_run: bool
    now_ms: int
    retention_ms: int | None
    checked: int = 0  # partitions with a catalog
    rows: list[PartitionCompaction] = field(default_factory=list)  # partitions with work
    spark_tasks: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(r.error is None for r in self.rows)

    def totals(self) -> dict[str, int]:
        return {
            "partitions": self.checked,
            "merged_segments": sum(len(r.merges) for r in self.rows),
            "segments_merged": sum(r.segments_merged for r in self.rows),
            "records": sum(r.records for r in self.rows),
            "bytes_before": sum(r.bytes_before for r in self.rows),
            "bytes_after": sum(r.bytes_after for r in self.rows),
            "expired_segments": sum(r.expired_segments for r in self.rows),
            "expired_records": sum(r.expired_records for r in self.rows),
            "deleted_files": sum(r.deleted_files for r in self.rows),
            "failed": sum(1 for r in self.rows if r.error is not None),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "region": self.region,
            "path": self.path,
            "from_level": self.level,
            "to_level": self.level + 1,
            "dry_run": self.dry_run,
            "now_ms": self.now_ms,
            "retention_ms": self.retention_ms,
            "seconds": round(self.seconds, 3),
            "spark_tasks": self.spark_tasks,
            "partitions": [r.to_json() for r in self.rows],
            "totals": self.totals(),
        }


def planned(topic: str, partition: int, level: int, work: PartitionWork) -> PartitionCompaction:
    """What a partition's task would do (a dry run's row): sizes after are unknown (0)."""
    return PartitionCompaction(
        topic,
        partition,
        level,
        merges=[
            MergeResult(r.start, r.end, len(r.segments), r.record_count, r.size_bytes, 0)
            for r in work.runs
        ],
        expired_segments=len(work.expiring),
        expired_records=sum(e.record_count for e in work.expiring),
        expired_bytes=sum(e.size_bytes for e in work.expiring),
        deleted_files=len(work.deleting) + sum(len(r.segments) for r in work.runs),
        recovered=list(work.crashed),
    )


def run_compact(
    cfg: MirrorConfig,
    *,
    level: int = 0,
    dry_run: bool = False,
    now_ms: int | None = None,
    spark_factory: Callable[[], Any] | None = None,
) -> CompactReport:
    started = time.monotonic()
    settings = backup_settings(cfg)
    storage = open_storage(settings.path)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    report = CompactReport(
        settings.region, settings.path, level, dry_run, now, settings.retention_ms
    )
    limits = limits_of(settings)
    tasks: list[CompactTask] = []
    refs = catalog_refs(storage, settings.region)
    report.checked = len(refs)
    for ref in refs:
        _version, catalog = storage.catalogs.load(ref)
        work = plan_partition_work(catalog, level, limits, now, settings.retention_ms)
        if not work.has_work:
            continue
        if dry_run:
            report.rows.append(planned(ref.topic, ref.partition, level, work))
        else:
            tasks.append(CompactTask(ref.topic, ref.partition))
    if tasks:
        ctx = CompactContext(settings.to_dict(), level, now)
        report.rows = _run_tasks(cfg, ctx, tasks, spark_factory)
        report.spark_tasks = len(tasks)
    report.seconds = time.monotonic() - started
    return report


def _run_tasks(
    cfg: MirrorConfig,
    ctx: CompactContext,
    tasks: list[CompactTask],
    spark_factory: Callable[[], Any] | None,
) -> list[PartitionCompaction]:
    return run_python_tasks(
        cfg,
        "mm-backup-compact",
        functools.partial(compact_partition, ctx.to_dict()),
        tasks,
        spark_factory,
        "what partitions committed before it stands, the next run finishes the rest",
    )


def run_partitions(
    spark: Any, ctx: CompactContext, tasks: list[CompactTask]
) -> list[PartitionCompaction]:
    """Each partition in its own Spark task; the summaries, in task order."""
    return map_tasks(spark, functools.partial(compact_partition, ctx.to_dict()), tasks)
