"""What a dependency call tells its circuit breaker: refusals are answers, not outages.

The demo's ERP refused one vendor's orders with a 503 that every retry met again, so
five refusals in a row opened the breaker and every other approved order waited
behind half-open probes (a decide phase of 16 s became 133 s). A refusal
(``NonRetryableError``, a 4xx) now counts as the dependency answering.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from sagalog.agents.circuit_breaker import BreakerPolicy, BreakerState
from sagalog.agents.context import HandlerContext
from sagalog.agents.failures import NonRetryableError, RetryableError
from sagalog.agents.flow_control import FlowControl
from sagalog.agents.state_store import StateStore
from sagalog.agents.workflow_context import WorkflowContext
from sagalog.contracts.headers import EventHeaders

from .fakes import FakeClock


def _context(store: StateStore, flow: FlowControl, event_id: str) -> HandlerContext:
    return HandlerContext(
        agent="purchasing",
        step="create_purchase_order",
        headers=EventHeaders(id=event_id, type="t", source="s", workflow_id=f"wf-{event_id}"),
        attempt=1,
        workflow=WorkflowContext(f"wf-{event_id}"),
        store=store,
        flow=flow,
    )


def _flow() -> FlowControl:
    return FlowControl(
        breaker_policy=BreakerPolicy(failure_threshold=2, open_for_s=10.0),
        rate_limits={},
        max_rate_wait_s=1.0,
        clock=FakeClock(),
    )


def _call(error: Exception) -> Callable[..., None]:
    def call(*, idempotency_key: str) -> None:
        raise error

    return call


def test_refusals_in_a_row_leave_the_breaker_closed(tmp_path: Path) -> None:
    store, flow = StateStore(tmp_path), _flow()
    for n in range(5):
        ctx = _context(store, flow, f"e{n}")
        with pytest.raises(NonRetryableError):
            asyncio.run(ctx.effect("erp.create_po", _call(NonRetryableError("422 refused"))))
    assert flow.breaker("erp").state is BreakerState.CLOSED


def test_unavailability_in_a_row_opens_it(tmp_path: Path) -> None:
    store, flow = StateStore(tmp_path), _flow()
    for n in range(2):
        ctx = _context(store, flow, f"e{n}")
        with pytest.raises(RetryableError):
            asyncio.run(ctx.effect("erp.create_po", _call(RetryableError("503"))))
    assert flow.breaker("erp").state is BreakerState.OPEN


def test_a_failed_probe_is_a_deferral_an_ordinary_failure_is_not(tmp_path: Path) -> None:
    """An outage's probe costs the event no attempt, nor does the call that met the
    outage as two callers' failures opened the breaker, nor the first failure before
    that (nobody had an answer from the dependency since); a failure after the
    dependency answered another caller does (it is that request's own)."""
    store, flow = StateStore(tmp_path), _flow()
    clock = flow.clock
    assert isinstance(clock, FakeClock)
    closed_failures = []
    for n in range(2):
        ctx = _context(store, flow, f"e{n}")
        with pytest.raises(RetryableError):
            asyncio.run(ctx.effect("erp.create_po", _call(RetryableError("503"))))
        closed_failures.append(ctx.failed_probe)
    assert closed_failures[0] is not None  # alone, unanswered: maybe an outage, free
    assert closed_failures[1] is not None  # it opened the breaker as an outage (e0, e1)
    clock.advance(10.0)
    probe = _context(store, flow, "e0")
    with pytest.raises(RetryableError):
        asyncio.run(probe.effect("erp.create_po", _call(RetryableError("503 still"))))
    assert probe.failed_probe is not None
    assert probe.failed_probe.dependency == "erp"
    assert probe.failed_probe.retry_at == clock.now + 10.0  # the breaker's next probe
    assert flow.breaker("erp").state is BreakerState.OPEN


def test_a_poison_event_steps_aside_and_the_next_probe_closes_the_breaker(
    tmp_path: Path,
) -> None:
    """An event whose own call always fails cannot hold the breaker open for free."""
    store, flow = StateStore(tmp_path), _flow()
    clock = flow.clock
    assert isinstance(clock, FakeClock)
    for _ in range(2):  # the poison event opens the breaker
        with pytest.raises(RetryableError):
            asyncio.run(
                _context(store, flow, "poison").effect(
                    "erp.create_po", _call(RetryableError("500"))
                )
            )
    clock.advance(10.0)
    with pytest.raises(RetryableError):  # it probes, fails: free, but it is noted
        asyncio.run(
            _context(store, flow, "poison").effect("erp.create_po", _call(RetryableError("500")))
        )
    healthy = _context(store, flow, "healthy")
    with pytest.raises(Exception, match="unavailable"):  # waits for the next probe
        asyncio.run(healthy.effect("erp.create_po", lambda *, idempotency_key: "po-1"))
    clock.advance(10.0)
    poison = _context(store, flow, "poison")
    with pytest.raises(Exception, match="unavailable") as refused:  # steps aside
        asyncio.run(poison.effect("erp.create_po", _call(RetryableError("500"))))
    assert refused.value.retry_at == clock.now + 10.0  # type: ignore[attr-defined]
    healthy = _context(store, flow, "healthy")
    assert asyncio.run(healthy.effect("erp.create_po", lambda *, idempotency_key: "po-1")) == "po-1"
    assert flow.breaker("erp").state is BreakerState.CLOSED
    poison = _context(store, flow, "poison")
    with pytest.raises(RetryableError):  # an ordinary attempt now, bounded by the policy
        asyncio.run(poison.effect("erp.create_po", _call(RetryableError("500"))))
    assert poison.failed_probe is None
