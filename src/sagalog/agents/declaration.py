"""Declaring an agent: its name, and a handler per step the flows give it.

    agent = Agent("budget-agent")

    @agent.handles(step="reserve_budget", dependencies=["ledger"])
    async def reserve(event: RiskScored, ctx: HandlerContext) -> BudgetReserved:
        reservation = await ctx.effect("ledger.reserve", ledger.reserve, event.amount)
        return BudgetReserved(...)

    @agent.compensates("reserve_budget")
    async def release(request: CompensationRequested, ctx: HandlerContext) -> BudgetReleased:
        ...

The flows are the one place that says which agent runs a step, on which events it
starts and completes, and so which topics the agent reads. A declaration says only
what code does; it is bound to the flows when the agent starts
(``agents.binding.bind``), and the handler's annotations, plain Python typing, are
checked against them there.

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
from sagalog.contracts.models import Event
from sagalog.errors import ConfigurationError
from sagalog.flows.model import COMPENSATION_REQUESTED

if TYPE_CHECKING:
    from sagalog.agents.context import HandlerContext

HandlerResult = Event | Sequence[Event] | None
Handler = Callable[[Any, "HandlerContext"], Awaitable[HandlerResult] | HandlerResult]
F = TypeVar("F", bound=Handler)

COMPENSATION_TYPE = COMPENSATION_REQUESTED


@dataclass(frozen=True)
class Declared:
    """A handler as its decorator declares it: the step it serves and its rules."""

    func: Handler
    step: str
    dependencies: tuple[str, ...] = ()
    timeout_s: float | None = None


@dataclass(frozen=True)
class HandlerSpec:
    """One handler bound to an event type of its step, and the rules it runs under."""

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
        output_topic: str | None = None,
        budgets: Sequence[Budget] = (),
    ) -> None:
        """Args:
        name: the name the flows give it on their steps (``agent: <name>``); it names
            the consumer group, the instances' transactional ids and the retry topic.
            The topics it reads are those of the flows that name it.
        output_topic: where outputs go; by default the topic the input came from,
            which keeps a workflow's history in one topic and partition.
        budgets: the budgets its model calls are made under (``ctx.model_call``),
            each shared by all the agent's instances (``sagalog.budgets``).
        """
        if not name or not all(c.isalnum() or c in "-_" for c in name):
            raise ConfigurationError(
                f"agent name {name!r} must be letters, digits, '-' and '_' (it names "
                "the consumer group and internal topics)"
            )
        self.name = name
        self.output_topic = output_topic
        self.budgets: dict[str, Budget] = {}
        for budget in budgets:
            if budget.name in self.budgets:
                raise ConfigurationError(
                    f"agent '{name}' declares budget '{budget.name}' twice; names must differ"
                )
            self.budgets[budget.name] = budget
        self.steps: dict[str, Declared] = {}
        self.compensations: dict[str, Declared] = {}

    def handles(
        self,
        step: str | None = None,
        *,
        dependencies: Sequence[str] = (),
        timeout_s: float | None = None,
    ) -> Callable[[F], F]:
        """Register the handler of ``step`` (by default the function's name).

        The events it takes are the ones the flow starts the step on; its parameter
        and return annotations, when given, are checked against the flow at start.
        """
        if step is not None and not isinstance(step, str):
            raise ConfigurationError(
                f"agent '{self.name}': @agent.handles takes the step's name; the event that "
                "starts the step comes from the flow: write @agent.handles(step='<name>')"
            )

        def register(func: F) -> F:
            name = step or func.__name__
            if name in self.steps:
                raise ConfigurationError(
                    f"agent '{self.name}' has two handlers for step '{name}': "
                    f"{self.steps[name].func.__name__} and {func.__name__}"
                )
            self.steps[name] = Declared(func, name, tuple(dependencies), timeout_s)
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

        def register(func: F) -> F:
            if step in self.compensations:
                raise ConfigurationError(
                    f"agent '{self.name}' has two compensations for step '{step}'"
                )
            self.compensations[step] = Declared(func, step, tuple(dependencies), timeout_s)
            return func

        return register
