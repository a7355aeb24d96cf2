"""Text and JSON for `mm backup verify` and `mm backup rebuild-index` (pure)."""

from __future__ import annotations

import json

from mm.backup.reindex import COMMITTED, DRY_RUN, FAILED, REFUSED, UNCHANGED, ReindexReport
from mm.backup.render import _table
from mm.backup.verify import VerifyReport


def _dash(x: int | None) -> str | int:
    return "-" if x is None else x


def render_verify(report: VerifyReport) -> str:
    lines = [f"verify of the backup at {report.path}, region {report.region}", ""]
    rows = [
        (
            v.topic,
            v.partition,
            v.version,
            _dash(v.first_offset),
            _dash(v.last_offset),
            v.segments,
            v.records,
            v.bytes_checked,
            len(v.problems),
            len(v.warnings),
            "ok" if v.ok else "PROBLEMS",
        )
        for v in report.partitions
    ]
    header = (
        "topic",
        "partition",
        "version",
        "first",
        "last",
        "segments",
        "records",
        "bytes",
        "problems",
        "warnings",
        "status",
    )
    right = {1, 2, 3, 4, 5, 6, 7, 8, 9}
    lines += _table(header, rows, right) if rows else ["(no backed-up partition)"]
    t = report.totals()
    lines += [
        "",
        f"total: {t['partitions']} partitions, {t['segments']} segments, {t['records']} records, "
        f"{t['bytes']} bytes checked, {t['problems']} problems, {t['warnings']} warnings "
        f"({report.seconds:.1f}s)",
    ]
    for v in report.partitions:
        where = f"{v.topic}[{v.partition}]"
        lines += [f"problem: {where}: {p}" for p in v.problems]
        lines += [f"warning: {where}: {w}" for w in v.warnings]
        lines += [
            f"in flight: {where}: {k} (a copy started and not finished: a running backup, or "
            "a crashed one the next run cleans up)"
            for k in v.in_flight
        ]
    lines.append("consistent" if report.ok else "NOT consistent: see the problems above")
    return "\n".join(lines)


def verify_json(report: VerifyReport) -> str:
    return json.dumps(report.to_json(), indent=2)


def render_reindex(report: ReindexReport) -> str:
    what = "dry run, nothing committed" if report.dry_run else "versioned commits"
    lines = [f"rebuild-index of the backup at {report.path}, region {report.region} ({what})", ""]
    rows = []
    for r in report.partitions:
        d = r.diff
        rows.append(
            (
                r.topic,
                r.partition,
                r.before_version,
                _dash(r.after_version),
                r.segments,
                _dash(r.next_offset),
                len(d.added) if d else "-",
                len(d.removed) if d else "-",
                len(d.changed) if d else "-",
                len(r.shadowed),
                r.status,
            )
        )
    header = (
        "topic",
        "partition",
        "version",
        "new version",
        "segments",
        "next offset",
        "added",
        "removed",
        "changed",
        "shadowed",
        "status",
    )
    lines += _table(header, rows, set(range(1, 10))) if rows else ["(no backed-up partition)"]
    lines.append("")
    for r in report.partitions:
        where = f"{r.topic}[{r.partition}]"
        if r.message:
            lines.append(f"{'note' if r.ok else r.status}: {where}: {r.message}")
        if r.diff:
            lines += [f"added: {where}: {k}" for k in r.diff.added]
            lines += [f"removed: {where}: {k}" for k in r.diff.removed]
            lines += [f"changed: {where}: {c.describe()}" for c in r.diff.changed]
        lines += [
            f"shadowed: {where}: {k} (a higher level covers it: its file can be deleted)"
            for k in r.shadowed
        ]
    counts = {s: sum(1 for r in report.partitions if r.status == s) for s in _STATUSES}
    lines.append(
        "total: "
        + ", ".join(f"{n} {s}" for s, n in counts.items() if n)
        + f" ({report.seconds:.1f}s)"
        if report.partitions
        else f"total: nothing to rebuild ({report.seconds:.1f}s)"
    )
    return "\n".join(lines)


_STATUSES = (COMMITTED, DRY_RUN, UNCHANGED, REFUSED, FAILED)


def reindex_json(report: ReindexReport) -> str:
    return json.dumps(report.to_json(), indent=2)
