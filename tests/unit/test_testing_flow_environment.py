"""``sagalog.testing.FlowTestEnvironment``: the reference procurement flow whole, in
memory, with its six agents as their services declare them and their stand-in
effects stubbed (``strict_effects``: nothing reaches a network).

The flow (topology/flows/procurement.v1.yaml): classify, retrieve, score, reserve
the budget, the manager's gate (escalated to the director after 24h, rejected by
default at 72h), the purchase order, the vendor's notification.
"""

from __future__ import annotations

import asyncio
import decimal
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from sagalog import CompensationRequested, NonRetryableError
from sagalog.agents.context import idempotency_key
from sagalog.events import GateOpened
from sagalog.flows.states import WorkflowState
from sagalog.testing import EffectStubs, FlowNotQuiet, FlowTestEnvironment, handler_context
from sagalog.tracker.actions import TRACKER_SOURCE

os.environ.setdefault("PURCHASING_AGENT_GATE_SECRET", "unit-test-gate-secret-0123456789")

from budget_agent import agent as budget
from intake_agent import agent as intake
from notification_agent import agent as notification
from procurement.events import (
    BudgetReleased,
    BudgetReserved,
    PurchaseOrderCreated,
    RequestSubmitted,
    RiskScored,
    VendorNotified,
)
from purchasing_agent import agent as purchasing
from retrieval_agent import agent as retrieval
from risk_agent import agent as risk

REPO = Path(__file__).resolve().parents[2]
AGENTS = [intake.agent, retrieval.agent, risk.agent, budget.agent, purchasing.agent,
          notification.agent]  # fmt: skip
ASSESSED = [
    "procurement.v1.RequestSubmitted",
    "procurement.v1.RequestClassified",
    "procurement.v1.PoliciesRetrieved",
    "procurement.v1.RiskScored",
    "procurement.v1.BudgetReserved",
    "sagalog.v1.GateOpened",
]


@pytest.fixture
def env() -> Iterator[FlowTestEnvironment]:
    secret = purchasing.settings.gate_secret.get_secret_value().encode()
    with FlowTestEnvironment.for_project(REPO, AGENTS, secret=secret, strict_effects=True) as env:
        env.stub_effect("ledger.reserve", returns={"id": "res-1"})
        env.stub_effect("ledger.release", returns={"id": "res-1", "released": True})
        env.stub_effect("erp.create_po", returns={"id": "po-1", "operation": "create_po"})
        env.stub_effect("erp.cancel_po", returns={"id": "po-1", "operation": "cancel_po"})
        env.stub_effect("mail.send", returns={"id": "msg-1"})
        env.stub_effect("mail.send_correction", returns={"id": "msg-2"})
        yield env


def request(request_id: str = "pr-1", amount: str = "2400.00") -> RequestSubmitted:
    return RequestSubmitted(
        request_id=request_id,
        requester="ann@example.com",
        department="it",
        title="Laptops for the new team",
        description="Three laptops with docking stations for the platform team.",
        amount=decimal.Decimal(amount),
        currency="EUR",
        vendor="Acme Hardware",
        submitted_at="2030-01-07T09:00:00Z",
    )


def submitted(env: FlowTestEnvironment, workflow_id: str = "pr-1") -> None:
    env.start(request(workflow_id), workflow_id=workflow_id)
    env.run_until_quiet()


def test_an_approved_request_is_ordered_and_the_vendor_notified(env: FlowTestEnvironment) -> None:
    submitted(env)
    assert env.state("pr-1") is WorkflowState.PENDING_APPROVAL
    assert env.event_types("pr-1") == ASSESSED
    env.decide_gate("pr-1", approve=True, by="alice@example.com")
    env.run_until_quiet()
    assert env.state("pr-1") is WorkflowState.COMPLETED
    assert env.event_types("pr-1")[len(ASSESSED) :] == [
        "sagalog.v1.GateDecided",
        "procurement.v1.PurchaseOrderCreated",
        "procurement.v1.VendorNotified",
    ]
    assert [to for _, to, _ in env.transitions("pr-1")][-1] == "completed"
    [order] = env.effect_calls("erp.create_po")
    assert order.args[2]["approved_by"] == "alice@example.com" and order.stubbed
    notified = env.latest("pr-1", VendorNotified)
    assert notified is not None and notified.message_id == "msg-1"
    assert env.dead_letters() == []


def test_an_effect_is_called_with_the_key_of_its_event_and_again_with_it_on_a_retry(
    env: FlowTestEnvironment,
) -> None:
    env.stub_effect("ledger.reserve", raises=[ConnectionError("ledger down"), None],
                    returns={"id": "res-9"})  # fmt: skip
    submitted(env)
    first, second = env.effect_calls("ledger.reserve", workflow_id="pr-1")
    scored = next(e for e in env.events("pr-1") if e.event_type == RiskScored.event_type)
    key = idempotency_key(agent="budget-agent", event_id=scored.id, effect="ledger.reserve",
                          occurrence=0)  # fmt: skip
    assert (first.attempt, first.idempotency_key) == (1, key)
    assert isinstance(first.error, ConnectionError)
    # The ledger's first failure, with no answer from it lately, is taken for an outage
    # (``CircuitBreaker.is_outage``): deferred, the attempt not spent; called again
    # after the deferral with the same key.
    assert (second.attempt, second.idempotency_key, second.error) == (1, key, None)
    reserved = env.latest("pr-1", BudgetReserved)
    assert reserved is not None and reserved.reservation_id == "res-9"
    assert env.now_ms > env.record("pr-1").started_at_ms  # the retry's backoff passed


def test_a_redelivered_request_is_handled_once(env: FlowTestEnvironment) -> None:
    env.start(request(), workflow_id="pr-1", event_id="submission-1")
    env.start(request(), workflow_id="pr-1", event_id="submission-1")
    env.run_until_quiet()
    assert env.event_types("pr-1").count("procurement.v1.RequestClassified") == 1
    assert len(env.effect_calls("ledger.reserve")) == 1


def test_a_purchase_order_the_erp_refuses_releases_the_budget(env: FlowTestEnvironment) -> None:
    env.stub_effect("erp.create_po", raises=NonRetryableError("vendor Acme Hardware is blocked"))
    submitted(env)
    env.decide_gate("pr-1", approve=True, by="alice@example.com")
    env.run_until_quiet()
    assert env.state("pr-1") is WorkflowState.COMPENSATED
    [dead] = env.dead_letters("pr-1")
    assert dead.agent == "purchasing-agent" and "blocked" in dead.reason
    requests = [e.as_(CompensationRequested) for e in env.events("pr-1")
                if e.event_type == CompensationRequested.event_type]  # fmt: skip
    assert [r.step for r in requests] == ["reserve_budget"]
    [release] = env.effect_calls("ledger.release")
    assert release.args[2] == {"reservation_id": "res-1"}
    released = env.latest("pr-1", BudgetReleased)
    assert released is not None and released.reservation_id == "res-1"
    assert env.latest("pr-1", PurchaseOrderCreated) is None


def test_a_rejection_releases_the_budget(env: FlowTestEnvironment) -> None:
    submitted(env)
    env.decide_gate("pr-1", approve=False, by="alice@example.com", comment="not this year")
    env.run_until_quiet()
    assert env.state("pr-1") is WorkflowState.COMPENSATED
    assert env.effect_calls("erp.create_po") == []
    assert len(env.effect_calls("ledger.release")) == 1


def test_a_gate_left_for_a_day_is_escalated_and_the_director_can_approve(
    env: FlowTestEnvironment,
) -> None:
    submitted(env)
    env.advance(hours=23)
    assert [e.as_(GateOpened).escalation_level for e in env.events("pr-1")
            if e.event_type == GateOpened.event_type] == [0]  # fmt: skip
    env.advance(hours=1)
    escalated = env.latest("pr-1", GateOpened)
    assert escalated is not None
    assert (escalated.escalation_level, escalated.assignee) == (1, "director@procurement.example")
    assert env.state("pr-1") is WorkflowState.PENDING_APPROVAL
    env.decide_gate("pr-1", approve=True, by="director@procurement.example")
    env.run_until_quiet()
    assert env.state("pr-1") is WorkflowState.COMPLETED


def test_a_gate_past_its_deadline_is_rejected_and_the_budget_released(
    env: FlowTestEnvironment,
) -> None:
    submitted(env)
    env.advance(days=3)
    assert env.state("pr-1") is WorkflowState.COMPENSATED
    decided = [e for e in env.events("pr-1") if e.event_type == "sagalog.v1.GateDecided"]
    assert [e.source for e in decided] == [TRACKER_SOURCE]  # the gate's default
    assert len(env.effect_calls("ledger.release")) == 1
    assert env.effect_calls("erp.create_po") == []


def test_an_effect_without_a_stub_fails_the_run_under_strict_effects() -> None:
    with FlowTestEnvironment.for_project(REPO, AGENTS, strict_effects=True) as env:
        env.start(request(), workflow_id="pr-1")
        with pytest.raises(FlowNotQuiet, match=r"ledger\.reserve"):
            env.run_until_quiet()


def test_a_gate_with_no_open_decision_is_refused_as_the_gateway_refuses_it(
    env: FlowTestEnvironment,
) -> None:
    from sagalog.services.gateway.exceptions import NoOpenGate, UnknownWorkflow

    with pytest.raises(UnknownWorkflow):
        env.decide_gate("nobody", approve=True, by="alice")
    env.start(request(), workflow_id="pr-1")
    env.run_until_quiet()
    env.decide_gate("pr-1", approve=False, by="alice")
    env.run_until_quiet()
    with pytest.raises(NoOpenGate):
        env.decide_gate("pr-1", approve=True, by="alice")


def test_one_handler_alone_reads_its_workflow_and_records_its_effect() -> None:
    stubs = EffectStubs(strict=True)
    stubs.stub("ledger.reserve", returns={"id": "res-7"})
    ctx = handler_context([request()], agent="budget-agent", step="reserve_budget",
                          effects=stubs)  # fmt: skip
    reserved = asyncio.run(budget.reserve_budget(RiskScored.model_construct(), ctx))
    assert reserved.reservation_id == "res-7" and reserved.amount == decimal.Decimal("2400.00")
    [call] = stubs.calls
    assert call.idempotency_key == idempotency_key(
        agent="budget-agent", event_id="event-1", effect="ledger.reserve", occurrence=0
    )
    [recorded] = ctx.recorded
    assert recorded.effect == "ledger.reserve" and recorded.idempotency_key == call.idempotency_key


def test_one_handler_alone_fails_as_the_runtime_would_see_it() -> None:
    ctx = handler_context([], agent="budget-agent", step="reserve_budget")
    with pytest.raises(NonRetryableError, match="requires an earlier"):
        asyncio.run(budget.reserve_budget(RiskScored.model_construct(), ctx))
