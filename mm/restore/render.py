"""Text and JSON for `mm restore` (pure)."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from mm.backup.render import _table
from mm.restore.job import PartitionRow, RestoreReport


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z"


def _note(r: PartitionRow, dry_run: bool) -> str:
    s = r.summary
    if r.error:
        return f"failed: {r.error}"
    if s is not None and s.error:
        return f"failed: {s.error}"
    if s is not None and s.until_stop is not None:
        return f"stopped at offset {s.until_stop} (after --until)"
    if dry_run:
        return "nothing to restore" if r.start >= r.end else "would restore"
    return ""


def render_restore(report: RestoreReport) -> str:
    o = report.options
    mode = " (dry run: nothing written)" if o.dry_run else ""
    lines = [
        f"restore of region {report.region} from {report.path} to cluster {report.target}"
        f"{mode}" + (f", up to {_when(o.until_ms)}" if o.until_ms is not None else ""),
        "",
    ]
    rows = []
    for r in report.rows:
        s = r.summary
        rows.append(
            (
                r.topic,
                r.partition,
                r.target_topic,
                r.start,
                s.position if s is not None and s.position >= 0 else r.start,
                r.end,
                s.records if s else 0,
                s.transactions if s else 0,
                _note(r, o.dry_run),
            )
        )
    header = ("topic", "partition", "target", "from", "to", "backup end", "records", "txns", "")
    lines += _table(header, rows, right={1, 3, 4, 5, 6, 7}) if rows else ["(nothing backed up)"]
    failed = sum(1 for r in report.rows if not r.ok)
    records = sum(r.summary.records for r in report.rows if r.summary)
    lines += [
        "",
        f"total: {len(report.rows)} partitions, {records} records restored, {failed} failed, "
        f"{len(report.created_topics)} topics {'to create' if o.dry_run else 'created'} "
        f"({report.seconds:.1f}s)",
    ]
    if report.created_topics:
        lines.append("topics: " + ", ".join(report.created_topics))
    if report.groups_snapshot_ms is None:
        lines.append(
            "groups: no saved group offsets" + (" at or before --until" if o.until_ms else "")
        )
    else:
        lines += ["", f"groups (offsets saved at {_when(report.groups_snapshot_ms)}):"]
        grows = [
            (
                g.group,
                m.target_topic,
                m.partition,
                m.original,
                "-" if m.target_offset is None else m.target_offset,
                g.status,
            )
            for g in report.groups
            for m in g.moves
        ]
        head = ("group", "topic", "partition", "backup offset", "target offset", "")
        lines += _table(head, grows, right={2, 3, 4}) if grows else ["(no group selected)"]
    return "\n".join(lines)


def restore_json(report: RestoreReport) -> str:
    doc: dict[str, Any] = {
        "region": report.region,
        "path": report.path,
        "target": report.target,
        "options": asdict(report.options),
        "ok": report.ok,
        "seconds": round(report.seconds, 3),
        "created_topics": report.created_topics,
        "partitions": [
            {
                "topic": r.topic,
                "partition": r.partition,
                "target_topic": r.target_topic,
                "backed_up_records": r.backed_up,
                "start": r.start,
                "backup_end": r.end,
                "summary": asdict(r.summary) if r.summary else None,
                "error": r.error,
            }
            for r in report.rows
        ],
        "groups_snapshot_ms": report.groups_snapshot_ms,
        "groups": [
            {"group": g.group, "status": g.status, "moves": [asdict(m) for m in g.moves]}
            for g in report.groups
        ],
    }
    return json.dumps(doc, indent=1)
