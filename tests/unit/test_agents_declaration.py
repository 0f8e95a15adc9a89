"""Declaring agents: refused early and clearly when something cannot work."""

from __future__ import annotations

from typing import Any

import pytest

from procurement.events import BudgetReserved, RequestSubmitted
from sagalog.agents.binding import bind
from sagalog.agents.context import HandlerContext
from sagalog.agents.declaration import Agent
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.contracts.models import Event
from sagalog.errors import ConfigurationError

from .agent_flows import flow, step

SUBMITTED = "procurement.v1.RequestSubmitted"
RESERVED = "procurement.v1.BudgetReserved"


class OrderShipped(Event):
    event_type = "shop.v1.OrderShipped"
    order_id: str


def test_handler_for_event_without_schema_refuses_to_start(catalog: SchemaCatalog) -> None:
    agent = Agent("shipping-agent")

    @agent.handles(step="notify")
    async def notify(event: OrderShipped, ctx: HandlerContext) -> Any:
        return None

    bound = bind(
        agent,
        [
            flow(
                "shop.events", [step("notify", "shipping-agent", OrderShipped.event_type, RESERVED)]
            )
        ],
    )
    with pytest.raises(ConfigurationError) as caught:
        bound.check(catalog)
    assert "agent 'shipping-agent' cannot start" in str(caught.value)
    assert "notify (shop.v1.OrderShipped)" in str(caught.value)


def test_two_handlers_for_one_step_are_refused() -> None:
    agent = Agent("a")

    @agent.handles(step="intake")
    async def first(event: RequestSubmitted, ctx: HandlerContext) -> None:
        return None

    with pytest.raises(ConfigurationError, match="two handlers for step 'intake'"):

        @agent.handles(step="intake")
        async def second(event: RequestSubmitted, ctx: HandlerContext) -> None:
            return None


def test_two_steps_of_an_agent_starting_on_one_event_type_are_refused() -> None:
    agent = Agent("a")

    @agent.handles()
    async def intake(event: RequestSubmitted, ctx: HandlerContext) -> BudgetReserved:
        raise NotImplementedError

    @agent.handles()
    async def audit(event: RequestSubmitted, ctx: HandlerContext) -> BudgetReserved:
        raise NotImplementedError

    both = flow(
        "t", [step("intake", "a", SUBMITTED, RESERVED), step("audit", "a", SUBMITTED, RESERVED)]
    )
    with pytest.raises(ConfigurationError, match="'intake' and 'audit' both start on"):
        bind(agent, [both])


def test_names_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="must be letters, digits"):
        Agent("budget agent!")


def test_routing_from_headers_alone() -> None:
    agent = Agent("a")

    @agent.handles(step="intake")
    async def intake(event: RequestSubmitted, ctx: HandlerContext) -> Any:
        return None

    @agent.compensates("intake")
    async def undo(event: Event, ctx: HandlerContext) -> None:
        return None

    bound = bind(agent, [flow("t", [step("intake", "a", SUBMITTED, RESERVED, undo="release")])])
    assert bound.wants("procurement.v1.RequestSubmitted")
    assert bound.wants("sagalog.v1.CompensationRequested")
    assert not bound.wants("procurement.v1.BudgetReserved")
    assert bound.handler_for("sagalog.v1.CompensationRequested", {"step": "intake"}) is not None
    assert bound.handler_for("sagalog.v1.CompensationRequested", {"step": "other"}) is None


def undo_spec(step_name: str) -> object:
    agent = Agent("a")

    @agent.handles(step=step_name)
    async def run(event: RequestSubmitted, ctx: HandlerContext) -> Any:
        return None

    @agent.compensates(step_name)
    async def undo(event: Event, ctx: HandlerContext) -> None:
        return None

    bound = bind(agent, [flow("t", [step(step_name, "a", SUBMITTED, RESERVED, undo="release")])])
    return bound.compensations[step_name]


def test_an_undo_that_returns_nothing_is_announced_as_completed() -> None:
    from sagalog.events import CompensationCompleted, CompensationRequested

    spec = undo_spec("reserve")
    request = CompensationRequested(step="reserve", compensation="release", reason="test")
    assert spec.outputs(request, []) == [  # type: ignore[attr-defined]
        CompensationCompleted(step="reserve", compensation="release")
    ]


def test_an_undo_that_returns_its_own_completion_is_not_completed_twice() -> None:
    from sagalog.events import CompensationRequested

    spec = undo_spec("ship")
    returned: list[Event] = [OrderShipped(order_id="o-1")]
    request = CompensationRequested(step="ship", compensation="recall", reason="test")
    assert spec.outputs(request, returned) == returned  # type: ignore[attr-defined]


def test_a_step_handler_publishes_what_it_returns() -> None:
    agent = Agent("a")

    @agent.handles(step="ship")
    async def ship(event: OrderShipped, ctx: HandlerContext) -> Any:
        return None

    bound = bind(agent, [flow("t", [step("ship", "a", "shop.v1.OrderShipped", RESERVED)])])
    spec = bound.handlers["shop.v1.OrderShipped"]
    assert spec.outputs(OrderShipped(order_id="o"), []) == []


def test_the_projection_keeps_what_the_flows_on_the_agents_topics_name() -> None:
    agent = Agent("a")

    @agent.handles(step="intake")
    async def intake(event: RequestSubmitted, ctx: HandlerContext) -> Any:
        return None

    mine = flow("t", [step("intake", "a", SUBMITTED, RESERVED)])
    # another flow on the same topic, run by another agent: its events are kept too
    theirs = flow(
        "t", [step("ship", "b", "shop.v1.OrderShipped", "procurement.v1.Other")], name="other"
    )
    elsewhere = flow("u", [step("x", "c", "shop.v1.Elsewhere", "shop.v1.Done")], name="else")
    folded = bind(agent, [mine, theirs, elsewhere]).folded_types()
    assert {SUBMITTED, RESERVED, "shop.v1.OrderShipped", "procurement.v1.Other"} <= folded
    assert "sagalog.v1.StepRetryRequested" in folded  # a step run again after its gate
    assert "shop.v1.Elsewhere" not in folded
