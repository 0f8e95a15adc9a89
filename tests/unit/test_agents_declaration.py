"""Declaring agents: refused early and clearly when something cannot work."""

from __future__ import annotations

import pytest

from procurement.events import RequestSubmitted
from sagalog.agents.context import HandlerContext
from sagalog.agents.declaration import Agent
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.contracts.models import Event
from sagalog.errors import ConfigurationError


class OrderShipped(Event):
    event_type = "shop.v1.OrderShipped"
    order_id: str


def test_handler_for_event_without_schema_refuses_to_start(catalog: SchemaCatalog) -> None:
    agent = Agent("shipping-agent", topics=["shop.events"])

    @agent.handles(OrderShipped)
    async def notify(event: OrderShipped, ctx: HandlerContext) -> None:
        return None

    with pytest.raises(ConfigurationError) as caught:
        agent.check(catalog)
    assert "agent 'shipping-agent' cannot start" in str(caught.value)
    assert "notify (shop.v1.OrderShipped)" in str(caught.value)


def test_two_handlers_for_one_event_type_are_refused() -> None:
    agent = Agent("a", topics=["t"])

    @agent.handles(RequestSubmitted)
    async def first(event: RequestSubmitted, ctx: HandlerContext) -> None:
        return None

    with pytest.raises(
        ConfigurationError, match=r"two handlers for procurement\.v1\.RequestSubmitted"
    ):

        @agent.handles(RequestSubmitted)
        async def second(event: RequestSubmitted, ctx: HandlerContext) -> None:
            return None


def test_names_and_topics_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="must be letters, digits"):
        Agent("budget agent!", topics=["t"])
    with pytest.raises(ConfigurationError, match="reads no topics"):
        Agent("a", topics=[])


def test_routing_from_headers_alone() -> None:
    agent = Agent("a", topics=["t"])

    @agent.handles(RequestSubmitted, step="intake")
    async def intake(event: RequestSubmitted, ctx: HandlerContext) -> None:
        return None

    @agent.compensates("intake")
    async def undo(event: Event, ctx: HandlerContext) -> None:
        return None

    assert agent.wants("procurement.v1.RequestSubmitted")
    assert agent.wants("sagalog.v1.CompensationRequested")
    assert not agent.wants("procurement.v1.BudgetReserved")
    assert agent.handler_for("sagalog.v1.CompensationRequested", {"step": "intake"}) is not None
    assert agent.handler_for("sagalog.v1.CompensationRequested", {"step": "other"}) is None


def test_an_undo_that_returns_nothing_is_announced_as_completed() -> None:
    from sagalog.events import CompensationCompleted, CompensationRequested

    agent = Agent("a", topics=["t"])

    @agent.compensates("reserve")
    async def undo(event: Event, ctx: HandlerContext) -> None:
        return None

    spec = agent.compensations["reserve"]
    request = CompensationRequested(step="reserve", compensation="release", reason="test")
    assert spec.outputs(request, []) == [
        CompensationCompleted(step="reserve", compensation="release")
    ]


def test_an_undo_that_returns_its_own_completion_is_not_completed_twice() -> None:
    from sagalog.events import CompensationRequested

    agent = Agent("a", topics=["t"])

    @agent.compensates("ship")
    async def undo(event: Event, ctx: HandlerContext) -> None:
        return None

    spec = agent.compensations["ship"]
    returned: list[Event] = [OrderShipped(order_id="o-1")]
    request = CompensationRequested(step="ship", compensation="recall", reason="test")
    assert spec.outputs(request, returned) == returned


def test_a_step_handler_publishes_what_it_returns() -> None:
    agent = Agent("a", topics=["t"])

    @agent.handles(OrderShipped, step="ship")
    async def ship(event: OrderShipped, ctx: HandlerContext) -> None:
        return None

    spec = agent.handlers["shop.v1.OrderShipped"]
    assert spec.outputs(OrderShipped(order_id="o"), []) == []


def test_the_projection_keeps_everything_unless_the_agent_says_what_it_reads() -> None:
    from procurement.events import BudgetReserved

    assert Agent("a", topics=["t"]).folded_types() is None
    agent = Agent("a", topics=["t"], workflow_context=[BudgetReserved, "procurement.v1.Other"])

    @agent.handles(RequestSubmitted, step="intake")
    async def intake(event: RequestSubmitted, ctx: HandlerContext) -> None:
        return None

    assert agent.folded_types() == frozenset(
        {
            "procurement.v1.BudgetReserved",
            "procurement.v1.Other",
            "procurement.v1.RequestSubmitted",  # handled: deduplicated through the projection
            "sagalog.v1.StepRetryRequested",  # a step run again after its budget gate
        }
    )

    @agent.compensates("intake")
    async def undo(event: Event, ctx: HandlerContext) -> None:
        return None

    folded = agent.folded_types()
    assert folded is not None and "sagalog.v1.CompensationRequested" in folded
    assert Agent("b", topics=["t"], workflow_context=[]).folded_types() == frozenset()


def test_a_declared_context_type_without_schema_refuses_to_start(catalog: SchemaCatalog) -> None:
    agent = Agent("a", topics=["t"], workflow_context=["procurement.v1.RequestSubmited"])
    with pytest.raises(
        ConfigurationError, match=r"workflow_context .*: procurement\.v1\.RequestSubmited;"
    ):
        agent.check(catalog)
    Agent("a", topics=["t"], workflow_context=[RequestSubmitted]).check(catalog)
