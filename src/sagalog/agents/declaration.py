"""Declaring an agent: its name, the topics it reads, and a handler per event type.

    agent = Agent("budget-agent", topics=["procurement.events"])

    @agent.handles(RequestSubmitted, step="reserve_budget", dependencies=["ledger"])
    async def reserve(event: RequestSubmitted, ctx: HandlerContext) -> BudgetReserved:
        reservation = await ctx.effect("ledger.reserve", ledger.reserve, event.amount)
        return BudgetReserved(...)

    @agent.compensates("reserve_budget")
    async def release(request: CompensationRequested, ctx: HandlerContext) -> BudgetReleased:
        ...

Declaring is pure data; ``sagalog.run_agent`` hands it to the worker (this module
imports nothing of the runtime, which imports it). Nothing about Kafka appears
in a handler: it gets a typed event and a context, and returns the events it causes.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from sagalog.budgets.declaration import Budget
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.contracts.models import Event
from sagalog.errors import ConfigurationError
from sagalog.flows.model import COMPENSATION_REQUESTED, STEP_RETRY_REQUESTED

if TYPE_CHECKING:
    from sagalog.agents.context import HandlerContext

HandlerResult = Event | Sequence[Event] | None
Handler = Callable[[Any, "HandlerContext"], Awaitable[HandlerResult] | HandlerResult]
F = TypeVar("F", bound=Handler)

COMPENSATION_TYPE = COMPENSATION_REQUESTED


@dataclass(frozen=True)
class HandlerSpec:
    """One handler and the rules it runs under."""

    event_type: str
    event_class: type[Event]
    func: Handler
    step: str
    dependencies: tuple[str, ...] = ()
    timeout_s: float | None = None
    compensates: str | None = None

    def outputs(self, event: Event, returned: list[Event]) -> list[Event]:
        """What the handler's run publishes: its events, and the completion of an undo.

        A compensation handler that returns nothing is announced as done with a
        ``CompensationCompleted``. One that returns events announces its own
        completion (``BudgetReleased``), as its flow file names it under
        ``compensation.completes_on``; adding ``CompensationCompleted`` to those
        would be a second completion, which the tracker ignores with a warning.
        """
        if self.compensates is None or returned:
            return returned
        from sagalog.events import CompensationCompleted

        undo = str(getattr(event, "compensation", self.step))
        return [CompensationCompleted(step=self.compensates, compensation=undo)]

    async def call(self, event: Event, ctx: HandlerContext) -> HandlerResult:
        if inspect.iscoroutinefunction(self.func):
            return await self.func(event, ctx)  # type: ignore[no-any-return]
        # A blocking handler runs in a thread; its timeout stops the wait, not the thread.
        return await asyncio.to_thread(self.func, event, ctx)  # type: ignore[arg-type]


class Agent:
    """An agent service's declaration."""

    def __init__(
        self,
        name: str,
        *,
        topics: Sequence[str],
        output_topic: str | None = None,
        workflow_context: Sequence[type[Event] | str] | None = None,
        budgets: Sequence[Budget] = (),
    ) -> None:
        """Args:
        name: names the consumer group, the instances' transactional ids and the
            retry topic.
        topics: the workflow topics to read (same partition count).
        output_topic: where outputs go; by default the topic the input came from,
            which keeps a workflow's history in one topic and partition.
        workflow_context: the event types the handlers look up in ``ctx.workflow``
            (``latest``, ``require``, ``history``), besides the ones they handle.
            None (the default) keeps every event of the topics in the projection.
            A list keeps only these and the handled types, and the agent stops
            paying for the rest: no fold, no write per event. Reading a type outside
            it raises ``ConfigurationError`` naming the agent, the step and the
            type; ``history`` lists only these types. Changing the list so that it
            names a type the projection did not keep rebuilds the projection from
            the log on the next start.
        budgets: the budgets its model calls are made under (``ctx.model_call``),
            each shared by all the agent's instances (``sagalog.budgets``).
        """
        if not name or not all(c.isalnum() or c in "-_" for c in name):
            raise ConfigurationError(
                f"agent name {name!r} must be letters, digits, '-' and '_' (it names "
                "the consumer group and internal topics)"
            )
        if not topics:
            raise ConfigurationError(f"agent '{name}' reads no topics; pass topics=[...]")
        self.name = name
        self.topics = tuple(topics)
        self.output_topic = output_topic
        self.workflow_context = (
            None
            if workflow_context is None
            else frozenset(t if isinstance(t, str) else t.event_type for t in workflow_context)
        )
        self.budgets: dict[str, Budget] = {}
        for budget in budgets:
            if budget.name in self.budgets:
                raise ConfigurationError(
                    f"agent '{name}' declares budget '{budget.name}' twice; names must differ"
                )
            self.budgets[budget.name] = budget
        self.handlers: dict[str, HandlerSpec] = {}
        self.compensations: dict[str, HandlerSpec] = {}

    def handles(
        self,
        event_class: type[Event],
        *,
        step: str | None = None,
        dependencies: Sequence[str] = (),
        timeout_s: float | None = None,
    ) -> Callable[[F], F]:
        """Register the handler of ``event_class`` events (one per event type)."""

        def register(func: F) -> F:
            event_type = event_class.event_type
            if event_type in self.handlers:
                raise ConfigurationError(
                    f"agent '{self.name}' has two handlers for {event_type}: "
                    f"{self.handlers[event_type].func.__name__} and {func.__name__}"
                )
            self.handlers[event_type] = HandlerSpec(
                event_type=event_type,
                event_class=event_class,
                func=func,
                step=step or func.__name__,
                dependencies=tuple(dependencies),
                timeout_s=timeout_s,
            )
            return func

        return register

    def compensates(
        self,
        step: str,
        *,
        dependencies: Sequence[str] = (),
        timeout_s: float | None = None,
    ) -> Callable[[F], F]:
        """Register the compensation of ``step``: it receives a ``CompensationRequested``.

        When it returns no event the runtime publishes ``CompensationCompleted``
        after it, so the tracker can move to the previous step; when it returns the
        event its flow names as the undo's completion, that event is the signal.
        """
        from sagalog.events import CompensationRequested

        def register(func: F) -> F:
            if step in self.compensations:
                raise ConfigurationError(
                    f"agent '{self.name}' has two compensations for step '{step}'"
                )
            self.compensations[step] = HandlerSpec(
                event_type=COMPENSATION_TYPE,
                event_class=CompensationRequested,
                func=func,
                step=step,
                dependencies=tuple(dependencies),
                timeout_s=timeout_s,
                compensates=step,
            )
            return func

        return register

    def handler_for(
        self, event_type: str, payload: dict[str, Any] | None = None
    ) -> HandlerSpec | None:
        """The handler of an event, or None when this agent ignores it.

        A compensation is taken by the handler of the compensation its payload names,
        and a ``StepRetryRequested`` by the handler of the step it names (which then
        runs on the event that started that step).
        """
        if event_type == COMPENSATION_TYPE and payload is not None:
            return self.compensations.get(str(payload.get("step")))
        if event_type == STEP_RETRY_REQUESTED and payload is not None:
            step = payload.get("step")
            return next((s for s in self.handlers.values() if s.step == step), None)
        return self.handlers.get(event_type)

    def wants(self, event_type: str) -> bool:
        """Whether any handler takes ``event_type`` (decided from the header alone)."""
        return (
            event_type in self.handlers
            or (event_type == COMPENSATION_TYPE and bool(self.compensations))
            or (event_type == STEP_RETRY_REQUESTED and bool(self.handlers))
        )

    def folded_types(self) -> frozenset[str] | None:
        """The event types the projection keeps: the declared ``workflow_context`` and
        every handled type (a handled event is deduplicated through it); None: all."""
        if self.workflow_context is None:
            return None
        handled = set(self.handlers)
        if self.compensations:
            handled.add(COMPENSATION_TYPE)
        if self.handlers:
            handled.add(STEP_RETRY_REQUESTED)
        return self.workflow_context | handled

    def check(self, catalog: SchemaCatalog) -> None:
        """Refuse to start when a handled or declared event type has no schema.

        Raises:
            ConfigurationError: naming the handler (or the declaration) and the
                missing schema.
        """
        specs = [*self.handlers.values(), *self.compensations.values()]
        missing = [s for s in specs if s.event_type not in catalog]
        if missing:
            listed = ", ".join(f"{s.func.__name__} ({s.event_type})" for s in missing)
            raise ConfigurationError(
                f"agent '{self.name}' cannot start: no schema under {catalog.root} for the "
                f"event type(s) its handlers take: {listed}; add the .avsc or fix the class"
            )
        unknown = sorted(t for t in self.workflow_context or () if t not in catalog)
        if unknown:
            raise ConfigurationError(
                f"agent '{self.name}' cannot start: its workflow_context names event type(s) "
                f"with no schema under {catalog.root}: {', '.join(unknown)}; fix the name "
                "(the Avro full name, e.g. procurement.v1.RequestSubmitted) or add the .avsc"
            )
