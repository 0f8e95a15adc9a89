"""The console's analytics: figures from index entries (pure), and the page that draws
them with the vendored Chart.js (through the gateway's app, ``console_fixtures``)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from sagalog.contracts.catalog import SchemaCatalog
from sagalog.flows.model import Flow
from sagalog.flows.states import WorkflowState
from sagalog.services.gateway.console.analytics import (
    MINUTE_MS,
    analyse,
    durations_chart,
    percentile,
)
from sagalog.services.gateway.read_model import ReadModel
from sagalog.services.gateway.workflow_index import Facets

from .console_fixtures import NOW, ConsoleRig, console_rig
from .gateway_fixtures import at_gate, reference_flow

STATIC = Path(__file__).resolve().parents[2] / "src/sagalog/services/gateway/console/static"
NOW_MS = int(NOW.timestamp() * 1000)


def facets(
    state: WorkflowState,
    started_ago_ms: int,
    lasted_ms: int,
    *,
    flow: str = "procurement",
    version: int = 1,
) -> Facets:
    started = NOW_MS - started_ago_ms
    return Facets(
        state=state,
        flow=flow,
        flow_version=version,
        started_ms=started,
        entered_ms=started + lasted_ms,
    )


def test_percentiles_are_nearest_rank() -> None:
    ordered = list(range(1, 101))
    assert [percentile(ordered, f) for f in (0.5, 0.95, 0.99)] == [50, 95, 99]
    assert percentile([7], 0.99) == 7 and percentile([], 0.5) is None


def test_throughput_and_durations_per_flow_version() -> None:
    done, running = WorkflowState.COMPLETED, WorkflowState.RUNNING
    newest_first = [
        facets(running, 1 * MINUTE_MS, 0),
        facets(done, 5 * MINUTE_MS, 2 * MINUTE_MS),  # started and ended within the hour
        facets(done, 30 * MINUTE_MS, 10 * MINUTE_MS, version=2),
        facets(WorkflowState.COMPENSATED, 3 * 3_600_000, 60 * MINUTE_MS),  # ended 2 h ago
        facets(done, 20 * 3_600_000, 4 * 3_600_000),
        facets(done, 30 * 3_600_000, MINUTE_MS),  # outside a day's window: not read
    ]
    figures = analyse(iter(newest_first), now_ms=NOW_MS, window_ms=24 * 3_600_000)
    assert figures.read == 5 and not figures.capped
    assert figures.throughput.started_total == 3
    assert figures.throughput.ended_total == 2
    assert figures.throughput.started[-2] == 1  # a minute ago, in the minute before this one
    v1, v2 = figures.durations
    assert (v1.flow, v1.version, v1.ended, v1.completed, v1.in_flight) == (
        "procurement",
        1,
        3,
        2,
        1,
    )
    assert (v1.p50_ms, v1.p95_ms, v1.max_ms) == (60 * MINUTE_MS, 4 * 3_600_000, 4 * 3_600_000)
    assert (v2.version, v2.ended, v2.p50_ms) == (2, 1, 10 * MINUTE_MS)
    chart = durations_chart(figures.durations)
    assert chart["data"]["labels"] == ["procurement v1", "procurement v2"]
    assert chart["data"]["datasets"][0]["data"] == [1.0, 0.17]  # p50 in hours: p99 is 4 h
    assert chart["options"]["scales"]["y"]["title"]["text"] == "hours"
    quick = durations_chart([replace(v2, p50_ms=3_000, p95_ms=9_000, p99_ms=9_000)])
    assert quick["data"]["datasets"][0]["data"] == [3.0]  # seconds, not 0.05 minutes
    assert quick["options"]["scales"]["y"]["title"]["text"] == "seconds"


def test_the_budget_stops_the_read_and_says_how_far_back() -> None:
    many = (facets(WorkflowState.COMPLETED, n * 1000, 500) for n in range(1, 10_000))
    figures = analyse(many, now_ms=NOW_MS, window_ms=24 * 3_600_000, budget=100)
    assert figures.read == 100 and figures.capped
    assert figures.oldest_ms == NOW_MS - 100_000


# -- the page --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def flow(repo_root: Path, catalog: SchemaCatalog) -> Flow:
    return reference_flow(repo_root, catalog)


@pytest.fixture
def rig(tmp_path: Path, flow: Flow) -> Iterator[ConsoleRig]:
    model = ReadModel(tmp_path / "rm")
    rig = console_rig(model, flow)
    template = at_gate(flow, "wf-0")
    recent = []
    for n, lasted_min in enumerate((3, 5, 8, 40)):
        started = NOW_MS - (n + 1) * 10 * MINUTE_MS - lasted_min * MINUTE_MS
        recent.append(
            template.model_copy(
                update={
                    "workflow_id": f"wf-{n}",
                    "state": WorkflowState.COMPLETED,
                    "current": None,
                    "gate": None,
                    "timers": (),
                    "started_at_ms": started,
                    "entered_current_state_at_ms": started + lasted_min * MINUTE_MS,
                }
            )
        )
    waiting = template.model_copy(
        update={"workflow_id": "wf-<script>", "started_at_ms": NOW_MS - 2 * MINUTE_MS}
    )
    rig.put(*recent, waiting)
    assert rig.sign_in().status_code == 303
    yield rig
    model.close()


def test_the_page_shows_the_figures_and_draws_them_from_the_same_numbers(rig: ConsoleRig) -> None:
    page = rig.client.get("/console/analytics")
    assert page.status_code == 200
    row = re.search(r'<tr data-flow="procurement" data-version="1">(.*?)</tr>', page.text, re.S)
    assert row, page.text
    cells = re.findall(r"<td>([^<]*)</td>", row.group(1))
    assert cells == ["procurement v1", "4", "4", "1", "5m", "40m", "40m", "40m"]
    assert "4 started, 4 ended" in page.text  # wf-3 started 80 minutes ago
    chart = re.search(r'id="durations-chart" data-chart="([^"]+)"', page.text)
    assert chart
    config = json.loads(chart.group(1).replace("&#34;", '"').replace("&quot;", '"'))
    assert config["data"]["datasets"][0]["data"] == [5.0]  # minutes: the p99 is 40 minutes
    scripts = re.findall(r"<script[^>]*>", page.text)
    assert '<script src="/console/static/chart.umd.min.js" defer>' in scripts
    assert all('src="/console/static/' in s for s in scripts)  # no inline script


def test_a_bad_window_is_a_400_that_says_what_it_takes(rig: ConsoleRig) -> None:
    for window in ("soon", "0s", "1000d"):
        page = rig.client.get("/console/analytics", params={"window": window})
        assert page.status_code == 400 and "window=" in page.text, window
    assert rig.client.get("/console/analytics", params={"window": "1h"}).status_code == 200


def test_chart_js_is_served_from_the_package_as_its_readme_says(rig: ConsoleRig) -> None:
    reply = rig.client.get("/console/static/chart.umd.min.js")
    assert reply.status_code == 200 and "javascript" in reply.headers["content-type"]
    readme = (STATIC / "README.md").read_text()
    assert hashlib.sha256(reply.content).hexdigest() in readme and "4.6.2" in readme
    assert b"new Function" not in reply.content and b"eval(" not in reply.content
    assert rig.client.get("/console/static/charts.js").status_code == 200


def test_the_overview_says_the_last_hours_throughput(rig: ConsoleRig) -> None:
    page = rig.client.get("/console")
    assert page.status_code == 200
    card = re.search(r'id="throughput"[^>]*>(.*?)</a>', page.text, re.S)
    assert card, page.text
    # wf-3 ended 40 minutes ago but started 80 minutes ago: not among the last hour's.
    assert "<strong>4</strong> started in the last hour, 3 of them ended" in card.group(1)
