"""docs/grafana/wanrl-s3.json: a dashboard whose every query names metrics the product exports.

The names come from a registry holding every metrics object the product makes
(worker, relay, trainer, staleness filter), never from a list written here; so a
metric renamed in the code and not in the dashboard (or the other way round)
fails this test.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from wanrl_s3 import RelayMetrics, StalenessMetrics, TrainerMetrics, WorkerMetrics

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "docs" / "grafana" / "wanrl-s3.json"
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


def exported() -> dict[str, set[str]]:
    """Family name -> the sample names it exports, from every metrics object the product makes."""
    registry = CollectorRegistry()
    for made in (WorkerMetrics, RelayMetrics, TrainerMetrics, StalenessMetrics):
        made(registry)
    return {
        family.name: {family.name + suffix for suffix in SUFFIXES[family.type]}
        for family in registry.collect()
    }


def panels(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in node.get("panels", ()):
        yield panel
        yield from panels(panel)


def queries() -> list[tuple[str, str]]:
    board = json.loads(DASHBOARD.read_text())
    return [
        (panel["title"], target["expr"])
        for panel in panels(board)
        for target in panel.get("targets", ())
    ]


def named_in(expr: str) -> set[str]:
    return set(re.findall(r"\bwanrl_s3_[a-z0-9_]+", expr))


def test_every_metric_a_panel_queries_is_exported() -> None:
    samples = set().union(*exported().values())
    found = queries()
    assert len(found) >= 20
    unknown = sorted(
        {(title, name) for title, expr in found for name in named_in(expr) if name not in samples}
    )
    assert unknown == [], f"panels query metrics nobody exports: {unknown}"


def test_every_exported_metric_has_a_panel() -> None:
    queried = set().union(*(named_in(expr) for _, expr in queries()))
    missing = sorted(family for family, names in exported().items() if not names & queried)
    assert missing == [], f"exported metrics no panel shows: {missing}"


def test_the_dashboard_asks_for_its_prometheus_datasource() -> None:
    board = json.loads(DASHBOARD.read_text())
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    ids = [p["id"] for p in panels(board)]
    assert len(ids) == len(set(ids))
    for panel in panels(board):
        assert {"h", "w", "x", "y"} <= set(panel["gridPos"])
        if panel["type"] != "row":
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
            assert panel["targets"] and panel["description"]
    for title, expr in queries():
        assert expr.count("(") == expr.count(")"), title
        if "histogram_quantile" in expr:
            assert "_bucket" in expr and "le" in expr, title
