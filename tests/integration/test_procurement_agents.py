"""The procurement agents on the real broker, each a separate process.

- intake, retrieval, risk and budget turn one ``RequestSubmitted`` into
  ``RequestClassified`` -> ``PoliciesRetrieved`` -> ``RiskScored`` -> ``BudgetReserved``;
- the risk agent asks a language model (a real HTTP server on localhost speaking the
  OpenAI chat completions protocol) and falls back to its offline model on a bad answer;
- the purchasing agent ignores a forged approval, orders once for a valid one, and
  cancels the order when compensating (witness: the ERP stand-in's own book);
- the notification agent mails the vendor once and the correction notice once.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from procurement.corpus import CORPUS_DIR, load_documents
from procurement.exceptions import ModelAnswerError
from procurement.risk import OFFLINE_MODEL_ID, SYSTEM_PROMPT, prompt_text
from risk_agent.llm import chat_completion
from sagalog.agents.failures import NonRetryableError, RetryableError
from sagalog.agents.lineage import prompt_hash
from sagalog.blobs.store import BlobRef, LocalBlobStore
from sagalog.publisher import EventPublisher, PublishedEvent
from sagalog.tracker.gates import gate_token

from .service_harness import ServiceLab, in_workflow, of_type

SUBMITTED = "procurement.v1.RequestSubmitted"
CLASSIFIED = "procurement.v1.RequestClassified"
RETRIEVED = "procurement.v1.PoliciesRetrieved"
SCORED = "procurement.v1.RiskScored"
RESERVED = "procurement.v1.BudgetReserved"
RECORDED = "sagalog.v1.EffectRecorded"
OPENED = "sagalog.v1.GateOpened"
DECIDED = "sagalog.v1.GateDecided"
COMPENSATE = "sagalog.v1.CompensationRequested"
COMPENSATED = "sagalog.v1.CompensationCompleted"
ORDERED = "procurement.v1.PurchaseOrderCreated"
CANCELLED = "procurement.v1.PurchaseOrderCancelled"
NOTIFIED = "procurement.v1.VendorNotified"
CORRECTED = "procurement.v1.CorrectionNoticeSent"
GATE = "manager_approval"
SECRET = "test-gate-secret-0123456789abcdef"


def request(request_id: str, **overrides: Any) -> dict[str, Any]:
    return {
        "request_id": request_id,
        "requester": "ana@example.com",
        "department": "platform",
        "title": "Developer laptops for the platform team",
        "description": (
            "Please order 4 laptops (32 GB RAM, 1 TB SSD) with docking stations for the "
            "platform engineers joining in March. Cost center CC-4410, delivery by 2027-03-01."
        ),
        "amount": "7200.00",
        "currency": "EUR",
        "vendor": "Dell Technologies",
        "submitted_at": "2026-11-29T09:00:00Z",
        **overrides,
    }


def handled_ids(lab: ServiceLab, module: str) -> set[str]:
    """Event ids the agent's runtime logged as handled (a handler ran and committed)."""
    lines = [json.loads(line) for line in lab.log(module).splitlines() if line.startswith("{")]
    return {line["event_id"] for line in lines if line.get("action") == "handled"}


def wait_handled(lab: ServiceLab, module: str, ids: set[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not ids <= handled_ids(lab, module):
        assert time.monotonic() < deadline, (
            f"{module} did not handle {sorted(ids - handled_ids(lab, module))}:\n"
            f"{lab.log(module)[-3000:]}"
        )
        time.sleep(0.1)


# -- the assessment chain ---------------------------------------------------------------


def test_one_request_becomes_classified_retrieved_scored_and_reserved(
    service_lab: ServiceLab,
) -> None:
    lab = service_lab
    for module in ("intake_agent", "retrieval_agent", "risk_agent", "budget_agent"):
        lab.start(module)
    out = lab.publisher()
    laptops = out.publish(lab.topic, SUBMITTED, request("PR-1001"), workflow_id="wf-laptops")
    booth = out.publish(
        lab.topic,
        SUBMITTED,
        request(
            "PR-1002",
            department="marketing",
            title="Booth and giveaways for the Web Summit",
            description=(
                "Design and build of a booth for Web Summit Lisbon with graphics, plus 800 "
                "branded t-shirts as giveaways for visitors; needed by 2027-10-20."
            ),
            amount="48000.00",
            vendor="Brightstage Events Ltd",
            priority="URGENT",
        ),
        workflow_id="wf-booth",
        priority="URGENT",
    )

    records = lab.records(expect=lambda rs: len(of_type(rs, RESERVED)) == 2, timeout=120)
    assert len(of_type(records, RESERVED)) == 2, [r["type"] for r in records]

    for sent in (laptops, booth):
        chain = [
            r
            for r in in_workflow(records, sent.headers.workflow_id)
            if r["type"] in (SUBMITTED, CLASSIFIED, RETRIEVED, SCORED, RESERVED)
        ]
        # One of each, in the flow's order, each caused by the one before it.
        assert [r["type"] for r in chain] == [SUBMITTED, CLASSIFIED, RETRIEVED, SCORED, RESERVED]
        assert chain[0]["headers"]["ce_id"] == sent.headers.id
        for before, after in itertools.pairwise(chain):
            assert after["headers"]["ce_causationid"] == before["headers"]["ce_id"]

    def payload(workflow: str, event_type: str) -> dict[str, Any]:
        [record] = of_type(in_workflow(records, workflow), event_type)
        return record["payload"]

    classified = payload("wf-laptops", CLASSIFIED)
    assert classified["category"] == "hardware" and classified["confidence"] > 0.5
    assert classified["extracted"] == {
        "quantity": "4",
        "unit": "laptops",
        "delivery_date": "2027-03-01",
        "cost_center": "CC-4410",
    }
    assert classified["classifier"].startswith("multinomial-naive-bayes/1")
    assert payload("wf-booth", CLASSIFIED)["category"] == "marketing"

    documents = payload("wf-laptops", RETRIEVED)["documents"]
    # The hardware policy and the Dell framework agreement, ahead of everything else.
    assert {d["document_id"] for d in documents[:2]} == {"POL-001", "CTR-2024-017"}
    assert payload("wf-booth", RETRIEVED)["documents"][0]["document_id"] == "POL-006"

    scored = payload("wf-laptops", SCORED)
    assert scored["level"] == "MEDIUM" and 0.3 <= scored["score"] < 0.6
    assert "POL-001" in scored["rationale"] and "CTR-2024-017" in scored["rationale"]
    lineage = scored["lineage"]
    assert lineage["model_id"] == OFFLINE_MODEL_ID
    assert lineage["input_refs"] == [laptops.headers.id, *(d["document_id"] for d in documents)]
    assert lineage["prompt_hash"].startswith("sha256:")
    risky = payload("wf-booth", SCORED)
    assert risky["level"] == "HIGH"
    assert any("no prior contract" in f for f in risky["factors"])
    assert any("URGENT" in f for f in risky["factors"])

    reserved = payload("wf-laptops", RESERVED)
    assert reserved["cost_center"] == "CC-4410"  # read from the text by the intake agent
    assert str(reserved["amount"]) == "7200.00"
    book = lab.standins["ledger"].book
    assert sorted(e["body"]["request_id"] for e in book.effects.values()) == ["PR-1001", "PR-1002"]


# -- the risk agent with a language model --------------------------------------------------


class FakeModel(ThreadingHTTPServer):
    """An OpenAI-compatible chat completions endpoint answering from a script."""

    daemon_threads = True

    def __init__(self, answer: Callable[[str], tuple[int, str]]) -> None:
        super().__init__(("127.0.0.1", 0), _FakeModelHandler)
        self.answer = answer
        self.received: list[dict[str, Any]] = []

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _FakeModelHandler(BaseHTTPRequestHandler):
    server: FakeModel

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.received.append(
            {"path": self.path, "body": body, "auth": self.headers.get("Authorization")}
        )
        status, content = self.server.answer(body["messages"][-1]["content"])
        if status == 200:
            reply = json.dumps(
                {
                    "id": "chatcmpl-test",
                    "object": "chat.completion",
                    "model": body["model"],
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": content},
                            "finish_reason": "stop",
                        }
                    ],
                }
            ).encode()
        else:
            reply = content.encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)


@pytest.fixture
def fake_model() -> Iterator[Callable[[Callable[[str], tuple[int, str]]], FakeModel]]:
    servers: list[FakeModel] = []

    def start(answer: Callable[[str], tuple[int, str]]) -> FakeModel:
        server = FakeModel(answer)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.shutdown()


GOOD_ANSWER = """```json
{"score": 0.72, "level": "HIGH", "rationale": "New vendor and above the threshold.",
 "factors": ["vendor without a prior contract", "amount above the approval threshold"]}
```"""


def publish_assessed(out: EventPublisher, topic: str, request_id: str, workflow: str) -> str:
    """A workflow as far as retrieval; returns the RequestSubmitted's event id."""
    sent = out.publish(topic, SUBMITTED, request(request_id), workflow_id=workflow)
    out.publish(
        topic,
        CLASSIFIED,
        {
            "request_id": request_id,
            "category": "hardware",
            "confidence": 0.93,
            "extracted": {"quantity": "4"},
            "classifier": "tests",
        },
        workflow_id=workflow,
    )
    out.publish(
        topic,
        RETRIEVED,
        {
            "request_id": request_id,
            "documents": [
                {"document_id": "POL-001", "kind": "policy", "title": "Hardware", "score": 9.1},
                {"document_id": "CTR-2024-017", "kind": "contract", "title": "Dell", "score": 8.0},
            ],
            "retriever": "tests",
        },
        workflow_id=workflow,
    )
    return sent.headers.id


def test_risk_agent_asks_the_model_and_falls_back_on_an_invalid_answer(
    service_lab: ServiceLab, fake_model: Callable[..., FakeModel]
) -> None:
    lab = service_lab
    model = fake_model(
        lambda prompt: (
            (200, GOOD_ANSWER) if "PR-2001" in prompt else (200, "The request looks fine to me.")
        )
    )
    blobs = LocalBlobStore(lab.tmp / "blobs")
    lab.start(
        "risk_agent",
        llm_base_url=model.base_url,
        llm_model="fake-risk-1",
        llm_api_key="sk-test",
        blob_dir=blobs.root,
        blob_threshold_bytes=300,  # the model's prompt (policies and contracts) as a blob
    )
    out = lab.publisher()
    good = publish_assessed(out, lab.topic, "PR-2001", "wf-good")
    bad = publish_assessed(out, lab.topic, "PR-2002", "wf-bad")
    records = lab.records(expect=lambda rs: len(of_type(rs, SCORED)) == 2, timeout=90)
    [answered] = [r["payload"] for r in of_type(in_workflow(records, "wf-good"), SCORED)]
    [fell_back] = [r["payload"] for r in of_type(in_workflow(records, "wf-bad"), SCORED)]

    # The model's answer, validated, with the lineage of that very prompt.
    assert (answered["score"], answered["level"]) == (0.72, "HIGH")
    assert answered["factors"] == [
        "vendor without a prior contract",
        "amount above the approval threshold",
    ]
    asked = next(r for r in model.received if "PR-2001" in r["body"]["messages"][-1]["content"])
    assert asked["path"] == "/v1/chat/completions" and asked["auth"] == "Bearer sk-test"
    assert asked["body"]["model"] == "fake-risk-1" and asked["body"]["temperature"] == 0
    lineage = answered["lineage"]
    assert lineage["model_id"] == "openai-compatible:fake-risk-1"
    assert lineage["prompt_hash"] == prompt_hash(prompt_text(asked["body"]["messages"]))
    assert lineage["input_refs"] == [good, "POL-001", "CTR-2024-017"]
    # The call's parameters, the instructions' version and each input, by hash.
    assert lineage["parameters"] == {
        "model": '"fake-risk-1"',
        "temperature": "0",
        "response_format": '{"type":"json_object"}',
    }
    assert lineage["template_hash"] == prompt_hash(SYSTEM_PROMPT)
    assert sorted(lineage["input_hashes"]) == sorted([good, "POL-001", "CTR-2024-017"])
    policy = next(d for d in load_documents(CORPUS_DIR) if d.document_id == "POL-001")
    assert lineage["input_hashes"]["POL-001"] == prompt_hash(policy.body)
    # The prompt itself, over the threshold, is a blob: the lineage's hash names it.
    ref = BlobRef.from_avro(answered["prompt"])
    assert lineage["prompt_hash"] == f"sha256:{ref.sha256}"
    assert blobs.get(ref).decode() == prompt_text(asked["body"]["messages"])

    # Not JSON: the offline model decided, and says why.
    assert "answer was rejected" in fell_back["rationale"]
    assert "offline model scored instead" in fell_back["rationale"]
    assert fell_back["lineage"]["model_id"] == OFFLINE_MODEL_ID
    assert fell_back["lineage"]["input_refs"] == [bad, "POL-001", "CTR-2024-017"]
    assert fell_back["level"] == "MEDIUM"  # 7200 EUR on a 5000 EUR threshold, known vendor
    offline = fell_back["prompt"]  # the facts as JSON: inline or a blob, by their size
    if isinstance(offline, dict):
        offline = blobs.get(BlobRef.from_avro(offline)).decode()
    assert prompt_hash(offline) == fell_back["lineage"]["prompt_hash"]

    # Both raw answers are in the log, so a replay or an auditor sees what the model said.
    told = [json.loads(r["payload"]["result_json"]) for r in of_type(records, RECORDED)]
    assert sorted(t["content"] for t in told) == sorted(
        [GOOD_ANSWER, "The request looks fine to me."]
    )
    assert len(model.received) == 2


def test_model_client_classifies_failures_by_their_retry_rule(
    fake_model: Callable[..., FakeModel],
) -> None:
    answers = {
        "busy": (503, '{"error": "overloaded"}'),
        "limited": (429, '{"error": "rate limited"}'),
        "denied": (401, '{"error": "bad key"}'),
    }
    model = fake_model(lambda prompt: answers.get(prompt, (200, "{}")))

    def ask(prompt: str) -> dict[str, str]:
        messages = [{"role": "user", "content": prompt}]
        return chat_completion(model.base_url, "m", messages, timeout_s=5)

    for prompt in ("busy", "limited"):
        with pytest.raises(RetryableError):
            ask(prompt)
    with pytest.raises(NonRetryableError, match="401"):
        ask("denied")
    assert ask("fine") == {"content": "{}", "model": "m"}
    with pytest.raises(RetryableError, match="unreachable"):
        chat_completion("http://127.0.0.1:9/v1", "m", [], timeout_s=2)


def test_model_client_rejects_a_reply_that_is_not_a_chat_completion() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NotACompletion)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(ModelAnswerError, match="not with a chat completion"):
            chat_completion(f"http://127.0.0.1:{server.server_address[1]}", "m", [])
    finally:
        server.shutdown()


class _NotACompletion(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        reply = b"<html>gateway login</html>"
        self.send_response(200)
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)


# -- purchasing ------------------------------------------------------------------------------


def open_gate(out: EventPublisher, topic: str, workflow: str, *, attempt: int = 1) -> str:
    """The workflow's request and the gate the tracker would open; returns the token."""
    out.publish(topic, SUBMITTED, request(f"PR-{workflow}"), workflow_id=workflow)
    token = gate_token(SECRET.encode(), workflow, GATE, attempt)
    out.publish(
        topic,
        OPENED,
        {
            "gate": GATE,
            "assignee": "managers@procurement.example",
            "token": token,
            "attempt": attempt,
            "deadline": "2026-12-02T09:00:00Z",
        },
        workflow_id=workflow,
    )
    return token


def decide(
    out: EventPublisher, topic: str, workflow: str, token: str, decision: str = "APPROVED"
) -> PublishedEvent:
    return out.publish(
        topic,
        DECIDED,
        {"gate": GATE, "token": token, "decision": decision, "decided_by": "maria@example.com"},
        workflow_id=workflow,
    )


def test_purchasing_ignores_forged_approvals_orders_once_and_cancels(
    service_lab: ServiceLab,
) -> None:
    lab = service_lab
    lab.start("purchasing_agent", gate_secret=SECRET)
    out = lab.publisher()
    forger = gate_token(b"not-the-gate-secret-at-all-000000", "wf-po", GATE, 1)

    token = open_gate(out, lab.topic, "wf-po")
    forged = decide(out, lab.topic, "wf-po", forger)
    approved = decide(out, lab.topic, "wf-po", token)
    # A token of another workflow, or of an earlier opening, is as good as forged.
    open_gate(out, lab.topic, "wf-borrower")
    other_token = gate_token(SECRET.encode(), "wf-lender", GATE, 1)
    borrowed = decide(out, lab.topic, "wf-borrower", other_token)
    open_gate(out, lab.topic, "wf-reopened", attempt=2)
    stale = decide(
        out, lab.topic, "wf-reopened", gate_token(SECRET.encode(), "wf-reopened", GATE, 1)
    )
    rejected_token = open_gate(out, lab.topic, "wf-rejected")
    rejected = decide(out, lab.topic, "wf-rejected", rejected_token, "REJECTED")

    records = lab.records(expect=lambda rs: len(of_type(rs, ORDERED)) >= 1)
    ids = {e.headers.id for e in (forged, approved, borrowed, stale, rejected)}
    wait_handled(lab, "purchasing_agent", ids)
    # A double click: a second valid approval after the order exists orders nothing.
    again = decide(out, lab.topic, "wf-po", token)
    wait_handled(lab, "purchasing_agent", {again.headers.id})

    records = lab.records(expect=lambda rs: False, timeout=3)
    [order] = of_type(records, ORDERED)
    assert order["headers"]["ce_workflowid"] == "wf-po"
    assert order["headers"]["ce_causationid"] == approved.headers.id
    assert order["payload"]["request_id"] == "PR-wf-po"
    assert order["payload"]["vendor"] == "Dell Technologies"
    assert lab.log("purchasing_agent").count('"action": "refused"') == 3  # forged, borrowed, stale

    # The ERP's own book: one order, for the approved workflow, asked for once.
    erp = lab.standins["erp"].book
    assert [e["operation"] for e in erp.effects.values()] == ["create_po"]
    [created] = erp.effects.values()
    assert created["body"]["request_id"] == "PR-wf-po"
    assert created["body"]["approved_by"] == "maria@example.com"
    assert created["result"]["id"] == order["payload"]["purchase_order_id"]
    assert sum(erp.calls.values()) == 1

    # The tracker undoes the step: the order is cancelled in the ERP, once.
    undo = out.publish(
        lab.topic,
        COMPENSATE,
        {"step": "create_purchase_order", "compensation": "cancel_po", "reason": "test"},
        workflow_id="wf-po",
    )
    records = lab.records(expect=lambda rs: len(of_type(rs, CANCELLED)) == 1)
    [cancelled] = of_type(records, CANCELLED)
    assert cancelled["payload"]["purchase_order_id"] == order["payload"]["purchase_order_id"]
    assert cancelled["headers"]["ce_causationid"] == undo.headers.id
    # PurchaseOrderCancelled is the undo's completion (the flow says so): no second one.
    assert of_type(records, COMPENSATED) == []
    operations = sorted(e["operation"] for e in erp.effects.values())
    assert operations == ["cancel_po", "create_po"]


def test_a_handler_sees_its_workflow_as_of_its_own_event_not_the_batch_end(
    service_lab: ServiceLab,
) -> None:
    """An approval valid when it was given orders, even if the gate re-opened after it.

    Everything is published before the agent starts, so it all arrives in one poll:
    the decision must not depend on later events of the same batch.
    """
    lab = service_lab
    out = lab.publisher()
    token = open_gate(out, lab.topic, "wf-batch")
    approved = decide(out, lab.topic, "wf-batch", token)
    open_gate(out, lab.topic, "wf-batch", attempt=2)  # after the approval, same batch
    lab.start("purchasing_agent", gate_secret=SECRET)
    records = lab.records(expect=lambda rs: len(of_type(rs, ORDERED)) >= 1)
    [order] = of_type(records, ORDERED)
    assert order["headers"]["ce_causationid"] == approved.headers.id


# -- notification -----------------------------------------------------------------------------


def test_notification_mails_the_vendor_once_and_the_correction_once(
    service_lab: ServiceLab,
) -> None:
    lab = service_lab
    lab.start("notification_agent")
    out = lab.publisher()
    order = {
        "purchase_order_id": "create_po-1234",
        "request_id": "PR-3001",
        "vendor": "Dell Technologies",
        "amount": "7200.00",
        "currency": "EUR",
    }
    for _ in range(2):  # redelivered by an at-least-once upstream: the same event id
        out.publish(lab.topic, ORDERED, order, workflow_id="wf-mail", event_id="evt-po-1")
    records = lab.records(expect=lambda rs: len(of_type(rs, NOTIFIED)) >= 1)

    # Another step's compensation is not this agent's business.
    other = out.publish(
        lab.topic,
        COMPENSATE,
        {"step": "reserve_budget", "compensation": "release_budget"},
        workflow_id="wf-mail",
    )
    # The tracker asks for the follow-up, then asks again (attempt 2) as if the first
    # answer were slow: the vendor still gets one correction.
    first = out.publish(
        lab.topic,
        COMPENSATE,
        {
            "step": "notify_vendor",
            "compensation": "send_correction_notice",
            "reason": "gate rejected",
        },
        workflow_id="wf-mail",
    )
    second = out.publish(
        lab.topic,
        COMPENSATE,
        {
            "step": "notify_vendor",
            "compensation": "send_correction_notice",
            "attempt": 2,
            "reason": "gate rejected",
        },
        workflow_id="wf-mail",
    )
    records = lab.records(expect=lambda rs: len(of_type(rs, CORRECTED)) == 2)
    wait_handled(lab, "notification_agent", {first.headers.id, second.headers.id})

    [notified] = of_type(records, NOTIFIED)
    assert notified["payload"]["purchase_order_id"] == "create_po-1234"
    assert notified["payload"]["channel"] == "email"
    corrections = of_type(records, CORRECTED)
    assert [c["headers"]["ce_causationid"] for c in corrections] == [
        first.headers.id,
        second.headers.id,
    ]
    assert {c["payload"]["message_id"] for c in corrections} == {
        lab.standins["mail"].book.effects[k]["result"]["id"]
        for k in lab.standins["mail"].book.effects
        if lab.standins["mail"].book.effects[k]["body"].get("corrects")
    }
    assert of_type(records, COMPENSATED) == []  # CorrectionNoticeSent is the completion
    assert not [r for r in records if r["headers"].get("ce_causationid") == other.headers.id]

    # The mail service's own book: one order mail, one correction.
    mail = lab.standins["mail"].book
    sent = sorted(
        ("correction" if e["body"].get("corrects") else "order") for e in mail.effects.values()
    )
    assert sent == ["correction", "order"]
    [correction] = [e for e in mail.effects.values() if e["body"].get("corrects")]
    assert correction["body"]["corrects"] == notified["payload"]["message_id"]
    assert "gate rejected" in correction["body"]["text"]
