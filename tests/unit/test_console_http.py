"""The console at the HTTP level: sessions, CSRF, roles, escaping, pages and actions,
through FastAPI's TestClient on the gateway's own app (``console_fixtures``). No Kafka:
the publisher keeps what it is given, so "writes nothing" is checked on it."""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from sagalog.audit.trail import build_trail
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.errors import ServiceUnavailableError
from sagalog.events import DeadLetterReplayed, GateDecided, WorkflowCancelled
from sagalog.flows.model import Flow
from sagalog.flows.states import WorkflowState
from sagalog.services.gateway.console.routes import ConsoleOptions
from sagalog.services.gateway.read_model import ReadModel
from sagalog.tracker.record import WorkflowRecord

from . import audit_fixtures
from .console_fixtures import (
    KEY,
    READER_KEY,
    SESSION_S,
    ConsoleRig,
    console_rig,
    csrf_of,
    dead_letter,
)
from .gateway_fixtures import BEFORE_GATE, at_gate, reference_flow, tracked

EVIL = "<script>alert(1)</script>"
STATIC = Path(__file__).resolve().parents[2] / "src/sagalog/services/gateway/console/static"


@pytest.fixture(scope="module")
def flow(repo_root: Path, catalog: SchemaCatalog) -> Flow:
    """The reference flow, with its request id declared as a correlation key."""
    return reference_flow(repo_root, catalog).model_copy(
        update={"correlation_keys": ("request_id",)}
    )


@pytest.fixture(scope="module")
def records(flow: Flow) -> list[WorkflowRecord]:
    """Two workflows at their gate and one running, as the tracker's rules left them."""
    return [
        at_gate(flow, "wf-1"),
        at_gate(flow, "wf-2"),
        tracked(flow, "wf-3", *BEFORE_GATE[:2]).record("wf-3"),
    ]


@pytest.fixture
def rig(tmp_path: Path, flow: Flow, records: list[WorkflowRecord]) -> Iterator[ConsoleRig]:
    model = ReadModel(tmp_path / "rm")
    rig = console_rig(model, flow)
    rig.put(*records)
    yield rig
    model.close()


@pytest.fixture
def signed_in(rig: ConsoleRig) -> ConsoleRig:
    assert rig.sign_in().status_code == 303
    return rig


def token_of(rig: ConsoleRig, workflow_id: str) -> str:
    record = rig.model.record(workflow_id)
    assert record is not None and record.gate is not None
    return record.gate.token


def decision_form(rig: ConsoleRig, workflow_id: str = "wf-1", **changes: str) -> dict[str, str]:
    return {
        "workflow_id": workflow_id,
        "token": token_of(rig, workflow_id),
        "decision": "approve",
        "comment": "fine by me",
        **changes,
    }


def nothing_written(rig: ConsoleRig) -> bool:
    return rig.publisher.sent == [] and rig.publisher.records == []


PAGES = [
    "/console",
    "/console/workflows",
    "/console/workflows/wf-1",
    "/console/gates",
    "/console/dead-letters",
    "/console/dead-letters/procurement.deadletter/0/1",
]


# -- signing in ------------------------------------------------------------------------


def test_sign_in_sets_an_httponly_samesite_strict_session_cookie(rig: ConsoleRig) -> None:
    reply = rig.sign_in()
    assert reply.status_code == 303 and reply.headers["location"] == "/console"
    [cookie] = [c for c in reply.headers.get_list("set-cookie") if c.startswith("sagalog_session=")]
    flags = {part.strip().split("=")[0].lower(): part for part in cookie.split(";")}
    assert "httponly" in flags
    assert flags["samesite"].strip().lower() == "samesite=strict"
    assert flags["path"].strip() == "Path=/console"
    assert flags["max-age"].strip() == f"Max-Age={SESSION_S}"
    assert "secure" not in flags  # plain HTTP: a Secure cookie would never come back
    assert KEY not in cookie and KEY not in reply.headers["location"]
    page = rig.client.get("/console")
    assert page.status_code == 200 and "ann@example.com" in page.text
    assert KEY not in page.text


def test_over_https_the_session_cookie_is_secure(rig: ConsoleRig) -> None:
    client = rig.new_client(base_url="https://testserver")
    reply = rig.sign_in(client=client)
    [cookie] = [c for c in reply.headers.get_list("set-cookie") if c.startswith("sagalog_session=")]
    assert "secure" in cookie.lower().replace(";", " ").split()


def test_a_wrong_or_missing_key_at_sign_in_is_refused_with_no_session(rig: ConsoleRig) -> None:
    wrong = rig.sign_in(key="guess")
    assert wrong.status_code == 403 and "not valid" in wrong.text
    assert rig.sign_in(key="").status_code == 401
    nameless = rig.sign_in(who=" ")
    assert nameless.status_code == 422 and "your name" in nameless.text
    for reply in (wrong, nameless):
        assert not any(
            c.startswith("sagalog_session=") for c in reply.headers.get_list("set-cookie")
        )
    assert rig.client.get("/console", follow_redirects=False).status_code == 303


def test_a_sign_in_post_without_its_form_token_is_a_403(rig: ConsoleRig) -> None:
    reply = rig.client.post(
        "/console/sign-in", data={"api_key": KEY, "who": "mallory"}, follow_redirects=False
    )
    assert reply.status_code == 403 and "sign-in form" in reply.text
    assert rig.client.get("/console", follow_redirects=False).status_code == 303


@pytest.mark.parametrize("path", PAGES)
def test_a_page_without_a_session_redirects_to_sign_in(rig: ConsoleRig, path: str) -> None:
    reply = rig.client.get(path, follow_redirects=False)
    assert reply.status_code == 303
    location = reply.headers["location"]
    assert location.startswith("/console/sign-in?next=")
    # Signed in from there, the person lands where they were going.
    form = rig.client.get(location)
    assert f'name="next" value="{path}"' in form.text
    landed = rig.client.post(
        "/console/sign-in",
        data={"api_key": KEY, "who": "ann", "csrf_token": csrf_of(form.text), "next": path},
    )
    assert landed.status_code == 200 and landed.url.path == path


def test_under_htmx_an_ended_session_sends_the_browser_to_sign_in(rig: ConsoleRig) -> None:
    reply = rig.client.get("/console/workflows", headers={"HX-Request": "true"})
    assert reply.status_code == 401
    assert reply.headers["hx-redirect"].startswith("/console/sign-in")


def test_an_expired_session_redirects_to_sign_in(signed_in: ConsoleRig) -> None:
    rig = signed_in
    rig.clock["now"] += dt.timedelta(seconds=SESSION_S - 1)
    assert rig.client.get("/console/gates").status_code == 200
    rig.clock["now"] += dt.timedelta(seconds=1)
    reply = rig.client.get("/console/gates", follow_redirects=False)
    assert reply.status_code == 303
    assert reply.headers["location"] == "/console/sign-in?next=%2Fconsole%2Fgates"


def test_an_expired_session_acts_on_nothing(signed_in: ConsoleRig) -> None:
    rig = signed_in
    csrf = rig.csrf()
    rig.clock["now"] += dt.timedelta(seconds=SESSION_S)
    form = {**decision_form(rig), "csrf_token": csrf}
    reply = rig.client.post("/console/gates/decision", data=form, follow_redirects=False)
    assert reply.status_code == 303 and reply.headers["location"] == "/console/sign-in"
    assert nothing_written(rig)


def test_a_key_rotated_out_ends_the_sessions_made_with_it(signed_in: ConsoleRig) -> None:
    rig = signed_in
    cookie = rig.client.cookies.get("sagalog_session")
    rotated = rig.new_client(api_keys=[b"the-new-key"])
    rotated.cookies.set("sagalog_session", cookie, path="/console")
    assert rotated.get("/console", follow_redirects=False).status_code == 303


def test_signing_out_ends_the_session_and_needs_the_csrf_token(signed_in: ConsoleRig) -> None:
    rig = signed_in
    assert rig.client.post("/console/sign-out", data={"csrf_token": ""}).status_code == 403
    out = rig.client.post(
        "/console/sign-out", data={"csrf_token": rig.csrf()}, follow_redirects=False
    )
    assert out.status_code == 303 and out.headers["location"] == "/console/sign-in"
    assert rig.client.get("/console", follow_redirects=False).status_code == 303


# -- CSRF and roles on every action --------------------------------------------------------


def actions(rig: ConsoleRig) -> dict[str, dict[str, str]]:
    return {
        "/console/gates/decision": decision_form(rig),
        "/console/workflows/wf-3/cancel": {"reason": "a duplicate request"},
        "/console/dead-letters/procurement.deadletter/0/1/replay": {"reason": "fixed the budget"},
    }


def test_a_post_without_the_csrf_token_gets_403_and_writes_nothing(signed_in: ConsoleRig) -> None:
    rig = signed_in
    for path, form in actions(rig).items():
        reply = rig.client.post(path, data=form)
        assert reply.status_code == 403, (path, reply.text)
        assert "CSRF token" in reply.text and 'role="alert"' in reply.text
    assert nothing_written(rig)


def test_a_post_with_another_sessions_csrf_token_gets_403(signed_in: ConsoleRig) -> None:
    rig = signed_in
    other = rig.new_client()
    rig.sign_in(client=other)
    foreign = csrf_of(other.get("/console/gates").text)
    assert foreign != rig.csrf()
    for path, form in actions(rig).items():
        reply = rig.client.post(path, data={**form, "csrf_token": foreign})
        assert reply.status_code == 403 and "earlier sign-in" in reply.text, path
        htmx = rig.client.post(
            path, data=form, headers={"HX-Request": "true", "X-CSRF-Token": foreign}
        )
        assert htmx.status_code == 403 and htmx.text.startswith('<p class="notice error"'), path
    assert nothing_written(rig)


def test_a_read_only_key_sees_everything_and_its_actions_get_403(rig: ConsoleRig) -> None:
    assert rig.sign_in(key=READER_KEY, who="auditor").status_code == 303
    for path in PAGES:
        page = rig.client.get(path)
        assert page.status_code == 200, path
        assert 'name="decision"' not in page.text and 'name="reason"' not in page.text, path
    assert "read-only" in rig.client.get("/console").text
    csrf = rig.csrf()
    for path, form in actions(rig).items():
        reply = rig.client.post(path, data={**form, "csrf_token": csrf})
        assert reply.status_code == 403, path
        assert "read-only" in reply.text and "operator key" in reply.text
    assert nothing_written(rig)


# -- escaping ----------------------------------------------------------------------------


def test_a_payload_with_a_script_is_shown_as_text_everywhere(
    signed_in: ConsoleRig, flow: Flow
) -> None:
    rig = signed_in
    evil = at_gate(flow, EVIL).model_copy(update={"keys": {"request_id": EVIL}})
    rig.put(evil)
    event = audit_fixtures.record(
        "procurement.events", 0, "procurement.v1.RequestSubmitted", EVIL,
        {"title": EVIL, "lineage": None}, source=EVIL, cause=EVIL,
    )  # fmt: skip
    rig.stories.trail = build_trail(
        audit_fixtures.history().seal, [event], [], decode=audit_fixtures.decode
    )
    pages = {
        "workflow": rig.client.get(f"/console/workflows/{EVIL}"),
        "list": rig.client.get("/console/workflows"),
        "search": rig.client.get("/console/workflows", params={"q": f"request_id={EVIL}"}),
        "gates": rig.client.get("/console/gates"),
        "notice": rig.client.get("/console/workflows/wf-1", params={"notice": EVIL}),
        "refusal": rig.client.get("/console/workflows", params={"state": EVIL}),
    }
    for name, page in pages.items():
        assert page.status_code in (200, 400), name
        assert "<script>alert" not in page.text, name
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text, name
    assert pages["workflow"].text.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 4


def test_pages_load_nothing_from_elsewhere_and_allow_no_inline_script(
    signed_in: ConsoleRig,
) -> None:
    page = signed_in.client.get("/console/workflows/wf-1")
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["cache-control"] == "no-store"
    assert not re.search(r'(src|href)="(https?:)?//', page.text)
    assert re.findall(r"<script[^>]*>", page.text) == [
        '<script src="/console/static/htmx.min.js" defer>',
        '<script src="/console/static/live.js" defer>',
        '<script src="/console/static/model_stream.js" defer>',  # a workflow's page
    ]


def test_htmx_is_served_from_the_package_as_its_readme_says(rig: ConsoleRig) -> None:
    reply = rig.client.get("/console/static/htmx.min.js")
    assert reply.status_code == 200 and "javascript" in reply.headers["content-type"]
    digest = hashlib.sha256(reply.content).hexdigest()
    assert digest in (STATIC / "README.md").read_text()
    assert "2.0.11" in (STATIC / "README.md").read_text()
    assert rig.client.get("/console/static/console.css").status_code == 200


# -- the workflows list --------------------------------------------------------------------


def listed(html: str) -> list[str]:
    return re.findall(r'<tr data-workflow="([^"]+)"', html)


def test_cursor_pages_return_every_workflow_exactly_once(signed_in: ConsoleRig) -> None:
    rig = signed_in
    t0 = 1_700_000_000_000
    many = [
        WorkflowRecord(
            workflow_id=f"bulk-{n:03d}",
            flow="procurement",
            flow_version=1,
            state=WorkflowState.RUNNING if n % 2 else WorkflowState.COMPLETED,
            started_at_ms=t0 + (n // 4) * 1000,  # four share each millisecond
            entered_current_state_at_ms=t0,
        )
        for n in range(121)
    ]
    rig.put(*many)
    seen: list[str] = []
    url: str | None = "/console/workflows"
    visits = 0
    while url:
        page = rig.client.get(url)
        assert page.status_code == 200
        seen += listed(page.text)
        more = re.search(r'<a id="more" href="([^"]+)"', page.text)
        url = more.group(1).replace("&amp;", "&") if more else None
        visits += 1
    assert visits == 3  # 124 workflows, 50 a page
    assert len(seen) == len(set(seen)) == 124
    assert set(seen) == {r.workflow_id for r in many} | {"wf-1", "wf-2", "wf-3"}
    # With a filter, the cursor keeps it.
    running: list[str] = []
    url = "/console/workflows?state=running&flow=procurement"
    while url:
        page = rig.client.get(url)
        running += listed(page.text)
        more = re.search(r'<a id="more" href="([^"]+)"', page.text)
        url = more.group(1).replace("&amp;", "&") if more else None
    assert sorted(running) == sorted(
        ["wf-3"] + [r.workflow_id for r in many if r.state == "running"]
    )


def test_filters_search_and_their_refusals(signed_in: ConsoleRig, flow: Flow) -> None:
    rig = signed_in
    rig.put(at_gate(flow, "wf-9").model_copy(update={"keys": {"request_id": "R-9"}}))

    def ids(**params: str) -> list[str]:
        page = rig.client.get("/console/workflows", params=params)
        assert page.status_code == 200, page.text
        return sorted(listed(page.text))

    assert ids(state="pending_approval") == ["wf-1", "wf-2", "wf-9"]
    assert ids(state="running") == ["wf-3"]
    assert ids(flow="procurement", version="1") == ["wf-1", "wf-2", "wf-3", "wf-9"]
    assert ids(version="2") == []
    assert ids(stuck="1h") == ["wf-1", "wf-2", "wf-3", "wf-9"]  # idle since 2023
    assert ids(started_from="2030-01-01T00:00") == []
    assert ids(ended_from="2020-01-01T00:00") == []  # none ended
    assert ids(q="wf-2") == ["wf-2"]
    assert ids(q="request_id=R-9") == ["wf-9"]
    assert ids(q="nobody") == []
    for params, named in [({"state": "lost"}, "state="), ({"q": "order=1"}, "request_id")]:
        refused = rig.client.get("/console/workflows", params=params)
        assert refused.status_code == 400 and named in refused.text
    cursor = rig.client.get("/console/workflows", params={"stuck": "1h", "after": "c3RhcnQ6MQ"})
    assert cursor.status_code == 400 and "first page" in cursor.text


# -- one workflow: its story and its actions ----------------------------------------------------


def test_the_story_lists_the_events_in_the_audits_order(signed_in: ConsoleRig) -> None:
    rig = signed_in
    history = audit_fixtures.history()
    trail = build_trail(
        history.seal, history.events, history.transitions, decode=audit_fixtures.decode
    )
    rig.stories.trail = trail
    page = rig.client.get("/console/workflows/wf-1")
    assert page.status_code == 200 and rig.stories.asked == ["wf-1"]
    shown = re.findall(
        r'<li class="(event|transition)" data-(?:event-id|position)="([^"]+)"', page.text
    )
    expected = [
        (e.kind, e.event_id if e.kind == "event" else e.record.position) for e in trail.entries
    ]
    assert shown == expected
    assert [s[1] for s in shown if s[0] == "event"] == ["e0", "e1", "e2", "e3", "e4"]
    story = page.text[page.text.index('id="story"') :]
    assert "GATE manager_approval: APPROVED by ana@example.com" in story
    assert "MODEL risk-model-3" in story and "sha256:abc" in story
    assert "by sagalog/gateway" in story and "caused by e2 ← e1 ← e0" in story
    assert "g1.secret-token-value" not in page.text  # tokens shortened, as the audit does


def test_without_the_log_the_page_shows_the_read_models_transitions(signed_in: ConsoleRig) -> None:
    rig = signed_in
    rig.stories.failure = ServiceUnavailableError("Kafka at test:9092 did not answer")
    page = rig.client.get("/console/workflows/wf-1")
    assert page.status_code == 200
    assert "The log could not be read (Kafka at test:9092 did not answer)" in page.text
    assert 'id="history"' in page.text and "pending_approval" in page.text
    assert 'id="timers"' in page.text  # the gate's deadline and escalation timers


def test_verify_checks_the_audit_chain_and_says_it_held(signed_in: ConsoleRig) -> None:
    rig = signed_in
    page = rig.client.get("/console/workflows/wf-1")
    assert 'id="verify"' in page.text and "Audit chain verified" not in page.text
    page = rig.client.get("/console/workflows/wf-1", params={"verify": "1"})
    assert page.status_code == 200
    assert "Audit chain verified" in page.text
    assert "5 event(s) and 3 transition(s) checked" in page.text
    assert 'class="story" id="story"' in page.text  # the story is shown with it


def test_verify_names_a_modified_event(signed_in: ConsoleRig) -> None:
    rig = signed_in
    log = rig.stories.log
    reserved = log.event("e1")
    log.events[log.events.index(reserved)] = replace(reserved, value=b'{"amount": "100000"}')
    page = rig.client.get("/console/workflows/wf-1", params={"verify": "1"})
    assert page.status_code == 200
    assert "Audit chain broken" in page.text and "Audit chain verified" not in page.text
    findings = page.text[page.text.index('id="findings"') :]
    assert "<td>modified</td><td><code>e1</code></td>" in findings
    assert "does not match its own sagalog_hash" in findings


def test_a_read_only_key_verifies_too(rig: ConsoleRig) -> None:
    rig.sign_in(key=READER_KEY)
    page = rig.client.get("/console/workflows/wf-1", params={"verify": "1"})
    assert page.status_code == 200 and "Audit chain verified" in page.text


def test_verify_without_the_log_says_so_and_a_bad_value_is_a_400(signed_in: ConsoleRig) -> None:
    rig = signed_in
    page = rig.client.get("/console/workflows/wf-1", params={"verify": "yes"})
    assert page.status_code == 400 and "verify=&#39;yes&#39; is not understood" in page.text
    rig.stories.failure = ServiceUnavailableError("Kafka at test:9092 did not answer")
    page = rig.client.get("/console/workflows/wf-1", params={"verify": "1"})
    assert page.status_code == 200
    assert "The audit chain was not verified" in page.text
    assert "Audit chain verified" not in page.text


def test_an_unknown_workflow_is_a_404_page(signed_in: ConsoleRig) -> None:
    page = signed_in.client.get("/console/workflows/nope")
    assert page.status_code == 404 and "no workflow &#39;nope&#39;" in page.text


def test_an_operator_cancels_with_a_reason_and_the_event_says_who(signed_in: ConsoleRig) -> None:
    rig = signed_in
    csrf = rig.csrf()
    empty = rig.client.post(
        "/console/workflows/wf-3/cancel", data={"reason": " ", "csrf_token": csrf}
    )
    assert empty.status_code == 422 and "reason" in empty.text and nothing_written(rig)
    reply = rig.client.post(
        "/console/workflows/wf-3/cancel",
        data={"reason": "a duplicate request", "csrf_token": csrf},
        follow_redirects=False,
    )
    assert reply.status_code == 303
    assert reply.headers["location"].startswith("/console/workflows/wf-3?notice=cancellation")
    [(_, event, meta)] = rig.publisher.sent
    assert isinstance(event, WorkflowCancelled) and meta["workflow_id"] == "wf-3"
    assert (event.reason, event.requested_by) == ("a duplicate request", "ann@example.com")


def test_approving_on_the_workflow_page_goes_back_to_it(signed_in: ConsoleRig) -> None:
    rig = signed_in
    form = {
        **decision_form(rig, "wf-2", decision="reject"),
        "back": "workflow",
        "csrf_token": rig.csrf(),
    }
    reply = rig.client.post("/console/gates/decision", data=form)
    assert reply.status_code == 200 and reply.url.path == "/console/workflows/wf-2"
    assert "gate &#39;manager_approval&#39; rejected" in reply.text
    assert "rejected by ann@example.com: waiting for the workflow to move on" in reply.text
    [(_, event, _)] = rig.publisher.sent
    assert isinstance(event, GateDecided) and event.decision == "REJECTED"


# -- the gates inbox ---------------------------------------------------------------------------


def test_the_inbox_approves_a_gate_through_htmx_and_the_row_says_so(signed_in: ConsoleRig) -> None:
    rig = signed_in
    inbox = rig.client.get("/console/gates")
    assert sorted(listed(inbox.text)) == ["wf-1", "wf-2"]
    assert inbox.text.count('name="decision" value="approve"') == 2
    headers = {"HX-Request": "true", "X-CSRF-Token": rig.csrf()}
    row = rig.client.post("/console/gates/decision", data=decision_form(rig), headers=headers)
    assert row.status_code == 200
    assert row.text.lstrip().startswith('<tr data-workflow="wf-1" ')
    assert "approved by ann@example.com: waiting for the workflow to move on" in row.text
    assert (
        'hx-swap-oob="true"' in row.text and "gate &#39;manager_approval&#39; approved" in row.text
    )
    [(_, event, _)] = rig.publisher.sent
    assert isinstance(event, GateDecided)
    assert (event.decision, event.decided_by, event.comment) == (
        "APPROVED",
        "ann@example.com",
        "fine by me",
    )
    # The same click again publishes nothing new; the inbox shows the decision, not buttons.
    again = rig.client.post("/console/gates/decision", data=decision_form(rig), headers=headers)
    assert again.status_code == 200 and len(rig.publisher.sent) == 1
    assert rig.client.get("/console/gates").text.count('name="decision" value="approve"') == 1


def test_a_forged_gate_token_is_refused_in_the_alert_region(signed_in: ConsoleRig) -> None:
    rig = signed_in
    headers = {"HX-Request": "true", "X-CSRF-Token": rig.csrf()}
    reply = rig.client.post(
        "/console/gates/decision", data=decision_form(rig, token="g1.forged"), headers=headers
    )
    assert reply.status_code == 403 and 'role="alert"' in reply.text
    assert nothing_written(rig)


def test_the_inbox_filters_by_assignee_deadline_and_level(signed_in: ConsoleRig) -> None:
    rig = signed_in
    gate = rig.model.record("wf-1").gate  # type: ignore[union-attr]
    assert gate is not None

    def ids(**params: str) -> list[str]:
        page = rig.client.get("/console/gates", params=params)
        assert page.status_code == 200, page.text
        return sorted(listed(page.text))

    assert ids(assignee=gate.assignee) == ["wf-1", "wf-2"]
    assert ids(assignee="someone-else@example.com") == []
    assert ids(level=str(gate.escalation_level)) == ["wf-1", "wf-2"]
    assert ids(level=str(gate.escalation_level + 1)) == []
    deadline = dt.datetime.fromtimestamp(gate.deadline_ms / 1000, dt.UTC)
    after = (deadline + dt.timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M")
    before = (deadline - dt.timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")
    assert ids(due_before=after) == ["wf-1", "wf-2"]
    assert ids(due_before=before) == []
    refused = rig.client.get("/console/gates", params={"level": "high"})
    assert refused.status_code == 400 and "level=" in refused.text


# -- the overview and dead letters --------------------------------------------------------------


def test_the_overview_counts_by_flow_version_and_state(signed_in: ConsoleRig) -> None:
    rig = signed_in
    page = rig.client.get("/console")
    assert page.status_code == 200
    row = page.text[page.text.index('<tr data-flow="procurement" data-version="1">') :]
    row = row[: row.index("</tr>")]
    assert re.findall(r"state=(\w+)\">(\d+)</a>", row) == [
        ("running", "1"),
        ("pending_approval", "2"),
    ]
    # Only the states some workflow is in get a column, in the machine's order.
    header = page.text[page.text.index('<table id="by-state">') :]
    header = header[: header.index("</thead>")]
    assert re.findall(r'<th class="num">([^<]+)</th>', header) == [
        "running",
        "pending approval",
        "Total",
    ]
    assert "<strong>3</strong> stuck for over 1h" in page.text
    assert "<strong>2</strong> gates waiting" in page.text
    # Counted from the offsets (no record read): an upper bound, and said so.
    assert "<strong>≤ 3</strong> dead letters" in page.text and "(by offset)" in page.text
    later = rig.client.get("/console", params={"stuck": "10000d"})
    assert "<strong>0</strong> stuck for over 10000d" in later.text
    assert rig.client.get("/console", params={"stuck": "soon"}).status_code == 400


def test_dead_letters_are_paged_without_reading_them_all(signed_in: ConsoleRig) -> None:
    rig = signed_in
    rig.letters.letters = [dead_letter(n) for n in range(120)]
    first = rig.client.get("/console/dead-letters")
    assert first.status_code == 200
    positions = re.findall(r'<tr data-position="([^"]+)"', first.text)
    assert len(positions) == 50 and positions[0] == "procurement.deadletter/0/0"
    assert rig.letters.read == 51  # one page and one more, to know there is a next
    more = re.search(r'<a id="more" href="([^"]+)"', first.text)
    assert more is not None
    second = rig.client.get(more.group(1).replace("&amp;", "&"))
    assert (
        re.findall(r'<tr data-position="([^"]+)"', second.text)[0] == "procurement.deadletter/0/50"
    )


def test_a_dead_letter_shows_whole_and_replays_with_a_reason(signed_in: ConsoleRig) -> None:
    rig = signed_in
    page = rig.client.get("/console/dead-letters/procurement.deadletter/0/1")
    assert page.status_code == 200
    assert (
        "budget service said no (1)" in page.text and "&lt;script&gt;x&lt;/script&gt;" in page.text
    )
    reply = rig.client.post(
        "/console/dead-letters/procurement.deadletter/0/1/replay",
        data={"reason": "fixed the budget", "csrf_token": csrf_of(page.text)},
    )
    assert reply.status_code == 200 and "replay 1 published" in reply.text
    [(_, event, meta)] = rig.publisher.sent
    assert isinstance(event, DeadLetterReplayed) and meta["workflow_id"] == "wf-3"
    assert (event.reason, event.requested_by) == ("fixed the budget", "ann@example.com")
    assert [(t, p) for t, p, _ in rig.publisher.records] == [("procurement.events", 0)]


def test_personal_data_shows_as_erased_or_sealed_never_opened(signed_in: ConsoleRig) -> None:
    from sagalog.personal.envelope import seal
    from sagalog.services.gateway.console.stories import SEALED, shown_personal

    erased_subject, kept_subject = "a" * 32, "b" * 32
    erased = seal(b"k" * 32, subject=erased_subject, key_id="0" * 16, plaintext="cy@example.org")
    kept = seal(b"k" * 32, subject=kept_subject, key_id="0" * 16, plaintext="bo@example.com")
    gone = {erased_subject}
    payload = {"requester": erased, "approvers": [kept, "plain"], "amount": "100"}
    shown = shown_personal(payload, lambda e: e.subject in gone)
    assert shown == {"requester": "[erased]", "approvers": [SEALED, "plain"], "amount": "100"}
    assert shown_personal(payload, None)["requester"] == SEALED  # no key topic: not told
    # On the page: the story's payloads say so, and hold neither ciphertext nor plaintext.
    rig = signed_in
    history = audit_fixtures.history()
    trail = build_trail(
        history.seal, history.events, history.transitions, decode=audit_fixtures.decode
    )
    first = trail.entries[0]
    trail = replace(
        trail,
        entries=(
            replace(first, payload={**(first.payload or {}), "requester": erased}),
            *trail.entries[1:],
        ),
    )
    rig.stories.trail = trail
    client = rig.new_client(
        console=ConsoleOptions(
            session_s=SESSION_S, stories=rig.stories, is_erased=lambda e: e.subject in gone
        )
    )
    rig.sign_in(client=client)
    page = client.get("/console/workflows/wf-1")
    assert page.status_code == 200
    assert (
        "&#34;requester&#34;: &#34;[erased]&#34;" in page.text
        or '"requester": "[erased]"' in page.text
    )
    assert erased not in page.text, page.text[page.text.index(erased) - 300 :][:400]
    assert "cy@example.org" not in page.text
