"""Test doubles shared by unit tests."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sagalog.agents.context import HandlerContext
    from sagalog.agents.state_store import StateStore
    from sagalog.budgets.book import BudgetBook


class FakeClock:
    """Seconds that move only when the test says so."""

    def __init__(self, start: float = 1_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def drafting_context(
    store: StateStore,
    book: BudgetBook,
    *,
    now: dt.datetime,
    event_id: str = "e1",
    **more: Any,
) -> HandlerContext:
    """The context of a drafting agent's handler on partition 1 of ``filings.events``,
    making model calls under ``book``'s budgets at ``now``."""
    from sagalog.agents.circuit_breaker import BreakerPolicy
    from sagalog.agents.context import HandlerContext
    from sagalog.agents.flow_control import FlowControl
    from sagalog.agents.workflow_context import WorkflowContext
    from sagalog.contracts.headers import EventHeaders
    from sagalog.position import RecordPosition

    delivered = RecordPosition("filings.events", 1, 40)
    return HandlerContext(
        agent="drafter",
        step="draft",
        headers=EventHeaders(id=event_id, type="t", source="s", workflow_id="wf-1"),
        attempt=1,
        workflow=WorkflowContext("wf-1"),
        store=store,
        flow=FlowControl(
            breaker_policy=BreakerPolicy(failure_threshold=5, open_for_s=10.0),
            rate_limits={},
            max_rate_wait_s=1.0,
            clock=FakeClock(),
        ),
        budgets=book,
        origin=delivered,
        delivery=delivered,
        **{"monotonic": lambda: 100.0, "clock": lambda: now, **more},
    )
