"""Text and JSON for `mm backup compact` (pure)."""

from __future__ import annotations

import json

from mm.backup.compact_job import CompactReport
from mm.backup.render import _table, _time


def render_compact(report: CompactReport) -> str:
    verb = "would merge" if report.dry_run else "merged"
    lines = [
        f"compaction of level {report.level} into level {report.level + 1} at {report.path} "
        f"(region {report.region})" + (", dry run: nothing changed" if report.dry_run else ""),
    ]
    if report.retention_ms is None:
        lines.append("retention: none (backup.retention.ms not set): segments are kept")
    else:
        lines.append(
            f"retention: {report.retention_ms} ms: segments whose newest record is older than "
            f"{_time(report.now_ms - report.retention_ms)} are deleted (the newest is kept)"
        )
    lines.append("")
    rows = [
        (
            r.topic,
            r.partition,
            r.segments_merged,
            len(r.merges),
            r.level,
            r.records,
            r.bytes_before,
            "-" if report.dry_run else r.bytes_after,
            r.expired_segments,
        )
        for r in report.rows
    ]
    header = (
        "topic",
        "partition",
        "segments",
        "into",
        "from level",
        "records",
        "bytes before",
        "bytes after",
        "expired",
    )
    if rows:
        lines += _table(header, rows, right={1, 2, 3, 4, 5, 6, 7, 8})
    else:
        lines.append("(nothing to compact or expire)")
    t = report.totals()
    lines += [
        "",
        f"total: {t['partitions']} partitions, {t['segments_merged']} segments {verb} into "
        f"{t['merged_segments']} ({t['records']} records), {t['expired_segments']} segments "
        f"({t['expired_records']} records) expired, {t['deleted_files']} files "
        f"{'to delete' if report.dry_run else 'deleted'}, {t['failed']} failed "
        f"({report.seconds:.1f}s, {report.spark_tasks} Spark tasks)",
    ]
    for r in report.rows:
        for key in r.recovered:
            lines.append(f"recovered: aborted the unfinished compaction of a crashed run: {key}")
    for r in report.rows:
        if r.error is not None:
            lines.append(f"failed: {r.topic}[{r.partition}]: {r.error}")
    return "\n".join(lines)


def compact_json(report: CompactReport) -> str:
    return json.dumps(report.to_json(), indent=2)
