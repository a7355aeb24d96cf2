"""deploy/grafana-dashboard.json stays in step with mm/metrics.py METRICS and
docs/metrics.md: every metric a panel queries exists and is documented, every
label it uses exists on that metric, and every metric has a panel."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mm.metrics import METRICS

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana-dashboard.json"
SPECS = {m.name: m for m in METRICS}
# what a panel must use so the dashboard's variables apply
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}

_METRIC = re.compile(r"\bmm_[a-z0-9_]+\b")
_SELECTOR = re.compile(r"\b(mm_[a-z0-9_]+)\s*\{([^}]*)\}")
_MATCHER = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)")
_GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
_LEGEND = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


def _dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for p in panels:
        yield p
        yield from _panels(p.get("panels", []))  # collapsed rows hold their panels


def _queries() -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(panel title, panel, target) for every query of the dashboard."""
    return [
        (p.get("title", "?"), p, t)
        for p in _panels(_dashboard()["panels"])
        if p.get("type") != "row"
        for t in p.get("targets", [])
    ]


def test_the_dashboard_has_a_datasource_and_a_flow_variable() -> None:
    variables = {v["name"]: v for v in _dashboard()["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    flow = variables["flow"]
    assert flow["type"] == "query" and flow["datasource"] == DATASOURCE
    query = flow["query"]["query"] if isinstance(flow["query"], dict) else flow["query"]
    assert "flow)" in query
    for name in _METRIC.findall(query):
        assert name in SPECS and "flow" in SPECS[name].labels, query


def test_every_query_names_known_documented_metrics_and_their_labels() -> None:
    doc = (ROOT / "docs" / "metrics.md").read_text()
    queries = _queries()
    assert len(queries) >= 15
    for title, panel, target in queries:
        expr = target["expr"]
        where = f"panel {title!r}: {expr}"
        assert panel["datasource"] == DATASOURCE, f"{where}: datasource is not $datasource"
        assert target["datasource"] == DATASOURCE, f"{where}: datasource is not $datasource"
        names = set(_METRIC.findall(expr))
        assert names, f"{where}: queries no mm_ metric"
        for name in names:
            assert name in SPECS, (
                f"{where}: {name} is not in mm/metrics.py METRICS (renamed or removed? "
                "fix the panel)"
            )
            assert f"`{name}`" in doc, f"{where}: {name} is not documented in docs/metrics.md"
        for name, matchers in _SELECTOR.findall(expr):
            for label in _MATCHER.findall(matchers):
                assert label in SPECS[name].labels, (
                    f"{where}: label {label!r} is not a label of {name} {SPECS[name].labels}"
                )
        # a label kept by an aggregation or shown in the legend must exist on every
        # metric of the expression (else the series has no such label)
        common = set.intersection(*(set(SPECS[n].labels) for n in names))
        grouped = [g.strip() for by in _GROUPING.findall(expr) for g in by.split(",") if g]
        for label in grouped:
            assert label in common, f"{where}: aggregates by {label!r}, not a label of {names}"
        shown = set(grouped) if grouped else common
        for label in _LEGEND.findall(target.get("legendFormat", "")):
            assert label in shown, f"{where}: legend shows {{{{{label}}}}}, not a result label"
        # the flow variable applies to every flow-labelled series
        for name, matchers in _SELECTOR.findall(expr):
            if "flow" in SPECS[name].labels:
                assert 'flow=~"$flow"' in matchers, f"{where}: {name} not filtered by $flow"


def test_every_metric_has_a_panel() -> None:
    used = {name for _title, _panel, t in _queries() for name in _METRIC.findall(t["expr"])}
    # every status, mirror and mm run metric is one an operator needs to see
    important = [m for m in METRICS if m.origin in ("status", "mirror", "run")]
    assert len(important) == len(METRICS), "a METRICS entry of a new origin: decide here"
    missing = [m.name for m in important if m.name not in used]
    assert not missing, (
        f"no panel of deploy/grafana-dashboard.json shows {', '.join(missing)} "
        f"(mm/metrics.py METRICS, origin {sorted({SPECS[n].origin for n in missing})}): add a "
        'panel for each (datasource ${datasource}; flow=~"$flow" where the metric has a '
        "flow label), and document it in docs/metrics.md"
    )
