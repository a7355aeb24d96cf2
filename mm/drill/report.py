"""The drill's report: its model, JSON, a plain-text summary, a self-contained HTML page
with inline SVG charts, and the same charts as PNG files.

Times in the report are epoch seconds (the drill's wall clock); the charts draw them
relative to the earliest time in the series.
"""

from __future__ import annotations

import html
import io
import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import matplotlib
from matplotlib.figure import Figure
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from mm.drill.accounting import GroupFigures, LossEstimate, LossFigures, describe_estimate

FORMAT = 1  # version of the JSON document, bumped when a field changes meaning

LATENCY_PNG = "latency.png"
GROUPS_PNG = "groups.png"


@dataclass(frozen=True)
class LatencyStats:
    p50_ms: float
    p99_ms: float
    max_ms: float


def latency_stats(samples_ms: Iterable[float]) -> LatencyStats | None:
    """Nearest-rank percentiles (each one a measured sample); None without samples."""
    ordered = sorted(samples_ms)
    if not ordered:
        return None

    def rank(p: float) -> float:
        return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]

    return LatencyStats(rank(50), rank(99), ordered[-1])


@dataclass(frozen=True)
class GroupReport:
    figures: GroupFigures
    # From the disaster (or the start of a switchover or failback) to the first record
    # the group processed on the cluster it moved to, and to when it had caught up;
    # None: it never did within the drill.
    rto_first_s: float | None = None
    rto_caught_up_s: float | None = None


@dataclass(frozen=True)
class ProofRow:
    """One group partition of `mm failover`'s proof on the source."""

    group: str
    topic: str
    partition: int
    status: str  # proven, conservative, unprovable
    reason: str


@dataclass(frozen=True)
class ScenarioReport:
    name: str  # "switchover", "failover", "failback"
    passed: bool
    reasons: list[str]
    disaster_at: float | None  # None for a planned move
    moved_at: float | None  # when the groups were moved; None: never
    loss: LossFigures
    groups: list[GroupReport]
    quarantined_records: int | None = None  # failback: divergent records set aside on A
    replication_latency_ms: LatencyStats | None = None  # before the disaster
    # failback: offsets of A compared with B's copies below the failover point (all
    # partitions), and the partitions whose records there differ (A rewritten)
    content_compared: int | None = None
    content_differs: int | None = None
    # failover: its proof of the translations on A (None: not a failover); the message
    # says why nothing was proven (A down)
    proof: list[ProofRow] | None = None
    proof_message: str | None = None
    # failover: mm failover's own loss figure (None: not a failover, or no point)
    loss_estimate: LossEstimate | None = None

    def estimate_line(self) -> str | None:
        """The failover's figure and the measured loss, in the runbook's words."""
        if self.loss_estimate is None:
            return None
        return describe_estimate(self.loss_estimate, self.loss)


@dataclass(frozen=True)
class Series:
    """Time series for the charts."""

    latency_ms: list[tuple[float, float]] = field(default_factory=list)  # (t, ms)
    positions: dict[str, list[tuple[float, str, int]]] = field(default_factory=dict)
    events: list[tuple[float, str]] = field(default_factory=list)  # (t, "disaster")


@dataclass(frozen=True)
class DrillReport:
    started_at: str  # ISO 8601
    duration_s: float
    clusters: dict[str, str]  # alias -> bootstrap servers (never credentials)
    embedded: bool
    topic: str
    partitions: int
    note: str
    scenarios: list[ScenarioReport]
    series: Series
    disaster: str = ""  # how A failed, or that the failure was simulated
    # external clusters (-c): user alias -> the drill's alias for it
    aliases: dict[str, str] = field(default_factory=dict)
    # external clusters: "deleted", "not deleted" (with why) or "kept"
    # -> ["<alias> topic <name>", "<alias> group <name>", ...]
    cleanup: dict[str, list[str]] = field(default_factory=dict)


# ---- JSON -------------------------------------------------------------------------------


def to_json(report: DrillReport) -> str:
    return json.dumps({"format": FORMAT, **asdict(report)}, indent=2)


def _group(doc: dict[str, Any]) -> GroupReport:
    return GroupReport(GroupFigures(**doc["figures"]), doc["rto_first_s"], doc["rto_caught_up_s"])


def _scenario(doc: dict[str, Any]) -> ScenarioReport:
    latency = doc["replication_latency_ms"]
    return ScenarioReport(
        name=doc["name"],
        passed=doc["passed"],
        reasons=list(doc["reasons"]),
        disaster_at=doc["disaster_at"],
        moved_at=doc["moved_at"],
        loss=LossFigures(**doc["loss"]),
        groups=[_group(g) for g in doc["groups"]],
        quarantined_records=doc["quarantined_records"],
        replication_latency_ms=None if latency is None else LatencyStats(**latency),
        # absent from reports of earlier versions
        content_compared=doc.get("content_compared"),
        content_differs=doc.get("content_differs"),
        proof=None if doc.get("proof") is None else [ProofRow(**r) for r in doc["proof"]],
        proof_message=doc.get("proof_message"),
        loss_estimate=None
        if doc.get("loss_estimate") is None
        else LossEstimate(**doc["loss_estimate"]),
    )


def from_json(text: str) -> DrillReport:
    """The report :func:`to_json` wrote; raises ValueError naming what is wrong."""
    try:
        doc = json.loads(text)
        if doc.get("format") != FORMAT:
            raise ValueError(f"drill report format {doc.get('format')!r}, expected {FORMAT}")
        s = doc["series"]
        series = Series(
            latency_ms=[(t, ms) for t, ms in s["latency_ms"]],
            positions={
                g: [(t, cluster, pos) for t, cluster, pos in points]
                for g, points in s["positions"].items()
            },
            events=[(t, label) for t, label in s["events"]],
        )
        return DrillReport(
            started_at=doc["started_at"],
            duration_s=doc["duration_s"],
            clusters=dict(doc["clusters"]),
            embedded=doc["embedded"],
            topic=doc["topic"],
            partitions=doc["partitions"],
            note=doc["note"],
            scenarios=[_scenario(x) for x in doc["scenarios"]],
            series=series,
            # absent from reports written before -c existed
            disaster=doc.get("disaster", ""),
            aliases=dict(doc.get("aliases", {})),
            cleanup={k: list(v) for k, v in doc.get("cleanup", {}).items()},
        )
    except (KeyError, TypeError, AttributeError, json.JSONDecodeError) as e:
        raise ValueError(f"not a drill report: {type(e).__name__}: {e}") from e


# ---- the summary table ------------------------------------------------------------------

COLUMNS = (
    "scenario",
    "group",
    "lost (records / s)",
    "twice",
    "never",
    "RTO first",
    "RTO caught up",
    "quarantined",
    "result",
)


def _seconds(s: float | None) -> str:
    return "-" if s is None else f"{s:.1f} s"


def _rows(report: DrillReport) -> list[tuple[str, ...]]:
    """One row per scenario and group (a scenario without groups still has its row)."""
    rows: list[tuple[str, ...]] = []
    for sc in report.scenarios:
        lost = f"{sc.loss.lost_records} / {sc.loss.lost_seconds:.1f} s"
        quarantined = "-" if sc.quarantined_records is None else str(sc.quarantined_records)
        result = "PASS" if sc.passed else "FAIL"
        groups: list[GroupReport | None] = [*sc.groups] or [None]
        for g in groups:
            f = None if g is None else g.figures
            rows.append(
                (
                    sc.name,
                    "-" if f is None else f.group,
                    lost,
                    "-" if f is None else str(f.processed_twice),
                    "-" if f is None else str(f.never_processed),
                    _seconds(None if g is None else g.rto_first_s),
                    _seconds(None if g is None else g.rto_caught_up_s),
                    quarantined,
                    result,
                )
            )
    return rows


def summary_table(report: DrillReport) -> str:
    """The table as plain text, then why each failed scenario failed."""
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for c in COLUMNS:
        # right-aligned numbers, except the names and the verdict
        table.add_column(c, justify="left" if c in ("scenario", "group", "result") else "right")
    for row in _rows(report):
        table.add_row(*(Text(cell) for cell in row))  # Text: names are not rich markup
    console = Console(width=200, color_system=None, highlight=False)
    with console.capture() as capture:
        console.print(table)
    lines = [line.rstrip() for line in capture.get().splitlines()]
    for sc in report.scenarios:
        lines.extend(f"{sc.name}: {reason}" for reason in sc.reasons)
        estimate = sc.estimate_line()
        if estimate is not None:
            lines.append(f"{sc.name}: {estimate}")
    return "\n".join(lines).strip("\n") + "\n"


# ---- charts -----------------------------------------------------------------------------

EVENT_COLOURS = {
    "disaster": "#d62728",
    "failover": "#ff7f0e",
    "switchover": "#1f77b4",
    "failback": "#2ca02c",
}


def _origin(series: Series) -> float:
    times = [t for t, _ in series.latency_ms] + [t for t, _ in series.events]
    times += [t for points in series.positions.values() for t, _, _ in points]
    return min(times, default=0.0)


def _plain(text: str) -> str:
    """Text matplotlib draws as is: a ``$`` (legal in a group id) would start math."""
    return text.replace("$", r"\$")


def _mark_events(ax: Any, events: Sequence[tuple[float, str]], origin: float) -> None:
    """A labelled vertical line at each event, labels at the top of the plot."""
    for t, label in events:
        colour = EVENT_COLOURS.get((label.split() or [""])[0].lower(), "#7f7f7f")
        ax.axvline(t - origin, color=colour, linestyle="--", linewidth=1.2)
        ax.annotate(
            _plain(label),
            xy=(t - origin, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(3, -4),
            textcoords="offset points",
            rotation=90,
            va="top",
            ha="left",
            fontsize=9,
            color=colour,
            # legible over the lines it crosses
            bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1},
        )


def _empty(ax: Any, what: str) -> None:
    ax.text(0.5, 0.5, f"no {what}", transform=ax.transAxes, ha="center", va="center")


def latency_figure(report: DrillReport) -> Figure:
    s = report.series
    origin = _origin(s)
    # Figure, not pyplot: no global backend or figure registry, so rendering is the
    # non-interactive Agg (PNG) and SVG backends whatever the process set up.
    fig = Figure(figsize=(11, 3.8), layout="constrained")
    ax = fig.subplots()
    if s.latency_ms:
        ax.plot(
            [t - origin for t, _ in s.latency_ms],
            [ms for _, ms in s.latency_ms],
            color="#444444",
            linewidth=1.2,
            marker=".",
            markersize=3,
        )
    else:
        _empty(ax, "latency samples")
    _mark_events(ax, s.events, origin)
    ax.set_title(_plain(f"Replication latency {' -> '.join(report.clusters)} ({report.topic})"))
    ax.set_xlabel("seconds since the first sample")
    ax.set_ylabel("replication latency (ms)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    return fig


def groups_figure(report: DrillReport) -> Figure:
    s = report.series
    origin = _origin(s)
    fig = Figure(figsize=(11, 4.6), layout="constrained")
    ax = fig.subplots()
    clusters = sorted({c for points in s.positions.values() for _, c, _ in points})
    styles = dict(zip(clusters, ["-", "--", ":", "-."] * len(clusters), strict=False))
    colours = matplotlib.color_sequences["tab10"]
    for i, (group, points) in enumerate(sorted(s.positions.items())):
        for cluster in clusters:
            on = sorted((t, pos) for t, c, pos in points if c == cluster)
            if on:
                ax.plot(
                    [t - origin for t, _ in on],
                    [pos for _, pos in on],
                    drawstyle="steps-post",
                    color=colours[i % len(colours)],
                    linestyle=styles[cluster],
                    linewidth=1.6,
                    label=_plain(f"{group} on {cluster}"),
                )
    if not s.positions:
        _empty(ax, "group positions")
    _mark_events(ax, s.events, origin)
    ax.set_title("Consumer group positions")
    ax.set_xlabel("seconds since the first sample")
    ax.set_ylabel("committed position (records)")
    ax.grid(True, alpha=0.3)
    if s.positions:
        ax.legend(loc="upper left", fontsize="small", ncols=2)
    return fig


_ID = re.compile(r'\bid="([^"]+)"')
_REF = re.compile(r'(href="#|url\(#)([^")]+)')


def _inline_svg(fig: Figure, prefix: str) -> str:
    """The figure as an ``<svg>`` element for an HTML page.

    Matplotlib numbers glyphs and clip paths per figure, so two charts on one page
    would share ids: each chart's ids get ``prefix``. The XML prolog, DOCTYPE and
    namespace declarations go (the HTML parser puts ``<svg>`` in the SVG namespace),
    which leaves the page without a single URL.
    """
    buf = io.StringIO()
    # Deterministic (the same report renders the same page): fixed salt for the ids;
    # glyphs drawn as paths, so the page needs no font.
    with matplotlib.rc_context({"svg.hashsalt": "mm-drill", "svg.fonttype": "path"}):
        # None drops each metadata entry, Creator's and Type's URLs among them
        fig.savefig(
            buf,
            format="svg",
            metadata={"Creator": None, "Date": None, "Format": None, "Type": None},
        )
    svg = buf.getvalue()
    svg = svg[svg.index("<svg") :]
    # Matplotlib repeats each text in a comment; the drawing is what matters, and a
    # group or topic name then cannot bring a URL into the page (it escapes "--").
    svg = re.sub(r"<!--.*?-->\n?", "", svg, flags=re.DOTALL)
    svg = re.sub(r'\sxmlns(:xlink)?="[^"]*"', "", svg)
    svg = svg.replace("xlink:href=", "href=")
    svg = _ID.sub(lambda m: f'id="{prefix}-{m.group(1)}"', svg)
    return _REF.sub(lambda m: f"{m.group(1)}{prefix}-{m.group(2)}", svg)


# ---- HTML -------------------------------------------------------------------------------

_CSS = """
body { font-family: sans-serif; margin: 24px; color: #222; max-width: 1140px; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 18px; margin-top: 28px; }
.meta { color: #555; }
.note { background: #f6f6f6; border-left: 4px solid #999; padding: 8px 12px; }
table { border-collapse: collapse; font-size: 14px; }
th, td { border: 1px solid #ccc; padding: 4px 10px; }
th { background: #eee; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.pass { color: #1a7f37; font-weight: bold; }
.fail { color: #c62828; font-weight: bold; }
.chart svg { width: 100%; height: auto; }
ul.reasons { color: #c62828; }
"""


def _clock(t: float | None, origin: float) -> str:
    if t is None:
        return "-"
    when = datetime.fromtimestamp(t, UTC).strftime("%H:%M:%S.%f")[:-3]
    return f"{when} UTC (+{t - origin:.1f} s)"


def _summary_html(report: DrillReport) -> str:
    e = html.escape
    head = "".join(f"<th>{e(c)}</th>" for c in COLUMNS)
    body = []
    for row in _rows(report):
        cells = []
        for c, v in zip(COLUMNS, row, strict=True):
            if c == "result":
                cells.append(f'<td class="{v.lower()}">{e(v)}</td>')
            elif c in ("scenario", "group"):
                cells.append(f"<td>{e(v)}</td>")
            else:
                cells.append(f'<td class="num">{e(v)}</td>')
        body.append(f"<tr>{''.join(cells)}</tr>")
    return f'<table class="summary"><tr>{head}</tr>{"".join(body)}</table>'


_PROOF_STATUSES = ("proven", "conservative", "unprovable")


def _scenario_html(sc: ScenarioReport, origin: float) -> str:
    e = html.escape
    verdict = "PASS" if sc.passed else "FAIL"
    loss = sc.loss
    items = [
        "planned: no disaster"
        if sc.disaster_at is None
        else f"disaster: {e(_clock(sc.disaster_at, origin))}",
        f"groups moved: {e(_clock(sc.moved_at, origin))}",
        f"acknowledged on the source: {loss.acked_records}, on the target: "
        f"{loss.mirrored_records}, lost: {loss.lost_records} ({loss.lost_seconds:.1f} s)",
    ]
    estimate = sc.estimate_line()
    if estimate is not None:
        items.append(e(estimate))
    if sc.quarantined_records is not None:
        items.append(f"divergent records quarantined: {sc.quarantined_records}")
    if sc.proof is not None:
        counts = {k: sum(1 for r in sc.proof if r.status == k) for k in _PROOF_STATUSES}
        shown = ", ".join(f"{n} {k}" for k, n in counts.items())
        items.append(
            f"translations proven on A by content: {shown}"
            if sc.proof_message is None
            else f"translations: {e(sc.proof_message)}"
        )
        items += [
            f"{e(r.group)} {e(r.topic)}[{r.partition}]: {r.status}: {e(r.reason)}"
            for r in sc.proof[:50]
        ]
    if sc.content_compared is not None:
        items.append(
            f"A's records below the failover point compared with B's copies: "
            f"{sc.content_compared} offsets, {sc.content_differs or 0} partition(s) differing"
        )
    lat = sc.replication_latency_ms
    if lat is not None:
        items.append(
            f"replication latency before: p50 {lat.p50_ms:.0f} ms, p99 {lat.p99_ms:.0f} ms, "
            f"max {lat.max_ms:.0f} ms"
        )
    for g in sc.groups:
        f = g.figures
        items.append(
            f"group {e(f.group)}: expected {f.expected}, processed {f.processed} "
            f"({f.processed_before} before the move, {f.processed_after} after)"
        )
    reasons = "".join(f"<li>{e(r)}</li>" for r in sc.reasons)
    return (
        f'<h3>{e(sc.name)} <span class="{verdict.lower()}">{verdict}</span></h3>'
        f"<ul>{''.join(f'<li>{i}</li>' for i in items)}</ul>"
        + (f'<ul class="reasons">{reasons}</ul>' if reasons else "")
    )


def render_html(report: DrillReport) -> str:
    """One self-contained page: no script, stylesheet, font or image from elsewhere."""
    e = html.escape
    origin = _origin(report.series)
    clusters = ", ".join(
        f"{e(alias)} = {e(bootstrap)}"
        + (f" (as {e(report.aliases[alias])})" if alias in report.aliases else "")
        for alias, bootstrap in report.clusters.items()
    )
    disaster = f"<p>disaster: {e(report.disaster)}</p>" if report.disaster else ""
    cleanup = "".join(
        f"<h3>{e(what)}</h3><ul>{''.join(f'<li>{e(x)}</li>' for x in items)}</ul>"
        for what, items in report.cleanup.items()
    )
    cleanup = f"<h2>Clean-up</h2>{cleanup}" if cleanup else ""
    verdicts = ", ".join(
        f'{e(sc.name)} <span class="{"pass" if sc.passed else "fail"}">'
        f"{'PASS' if sc.passed else 'FAIL'}</span>"
        for sc in report.scenarios
    )
    scenarios = "".join(_scenario_html(sc, origin) for sc in report.scenarios)
    latency = _inline_svg(latency_figure(report), "latency")
    groups = _inline_svg(groups_figure(report), "groups")
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>mm drill report {e(report.started_at)}</title>
<style>{_CSS}</style>
</head>
<body>
<h1>mm drill report</h1>
<p class="meta">started {e(report.started_at)}, {report.duration_s:.1f} s;
clusters {clusters} ({"embedded" if report.embedded else "external"});
topic {e(report.topic)}, {report.partitions} partitions</p>
<p>{verdicts}</p>
{disaster}
<p class="note">{e(report.note)}</p>
<h2>Summary</h2>
{_summary_html(report)}
<h2>Scenarios</h2>
{scenarios}
<h2>Replication latency</h2>
<figure class="chart">{latency}</figure>
<h2>Consumer groups</h2>
<figure class="chart">{groups}</figure>
{cleanup}
</body>
</html>
"""


def write_html(report: DrillReport, path: Path) -> Path:
    path.write_text(render_html(report), encoding="utf-8")
    return path


def write_pngs(report: DrillReport, directory: Path) -> list[Path]:
    """The charts of the HTML page as ``latency.png`` and ``groups.png``."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, fig in ((LATENCY_PNG, latency_figure(report)), (GROUPS_PNG, groups_figure(report))):
        path = directory / name
        fig.savefig(path, format="png", dpi=100)
        written.append(path)
    return written
