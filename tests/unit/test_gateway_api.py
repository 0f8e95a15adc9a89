"""The gateway's HTTP API through FastAPI's TestClient: a real read model (RocksDB in a
temporary directory) filled with records the tracker's rules produced, and a publisher
that keeps what it is asked to publish instead of sending it to Kafka."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from sagalog.contracts.catalog import SchemaCatalog
from sagalog.events import GateDecided, WebhookReceived
from sagalog.flows.model import Flow
from sagalog.flows.registry import FlowRegistry
from sagalog.flows.states import WorkflowState
from sagalog.services.gateway.api import create_app
from sagalog.services.gateway.application import Gateway
from sagalog.services.gateway.decisions import Decision, decision_event_id
from sagalog.services.gateway.follower import FollowerStatus
from sagalog.services.gateway.read_model import ReadModel, TransitionEntry
from sagalog.services.gateway.signatures import WebhookSource, sign_webhook
from sagalog.tracker import gate_token

from .gateway_fixtures import BEFORE_GATE, SECRET, KeptPublisher, at_gate, reference_flow, tracked

KEY = "unit-key-1"
OTHER_KEY = "unit-key-2"
LIMIT = 2048
NOW = dt.datetime(2026, 12, 3, 9, 0, tzinfo=dt.UTC)
"""The gateway's clock in these tests (signatures are dated against it)."""


@dataclass
class Rig:
    client: TestClient
    model: ReadModel
    publisher: KeptPublisher
    statuses: dict[str, FollowerStatus]
    flow: Flow
    follower: dict[str, bool]
    gateway: Gateway

    def set_status(self, status: FollowerStatus) -> None:
        self.statuses["now"] = status

    def post(self, path: str, body: Any, *, key: str | None = KEY, **kw: Any) -> Any:
        headers = {"X-API-Key": key} if key else {}
        headers.update(kw.pop("headers", {}))
        return self.client.post(path, json=body, headers=headers, **kw)

    def get(self, path: str, *, key: str | None = KEY, **params: Any) -> Any:
        headers = {"X-API-Key": key} if key else {}
        return self.client.get(path, headers=headers, params=params)


@pytest.fixture(scope="module")
def flow(repo_root: Path, catalog: SchemaCatalog) -> Flow:
    """The reference flow, with its request id declared as a correlation key."""
    return reference_flow(repo_root, catalog).model_copy(
        update={"correlation_keys": ("request_id",)}
    )


@pytest.fixture
def webhook_sources() -> dict[str, WebhookSource] | None:
    """None: webhooks unsigned; a test parametrizes it to configure sources."""
    return None


@pytest.fixture
def rig(
    tmp_path: Path, flow: Flow, webhook_sources: dict[str, WebhookSource] | None
) -> Iterator[Rig]:
    model = ReadModel(tmp_path / "rm")
    batch = model.batch()
    for record in (
        at_gate(flow, "wf-1"),
        at_gate(flow, "wf-2"),
        tracked(flow, "wf-3", *BEFORE_GATE[:2]).record("wf-3"),
    ):
        batch.put_record(record.workflow_id, json.dumps(record.to_stored()).encode())
    batch.add_transition(
        "wf-1",
        TransitionEntry(
            event_id="t-1",
            flow="procurement",
            flow_version=1,
            from_state="initiated",
            to_state="running",
            step="classify_request",
            cause_event_id="c-1",
            time_in_previous_state_ms=0,
            at_ms=1_700_000_000_000,
        ),
        partition=0,
        offset=0,
    )
    batch.commit()
    publisher = KeptPublisher()
    statuses = {"now": FollowerStatus(ready=True, health="ok", lag=0)}
    follower = {"alive": True}
    gateway = Gateway(
        model=model,
        publisher=publisher,
        flows=FlowRegistry([flow]),
        secret=SECRET,
        status=lambda: statuses["now"],
        follower_alive=lambda: follower["alive"],
        now=lambda: NOW,
    )
    app = create_app(
        gateway,
        api_keys=[KEY.encode(), OTHER_KEY.encode()],
        max_body_bytes=LIMIT,
        webhook_source="sagalog/gateway",
        webhook_sources=webhook_sources,
    )
    yield Rig(TestClient(app), model, publisher, statuses, flow, follower, gateway)
    model.close()


def token_of(rig: Rig, workflow_id: str) -> str:
    record = rig.model.record(workflow_id)
    assert record is not None and record.gate is not None
    return record.gate.token


def decision(rig: Rig, workflow_id: str = "wf-1", **changes: Any) -> dict[str, Any]:
    return {
        "token": token_of(rig, "wf-1"),
        "workflow_id": workflow_id,
        "decision": "approve",
        "decided_by": "ann@example.com",
        **changes,
    }


def assert_error(reply: Any, status: int, *words: str) -> dict[str, Any]:
    assert reply.status_code == status, reply.text
    body = reply.json()
    assert set(body) == {"error", "detail"}, body
    for word in words:
        assert word in body["error"], body["error"]
    return dict(body)


# -- keys ----------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/v1/gates", "/v1/workflows", "/v1/workflows/wf-1"])
def test_v1_needs_an_api_key_401_without_and_403_with_a_wrong_one(rig: Rig, path: str) -> None:
    assert_error(rig.get(path, key=None), 401, "X-API-Key")
    assert_error(rig.get(path, key="guess"), 403, "not valid")
    assert rig.get(path, key=OTHER_KEY).status_code == 200


def test_a_post_without_a_key_is_refused_before_its_body_is_looked_at(rig: Rig) -> None:
    assert_error(rig.post("/v1/gates/decisions", {"junk": 1}, key=None), 401)
    assert_error(rig.post("/v1/webhooks/x", {"workflow_id": "wf-1"}, key="nope"), 403)
    assert rig.publisher.sent == []


def test_health_and_openapi_need_no_key(rig: Rig) -> None:
    health = rig.client.get("/healthz")
    assert health.status_code == 200 and health.json()["ready"] is True
    spec = rig.client.get("/openapi.json").json()
    assert "/v1/gates/decisions" in spec["paths"]
    assert "X-API-Key" in json.dumps(spec["components"]["securitySchemes"])


def test_while_catching_up_reads_and_decisions_answer_503(rig: Rig) -> None:
    rig.set_status(FollowerStatus(ready=False, lag=42, waiting_for="topic x"))
    health = rig.client.get("/healthz")
    assert health.status_code == 503 and health.json()["status"] == "starting"
    reply = rig.get("/v1/gates")
    body = assert_error(reply, 503, "still reading", "retry")
    assert reply.headers["Retry-After"] == "5"
    assert body["detail"]["lag"] == 42
    assert_error(rig.post("/v1/gates/decisions", decision(rig)), 503)
    assert rig.publisher.sent == []


def test_health_ready_is_healthz_and_live_follows_the_follower_thread(rig: Rig) -> None:
    assert rig.client.get("/health/ready").json() == rig.client.get("/healthz").json()
    assert rig.client.get("/health/live").status_code == 200
    rig.set_status(FollowerStatus(ready=False, lag=42, waiting_for="topic x"))
    assert rig.client.get("/health/ready").status_code == 503
    assert rig.client.get("/health/live").status_code == 200, "catching up is not stuck"
    rig.follower["alive"] = False
    live = rig.client.get("/health/live")
    assert live.status_code == 503 and live.json()["follower"] == "stopped"


# -- gates ---------------------------------------------------------------------------


def test_open_gates_are_listed_with_their_tokens(rig: Rig) -> None:
    gates = rig.get("/v1/gates").json()["gates"]
    assert [(g["workflow_id"], g["gate"], g["assignee"]) for g in gates] == [
        ("wf-1", "manager_approval", "managers@procurement.example"),
        ("wf-2", "manager_approval", "managers@procurement.example"),
    ]
    assert gates[0]["token"] == token_of(rig, "wf-1")
    assert gates[0]["escalation_level"] == 0 and gates[0]["deadline"] > gates[0]["opened_at"]
    assert rig.get("/v1/gates", assignee="someone@else").json() == {"gates": []}
    assert len(rig.get("/v1/gates", flow="procurement").json()["gates"]) == 2


def test_a_decision_publishes_gate_decided_once(rig: Rig) -> None:
    reply = rig.post("/v1/gates/decisions", decision(rig, comment="fine"))
    assert reply.status_code == 202, reply.text
    accepted = reply.json()
    token = token_of(rig, "wf-1")
    assert accepted["event_id"] == decision_event_id(token, Decision.APPROVE)
    assert accepted["duplicate"] is False and accepted["gate"] == "manager_approval"
    [(topic, event, metadata)] = rig.publisher.sent
    assert topic == rig.flow.topic
    assert event == GateDecided(
        gate="manager_approval",
        token=token,
        decision="APPROVED",
        decided_by="ann@example.com",
        comment="fine",
    )
    assert metadata["workflow_id"] == "wf-1" and metadata["flow_version"] == 1

    again = rig.post("/v1/gates/decisions", decision(rig, comment="fine"))
    assert again.status_code == 202
    assert again.json() == {**accepted, "duplicate": True}
    assert len(rig.publisher.sent) == 1


def test_the_other_answer_after_a_decision_is_409(rig: Rig) -> None:
    assert rig.post("/v1/gates/decisions", decision(rig)).status_code == 202
    body = assert_error(
        rig.post("/v1/gates/decisions", decision(rig, decision="reject")), 409, "already decided"
    )
    assert body["detail"]["decision"] == "approve"
    assert len(rig.publisher.sent) == 1


@pytest.mark.parametrize(
    ("change", "status", "words"),
    [
        ({"workflow_id": "wf-404"}, 404, ("no workflow 'wf-404'",)),
        ({"workflow_id": "wf-3"}, 409, ("waits for no decision",)),
        ({"token": gate_token(SECRET, "wf-2", "manager_approval", 1)}, 403, ("does not belong",)),
        ({"token": "g1.forged"}, 403, ("does not belong",)),
    ],
)
def test_refused_decisions_publish_nothing(
    rig: Rig, change: dict[str, Any], status: int, words: tuple[str, ...]
) -> None:
    assert_error(rig.post("/v1/gates/decisions", decision(rig, **change)), status, *words)
    assert rig.publisher.sent == []


def test_malformed_json_is_400_and_a_bad_field_422_naming_it(rig: Rig) -> None:
    reply = rig.client.post(
        "/v1/gates/decisions",
        content=b'{"token": "g1.x", ',
        headers={"X-API-Key": KEY, "Content-Type": "application/json"},
    )
    assert_error(reply, 400, "not valid JSON")
    body = assert_error(
        rig.post("/v1/gates/decisions", decision(rig, decision="maybe")), 422, "decision"
    )
    assert body["detail"][0]["loc"] == ["body", "decision"]
    missing = {k: v for k, v in decision(rig).items() if k != "decided_by"}
    assert_error(rig.post("/v1/gates/decisions", missing), 422, "decided_by", "Field required")
    assert_error(rig.post("/v1/gates/decisions", decision(rig, extra=1)), 422, "extra")
    assert rig.publisher.sent == []


def test_kafka_down_is_503_with_retry_after_and_a_retry_then_publishes(rig: Rig) -> None:
    rig.publisher.down = True
    reply = rig.post("/v1/gates/decisions", decision(rig))
    body = assert_error(reply, 503, "not acknowledged", "retry the same request")
    assert int(reply.headers["Retry-After"]) >= 1
    assert body["detail"]["event_id"] == decision_event_id(token_of(rig, "wf-1"), Decision.APPROVE)
    health = rig.client.get("/healthz")
    assert health.status_code == 200  # reads are still served
    assert health.json()["status"] == "degraded" and "publish" in health.json()["problems"]
    assert rig.get("/v1/workflows/wf-1").status_code == 200
    rig.publisher.down = False
    assert rig.post("/v1/gates/decisions", decision(rig)).status_code == 202
    assert len(rig.publisher.sent) == 1
    assert rig.client.get("/healthz").json()["status"] == "ok"


def test_a_webhook_without_idempotency_key_is_told_to_send_one_when_kafka_is_down(
    rig: Rig,
) -> None:
    rig.publisher.down = True
    reply = rig.post("/v1/webhooks/signature.completed?workflow_id=wf-3", {"status": "signed"})
    assert_error(reply, 503, "Idempotency-Key")
    assert "Retry-After" in reply.headers


def test_a_degraded_follower_keeps_reads_served_and_says_so(rig: Rig) -> None:
    problems = {"kafka": {"for_s": 3.0, "error": "all brokers down"}}
    rig.set_status(FollowerStatus(ready=True, health="degraded", lag=0, problems=problems))
    health = rig.client.get("/healthz")
    assert health.status_code == 200
    assert health.json()["status"] == "degraded"
    assert health.json()["problems"]["kafka"]["error"] == "all brokers down"
    assert rig.get("/v1/gates").status_code == 200


# -- webhooks ------------------------------------------------------------------------


def test_a_webhook_becomes_webhook_received_on_the_workflow_topic(rig: Rig) -> None:
    reply = rig.post(
        "/v1/webhooks/signature.completed?workflow_id=wf-3",
        {"envelope": "E-1", "status": "signed"},
        headers={"X-Webhook-Source": "docusign"},
    )
    assert reply.status_code == 202, reply.text
    [(topic, event, metadata)] = rig.publisher.sent
    assert topic == rig.flow.topic and metadata["workflow_id"] == "wf-3"
    assert isinstance(event, WebhookReceived)
    assert (event.kind, event.source) == ("signature.completed", "docusign")
    assert json.loads(event.payload_json) == {"envelope": "E-1", "status": "signed"}
    assert reply.json()["event_type"] == "sagalog.v1.WebhookReceived"


def test_a_webhook_may_name_its_workflow_in_the_body_and_be_retried_once(rig: Rig) -> None:
    headers = {"Idempotency-Key": "delivery-7"}
    first = rig.post("/v1/webhooks/payment", {"workflow_id": "wf-2"}, headers=headers)
    second = rig.post("/v1/webhooks/payment", {"workflow_id": "wf-2"}, headers=headers)
    assert first.status_code == second.status_code == 202
    assert second.json() == {**first.json(), "duplicate": True}
    assert len(rig.publisher.sent) == 1
    assert rig.publisher.sent[0][1].source == "sagalog/gateway"


def test_bad_webhooks_get_a_4xx_with_a_message_and_publish_nothing(rig: Rig) -> None:
    send = rig.client.post
    headers = {"X-API-Key": KEY, "Content-Type": "application/json"}
    assert_error(
        send("/v1/webhooks/x?workflow_id=wf-1", content=b"{oops", headers=headers),
        400,
        "not valid JSON",
        "line 1 column 2",
    )
    assert_error(send("/v1/webhooks/x", content=b"[1, 2]", headers=headers), 400, "workflow_id")
    assert_error(
        send("/v1/webhooks/x?workflow_id=wf-1", content=b"", headers=headers), 400, "empty"
    )
    assert_error(rig.post("/v1/webhooks/x?workflow_id=nope", {}), 404, "no workflow 'nope'")
    assert_error(rig.post("/v1/webhooks/Bad Kind?workflow_id=wf-1", {}), 400, "not a valid name")
    big = {"workflow_id": "wf-1", "blob": "x" * LIMIT}
    assert_error(rig.post("/v1/webhooks/x", big), 413, "over the gateway's limit of 2048")
    assert rig.publisher.sent == []


def test_a_chunked_body_over_the_limit_is_stopped_too(rig: Rig) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"workflow_id": "wf-1", "blob": "'
        for _ in range(10):
            yield b"x" * 512
        yield b'"}'

    reply = rig.client.post(
        "/v1/webhooks/x",
        content=chunks(),
        headers={"X-API-Key": KEY, "Content-Type": "application/json"},
    )
    assert_error(reply, 413, "limit")
    assert rig.publisher.sent == []


# -- workflows -----------------------------------------------------------------------


def test_workflows_are_listed_by_state_and_flow(rig: Rig) -> None:
    waiting = rig.get("/v1/workflows", state="pending_approval").json()
    assert [w["workflow_id"] for w in waiting["workflows"]] == ["wf-1", "wf-2"]
    assert waiting["next_after"] is None
    page = rig.get("/v1/workflows", limit=1).json()
    assert [w["workflow_id"] for w in page["workflows"]] == ["wf-1"]
    assert page["next_after"] == "wf-1"
    assert rig.get("/v1/workflows", flow="other").json()["workflows"] == []
    assert_error(rig.get("/v1/workflows", state="sleeping"), 422, "state")


def test_a_workflow_shows_state_history_timers_and_its_open_gate(rig: Rig) -> None:
    shown = rig.get("/v1/workflows/wf-1").json()
    assert shown["state"] == "pending_approval" and shown["current"] == "manager_approval"
    assert shown["open_gate"]["token"] == token_of(rig, "wf-1")
    assert [h["event_id"] for h in shown["history"]] == ["t-1"]
    kinds = {t["kind"] for t in shown["pending_timers"]}
    assert {"gate_escalation", "gate_deadline", "workflow_deadline"} <= kinds
    assert "reserve_budget" in shown["completed"]
    assert_error(rig.get("/v1/workflows/nope"), 404, "no workflow 'nope'")


def test_an_unknown_endpoint_is_a_json_404(rig: Rig) -> None:
    assert_error(rig.get("/v2/things"), 404, "no such endpoint")


# -- the reviews page's old address, and read-only keys ----------------------------


def test_the_old_reviews_page_redirects_to_the_console_inbox_and_drops_the_key(rig: Rig) -> None:
    reply = rig.client.get("/reviews", params={"api_key": KEY}, follow_redirects=False)
    assert reply.status_code == 301
    assert reply.headers["location"] == "/console/gates"
    assert KEY not in reply.headers["location"]
    assert reply.headers["referrer-policy"] == "no-referrer"
    # Followed, it lands on the sign-in page: the key in the old URL opened nothing.
    landed = rig.client.get("/reviews", params={"api_key": KEY})
    assert landed.url.path == "/console/sign-in" and "next=%2Fconsole%2Fgates" in str(landed.url)


def test_the_old_form_post_is_gone_and_publishes_nothing(rig: Rig) -> None:
    form = {"api_key": KEY, "workflow_id": "wf-1", "token": token_of(rig, "wf-1")}
    reply = rig.client.post("/reviews/decisions", data={**form, "decision": "approve"})
    assert reply.status_code in (404, 405)
    assert rig.publisher.sent == []


def read_only_rig(rig: Rig) -> TestClient:
    """The same gateway with a read-only key as well."""
    app = create_app(
        rig.gateway,
        api_keys=[KEY.encode()],
        read_only_keys=[READER_KEY.encode()],
        max_body_bytes=LIMIT,
        webhook_source="sagalog/gateway",
    )
    return TestClient(app)


READER_KEY = "unit-reader-key"


def test_a_read_only_key_reads_everything_and_every_post_is_a_403(rig: Rig) -> None:
    client = read_only_rig(rig)
    reader = {"X-API-Key": READER_KEY}
    for path in ("/v1/gates", "/v1/workflows", "/v1/workflows/wf-1"):
        assert client.get(path, headers=reader).status_code == 200, path
    posts = {
        "/v1/gates/decisions": decision(rig),
        "/v1/workflows/wf-1/cancel": {"reason": "r", "requested_by": "x"},
        "/v1/webhooks/doc": {"workflow_id": "wf-3"},
    }
    for path, body in posts.items():
        assert_error(client.post(path, json=body, headers=reader), 403, "read-only", "operator")
    assert rig.publisher.sent == []
    # The operator key still acts through the same app.
    done = client.post("/v1/gates/decisions", json=decision(rig), headers={"X-API-Key": KEY})
    assert done.status_code == 202, done.text


# -- signed webhooks -----------------------------------------------------------------

DOCS = WebhookSource(secret=b"docs-secret-0123456789", kinds=frozenset({"document.filed"}))
SIGNED = {"docs": DOCS}


def signed_post(
    rig: Rig,
    kind: str,
    body: bytes,
    *,
    source: str = "docs",
    secret: bytes = DOCS.secret,
    workflow_id: str | None = "wf-3",
    signed_for: str | None = None,
    timestamp: int | None = None,
) -> Any:
    """POST a webhook signed as ``source`` would (``signed_for``: sign another workflow id)."""
    t = timestamp if timestamp is not None else int(NOW.timestamp())
    signed = signed_for if signed_for is not None else workflow_id
    signature = sign_webhook(
        secret,
        kind=kind,
        body=body,
        timestamp=t,
        query=f"workflow_id={signed}" if signed else "",
    )
    query = f"?workflow_id={workflow_id}" if workflow_id else ""
    headers = {
        "X-API-Key": KEY,
        "X-Webhook-Source": source,
        "X-Sagalog-Signature": signature,
        "Content-Type": "application/json",
    }
    return rig.client.post(f"/v1/webhooks/{kind}{query}", content=body, headers=headers)


@pytest.mark.parametrize("webhook_sources", [SIGNED])
def test_a_signed_webhook_from_a_known_source_is_published(rig: Rig) -> None:
    reply = signed_post(rig, "document.filed", b'{"document": "10-K.pdf"}')
    assert reply.status_code == 202, reply.text
    [(_, event, metadata)] = rig.publisher.sent
    assert isinstance(event, WebhookReceived) and event.source == "docs"
    assert metadata["workflow_id"] == "wf-3"


@pytest.mark.parametrize("webhook_sources", [SIGNED])
@pytest.mark.parametrize(
    ("how", "status", "words"),
    [
        ("forged", 401, ("does not match its body", "'docs'")),
        ("unsigned", 401, ("is not signed", "'docs'")),
        ("unknown source", 401, ("'mallory' is not one this gateway accepts",)),
        ("other workflow", 401, ("does not match",)),
        ("stale", 401, ("tolerance 300 s",)),
        ("malformed", 401, ("malformed",)),
        ("kind not allowed", 403, ("may not send kind 'invoice.paid'", "document.filed")),
    ],
)
def test_a_bad_webhook_signature_is_refused_and_nothing_is_written(
    rig: Rig, how: str, status: int, words: tuple[str, ...]
) -> None:
    body = b'{"document": "10-K.pdf"}'
    now = int(NOW.timestamp())
    if how == "forged":
        reply = signed_post(rig, "document.filed", body, secret=b"guessed-secret-000000")
    elif how == "unsigned":
        reply = rig.client.post(
            "/v1/webhooks/document.filed?workflow_id=wf-3",
            content=body,
            headers={"X-API-Key": KEY, "X-Webhook-Source": "docs"},
        )
    elif how == "unknown source":
        reply = signed_post(rig, "document.filed", body, source="mallory")
    elif how == "other workflow":  # a captured call redirected through the query string
        reply = signed_post(rig, "document.filed", body, workflow_id="wf-2", signed_for="wf-3")
    elif how == "stale":
        reply = signed_post(rig, "document.filed", body, timestamp=now - 3600)
    elif how == "malformed":
        reply = rig.client.post(
            "/v1/webhooks/document.filed?workflow_id=wf-3",
            content=body,
            headers={"X-API-Key": KEY, "X-Webhook-Source": "docs", "X-Sagalog-Signature": "v1"},
        )
    else:
        reply = signed_post(rig, "invoice.paid", body)
    assert_error(reply, status, *words)
    assert rig.publisher.sent == []


# -- webhooks by correlation key -----------------------------------------------------


def keyed(rig: Rig, workflow_id: str, request_id: str, *, done: bool = False) -> None:
    """Give a stored workflow a request id (and, with ``done``, an end)."""
    record = rig.model.record(workflow_id)
    assert record is not None
    update: dict[str, Any] = {"keys": {"request_id": request_id}}
    if done:
        update["state"] = WorkflowState.COMPLETED
    record = record.model_copy(update=update)
    batch = rig.model.batch()
    batch.put_record(workflow_id, record.model_dump_json().encode())
    batch.commit()


def test_a_webhook_may_name_its_workflow_by_a_correlation_key(rig: Rig) -> None:
    keyed(rig, "wf-3", "PR-7")
    keyed(rig, "wf-1", "PR-7", done=True)  # an old workflow with the same reference
    reply = rig.post("/v1/webhooks/quote.received?request_id=PR-7", {"amount": 10})
    assert reply.status_code == 202, reply.text
    assert reply.json()["workflow_id"] == "wf-3"  # the one still running
    [(_, event, metadata)] = rig.publisher.sent
    assert isinstance(event, WebhookReceived) and metadata["workflow_id"] == "wf-3"


def test_a_correlation_key_that_names_no_workflow_or_several_is_refused(rig: Rig) -> None:
    assert_error(
        rig.post("/v1/webhooks/quote.received?request_id=PR-0", {}),
        404,
        "no workflow with request_id='PR-0' is known",
    )
    keyed(rig, "wf-2", "PR-8")
    keyed(rig, "wf-3", "PR-8")
    body = assert_error(
        rig.post("/v1/webhooks/quote.received?request_id=PR-8", {}),
        409,
        "request_id='PR-8' names 2 running workflows (wf-2, wf-3)",
        "?workflow_id=",
    )
    assert body["detail"]["workflow_ids"] == ["wf-2", "wf-3"]
    assert_error(
        rig.post("/v1/webhooks/quote.received?order=1", {}), 400, "unknown query parameter"
    )
    assert rig.publisher.sent == []


def test_a_workflow_that_ends_leaves_the_key_index_with_its_record(rig: Rig) -> None:
    keyed(rig, "wf-3", "PR-9")
    assert [r.workflow_id for r in rig.model.by_key("request_id", "PR-9")] == ["wf-3"]
    batch = rig.model.batch()
    batch.put_record("wf-3", None)  # compacted away
    batch.commit()
    assert rig.model.by_key("request_id", "PR-9") == []


# -- cancellations -------------------------------------------------------------------


def test_a_cancellation_is_published_once_and_an_ended_workflow_refuses_it(rig: Rig) -> None:
    body = {"reason": "duplicate of PR-7", "requested_by": "ops@example.com"}
    first = rig.post("/v1/workflows/wf-3/cancel", body)
    assert first.status_code == 202, first.text
    assert first.json()["event_type"] == "sagalog.v1.WorkflowCancelled"
    again = rig.post("/v1/workflows/wf-3/cancel", body)
    assert again.status_code == 202 and again.json()["duplicate"] is True
    assert again.json()["event_id"] == first.json()["event_id"]
    [(topic, event, metadata)] = rig.publisher.sent
    assert (topic, metadata["workflow_id"]) == ("procurement.events", "wf-3")
    assert (event.reason, event.requested_by) == ("duplicate of PR-7", "ops@example.com")
    keyed(rig, "wf-2", "PR-1", done=True)
    assert_error(
        rig.post("/v1/workflows/wf-2/cancel", body), 409, "is completed", "nothing left to cancel"
    )
    assert_error(rig.post("/v1/workflows/nope/cancel", body), 404, "no workflow 'nope'")
    assert_error(rig.post("/v1/workflows/wf-1/cancel", {"reason": ""}), 422)
    assert len(rig.publisher.sent) == 1


def test_metrics_need_no_key_and_count_requests_by_route_not_by_path(rig: Rig) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    def served(method: str, route: str, status: str) -> float:
        text = rig.client.get("/metrics").text
        return sum(
            sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == "sagalog_gateway_requests_total"
            and sample.labels == {"method": method, "route": route, "status": status}
        )

    route = "/v1/workflows/{workflow_id:path}"  # the route's template, as declared
    before = served("GET", route, "200"), served("GET", route, "404")
    assert rig.get("/v1/workflows/wf-1").status_code == 200
    assert rig.get("/v1/workflows/wf-2").status_code == 200
    assert rig.get("/v1/workflows/nobody").status_code == 404
    assert served("GET", route, "200") - before[0] == 2  # one series for every workflow
    assert served("GET", route, "404") - before[1] == 1
    assert "/metrics" not in rig.client.get("/openapi.json").json()["paths"]


def test_a_decision_continues_the_workflow_s_trace_and_show_names_it(rig: Rig) -> None:
    traced = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    record = rig.model.record("wf-1")
    assert record is not None
    batch = rig.model.batch()
    batch.put_record(
        "wf-1", json.dumps(record.model_copy(update={"traceparent": traced}).to_stored()).encode()
    )
    batch.commit()
    assert rig.get("/v1/workflows/wf-1").json()["trace_id"] == traced.split("-")[1]
    assert rig.post("/v1/gates/decisions", decision(rig)).status_code == 202
    [(_, event, metadata)] = rig.publisher.sent
    assert isinstance(event, GateDecided)
    # Nothing records spans in this process: the record's context passes on unchanged.
    assert metadata["traceparent"] == traced
