"""Intent before effect: the intent is on disk while the call runs, and a call whose
answer was lost is reconciled (looked up, or repeated with the same key) on the next
attempt, which the recorded effect then tells."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

import pytest

from sagalog.agents.circuit_breaker import BreakerPolicy, BreakerState
from sagalog.agents.context import HandlerContext, idempotency_key
from sagalog.agents.failures import DependencyUnavailable
from sagalog.agents.flow_control import FlowControl
from sagalog.agents.intents import (
    EffectIntent,
    Settlement,
    arguments_digest,
    describe,
    settlement_of_lookup,
)
from sagalog.agents.state_store import StateStore
from sagalog.agents.workflow_context import WorkflowContext
from sagalog.contracts.headers import EventHeaders

from .fakes import FakeClock
from .timing import VirtualTimeLoop, run_virtual

KEY = idempotency_key(agent="budget", event_id="e1", effect="ledger.reserve", occurrence=0)


class Crash(BaseException):
    """Stands for the process dying inside the call (not an ``Exception``: nothing in
    the runtime may catch and handle it as a failed call)."""


class Ledger:
    """A dependency with its own books: one effect per key, every call counted."""

    def __init__(self) -> None:
        self.effects: dict[str, dict[str, Any]] = {}
        self.calls: list[str] = []
        self.lookups: list[str] = []
        self.crash_after_applying = False
        self.intent_seen_during_call: EffectIntent | None = None

    def reserve(self, amount: int, *, idempotency_key: str) -> dict[str, Any]:
        self.calls.append(idempotency_key)
        result = self.effects.setdefault(
            idempotency_key, {"id": f"r-{len(self.effects)}", "amount": amount}
        )
        if self.crash_after_applying:
            self.crash_after_applying = False
            raise Crash
        return result

    async def lookup(self, *, idempotency_key: str) -> dict[str, Any] | None:
        self.lookups.append(idempotency_key)
        return self.effects.get(idempotency_key)


def _context(
    store: StateStore, *, attempt: int = 1, flow: FlowControl | None = None
) -> HandlerContext:
    return HandlerContext(
        agent="budget",
        step="reserve_budget",
        headers=EventHeaders(id="e1", type="t", source="s", workflow_id="wf-1"),
        attempt=attempt,
        workflow=WorkflowContext("wf-1"),
        store=store,
        flow=flow
        or FlowControl(
            breaker_policy=BreakerPolicy(failure_threshold=5, open_for_s=10.0),
            rate_limits={},
            max_rate_wait_s=1.0,
            clock=FakeClock(),
        ),
    )


def _limited(loop: VirtualTimeLoop, *, max_wait_s: float = 1.0) -> FlowControl:
    """The ledger at 10 calls/s for this instance, its bucket empty (as after a start)."""
    return FlowControl(
        breaker_policy=BreakerPolicy(failure_threshold=5, open_for_s=10.0),
        rate_limits={"ledger": 10.0},
        max_rate_wait_s=max_wait_s,
        clock=loop.time,
    )


def _crash_then_restart(tmp_path: Path, ledger: Ledger) -> StateStore:
    """The first attempt dies inside the call, after the ledger applied it."""
    store = StateStore(tmp_path / "db")
    ledger.crash_after_applying = True
    with contextlib.suppress(Crash):
        asyncio.run(_context(store).effect("ledger.reserve", ledger.reserve, 40))
    store.close()
    return StateStore(tmp_path / "db")  # the restarted process opens the same files


def test_the_intent_is_on_disk_during_the_call_and_retired_with_the_result(
    tmp_path: Path,
) -> None:
    store, ledger = StateStore(tmp_path), Ledger()
    ctx = _context(store)

    def reserve(amount: int, *, idempotency_key: str) -> dict[str, Any]:
        ledger.intent_seen_during_call = store.effect_intent(idempotency_key)
        return ledger.reserve(amount, idempotency_key=idempotency_key)

    result = asyncio.run(ctx.effect("ledger.reserve", reserve, 40))
    seen = ledger.intent_seen_during_call
    assert seen is not None and seen.effect == "ledger.reserve" and seen.dependency == "ledger"
    assert seen.arguments_sha256 == arguments_digest([40], {})
    assert store.effect_intent(KEY) is None
    entry = store.effect_result(KEY)
    assert entry is not None and entry["result"] == result and "reconciliation" not in entry
    (recorded,) = ctx.recorded
    assert recorded.dependency == "ledger" and recorded.reconciliation is None
    assert recorded.intended_at == seen.intended_at


def test_a_lost_answer_is_found_by_the_lookup_and_not_called_again(tmp_path: Path) -> None:
    ledger = Ledger()
    store = _crash_then_restart(tmp_path, ledger)
    assert store.effect_intent(KEY) is not None, "the crash left no intent"
    ctx = _context(store, attempt=1)
    result = asyncio.run(ctx.effect("ledger.reserve", ledger.reserve, 40, lookup=ledger.lookup))
    assert ledger.calls == [KEY] and ledger.lookups == [KEY]
    assert result == ledger.effects[KEY]
    (recorded,) = ctx.recorded
    assert recorded.reconciliation is not None
    assert recorded.reconciliation.startswith(Settlement.FOUND.value)
    assert json.loads(recorded.result_json) == result
    assert store.effect_intent(KEY) is None


def test_without_a_lookup_the_call_is_repeated_with_the_same_key(tmp_path: Path) -> None:
    ledger = Ledger()
    store = _crash_then_restart(tmp_path, ledger)
    ctx = _context(store)
    result = asyncio.run(ctx.effect("ledger.reserve", ledger.reserve, 40))
    assert ledger.calls == [KEY, KEY] and len(ledger.effects) == 1
    assert result == ledger.effects[KEY]
    (recorded,) = ctx.recorded
    assert recorded.reconciliation is not None
    assert recorded.reconciliation.startswith(Settlement.CALLED_AGAIN.value)


def test_a_lookup_that_finds_nothing_calls_again(tmp_path: Path) -> None:
    ledger = Ledger()
    store = _crash_then_restart(tmp_path, ledger)
    ledger.effects.clear()  # the dependency never applied it after all
    ctx = _context(store)
    asyncio.run(ctx.effect("ledger.reserve", ledger.reserve, 40, lookup=ledger.lookup))
    assert ledger.lookups == [KEY] and ledger.calls == [KEY, KEY] and KEY in ledger.effects
    (recorded,) = ctx.recorded
    assert recorded.reconciliation is not None
    assert recorded.reconciliation.startswith(Settlement.NOT_FOUND_CALLED_AGAIN.value)


def test_a_lookup_and_the_call_after_it_take_a_rate_slot_each(tmp_path: Path) -> None:
    """Both reach the dependency; the call rode on the lookup's slot before, so an
    outage that left many intents could bring twice the limit on its recovery."""
    ledger = Ledger()
    store = _crash_then_restart(tmp_path, ledger)
    ledger.effects.clear()  # the lookup finds nothing: the call goes again
    arrived: list[tuple[str, float]] = []

    async def attempt(loop: VirtualTimeLoop) -> None:
        async def lookup(*, idempotency_key: str) -> dict[str, Any] | None:
            arrived.append(("lookup", loop.time()))
            return await ledger.lookup(idempotency_key=idempotency_key)

        async def reserve(amount: int, *, idempotency_key: str) -> dict[str, Any]:
            arrived.append(("call", loop.time()))
            return ledger.reserve(amount, idempotency_key=idempotency_key)

        ctx = _context(store, flow=_limited(loop))
        await ctx.effect("ledger.reserve", reserve, 40, lookup=lookup)

    run_virtual(attempt)
    assert arrived == [("lookup", pytest.approx(0.1)), ("call", pytest.approx(0.2))]


def test_a_call_after_a_lookup_without_a_rate_slot_soon_is_deferred_and_keeps_its_intent(
    tmp_path: Path,
) -> None:
    ledger = Ledger()
    store = _crash_then_restart(tmp_path, ledger)
    ledger.effects.clear()

    async def attempt(loop: VirtualTimeLoop) -> FlowControl:
        flow = _limited(loop, max_wait_s=0.15)

        async def lookup(*, idempotency_key: str) -> dict[str, Any] | None:
            for _ in range(3):  # other handlers take the next slots meanwhile
                flow.limits.reserve("ledger")
            return await ledger.lookup(idempotency_key=idempotency_key)

        with pytest.raises(DependencyUnavailable):
            await _context(store, flow=flow).effect(
                "ledger.reserve", ledger.reserve, 40, lookup=lookup
            )
        return flow

    flow = run_virtual(attempt)
    assert ledger.lookups == [KEY] and ledger.calls == [KEY]  # the crashed call only
    assert store.effect_intent(KEY) is not None  # the next attempt looks it up again
    # the lookup was answered: the dependency is up, whatever the rate said after
    assert flow.breaker("ledger").state is BreakerState.CLOSED


def test_a_redelivery_after_the_result_was_recorded_neither_looks_up_nor_calls(
    tmp_path: Path,
) -> None:
    store, ledger = StateStore(tmp_path), Ledger()
    asyncio.run(_context(store).effect("ledger.reserve", ledger.reserve, 40))
    asyncio.run(_context(store).effect("ledger.reserve", ledger.reserve, 40, lookup=ledger.lookup))
    assert ledger.calls == [KEY] and ledger.lookups == []


def test_the_pure_rules() -> None:
    assert arguments_digest([1], {"a": 1, "b": 2}) == arguments_digest([1], {"b": 2, "a": 1})
    assert arguments_digest([1], {}) != arguments_digest([2], {})
    assert settlement_of_lookup(None) is Settlement.NOT_FOUND_CALLED_AGAIN
    assert settlement_of_lookup({"id": "r-1"}) is Settlement.FOUND
    intent = EffectIntent("ledger.reserve", "ledger", arguments_digest([40], {}), 0, 1)
    same = describe(Settlement.CALLED_AGAIN, intent, arguments_sha256=intent.arguments_sha256)
    assert "attempt 1 at 1970-01-01T00:00:00.000+00:00" in same and "differ" not in same
    other = describe(Settlement.CALLED_AGAIN, intent, arguments_sha256=arguments_digest([41], {}))
    assert "not deterministic" in other
    assert EffectIntent.from_dict(intent.as_dict()) == intent
