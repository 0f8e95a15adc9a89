"""One handler tested alone: a ``HandlerContext`` over a workflow the test writes.

    ctx = handler_context([RequestSubmitted(...)], effects=stubs)
    reserved = await reserve_budget(RiskScored(...), ctx)

The context is the runtime's own class: ``ctx.workflow.latest/require`` read the
given events as the agent's projection would hold them, ``ctx.effect`` derives its
idempotency keys, writes its ledger (RocksDB in a temporary folder, removed with the
context) and records ``EffectRecorded`` in ``ctx.recorded``. Only the calls are
stubbed, by ``effects``. What the runtime does with a handler's failure (a retry,
a dead letter, a compensation) needs the whole flow: ``FlowTestEnvironment``.
"""

from __future__ import annotations

import datetime as dt
import tempfile
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sagalog.agents.circuit_breaker import BreakerPolicy
from sagalog.agents.context import HandlerContext
from sagalog.agents.flow_control import FlowControl
from sagalog.agents.state_store import StateStore
from sagalog.agents.workflow_context import WorkflowContext
from sagalog.contracts.headers import EventHeaders
from sagalog.contracts.models import Event
from sagalog.position import RecordPosition
from sagalog.testing.effects import EffectStubs
from sagalog.testing.flow_environment import START


def handler_context(
    workflow: Sequence[Event] = (),
    *,
    event: Event | None = None,
    workflow_id: str = "wf-1",
    agent: str = "test-agent",
    step: str = "test-step",
    attempt: int = 1,
    effects: EffectStubs | None = None,
    now: dt.datetime = START,
    event_id: str = "event-1",
) -> HandlerContext:
    """A context for one handler run.

    Args:
        workflow: the workflow's earlier events, oldest first (``ctx.workflow``).
        event: the event being handled, for its headers (``ctx.headers.type``).
        agent: the agent's name, part of the effects' keys.
        step: the step the handler performs.
        attempt: 1 for a first attempt; more for a retry.
        effects: the stubs the effects' calls go to, and where they are recorded;
            without, the real functions run (and are recorded nowhere).
        now: what ``ctx.clock()`` says.
        event_id: the handled event's id, which the effects' keys are made of.
    """
    payloads: list[dict[str, Any]] = []
    context = WorkflowContext(workflow_id, decoder=lambda raw: payloads[int(raw)])
    for number, earlier in enumerate(workflow):
        payloads.append(earlier.to_avro())
        context.records[earlier.event_type] = str(number).encode()
        context.history.append((f"earlier-{number + 1}", earlier.event_type, "test"))
    folder = tempfile.TemporaryDirectory(prefix="sagalog-handler-")
    store = StateStore(Path(folder.name))
    monotonic = now.timestamp()
    ctx = HandlerContext(
        agent=agent,
        step=step,
        headers=EventHeaders(
            id=event_id,
            type=event.event_type if event is not None else "test.Event",
            source="test",
            workflow_id=workflow_id,
            time=now,
        ),
        attempt=attempt,
        workflow=context,
        store=store,
        flow=FlowControl(
            breaker_policy=BreakerPolicy(),
            rate_limits={},
            max_rate_wait_s=1.0,
            clock=lambda: monotonic,
        ),
        clock=lambda: now,
        monotonic=lambda: monotonic,
        origin=RecordPosition("test", 0, 0),
        perform=None if effects is None else effects.perform,
    )
    weakref.finalize(ctx, _remove, store, folder)
    return ctx


def _remove(store: StateStore, folder: tempfile.TemporaryDirectory[str]) -> None:
    store.close()
    folder.cleanup()
