"""`mm verify` output: one table row per partition, then what is wrong and what could
not be compared; or the report as JSON."""

from __future__ import annotations

import json

from mm.verify.compare import PartitionReport
from mm.verify.job import VerifyReport

HEADER = (
    "topic",
    "part",
    "compared",
    "position/end",
    "first difference (source -> target)",
    "syncs",
    "translations",
    "checkpoints e/c/a",
    "result",
)


def to_json(report: VerifyReport) -> str:
    return json.dumps(report.to_json(), indent=2)


def _row(p: PartitionReport) -> tuple[str, ...]:
    d = p.difference
    if d is None:
        first = "-"
    else:
        src = "-" if d.source_offset is None else str(d.source_offset)
        tgt = "-" if d.target_offset is None else str(d.target_offset)
        what = d.kind + (f" ({', '.join(d.fields)})" if d.fields else "")
        first = f"{src} -> {tgt}: {what}"
    s, t, c = p.syncs, p.translations, p.checkpoints
    pos = "-" if p.position is None else str(p.position)
    return (
        p.topic,
        str(p.partition),
        f"{p.matched}/{p.source_records - p.not_yet_mirrored}",
        f"{pos}/{p.source_end}",
        first,
        f"{s.checked}" + (f" ({s.false} false)" if s.false else ""),
        f"{t.checked}"
        + (f" ({t.wrong} wrong)" if t.wrong else "")
        + (f" ({t.conservative} conservative)" if t.conservative else ""),
        f"{c.exact}/{c.conservative}/{c.ahead}",
        "ok" if p.ok else "DIFFERS",
    )


def render(report: VerifyReport) -> str:
    lines: list[str] = []
    for flow in report.flows:
        lines.append(
            f"flow {flow.flow}: offset syncs {flow.offset_syncs}, checkpoints "
            f"{flow.checkpoints_topic}"
        )
        rows = [HEADER, *(_row(p) for p in flow.partitions)]
        widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER))]
        for r in rows:
            cells = "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True))
            lines.append(("  " + cells).rstrip())
        for msg in flow.problems:
            lines.append(f"  problem: {msg}")
        for msg in flow.not_compared:
            lines.append(f"  not compared: {msg}")
        for p in flow.partitions:
            name = f"{p.topic}[{p.partition}]"
            lines += [f"  {name}: {m}" for m in p.problems]
            if p.difference is not None:
                lines.append(
                    f"  {name}: {p.missing_total} records missing on target, "
                    f"{p.extra_total} extra on target in all"
                )
            lines += [f"  {name}: not compared: {m}" for m in p.not_compared]
            lines += [f"  {name}: note: {m}" for m in p.notes]
        lines.append("")
    parts = [p for f in report.flows for p in f.partitions]
    records = sum(p.matched for p in parts)
    verdict = (
        "VERIFIED: every compared record, position, sync, translation and checkpoint is exact"
        if report.ok
        else "NOT VERIFIED: see the problems above"
    )
    lines.append(
        f"{verdict} ({len(parts)} partitions, {records} records matched, "
        f"{report.spark_tasks} Spark tasks, {report.seconds:.1f}s)"
    )
    lines.append(
        "compared: key, value, headers (order, duplicates), timestamp of each record as "
        "Apache Kafka's read_committed consumer sees it, on both sides"
    )
    return "\n".join(lines)
