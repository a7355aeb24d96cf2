"""Human-readable `mm status` output (rich) and the JSON document."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from mm.status.model import Alert, FlowStatus, StatusReport


def duration(ms: int | None) -> str:
    """``1234`` -> ``1.2 s``; minutes, hours and days beyond that; ``-`` for None."""
    if ms is None:
        return "-"
    s = ms / 1000
    if s < 60:
        return f"{s:.1f} s"
    if s < 3600:
        return f"{s / 60:.1f} min"
    if s < 86400:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} d"


def to_json(report: StatusReport) -> str:
    return json.dumps(report.to_json(), indent=2, sort_keys=False)


def _flow_header(f: FlowStatus, alerts: list[Alert]) -> Text:
    text = Text()
    text.append(f"{f.flow}", style="bold")
    if f.error is not None:
        text.append("  UNAVAILABLE", style="bold red")
        return text
    how = {"heartbeat": "heartbeats", "record_age": "record age"}.get(f.latency_method or "", "")
    text.append("  replication latency ")
    style = "red" if any(a.kind == "replication_latency" for a in alerts) else "green"
    text.append(duration(f.latency_ms), style=style)
    if how:
        text.append(f" ({how})", style="dim")
    if f.clock_skew_ms > 0:  # the latency above was clamped: say why it may read low
        text.append(f"  clock skew {f.clock_skew_ms / 1000:.1f}s ahead", style="bold yellow")
    text.append(f"  lag {f.total_lag} records")
    if f.offset_syncs_age_ms is not None:
        text.append(f"  offset syncs {duration(f.offset_syncs_age_ms)} ago", style="dim")
    elif f.offset_syncs_topic:
        text.append("  no offset syncs yet", style="dim")
    if f.inexact_translations:
        text.append(f"  {f.inexact_translations} conservative translation(s)", style="yellow")
    if f.translation_holes:
        text.append(f"  {f.translation_holes} history hole(s)", style="yellow")
    text.append(
        "  OK" if not alerts else f"  {len(alerts)} ALERT(S)",
        style="green" if not alerts else "bold red",
    )
    return text


def _partitions_table(f: FlowStatus, alerts: list[Alert]) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    for col, justify in (
        ("source partition", "left"),
        ("target", "left"),
        ("log start..end", "right"),
        ("mirrored to", "right"),
        ("lag", "right"),
        ("record age", "right"),
        ("newest src/tgt", "right"),
        ("deleted unmirrored", "right"),
    ):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    lagging = {a.message.split(":", 1)[0] for a in alerts if a.kind == "record_lag"}
    for p in sorted(f.partitions, key=lambda p: (p.topic, p.partition)):
        where = f"{p.topic}[{p.partition}]"
        lag_style = "red" if where in lagging else ("yellow" if p.lag else "")
        lost = (
            Text(str(p.truncated), style="bold red")
            if p.truncated
            else Text("RESET", style="bold red")
            if p.source_reset
            else Text("0")
        )
        table.add_row(
            where,
            p.target_topic,
            f"{p.log_start}..{p.log_end}",
            "-" if p.position is None else str(p.position),
            Text(str(p.lag), style=lag_style),
            duration(p.record_age_ms),
            f"{duration(p.source_newest_age_ms)} / {duration(p.target_newest_age_ms)}",
            lost,
        )
    return table


def _groups_table(f: FlowStatus) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    cols = ["group", "partitions", "newest checkpoint", "moved since", "checkpoint latency"]
    report = f.inexact_translations is not None
    if report:
        cols.append("conservative")
    for col in cols:
        table.add_column(col, justify="left" if col == "group" else "right")
    for g in f.groups:
        row: list[str | Text] = [
            g.group,
            str(g.partitions),
            f"{duration(g.newest_age_ms)} ago",
            str(g.stale_partitions),
            duration(g.latency_ms),
        ]
        if report:
            row.append(
                Text(str(g.inexact_partitions), style="yellow" if g.inexact_partitions else "")
            )
        table.add_row(*row)
    return table


def _run_lines(run: dict[str, Any]) -> list[RenderableType]:
    head = Text("mm run", style="bold")
    head.append(f"  pid {run['pid']}  state file {run['path']}", style="dim")
    if run["stale"]:
        head.append("  NOT UPDATED", style="bold red")
    table = Table(box=None, pad_edge=False, header_style="bold")
    for col in ("job", "flows", "state", "restarts", "last error"):
        table.add_column(col)
    styles = {"running": "green", "backoff": "bold red", "starting": "yellow", "stopped": "dim"}
    for j in run["jobs"]:
        table.add_row(
            j["job"],
            ", ".join(j["flows"]),
            Text(j["state"], style=styles.get(j["state"], "")),
            str(j["restarts"]),
            j["last_error"] or "-",
        )
    return [head, table]


def render(report: StatusReport) -> RenderableType:
    parts: list[RenderableType] = []
    when = datetime.fromtimestamp(report.collected_at_ms / 1000, UTC).isoformat(timespec="seconds")
    parts.append(Text(f"mm status at {when}", style="dim"))
    for f in report.flows:
        alerts = [a for a in report.alerts if a.flow == f.flow]
        parts.append(Text(""))
        parts.append(_flow_header(f, alerts))
        if f.error is not None:
            parts.append(Text(f"  {f.error}", style="red"))
            continue
        if f.partitions:
            parts.append(_partitions_table(f, alerts))
        else:
            parts.append(Text("  no source topic selected by the flow", style="yellow"))
        if not f.checkpoints_enabled:
            parts.append(
                Text("  checkpoints disabled (emit.checkpoints.enabled = false)", style="dim")
            )
        elif f.groups:
            parts.append(Text(f"  checkpoints in {f.checkpoints_topic}:"))
            parts.append(_groups_table(f))
        elif f.checkpoints_topic:
            state = "has no checkpoints" if f.checkpoints_present else "does not exist"
            parts.append(Text(f"  {f.checkpoints_topic} {state}", style="dim"))
        for note in f.notes:
            parts.append(Text(f"  note: {note}", style="yellow"))
    if report.run is not None:
        parts.append(Text(""))
        parts.extend(_run_lines(report.run))
    parts.append(Text(""))
    if report.alerts:
        parts.append(Text(f"{len(report.alerts)} alert(s):", style="bold red"))
        for a in report.alerts:
            parts.append(Text(f"  [{a.kind}] {a.flow}: {a.message}", style="red"))
    else:
        t = report.thresholds
        parts.append(
            Text(
                f"no alerts (latency <= {t.replication_latency_ms} ms, lag <= {t.record_lag}, "
                f"stale checkpoints <= {t.checkpoint_age_seconds} s)",
                style="green",
            )
        )
    return Group(*parts)


def make_console(**kwargs: Any) -> Console:
    """A console for stdout; wide enough for the tables when stdout is not a terminal."""
    console = Console(**kwargs)
    if not console.is_terminal and "width" not in kwargs:
        console = Console(width=160, **kwargs)
    return console
