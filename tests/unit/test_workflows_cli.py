"""``sagalog workflows`` and ``sagalog gates`` against a stand-in gateway on loopback:
what they send, what they print, and their exit codes (2 refused, 3 unreachable)."""

from __future__ import annotations

import json
import socket
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from click.testing import CliRunner

from sagalog.cli.main import cli

GATE = {
    "workflow_id": "wf-1",
    "flow": "procurement",
    "flow_version": 1,
    "gate": "manager_approval",
    "attempt": 1,
    "assignee": "boss@example.com",
    "escalation_level": 0,
    "opened_at": "2027-01-15T08:00:00Z",
    "deadline": "2027-01-18T08:00:00Z",
    "token": "g1.tok",
}
WORKFLOW = {
    "workflow_id": "wf-1",
    "flow": "procurement",
    "flow_version": 1,
    "state": "pending_approval",
    "current": "manager_approval",
    "priority": "normal",
    "started_at": "2027-01-15T07:00:00Z",
    "entered_state_at": "2027-01-15T08:00:00Z",
    "terminal_reason": None,
    "completed": ["reserve_budget"],
    "open_gate": GATE,
    "pending_timers": [
        {"kind": "gate_deadline", "ref": "manager_approval#1", "due": "2027-01-18T08:00:00Z"}
    ],
    "compensation": None,
    "history": [
        {
            "event_id": "t-1",
            "from_state": "running",
            "to_state": "pending_approval",
            "step": "manager_approval",
            "at": "2027-01-15T08:00:00Z",
            "time_in_previous_state_ms": 60000,
            "cause_event_id": "c-1",
        }
    ],
}


IDLE = {  # running since 2020: idle for years whatever the date
    **{k: v for k, v in WORKFLOW.items() if k != "open_gate"},
    "workflow_id": "wf-old",
    "state": "running",
    "current": "reserve_budget",
    "entered_state_at": "2020-01-01T00:00:00Z",
}


class StandIn(BaseHTTPRequestHandler):
    seen: list[tuple[str, str, Any, Any]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def _answer(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self.seen.append(("GET", self.path, self.headers, None))
        if self.headers.get("X-API-Key") != "k":
            self._answer(403, {"error": "the API key in X-API-Key is not valid", "detail": None})
        elif self.path.startswith("/v1/workflows?"):
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
            state = query.get("state", [None])[0]
            listed = [w for w in (WORKFLOW, IDLE) if state in (None, w["state"])]
            self._answer(200, {"workflows": listed, "next_after": None})
        elif self.path == "/v1/workflows/wf-1":
            self._answer(200, WORKFLOW)
        elif self.path.startswith("/v1/gates"):
            self._answer(200, {"gates": [GATE]})
        else:
            self._answer(404, {"error": "no workflow 'x' is known to the gateway", "detail": {}})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append(("POST", self.path, self.headers, body))
        if self.path.endswith("/cancel"):
            self._answer(
                202,
                {
                    "event_id": "e-9",
                    "event_type": "sagalog.v1.WorkflowCancelled",
                    "workflow_id": "wf-1",
                    "topic": "procurement.events",
                    "partition": 1,
                    "offset": 4,
                    "duplicate": False,
                },
            )
            return
        if body["token"] != "g1.tok":
            self._answer(403, {"error": "the token does not belong to workflow 'wf-1'"})
            return
        self._answer(
            202,
            {
                "event_id": "e-1",
                "event_type": "sagalog.v1.GateDecided",
                "workflow_id": body["workflow_id"],
                "topic": "procurement.events",
                "partition": 2,
                "offset": 17,
                "duplicate": False,
                "gate": "manager_approval",
                "decision": body["decision"],
            },
        )


@pytest.fixture
def gateway_url() -> Iterator[str]:
    StandIn.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def run(*args: str, url: str, key: str | None = "k") -> Any:
    env = {"SAGALOG_GATEWAY_URL": url, "SAGALOG_GATEWAY_API_KEY": key}
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


def test_workflows_list_prints_a_table_and_passes_the_filters(gateway_url: str) -> None:
    result = run("workflows", "list", "--state", "pending_approval", "--flow", "p", url=gateway_url)
    assert result.exit_code == 0, result.output
    assert "WORKFLOW" in result.output and "pending_approval" in result.output
    _, path, headers, _ = StandIn.seen[-1]
    assert path.startswith("/v1/workflows?") and "state=pending_approval" in path
    assert "flow=p" in path and headers.get("X-API-Key") == "k"


def test_workflows_show_prints_state_gate_timers_and_history(gateway_url: str) -> None:
    result = run("workflows", "show", "wf-1", url=gateway_url)
    assert result.exit_code == 0, result.output
    for text in (
        "state     pending_approval at manager_approval",
        "open gate manager_approval: assignee boss@example.com",
        "token   g1.tok",
        "gate_deadline  manager_approval#1",
        "running -> pending_approval (manager_approval)",
    ):
        assert text in result.output


def test_gates_approve_posts_the_decision(gateway_url: str) -> None:
    result = run(
        "gates",
        "approve",
        "g1.tok",
        "--workflow",
        "wf-1",
        "--by",
        "ann",
        "--comment",
        "ok",
        url=gateway_url,
    )
    assert result.exit_code == 0, result.output
    assert "approved gate 'manager_approval' of wf-1: event e-1" in result.output
    assert StandIn.seen[-1][3] == {
        "token": "g1.tok",
        "workflow_id": "wf-1",
        "decision": "approve",
        "decided_by": "ann",
        "comment": "ok",
    }


def test_a_refusal_prints_the_gateways_message_and_exits_2(gateway_url: str) -> None:
    result = run("gates", "reject", "g1.bad", "--workflow", "wf-1", url=gateway_url)
    assert result.exit_code == 2
    assert "gateway refused (403): the token does not belong to workflow 'wf-1'" in result.output
    assert run("workflows", "list", url=gateway_url, key="wrong").exit_code == 2


def test_an_unreachable_gateway_exits_3_with_what_to_check() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again below: nothing listens there
    result = run("workflows", "list", url=f"http://127.0.0.1:{port}")
    assert result.exit_code == 3
    assert "unreachable" in result.output and "SAGALOG_GATEWAY_URL" in result.output


def test_no_api_key_is_a_configuration_error(gateway_url: str) -> None:
    result = run("gates", "list", url=gateway_url, key=None)
    assert result.exit_code == 2 and "SAGALOG_GATEWAY_API_KEY" in result.output


def test_workflows_cancel_posts_the_reason_and_who_asks(gateway_url: str) -> None:
    result = run(
        "workflows",
        "cancel",
        "wf-1",
        "--reason",
        "duplicate request",
        "--by",
        "ops",
        url=gateway_url,
    )
    assert result.exit_code == 0, result.output
    assert "cancellation of wf-1 published: WorkflowCancelled e-9" in result.output
    method, path, _, body = StandIn.seen[-1]
    assert (method, path) == ("POST", "/v1/workflows/wf-1/cancel")
    assert body == {"reason": "duplicate request", "requested_by": "ops"}


def test_workflows_stuck_lists_the_idle_ones_by_state_and_version_and_exits_1(
    gateway_url: str,
) -> None:
    result = run("workflows", "stuck", "--older-than", "2h", url=gateway_url)
    assert result.exit_code == 1, result.output
    assert "1 workflow(s) idle for more than 2h:" in result.output
    assert "1  running" in result.output and "procurement v1" in result.output
    assert "wf-old" in result.output and "wf-1 " not in result.output
    asked = {
        urllib.parse.parse_qs(p.split("?", 1)[1]).get("state", [""])[0]
        for _, p, _, _ in StandIn.seen
    }
    assert "completed" not in asked and {"running", "pending_approval"} <= asked
    empty = run("workflows", "stuck", "--state", "queued", url=gateway_url)
    assert empty.exit_code == 0 and "no workflow in flight" in empty.output
    wrong = run("workflows", "stuck", "--older-than", "soon", url=gateway_url)
    assert wrong.exit_code == 2 and "not a positive duration" in wrong.output
