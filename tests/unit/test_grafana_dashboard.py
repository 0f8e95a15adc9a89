"""The Grafana dashboard (``deploy/grafana``) reads only what the services export, and
shows all of it. The queries run against a live Prometheus in
``tests/integration/test_observability.py``; here their names and syntax."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

import external_tools
from sagalog import metrics
from sagalog.flows.states import TERMINAL_STATES

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "sagalog-dashboard.json"
NAME = re.compile(r"\bsagalog_[a-z0-9_]+")


def dashboard_queries() -> list[str]:
    """Every PromQL expression of the dashboard's panels."""
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [target["expr"] for panel in panels for target in panel["targets"]]


def test_every_query_names_only_metrics_the_services_export() -> None:
    named = {name for expr in dashboard_queries() for name in NAME.findall(expr)}
    assert named, "no sagalog metric in the dashboard"
    assert named <= metrics.exported_names(), sorted(named - metrics.exported_names())


def test_every_metric_the_services_export_is_on_the_dashboard() -> None:
    named = {name for expr in dashboard_queries() for name in NAME.findall(expr)}
    families = {family.exported for family in metrics.FAMILIES}
    families |= {f"{counter._name}_total" for counter in metrics.COUNTERS}
    histograms = {histogram._name for histogram in metrics.HISTOGRAMS}
    shown = {n for n in named if n in families} | {
        n.rsplit("_", 1)[0] for n in named if n.endswith(("_bucket", "_sum", "_count"))
    }
    assert families | histograms <= shown, sorted((families | histograms) - shown)


def test_the_ended_and_in_flight_panels_name_exactly_the_terminal_states() -> None:
    ended = next(q for q in dashboard_queries() if "to_state=~" in q)
    states = set(re.search(r'to_state=~"([^"]+)"', ended).group(1).split("|"))  # type: ignore[union-attr]
    assert states == {str(state) for state in TERMINAL_STATES}
    in_flight = next(q for q in dashboard_queries() if "state!~" in q)
    states = set(re.search(r'state!~"([^"]+)"', in_flight).group(1).split("|"))  # type: ignore[union-attr]
    assert states == {str(state) for state in TERMINAL_STATES}


@pytest.mark.tool("promtool")
def test_every_query_is_valid_promql(tmp_path: Path) -> None:
    promtool = external_tools.require("promtool")
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [
                    {"record": f"dashboard:query_{n}", "expr": expr}
                    for n, expr in enumerate(dashboard_queries())
                ],
            }
        ]
    }
    path = tmp_path / "rules.yml"
    path.write_text(json.dumps(rules))  # YAML is a JSON superset
    checked = subprocess.run(
        [promtool, "check", "rules", str(path)], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_observability_page_lists_every_exported_metric() -> None:
    page = (DASHBOARD.parents[2] / "docs" / "observability.md").read_text()
    listed = set(NAME.findall(page))
    families = {family.exported for family in metrics.FAMILIES}
    families |= {f"{counter._name}_total" for counter in metrics.COUNTERS}
    families |= {histogram._name for histogram in metrics.HISTOGRAMS}
    assert families <= listed, sorted(families - listed)
