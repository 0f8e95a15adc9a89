"""The gateway on the real broker and registry, next to a real tracker (virtual clock).

Both run as separate processes on throwaway topics, with the five-step test flow
(``flows/orders.v1.yaml``). A workflow is driven to its gate by publishing the agents'
events; the gate is listed through the API, approved through the API, and the
workflow moves on. Every refused request is shown to publish nothing: the workflow
topic's end offsets are the same before and after.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from playwright.sync_api import expect

import external_tools
from sagalog.tracker import gate_token

from .browser import chromium, screenshot
from .gateway_harness import API_KEY, GatewayLab, gateway_lab  # noqa: F401
from .project import REPO
from .tracker_harness import SECRET

SECRET_BYTES = SECRET.encode()


GATE_DECIDED = "sagalog.v1.GateDecided"


def open_gates(gw: GatewayLab) -> list[dict[str, object]]:
    reply = gw.call("GET", "/v1/gates")
    assert reply.status == 200, reply.body
    return list(reply.body["gates"])


def wait_for_gate(gw: GatewayLab, workflow_id: str) -> dict[str, object]:
    gw.wait(
        lambda: any(g["workflow_id"] == workflow_id for g in open_gates(gw)),
        what=f"{workflow_id}'s gate in GET /v1/gates",
    )
    return next(g for g in open_gates(gw) if g["workflow_id"] == workflow_id)


def cli(gw: GatewayLab, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "SAGALOG_GATEWAY_URL": gw.url,
        "SAGALOG_GATEWAY_API_KEY": API_KEY,
    }
    return subprocess.run(
        [sys.executable, "-m", "sagalog", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_person_approves_a_gate_through_the_api_and_the_workflow_moves_on(
    gateway_lab: GatewayLab,  # noqa: F811
) -> None:
    gw, lab = gateway_lab, gateway_lab.lab
    gw.start_gateway()
    gw.drive_to_gate("wf-ok")

    gate = wait_for_gate(gw, "wf-ok")
    assert gate["gate"] == "manager_approval" and gate["assignee"] == "managers@example.com"
    token = gate_token(SECRET_BYTES, "wf-ok", "manager_approval", 1)
    assert gate["token"] == token

    decision = {
        "token": token,
        "workflow_id": "wf-ok",
        "decision": "approve",
        "decided_by": "boss@example.com",
        "comment": "within budget",
    }
    accepted = gw.call("POST", "/v1/gates/decisions", decision)
    assert accepted.status == 202, accepted.body
    lab.wait(
        lambda: any(t["step"] == "score_risk" for t in lab.transitions("wf-ok")),
        what="wf-ok running score_risk after the approval",
    )
    [event] = lab.events("wf-ok", GATE_DECIDED)
    assert event["id"] == accepted.body["event_id"]
    assert (event["decision"], event["decided_by"], event["comment"]) == (
        "APPROVED",
        "boss@example.com",
        "within budget",
    )

    # The same click again: the same answer, nothing new on the topic.
    again = gw.call("POST", "/v1/gates/decisions", decision)
    assert again.status == 202 and again.body == {**accepted.body, "duplicate": True}
    assert len(gw.events_on_topic(GATE_DECIDED)) == 1

    # The gate leaves the list once the read model sees the tracker's new record.
    gw.wait(lambda: open_gates(gw) == [], what="the gate to leave GET /v1/gates")

    # A webhook for the workflow lands on its topic; the tracker ignores it quietly.
    hook = gw.call(
        "POST",
        "/v1/webhooks/signature.completed?workflow_id=wf-ok",
        {"envelope": "E-1", "status": "signed"},
        headers={"X-Webhook-Source": "esign"},
    )
    assert hook.status == 202, hook.body
    lab.wait(lambda: bool(lab.events("wf-ok", "sagalog.v1.WebhookReceived")), what="webhook")
    [received] = lab.events("wf-ok", "sagalog.v1.WebhookReceived")
    assert (received["kind"], received["source"]) == ("signature.completed", "esign")

    lab.complete("wf-ok", "score_risk")
    lab.wait(
        lambda: any(t["step"] == "create_purchase_order" for t in lab.transitions("wf-ok")),
        what="wf-ok at create_purchase_order",
    )
    lab.complete("wf-ok", "create_purchase_order")
    lab.wait_state("wf-ok", "completed")
    assert lab.seen.deadletters == []

    def shown_completed() -> bool:
        reply = gw.call("GET", "/v1/workflows/wf-ok")
        return reply.status == 200 and reply.body["state"] == "completed"

    gw.wait(shown_completed, what="GET /v1/workflows/wf-ok: completed")
    # Read to the end: the lag is 0, though the tracker writes in transactions and its
    # last commit marker takes an offset no reader receives (it read 1 for good before,
    # and the gateway never trimmed its heap after a burst).
    gw.wait(lambda: gw.call("GET", "/healthz").body["lag"] == 0, what="/healthz lag 0")
    shown = gw.call("GET", "/v1/workflows/wf-ok").body
    moves = [(h["from_state"], h["to_state"]) for h in shown["history"]]
    assert ("pending_approval", "running") in moves or ("pending_approval", "approved") in moves
    assert moves[-1][1] == "completed"
    assert shown["open_gate"] is None and shown["pending_timers"] == []

    listed = cli(gw, "workflows", "list", "--state", "completed")
    assert listed.returncode == 0, listed.stderr
    assert "wf-ok" in listed.stdout
    printed = cli(gw, "workflows", "show", "wf-ok")
    assert printed.returncode == 0, printed.stderr
    assert "state     completed" in printed.stdout
    assert "pending_approval -> " in printed.stdout


def test_bad_requests_get_the_right_4xx_with_a_message_and_publish_nothing(
    gateway_lab: GatewayLab,  # noqa: F811
) -> None:
    gw, lab = gateway_lab, gateway_lab.lab
    gw.start_gateway()
    gw.drive_to_gate("wf-gate")
    lab.start("wf-running")
    lab.wait_state("wf-running", "running")
    token = wait_for_gate(gw, "wf-gate")["token"]
    gw.wait(
        lambda: gw.call("GET", "/v1/workflows/wf-running").status == 200,
        what="wf-running in the read model",
    )
    good = {
        "token": token,
        "workflow_id": "wf-gate",
        "decision": "approve",
        "decided_by": "boss@example.com",
    }
    forged = gate_token(b"not-the-trackers-secret-0123456789", "wf-gate", "manager_approval", 1)
    before = gw.end_offsets()

    cases = [
        # (what, request, status, words in the message)
        ("missing API key", ("POST", "/v1/gates/decisions", good, None), 401, "X-API-Key"),
        ("wrong API key", ("POST", "/v1/gates/decisions", good, "guess"), 403, "not valid"),
        (
            "unknown token (no such workflow)",
            (
                "POST",
                "/v1/gates/decisions",
                {
                    **good,
                    "workflow_id": "wf-nope",
                    "token": gate_token(SECRET_BYTES, "wf-nope", "manager_approval", 1),
                },
                API_KEY,
            ),
            404,
            "no workflow 'wf-nope'",
        ),
        (
            "unknown token (never issued)",
            ("POST", "/v1/gates/decisions", {**good, "token": "g1.unknown"}, API_KEY),
            403,
            "does not belong to workflow 'wf-gate'",
        ),
        (
            "forged token",
            ("POST", "/v1/gates/decisions", {**good, "token": forged}, API_KEY),
            403,
            "does not belong to workflow 'wf-gate'",
        ),
        (
            "no open gate",
            ("POST", "/v1/gates/decisions", {**good, "workflow_id": "wf-running"}, API_KEY),
            409,
            "waits for no decision",
        ),
        (
            "bad decision value",
            ("POST", "/v1/gates/decisions", {**good, "decision": "maybe"}, API_KEY),
            422,
            "decision",
        ),
        (
            "webhook for an unknown workflow",
            ("POST", "/v1/webhooks/payment?workflow_id=wf-nope", {"paid": True}, API_KEY),
            404,
            "no workflow 'wf-nope'",
        ),
        (
            "oversize webhook",
            ("POST", "/v1/webhooks/payment?workflow_id=wf-gate", {"x": "y" * 5000}, API_KEY),
            413,
            "over the gateway's limit of 4096",
        ),
    ]
    for what, (method, path, body, key), status, words in cases:
        reply = gw.call(method, path, body, key=key)
        assert reply.status == status, (what, reply.status, reply.body)
        assert set(reply.body) == {"error", "detail"}, (what, reply.body)
        assert words in reply.body["error"], (what, reply.body)

    for path in ("/v1/gates/decisions", "/v1/webhooks/payment?workflow_id=wf-gate"):
        reply = gw.call("POST", path, raw=b'{"token": "g1.x", ')
        assert reply.status == 400 and "not valid JSON" in reply.body["error"], reply.body

    assert gw.end_offsets() == before, "a refused request published something"
    assert lab.state("wf-gate") == "pending_approval"
    assert lab.events("wf-gate", GATE_DECIDED) == []

    # The genuine token still works afterwards: the refusals changed nothing.
    assert gw.call("POST", "/v1/gates/decisions", good).status == 202
    lab.wait(lambda: lab.state("wf-gate") != "pending_approval", what="wf-gate decided")


def test_the_cli_rejects_a_gate_and_the_read_model_survives_a_restart(
    gateway_lab: GatewayLab,  # noqa: F811
) -> None:
    gw, lab = gateway_lab, gateway_lab.lab
    gw.start_gateway()
    gw.drive_to_gate("wf-no")
    token = str(wait_for_gate(gw, "wf-no")["token"])

    listed = cli(gw, "gates", "list")
    assert listed.returncode == 0 and token in listed.stdout, listed.stderr
    refused = cli(gw, "gates", "reject", "g1.forged", "--workflow", "wf-no")
    assert refused.returncode == 2
    assert "gateway refused (403)" in refused.stderr
    rejected = cli(gw, "gates", "reject", token, "--workflow", "wf-no", "--by", "cfo")
    assert rejected.returncode == 0, rejected.stderr
    assert "rejected gate 'manager_approval' of wf-no" in rejected.stdout
    lab.wait_state("wf-no", "compensating")

    # Restart on the same RocksDB: it resumes from its stored offsets.
    assert gw.gateway is not None
    gw.gateway.stop()
    down = cli(gw, "workflows", "list")
    assert down.returncode == 3 and "unreachable" in down.stderr
    gw.start_gateway()
    shown = gw.call("GET", "/v1/workflows/wf-no").body
    assert shown["state"] in ("compensating", "compensated"), shown
    assert "'manager_approval' rejected by cfo" in (shown["compensation"] or {}).get("reason", "")

    # The decision ledger survived too: the same click is answered, not republished.
    again = cli(gw, "gates", "reject", token, "--workflow", "wf-no", "--by", "cfo")
    assert again.returncode == 0 and "already recorded" in again.stdout
    assert len(gw.events_on_topic(GATE_DECIDED)) == 1

    # A fresh directory rebuilds the same view from the logs.
    gw.gateway.stop()
    gw.start_gateway(data_dir="gateway-rebuilt")
    rebuilt = gw.call("GET", "/v1/workflows/wf-no").body
    assert rebuilt["history"][: len(shown["history"])] == shown["history"]


@pytest.mark.tool("chromium", external_tools.PLAYWRIGHT)
def test_a_reviewer_approves_in_headless_chromium(
    gateway_lab: GatewayLab,  # noqa: F811
    tmp_path: Path,
) -> None:
    gw, lab = gateway_lab, gateway_lab.lab
    gw.start_gateway()
    gw.drive_to_gate("wf-web")
    wait_for_gate(gw, "wf-web")
    row = 'tr[data-workflow="wf-web"]'

    with chromium() as browser:
        page = browser.new_page()
        # An old bookmark with the key in its URL lands on the console's sign-in page,
        # the key dropped; signing in leads on to the gates inbox.
        page.goto(f"{gw.url}/reviews?api_key={API_KEY}")
        assert API_KEY not in page.url
        page.fill("input[name=api_key]", API_KEY)
        page.fill("input[name=who]", "ann@example.com")
        page.click("form button[type=submit]")
        page.wait_for_selector(row)
        screenshot(page, tmp_path / "reviews-before.png")
        page.evaluate("window.sameDocument = true")  # gone if the page reloads
        page.fill(f"{row} input[name=comment]", "ok from the browser")
        page.click(f"{row} button[value=approve]")
        # htmx swaps the row in place: no reload.
        decided = page.locator(f"{row} .decided")
        expect(decided).to_have_text(
            "approved by ann@example.com: waiting for the workflow to move on"
        )
        expect(page.locator("[role=status]")).to_have_text(
            "wf-web: gate 'manager_approval' approved."
        )
        assert page.locator(f"{row} button").count() == 0
        # The tracker takes the decision; the row hears it (live.js) and says so.
        expect(page.locator(f"{row}.moved-on")).to_contain_text("moved on: now running")
        assert page.evaluate("window.sameDocument") is True
        assert page.url == f"{gw.url}/console/gates"
        screenshot(page, tmp_path / "reviews-after.png")
    assert not browser.problems, browser.problems
    lab.wait(
        lambda: any(t["step"] == "score_risk" for t in lab.transitions("wf-web")),
        what="wf-web moving on after the browser's approval",
    )
    [event] = lab.events("wf-web", GATE_DECIDED)
    assert (event["decided_by"], event["comment"]) == ("ann@example.com", "ok from the browser")
    shots = os.environ.get("SAGALOG_TEST_SCREENSHOTS")
    if shots:  # keep the pictures for a person to look at
        for name in ("reviews-before.png", "reviews-after.png"):
            shutil.copy(tmp_path / name, Path(shots) / name)


def test_an_operator_cancels_a_workflow_at_its_gate_and_the_log_says_who_and_why(
    gateway_lab: GatewayLab,  # noqa: F811
) -> None:
    gw, lab = gateway_lab, gateway_lab.lab
    gw.start_gateway()
    gw.drive_to_gate("wf-cancel")
    wait_for_gate(gw, "wf-cancel")
    done = cli(gw, "workflows", "cancel", "wf-cancel", "--reason", "a duplicate", "--by", "ops")
    assert done.returncode == 0, done.stderr
    assert "cancellation of wf-cancel published" in done.stdout
    # The tracker undoes the completed steps, newest first, one at a time.
    lab.wait(
        lambda: (
            [e["step"] for e in lab.events("wf-cancel", "sagalog.v1.CompensationRequested")]
            == ["retrieve_policies"]
        ),
        what="the first compensation requested",
    )
    for step in ("retrieve_policies", "classify_request", "reserve_budget"):
        lab.wait(
            lambda s=step: (
                s
                in [e["step"] for e in lab.events("wf-cancel", "sagalog.v1.CompensationRequested")]
            ),
            what=f"{step} undo requested",
        )
        lab.undo("wf-cancel", step)
    lab.wait_state("wf-cancel", "compensated")
    [cancelled] = lab.events("wf-cancel", "sagalog.v1.WorkflowCancelled")
    assert (cancelled["reason"], cancelled["requested_by"]) == ("a duplicate", "ops")
    gw.wait(
        lambda: gw.call("GET", "/v1/workflows/wf-cancel").body.get("state") == "compensated",
        what="the gateway sees wf-cancel compensated",
    )
    shown = gw.call("GET", "/v1/workflows/wf-cancel").body
    assert shown["terminal_reason"].startswith("cancelled by ops: a duplicate; undone: ")
    again = cli(gw, "workflows", "cancel", "wf-cancel", "--reason", "again")
    assert again.returncode == 0 and "asked before: nothing new published" in again.stdout
    assert len(lab.events("wf-cancel", "sagalog.v1.WorkflowCancelled")) == 1
