"""Text and JSON for `mm backup --once` and `mm backup ls` (pure)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from mm.backup.job import BackupReport
from mm.backup.listing import PartitionListing


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]], right: set[int]) -> list[str]:
    cells = [[str(c) for c in header], *[[str(c) for c in r] for r in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    out = []
    for row in cells:
        parts = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        out.append("  ".join(parts).rstrip())
    return out


def render_once(report: BackupReport) -> str:
    lines = [
        f"backup of cluster {report.cluster} to {report.path} (region {report.region}, "
        f"committed filter: {report.committed_filter})",
        "",
    ]
    rows = []
    for r in report.rows:
        s = r.summary
        rows.append(
            (
                r.plan.topic,
                r.plan.partition,
                r.plan.start,
                r.reached,
                s.records if s else 0,
                s.segments if s else 0,
                s.lost if s else 0,
            )
        )
    header = ("topic", "partition", "from", "to", "records", "segments", "lost")
    lines += _table(header, rows, right={1, 2, 3, 4, 5, 6}) if rows else ["(no topic selected)"]
    t = report.totals()
    lines += [
        "",
        f"total: {t['partitions']} partitions, {t['records']} records in {t['segments']} new "
        f"segments, {t['lost']} offsets lost before they were backed up, {t['failed']} failed "
        f"({report.seconds:.1f}s, {report.spark_tasks} Spark tasks)",
    ]
    for r in report.rows:
        s = r.summary
        if s is not None and s.lost_unrecorded:
            lines.append(
                f"lost, not yet recorded: {r.plan.topic}[{r.plan.partition}]: {s.lost_unrecorded} "
                "offsets deleted by retention with no record after them yet (recorded by the "
                "next run that finds one)"
            )
        if s is not None and s.aborted_dropped:
            lines.append(
                f"note: {r.plan.topic}[{r.plan.partition}]: {s.aborted_dropped} records of "
                "aborted transactions the broker served were left out (read_committed)"
            )
    for key in report.recovered:
        lines.append(f"recovered: aborted an unfinished copy of a crashed run: {key}")
    lines.append(f"group offsets: {report.group_offsets} saved to {report.groups_key}")
    for g, err in sorted(report.group_errors.items()):
        lines.append(f"failed: group {g}: {err}")
    for r in report.rows:
        if r.error is not None:
            lines.append(f"failed: {r.plan.topic}[{r.plan.partition}]: {r.error}")
    return "\n".join(lines)


def _time(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def render_ls(region: str, path: str, listings: Sequence[PartitionListing]) -> str:
    lines = [f"backup at {path}, region {region}", ""]
    if not listings:
        return "\n".join([*lines, "(no backed-up partition)"])
    rows = [
        (
            x.topic,
            x.partition,
            "-" if x.first_offset is None else x.first_offset,
            "-" if x.last_offset is None else x.last_offset,
            _time(x.min_timestamp),
            _time(x.max_timestamp),
            x.records,
            x.size_bytes,
            x.segments,
            ",".join(str(level) for level in x.levels) or "-",
            x.lost,
        )
        for x in listings
    ]
    header = (
        "topic",
        "partition",
        "first",
        "last",
        "oldest record",
        "newest record",
        "records",
        "bytes",
        "segments",
        "levels",
        "lost",
    )
    lines += _table(header, rows, right={1, 2, 3, 6, 7, 8, 10})
    for x in listings:
        if x.in_flight:
            lines.append(
                f"in flight: {x.topic}[{x.partition}]: {x.in_flight} copies started and not "
                "finished (a running backup, or a crashed one the next run cleans up)"
            )
    return "\n".join(lines)


def ls_json(region: str, path: str, listings: Sequence[PartitionListing]) -> str:
    doc = {"region": region, "path": path, "partitions": [x.to_json() for x in listings]}
    return json.dumps(doc, indent=2)


def once_json(report: BackupReport) -> str:
    return json.dumps(report.to_json(), indent=2)
