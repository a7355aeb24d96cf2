"""The drill report: JSON round trip, summary table, self-contained HTML with inline SVG
charts, PNG charts, and a headless Chromium screenshot of the page."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from matplotlib import image

from mm.drill.accounting import (
    LossEstimate,
    RecordId,
    group_figures,
    judge_failover,
    judge_switchover,
    loss_figures,
    lost_ids,
)
from mm.drill.report import (
    DrillReport,
    GroupReport,
    ScenarioReport,
    Series,
    from_json,
    latency_stats,
    render_html,
    summary_table,
    to_json,
    write_html,
    write_pngs,
)

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[3]
SCREENSHOT = REPO / "scripts" / "drill_screenshot.py"
T0 = 1_750_000_000.0
GROUPS = ("keeping-up", "lagging", "stopped")


def _ids(n: int) -> list[RecordId]:
    return [("plain", i) for i in range(n)]


def build_report() -> DrillReport:
    """A switchover that passes and a failover that repeats more than it may."""
    # switchover at T0+40: 400 records, all mirrored; groups moved with no repeat
    acked = {r: T0 + 1 + r[1] * 0.09 for r in _ids(400)}
    loss = loss_figures(acked, set(acked), T0 + 40)
    switch_groups = [
        group_figures("keeping-up", _ids(400)[:300], _ids(400)[300:], acked),
        group_figures("lagging", _ids(400)[:200], _ids(400)[200:], acked),
        group_figures("stopped", _ids(200), [], _ids(200)),
    ]
    switchover = ScenarioReport(
        name="switchover",
        passed=judge_switchover(loss, switch_groups).passed,
        reasons=list(judge_switchover(loss, switch_groups).reasons),
        disaster_at=None,
        moved_at=T0 + 41.5,
        loss=loss,
        groups=[GroupReport(g, 1.2 + i, 3.5 + 2 * i) for i, g in enumerate(switch_groups)],
        replication_latency_ms=latency_stats(200 + 10 * (i % 7) for i in range(50)),
    )
    # failover: A killed at T0+90 with the last 7 acked records not mirrored
    acked2 = {r: T0 + 50 + r[1] * 0.1 for r in _ids(400)}
    on_b = set(_ids(393))
    loss2 = loss_figures(acked2, on_b, T0 + 90)
    lost = lost_ids(acked2, on_b)
    fail_groups = [
        group_figures("keeping-up", _ids(395), _ids(393)[380:], acked2, lost),
        group_figures("lagging", _ids(250), _ids(393)[240:], acked2, lost),
        group_figures("stopped", _ids(200), [], _ids(200), lost),
    ]
    verdict = judge_failover(fail_groups, {"keeping-up": 13, "lagging": 5, "stopped": 0})
    failover = ScenarioReport(
        name="failover",
        passed=verdict.passed,
        reasons=list(verdict.reasons),
        disaster_at=T0 + 90,
        moved_at=T0 + 93.25,
        loss=loss2,
        groups=[
            GroupReport(fail_groups[0], 4.1, 6.0),
            GroupReport(fail_groups[1], 4.4, 15.5),
            GroupReport(fail_groups[2], None, None),
        ],
        quarantined_records=None,
        replication_latency_ms=latency_stats(180 + 40 * math.sin(i) for i in range(60)),
        loss_estimate=LossEstimate(3, "lower_bound", 0.6, "mirror"),
    )
    latency = [(T0 + i, 180 + 60 * abs(math.sin(i / 6)) + (i % 5) * 7) for i in range(100)]
    positions: dict[str, list[tuple[float, str, int]]] = {}
    for k, (group, rate) in enumerate(zip(GROUPS, (10, 6, 4), strict=True)):
        on_a = [(T0 + t, "A", min(t * rate, 400 if k < 2 else 200)) for t in range(0, 90, 3)]
        moved = [(T0 + 93 + t, "B", 380 - 20 * k + t * rate) for t in range(0, 7 + 3 * k, 2)]
        positions[group] = on_a + (moved if k < 2 else [])
    events = [(T0 + 40, "switchover"), (T0 + 90, "disaster"), (T0 + 93.25, "failover")]
    return DrillReport(
        started_at="2025-06-15T15:06:40+00:00",
        duration_s=102.5,
        clusters={"A": "127.0.0.1:19092", "B": "127.0.0.1:29092"},
        embedded=True,
        topic="drill-orders",
        partitions=6,
        note=(
            "figures are what Apache Kafka's read_committed consumers would see; "
            "the embedded broker serves aborted transactions' records <sic> & more"
        ),
        scenarios=[switchover, failover],
        series=Series(latency_ms=latency, positions=positions, events=events),
    )


def test_the_example_report_is_what_the_drill_would_judge() -> None:
    sw, fo = build_report().scenarios
    assert sw.passed and not sw.reasons
    assert (fo.loss.lost_records, fo.loss.lost_seconds) == (7, pytest.approx(0.7))
    # keeping-up: checkpoint bound 13 respected; lagging: 10 repeats allowed 5
    assert not fo.passed
    assert fo.reasons == ["group lagging processed 10 records twice; allowed 5"]


def test_json_round_trip_is_exact() -> None:
    report = build_report()
    text = to_json(report)
    assert from_json(text) == report
    assert to_json(from_json(text)) == text
    assert '"format": 1' in text


def test_from_json_rejects_what_is_not_a_report() -> None:
    with pytest.raises(ValueError, match="not a drill report"):
        from_json('{"format": 1, "started_at": "x"}')
    with pytest.raises(ValueError, match="format 7"):
        from_json('{"format": 7}')
    with pytest.raises(ValueError, match="not a drill report"):
        from_json("[1, 2]")


def test_latency_stats_are_nearest_rank() -> None:
    stats = latency_stats(float(ms) for ms in range(100, 0, -1))
    assert stats is not None and (stats.p50_ms, stats.p99_ms, stats.max_ms) == (50, 99, 100)
    assert latency_stats([]) is None


def test_summary_table_has_a_row_per_scenario_and_group_and_the_reasons() -> None:
    text = summary_table(build_report())
    rows = [
        line.split()
        for line in text.splitlines()
        if line.split()[:1] in (["switchover"], ["failover"])
    ]
    assert [(r[0], r[1]) for r in rows if len(r) > 2 and r[1] in GROUPS] == [
        (s, g) for s in ("switchover", "failover") for g in GROUPS
    ]
    assert "scenario" in text and "RTO caught up" in text
    failover_lagging = next(r for r in rows if r[:2] == ["failover", "lagging"])
    # lost 7 / 0.7 s, twice 10, never 0, RTO 4.4 s / 15.5 s, not quarantined, FAIL
    assert failover_lagging[2:] == [
        "7",
        "/",
        "0.7",
        "s",
        "10",
        "0",
        "4.4",
        "s",
        "15.5",
        "s",
        "-",
        "FAIL",
    ]
    assert "failover: group lagging processed 10 records twice; allowed 5" in text
    # mm failover's own figure, in its words, next to what the drill measured
    assert (
        "failover: failover point: loss: at least 3 offsets not mirrored (3 known), a lower "
        "bound: A was last seen 0.6 s before the failover (by the mirror); records A "
        "acknowledged after that are not counted; measured: 7 records acknowledged on A "
        "never on B" in text
    ), text


def test_a_scenario_without_groups_keeps_its_row() -> None:
    report = build_report()
    bare = dataclasses.replace(
        report.scenarios[0], name="failback", groups=[], quarantined_records=3
    )
    text = summary_table(dataclasses.replace(report, scenarios=[bare]))
    assert re.search(r"failback\s+-\s+0 / 0.0 s\s+-\s+-\s+-\s+-\s+3\s+PASS", text)


def test_html_is_self_contained_with_two_svg_charts_and_the_table(tmp_path: Path) -> None:
    report = build_report()
    path = write_html(report, tmp_path / "drill.html")
    page = path.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    # nothing fetched from elsewhere: not a single URL, and no script at all
    assert "http://" not in page and "https://" not in page
    assert not re.search(r"""(src|href)\s*=\s*["'](?!#)""", page)
    assert "<script" not in page and "<link" not in page and "<img" not in page
    assert page.count("<svg") == 2
    assert render_html(report) == page  # the same report renders the same page
    assert '<table class="summary">' in page and page.count("<tr>") == 1 + 6
    assert ">FAIL</td>" in page and ">PASS</td>" in page
    # text escaped, not interpreted
    assert "records &lt;sic&gt; &amp; more" in page and "<sic>" not in page
    assert "group lagging processed 10 records twice; allowed 5" in page
    # each chart's ids are its own: every internal reference resolves within its chart
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids))
    for ref in re.findall(r'(?:href="#|url\(#)([^")]+)', page):
        assert ref in ids


def test_html_escapes_a_hostile_group_name(tmp_path: Path) -> None:
    report = build_report()
    sc = report.scenarios[0]
    evil = dataclasses.replace(sc.groups[0].figures, group='<img src="http://x/$a$">')
    hostile = dataclasses.replace(sc, groups=[dataclasses.replace(sc.groups[0], figures=evil)])
    positions = {evil.group: report.series.positions["lagging"]}
    page = render_html(
        dataclasses.replace(
            report,
            scenarios=[hostile],
            series=dataclasses.replace(report.series, positions=positions),
        )
    )
    assert "<img" not in page and "&lt;img src=&quot;http://x/$a$&quot;&gt;" in page


def test_pngs_are_the_two_charts(tmp_path: Path) -> None:
    paths = write_pngs(build_report(), tmp_path / "charts")
    assert [p.name for p in paths] == ["latency.png", "groups.png"]
    for p in paths:
        pixels = image.imread(p)
        assert pixels.shape[0] > 300 and pixels.shape[1] > 1000
        assert pixels.std() > 0


def test_empty_series_still_render(tmp_path: Path) -> None:
    report = dataclasses.replace(build_report(), series=Series())
    assert render_html(report).count("<svg") == 2
    assert len(write_pngs(report, tmp_path)) == 2


def _chromium() -> str | None:
    explicit = os.environ.get("CHROMIUM")
    if explicit:
        return shutil.which(explicit)
    return "/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None


@pytest.mark.skipif(_chromium() is None, reason="Chromium is not installed (or $CHROMIUM unset)")
def test_chromium_screenshot_shows_the_charts(tmp_path: Path) -> None:
    html = write_html(build_report(), tmp_path / "drill.html")
    out = tmp_path / "drill.png"
    done = subprocess.run(
        [sys.executable, str(SCREENSHOT), str(html), str(out), "--timeout", "120"],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    assert out.is_file() and out.stat().st_size > 20_000
    pixels = image.imread(out)
    assert pixels.shape[:2] == (2000, 1200)
    assert pixels.std() > 0
    colours = {tuple(p) for p in (pixels[:, :, :3] * 255).astype("uint8").reshape(-1, 3)[::7]}
    assert len(colours) > 200  # antialiased lines and text in several colours, not a blank page


def test_screenshot_script_says_when_chromium_is_missing(tmp_path: Path) -> None:
    html = write_html(build_report(), tmp_path / "drill.html")
    done = subprocess.run(
        [sys.executable, str(SCREENSHOT), str(html), str(tmp_path / "x.png")],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "CHROMIUM": str(tmp_path / "no-such-chromium")},
    )
    assert done.returncode == 2
    assert "Chromium not found" in done.stderr
    assert not (tmp_path / "x.png").exists()


def test_the_failback_content_check_is_in_the_report_and_its_page(tmp_path: Path) -> None:
    report = build_report()
    failback = dataclasses.replace(
        report.scenarios[0],
        name="failback",
        quarantined_records=3,
        content_compared=2_000,
        content_differs=1,
    )
    both = dataclasses.replace(report, scenarios=[report.scenarios[0], failback])
    assert from_json(to_json(both)) == both
    page = write_html(both, tmp_path / "drill.html").read_text(encoding="utf-8")
    assert (
        "A's records below the failover point compared with B's copies: "
        "2000 offsets, 1 partition(s) differing" in page
    )
    # a report written before the check existed still reads
    doc = json.loads(to_json(report))
    for sc in doc["scenarios"]:
        del sc["content_compared"], sc["content_differs"]
    assert from_json(json.dumps(doc)) == report
