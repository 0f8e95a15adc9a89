"""Live updates: the read model's broadcast of changes, and ``/console/live`` that carries
them to a page as server-sent events (read through TestClient's streaming response),
and what a page does with them: the regions it fetches again, the inbox row that shows
its workflow moving on. No Kafka: the rig writes the read model as the follower would."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sagalog.contracts.catalog import SchemaCatalog
from sagalog.flows.model import Flow
from sagalog.flows.states import WorkflowState
from sagalog.services.gateway.changes import MAX_IDS, Change, ChangeBroadcast
from sagalog.services.gateway.console.live import change_message, change_stream
from sagalog.services.gateway.console.routes import ConsoleOptions
from sagalog.services.gateway.read_model import ReadModel, TransitionEntry
from sagalog.tracker.record import WorkflowRecord

from .console_fixtures import SESSION_S, ConsoleRig, console_rig, csrf_of
from .gateway_fixtures import BEFORE_GATE, at_gate, reference_flow, tracked

STATIC = Path(__file__).resolve().parents[2] / "src/sagalog/services/gateway/console/static"


# -- the broadcast ------------------------------------------------------------------------


def test_a_workflows_subscriber_hears_that_workflow_only_and_an_overview_hears_all() -> None:
    async def scenario() -> tuple[Change | None, Change | None, Change | None]:
        broadcast = ChangeBroadcast()
        with (
            broadcast.subscribe(workflow_id="wf-1") as one,
            broadcast.subscribe() as everyone,
            broadcast.subscribe(workflow_id="wf-9") as other,
        ):
            broadcast.publish(["wf-1", "wf-2"])
            await asyncio.sleep(0)  # the delivery is scheduled on this loop
            return (
                await one.next(timeout_s=1),
                await everyone.next(timeout_s=1),
                await other.next(timeout_s=0.05),
            )

    one, everyone, other = asyncio.run(scenario())
    assert one == Change(frozenset({"wf-1"}))
    assert everyone == Change(frozenset({"wf-1", "wf-2"}))
    assert other is None  # nothing it shows changed: it is not woken


def test_a_burst_becomes_one_change_and_too_many_become_everything() -> None:
    async def scenario() -> tuple[Change | None, Change | None]:
        broadcast = ChangeBroadcast()
        with broadcast.subscribe() as everyone:
            for n in range(3):
                broadcast.publish([f"wf-{n}"])
            await asyncio.sleep(0)
            burst = await everyone.next(timeout_s=1)
            for n in range(MAX_IDS + 1):
                broadcast.publish([f"many-{n}"])
            await asyncio.sleep(0)
            return burst, await everyone.next(timeout_s=1)

    burst, flood = asyncio.run(scenario())
    assert burst == Change(frozenset({"wf-0", "wf-1", "wf-2"}))
    assert flood == Change(frozenset(), everything=True)
    assert flood.touches("anything")


def test_a_change_published_from_another_thread_wakes_the_subscriber_and_closing_forgets_it() -> (
    None
):
    broadcast = ChangeBroadcast()

    async def scenario() -> Change | None:
        with broadcast.subscribe(workflow_id="wf-1") as one:
            assert broadcast.subscribers == 1
            # The follower's thread writes, then publishes: no poll on this side.
            threading.Timer(0.05, broadcast.publish, args=(["wf-1"],)).start()
            return await one.next(timeout_s=5)

    assert asyncio.run(scenario()) == Change(frozenset({"wf-1"}))
    assert broadcast.subscribers == 0
    broadcast.publish(["wf-1"])  # nobody listens: nothing scheduled, nothing raised


def test_a_read_model_batch_publishes_the_workflows_it_wrote_after_writing_them(
    tmp_path: Path, flow: Flow
) -> None:
    model = ReadModel(tmp_path / "rm")
    seen: list[tuple[frozenset[str], bool]] = []

    def publish(workflow_ids: Iterator[str]) -> None:
        ids = frozenset(workflow_ids)
        seen.append((ids, all(model.record(w) is not None for w in ids)))

    model.changes.publish = publish  # type: ignore[method-assign,assignment]
    try:
        record = at_gate(flow, "wf-1")
        batch = model.batch()
        batch.put_record("wf-1", json.dumps(record.to_stored()).encode())
        entry = TransitionEntry(
            event_id="t-1",
            flow=flow.name,
            flow_version=flow.version,
            from_state="running",
            to_state="pending_approval",
            step=None,
            from_step=None,
            cause_event_id="e-1",
            time_in_previous_state_ms=5,
            at_ms=1,
        )
        batch.add_transition("wf-2", entry, partition=0, offset=7)
        batch.commit()
        model.batch().commit()  # an empty batch tells nobody anything new
    finally:
        model.close()
    assert seen[0] == (frozenset({"wf-1", "wf-2"}), False)  # wf-2 has a history, no record
    assert seen[0][0] and len(seen) == 2 and seen[1][0] == frozenset()


def test_a_subscriber_rendered_before_the_last_change_starts_with_one_to_fetch() -> None:
    """A page is rendered, then connects: a change in between is not lost."""

    async def scenario() -> list[Change | None]:
        broadcast = ChangeBroadcast()
        broadcast.publish(["wf-1"])
        rendered = broadcast.sequence
        broadcast.publish(["wf-2"])  # lands before the page's connection opens
        with (
            broadcast.subscribe(workflow_id="wf-1", since=rendered) as one,
            broadcast.subscribe(since=rendered) as everyone,
            broadcast.subscribe(since=broadcast.sequence) as current,
        ):
            return [
                await one.next(timeout_s=1),
                await everyone.next(timeout_s=1),
                await current.next(timeout_s=0.05),
            ]

    one, everyone, current = asyncio.run(scenario())
    assert one == Change(frozenset({"wf-1"}))  # maybe not its own: one fetch too many, at worst
    assert everyone == Change(frozenset(), everything=True)
    assert current is None  # rendered after the last change: nothing to fetch


def test_the_stream_sends_a_retry_then_changes_then_ends_when_its_time_is_up() -> None:
    async def scenario() -> list[str]:
        broadcast = ChangeBroadcast()
        stream = change_stream(
            broadcast.subscribe(workflow_id='wf-"1"'), lasts_s=0.5, heartbeat_s=0.2, settle_s=0
        )
        sent = [await anext(stream)]
        broadcast.publish(['wf-"1"'])
        sent.extend([chunk async for chunk in stream])
        assert broadcast.subscribers == 0
        return sent

    sent = asyncio.run(scenario())
    assert sent[0] == "retry: 3000\n\n"
    assert sent[1] == 'event: changed\ndata: {"workflows": ["wf-\\"1\\""], "everything": false}\n\n'
    assert set(sent[2:]) == {": still here\n\n"}  # heartbeats until the 0.5 s are up
    assert change_message(Change(frozenset(), everything=True)).endswith(
        'data: {"workflows": [], "everything": true}\n\n'
    )


# -- /console/live over HTTP ---------------------------------------------------------------


@pytest.fixture(scope="module")
def flow(repo_root: Path, catalog: SchemaCatalog) -> Flow:
    return reference_flow(repo_root, catalog)


@pytest.fixture
def rig(tmp_path: Path, flow: Flow) -> Iterator[ConsoleRig]:
    model = ReadModel(tmp_path / "rm")
    rig = console_rig(model, flow)
    rig.client = rig.new_client(
        console=ConsoleOptions(
            session_s=SESSION_S, stories=rig.stories, live_settle_s=0, live_heartbeat_s=30
        )
    )
    rig.put(at_gate(flow, "wf-1"), at_gate(flow, "wf-2"))
    assert rig.sign_in().status_code == 303
    yield rig
    model.close()


def events_of(lines: Iterator[str], count: int) -> list[dict[str, object]]:
    found: list[dict[str, object]] = []
    for line in lines:
        if line.startswith("data: "):
            found.append(json.loads(line.removeprefix("data: ")))
            if len(found) == count:
                break
    return found


def moved_on(record: WorkflowRecord) -> WorkflowRecord:
    """``record`` after its gate was approved: running the next step."""
    return record.model_copy(
        update={"state": WorkflowState.RUNNING, "gate": None, "current": "place_order"}
    )


@pytest.mark.timeout(60)
def test_a_workflow_page_stream_says_when_that_workflow_changed(
    rig: ConsoleRig, flow: Flow
) -> None:
    with rig.client.stream("GET", "/console/live?workflow=wf-1") as reply:
        assert reply.status_code == 200
        assert reply.headers["content-type"].startswith("text/event-stream")
        assert reply.headers["cache-control"] == "no-store"
        lines = reply.iter_lines()
        assert next(lines) == "retry: 3000"
        rig.put(moved_on(at_gate(flow, "wf-2")))  # not this page's workflow: not sent
        rig.put(moved_on(at_gate(flow, "wf-1")))
        [change] = events_of(lines, 1)
    assert change == {"workflows": ["wf-1"], "everything": False}
    assert rig.model.changes.subscribers == 0  # the connection closed, so did its subscription


@pytest.mark.timeout(60)
def test_a_stream_from_a_page_rendered_before_a_change_sends_it_at_once(
    rig: ConsoleRig, flow: Flow
) -> None:
    since = rig.model.changes.sequence
    rig.put(moved_on(at_gate(flow, "wf-1")))  # after the page, before its connection
    with rig.client.stream("GET", f"/console/live?workflow=wf-1&since={since}") as reply:
        lines = reply.iter_lines()
        assert next(lines) == "retry: 3000"
        [change] = events_of(lines, 1)
    assert change == {"workflows": ["wf-1"], "everything": False}


@pytest.mark.timeout(60)
def test_an_overview_stream_hears_every_workflow(rig: ConsoleRig, flow: Flow) -> None:
    with rig.client.stream("GET", "/console/live") as reply:
        lines = reply.iter_lines()
        assert next(lines) == "retry: 3000"
        rig.put(tracked(flow, "wf-3", *BEFORE_GATE[:2]).record("wf-3"))
        [change] = events_of(lines, 1)
    assert change == {"workflows": ["wf-3"], "everything": False}


@pytest.mark.timeout(60)
def test_a_stream_ends_with_its_session_and_then_tells_the_browser_to_stop(
    rig: ConsoleRig,
) -> None:
    # One second of session left: the stream closes then, with no change to send.
    rig.clock["now"] += dt.timedelta(seconds=SESSION_S - 1)
    with rig.client.stream("GET", "/console/live") as reply:
        assert list(reply.iter_lines()) == ["retry: 3000", ""]
    rig.clock["now"] += dt.timedelta(seconds=2)
    again = rig.client.get("/console/live")
    assert again.status_code == 204  # an EventSource stops trying; it does not follow
    assert rig.new_client().get("/console/live").status_code == 204  # never signed in


def test_live_pages_name_their_stream_and_the_regions_it_refreshes(rig: ConsoleRig) -> None:
    since = rig.model.changes.sequence
    page = rig.client.get("/console/workflows/wf-1").text
    assert f'data-live="/console/live?workflow=wf-1&amp;since={since}"' in page
    assert 'id="live-workflow" data-live-region data-live-workflow="wf-1"' in page
    assert 'hx-get="/console/workflows/wf-1" hx-trigger="live"' in page
    overview = rig.client.get("/console?stuck=2h&notice=done").text
    assert f'data-live="/console/live?since={since}"' in overview
    assert 'hx-get="/console?stuck=2h" hx-trigger="live"' in overview  # the notice shows once
    inbox = rig.client.get("/console/gates").text
    assert 'data-live-workflow="wf-1"' in inbox
    assert "/console/gates/row?workflow_id=wf-1&amp;gate=manager_approval&amp;attempt=1" in inbox
    token = rig.model.record("wf-1").gate.token  # type: ignore[union-attr]
    assert token not in inbox.split('name="token"')[0]  # a gate's token is in no URL
    assert "data-live" not in rig.client.get("/console/dead-letters").text  # not a live page
    script = rig.client.get("/console/static/live.js")
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    assert "live.js" in (STATIC / "README.md").read_text()


def test_an_inbox_row_fetched_again_shows_its_workflow_moving_on(
    rig: ConsoleRig, flow: Flow
) -> None:
    row = "/console/gates/row?workflow_id=wf-1&gate=manager_approval&attempt=1"
    before = rig.client.get(row)
    assert before.status_code == 200 and 'name="decision" value="approve"' in before.text
    headers = {"HX-Request": "true", "X-CSRF-Token": csrf_of(rig.client.get("/console/gates").text)}
    form = {
        "workflow_id": "wf-1",
        "token": rig.model.record("wf-1").gate.token,  # type: ignore[union-attr]
        "decision": "approve",
    }
    assert rig.client.post("/console/gates/decision", data=form, headers=headers).status_code == 200
    waiting = rig.client.get(row).text
    assert "approved by ann@example.com: waiting for the workflow to move on" in waiting
    rig.put(moved_on(at_gate(flow, "wf-1")))  # the tracker took the decision
    after = rig.client.get(row).text
    assert 'class="moved-on"' in after and "moved on: now" in after
    assert ">running</span> at place_order" in after
    assert "approved by ann@example.com<" in after and 'name="decision"' not in after
    # A stale attempt, and a workflow no one knows, are told as such.
    assert "decided elsewhere, or expired" in rig.client.get(row.replace("=1", "=2")).text
    unknown = rig.client.get(row.replace("wf-1", "wf-404"))
    assert unknown.status_code == 404


def test_a_new_gate_arrives_in_the_inbox_as_a_row_it_can_append(
    rig: ConsoleRig, flow: Flow
) -> None:
    inbox = rig.client.get("/console/gates", params={"assignee": "nobody"}).text
    assert 'id="gate-rows" data-live-arrivals="/console/gates/arrived?assignee=nobody"' in inbox
    assert 'id="no-gates"' in inbox  # shown only while the table has no other row (CSS)
    rig.put(tracked(flow, "wf-3", *BEFORE_GATE[:2]).record("wf-3"), at_gate(flow, "wf-4"))
    arrived = rig.client.get(
        "/console/gates/arrived", params=[("workflow", "wf-3"), ("workflow", "wf-4")]
    )
    assert arrived.status_code == 200
    assert re.findall(r'<tr data-workflow="([^"]+)"', arrived.text) == ["wf-4"]  # wf-3 runs
    assert 'data-live-workflow="wf-4"' in arrived.text  # and updates itself from then on
    assert 'name="decision" value="approve"' in arrived.text
    gate = rig.model.record("wf-4").gate  # type: ignore[union-attr]
    filtered = rig.client.get(
        "/console/gates/arrived", params={"workflow": "wf-4", "assignee": "someone-else"}
    )
    assert filtered.status_code == 200 and "<tr" not in filtered.text
    mine = rig.client.get(
        "/console/gates/arrived", params={"workflow": "wf-4", "assignee": gate.assignee}
    )
    assert "<tr" in mine.text
    assert rig.client.get("/console/gates/arrived").status_code == 400
    many = [("workflow", f"wf-{n}") for n in range(201)]
    refused = rig.client.get("/console/gates/arrived", params=many)
    assert refused.status_code == 400 and "1 to 200 workflows" in refused.text
    script = (STATIC / "live.js").read_text()
    assert "data-live-arrivals" in script and '"beforeend"' in script


def test_the_gauge_counts_the_open_live_connections(tmp_path: Path) -> None:
    from sagalog import metrics
    from sagalog.services.gateway.exported_metrics import export_live_connections

    model = ReadModel(tmp_path / "rm")
    undo = export_live_connections(model)

    def gauge() -> float:
        text = metrics.render()[0].decode()
        line = next(
            line
            for line in text.splitlines()
            if line.startswith("sagalog_gateway_live_connections ")
        )
        return float(line.split()[1])

    async def scenario() -> list[float]:
        seen = [gauge()]
        with model.changes.subscribe(workflow_id="wf-1"), model.changes.subscribe():
            seen.append(gauge())
        seen.append(gauge())
        return seen

    try:
        assert asyncio.run(scenario()) == [0.0, 2.0, 0.0]
    finally:
        undo()
        model.close()


def test_a_workflow_page_shows_its_model_output_from_its_own_stream_route(
    rig: ConsoleRig,
) -> None:
    """The page's model-output section reads ``/console/model-stream``; with no stream
    hub in the app (no broker), the route says 204, so the browser stops asking."""
    page = rig.client.get("/console/workflows/wf-1").text
    assert 'data-model-stream="/console/model-stream?workflow=wf-1"' in page
    assert '<script src="/console/static/model_stream.js" defer>' in page
    assert rig.client.get("/console/model-stream?workflow=wf-1").status_code == 204
    script = rig.client.get("/console/static/model_stream.js")
    assert script.status_code == 200 and "textContent" in script.text
    assert "model_stream.js" in (STATIC / "README.md").read_text()
