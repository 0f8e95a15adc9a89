"""A handler reads earlier events of its workflow typed: ``ctx.workflow.latest(X)`` and
``ctx.workflow.require(X)``, and the errors say who read what."""

from __future__ import annotations

import decimal
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from procurement.events import BudgetReserved, RequestSubmitted
from sagalog import HandlerContext, NonRetryableError
from sagalog.agents.circuit_breaker import BreakerPolicy
from sagalog.agents.failures import is_retryable
from sagalog.agents.flow_control import FlowControl
from sagalog.agents.state_store import StateStore
from sagalog.agents.workflow_context import WorkflowContext
from sagalog.contracts.headers import EventHeaders
from sagalog.errors import ConfigurationError
from sagalog.position import RecordPosition

from .fakes import FakeClock


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    opened = StateStore(tmp_path / "db")
    yield opened
    opened.close()


def _reserved(reservation_id: str) -> BudgetReserved:
    return BudgetReserved(
        reservation_id=reservation_id,
        cost_center="CC-OPS",
        amount=decimal.Decimal("12.50"),
        currency="EUR",
    )


def _fold(store: StateStore, event_id: str, event: BudgetReserved, offset: int) -> None:
    """Fold ``event`` as the runtime does; JSON stands in for the Avro wire format."""
    store.project(
        workflow_id="wf-7",
        event_id=event_id,
        event_type=event.event_type,
        source="budget-agent",
        payload=json.dumps(event.to_avro(), default=str).encode(),
        position=RecordPosition("procurement.events", 0, offset),
    )


def _decode(raw: bytes) -> dict[str, Any]:
    decoded: dict[str, Any] = json.loads(raw)
    return decoded


def _handler(workflow: WorkflowContext, store: StateStore) -> HandlerContext:
    """The context of the budget agent's ``reserve_budget``, handling a RiskScored."""
    workflow.decoder = _decode  # the runtime decodes with the codec
    return HandlerContext(
        agent="budget-agent",
        step="reserve_budget",
        headers=EventHeaders(
            id="e9", type="procurement.v1.RiskScored", source="risk-agent", workflow_id="wf-7"
        ),
        attempt=1,
        workflow=workflow,
        store=store,
        flow=FlowControl(
            breaker_policy=BreakerPolicy(failure_threshold=5, open_for_s=10.0),
            rate_limits={},
            max_rate_wait_s=1.0,
            clock=FakeClock(),
        ),
    )


def test_latest_decodes_the_earlier_event_into_its_class(store: StateStore) -> None:
    _fold(store, "e1", _reserved("R-1"), offset=1)
    ctx = _handler(store.context("wf-7").snapshot(), store)

    found = ctx.workflow.latest(BudgetReserved)

    assert found == _reserved("R-1")
    assert isinstance(found, BudgetReserved)
    assert ctx.workflow.require(BudgetReserved) == found
    assert ctx.workflow.latest_id(BudgetReserved) == "e1"


def test_latest_is_the_last_of_several_in_log_order(store: StateStore) -> None:
    for offset, reservation in enumerate(["R-1", "R-2", "R-3"]):
        _fold(store, f"e{offset}", _reserved(reservation), offset=offset)
    _fold(store, "e1", _reserved("R-2"), offset=9)  # a duplicate changes nothing
    ctx = _handler(store.context("wf-7").snapshot(), store)

    assert ctx.workflow.require(BudgetReserved).reservation_id == "R-3"
    assert ctx.workflow.latest_id(BudgetReserved) == "e2"


def test_latest_of_a_missing_event_is_none(store: StateStore) -> None:
    ctx = _handler(store.context("wf-7").snapshot(), store)

    assert ctx.workflow.latest(RequestSubmitted) is None
    assert ctx.workflow.latest_id(RequestSubmitted) is None


def test_require_of_a_missing_event_fails_the_step_naming_workflow_step_and_event(
    store: StateStore,
) -> None:
    _fold(store, "e1", _reserved("R-1"), offset=1)
    ctx = _handler(store.context("wf-7").snapshot(), store)

    with pytest.raises(NonRetryableError) as raised:
        ctx.workflow.require(RequestSubmitted)

    message = str(raised.value)
    assert "workflow wf-7" in message
    assert "agent 'budget-agent'" in message
    assert "step 'reserve_budget'" in message
    assert "handling procurement.v1.RiskScored" in message
    assert "requires an earlier procurement.v1.RequestSubmitted" in message
    assert "ctx.workflow.latest(RequestSubmitted)" in message  # what to do instead
    assert not is_retryable(raised.value)  # no retry makes an earlier event appear


def test_reading_a_type_the_agent_does_not_keep_names_agent_step_and_type(
    tmp_path: Path,
) -> None:
    store = StateStore(tmp_path / "db", folded_types=frozenset({BudgetReserved.event_type}))
    ctx = _handler(store.context("wf-7").snapshot(), store)

    for read in (
        lambda: ctx.workflow.require(RequestSubmitted),
        lambda: ctx.workflow.latest(RequestSubmitted),
        lambda: ctx.workflow.latest_id(RequestSubmitted),
    ):
        with pytest.raises(ConfigurationError) as raised:
            read()
        message = str(raised.value)
        assert "agent 'budget-agent', step 'reserve_budget'" in message
        assert "reads procurement.v1.RequestSubmitted" in message
        assert "which no flow on the agent's topics names" in message  # the fix
        assert "it keeps: procurement.v1.BudgetReserved" in message
    assert ctx.workflow.latest(BudgetReserved) is None  # kept, only absent
    store.close()


def test_a_context_read_outside_a_handler_still_names_the_workflow() -> None:
    workflow = WorkflowContext("wf-3", decoder=_decode)

    with pytest.raises(NonRetryableError, match="workflow wf-3: a handler requires an earlier"):
        workflow.require(BudgetReserved)


def _gate_context(*, kept_by_id: bool) -> WorkflowContext:
    """A workflow whose review gate opened and was approved, then its step's budget
    gate did the same; ``kept_by_id`` False: folded before gate events were kept so."""
    context = WorkflowContext("wf-1", decoder=json.loads)
    events = [
        ("o1", "sagalog.v1.GateOpened", {"gate": "review"}),
        ("d1", "sagalog.v1.GateDecided", {"gate": "review"}),
        ("f1", "sagalog.v1.StepFailed", {"step": "draft"}),
        ("o2", "sagalog.v1.GateOpened", {"gate": "draft_budget"}),
        ("d2", "sagalog.v1.GateDecided", {"gate": "draft_budget"}),
    ]
    for event_id, kind, payload in events:
        context.history.append((event_id, kind, "tracker"))
        raw = json.dumps(payload).encode()
        if kept_by_id:
            context.keep(event_id, kind, raw)
        else:
            context.records[kind] = raw
    return context


def test_without_its_budget_gate_a_step_sees_the_gate_that_started_it() -> None:
    context = _gate_context(kept_by_id=True)
    view = context.without_gate("draft_budget")
    assert [e[0] for e in view.history] == ["o1", "d1", "f1"]
    assert view.get("sagalog.v1.GateDecided") == {"gate": "review"}
    assert view.get("sagalog.v1.GateOpened") == {"gate": "review"}
    assert context.get("sagalog.v1.GateDecided") == {"gate": "draft_budget"}  # unchanged
    assert context.without_gate("another").history == context.history


def test_a_gate_event_folded_before_they_were_kept_by_id_is_not_made_up() -> None:
    """The budget gate's events are still left out; the review's payloads, never kept
    by id, cannot come back, so the step reads none rather than the wrong one."""
    view = _gate_context(kept_by_id=False).without_gate("draft_budget")
    assert [e[0] for e in view.history] == ["o1", "d1", "f1"]
    assert view.records.get("sagalog.v1.GateDecided") is None
    assert view.records.get("sagalog.v1.GateOpened") is None
