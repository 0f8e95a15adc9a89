"""An agent bound to the flows that name it: its topics, its handlers' event types and
its workflow context come from the flows, and the one check refuses what would leave
a workflow stuck, naming the agent, the flow and the step.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

import pytest

from procurement.events import (
    BudgetReleased,
    BudgetReserved,
    PurchaseOrderCreated,
    RequestClassified,
    RequestSubmitted,
    RiskScored,
    VendorNotified,
)
from sagalog.agents.binding import bind, project_flows
from sagalog.agents.context import HandlerContext
from sagalog.agents.declaration import Agent
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.errors import AgentContractError, ConfigurationError
from sagalog.events import CompensationRequested
from sagalog.flows.model import Flow

# The purchasing agent's settings refuse to load without the tracker's gate secret.
os.environ.setdefault("PURCHASING_AGENT_GATE_SECRET", "unit-test-gate-secret-0123456789")

REFERENCE_AGENTS = (
    "intake_agent",
    "retrieval_agent",
    "risk_agent",
    "budget_agent",
    "purchasing_agent",
    "notification_agent",
    "records_agent",
    "drafting_agent",
    "submission_agent",
)
TOPIC = "procurement.events"


@pytest.fixture(scope="module")
def every_flow(repo_root: Path) -> list[Flow]:
    return list(project_flows(repo_root))


@pytest.fixture(scope="module")
def flows(every_flow: list[Flow]) -> list[Flow]:
    return [f for f in every_flow if f.name == "procurement"]  # the budget agent's flows


def handling(agent: Agent, step: str, name: str, takes: Any, returns: Any) -> Agent:
    """``agent`` with a handler ``name`` for ``step`` declared as a user writes it,
    ``async def name(event: takes, ctx: HandlerContext) -> returns``, its annotations
    being all that binding reads of it."""

    async def handler(event: Any, ctx: HandlerContext) -> Any:
        raise NotImplementedError

    handler.__name__ = handler.__qualname__ = name
    handler.__annotations__ = {"event": takes, "ctx": HandlerContext, "return": returns}
    agent.handles(step=step)(handler)
    return agent


def budget_agent(*, takes: Any = RiskScored, returns: Any = BudgetReserved) -> Agent:
    """A budget agent as the flow wants it, reserve (on RiskScored) and release, unless
    ``takes`` and ``returns`` annotate its reserve handler otherwise."""
    agent = handling(Agent("budget-agent"), "reserve_budget", "reserve", takes, returns)

    @agent.compensates("reserve_budget")
    async def release(event: CompensationRequested, ctx: HandlerContext) -> BudgetReleased:
        raise NotImplementedError

    return agent


def version_2(v1: Flow, **reserve_budget: Any) -> Flow:
    """``v1`` as its version 2, its ``reserve_budget`` step's fields changed as given."""
    entries = tuple(
        e.model_copy(update=reserve_budget) if (e.kind, e.name) == ("step", "reserve_budget") else e
        for e in v1.entries
    )
    return v1.model_copy(update={"version": 2, "entries": entries})


def problems(agent: Agent, flows: list[Flow]) -> list[str]:
    try:
        bind(agent, flows)
    except AgentContractError as refused:
        return [line.strip() for line in str(refused).splitlines()[1:-1]]
    return []


@pytest.mark.parametrize("name", REFERENCE_AGENTS)
def test_every_reference_agent_binds_to_the_reference_flows(
    name: str, every_flow: list[Flow]
) -> None:
    agent = importlib.import_module(f"{name}.agent").agent
    bound = bind(agent, every_flow)
    assert len(bound.topics) == 1 and bound.topics[0] in ("procurement.events", "filings.events")


def test_the_reference_flows_name_only_reference_agents(every_flow: list[Flow]) -> None:
    declared = {importlib.import_module(f"{n}.agent").agent.name for n in REFERENCE_AGENTS}
    assert {step.agent for flow in every_flow for step in flow.steps} == declared


def test_the_flow_gives_the_agent_its_topics_events_and_context(flows: list[Flow]) -> None:
    bound = bind(budget_agent(), flows)
    assert bound.topics == (TOPIC,)
    assert list(bound.handlers) == [RiskScored.event_type]
    assert bound.handlers[RiskScored.event_type].event_class is RiskScored
    assert list(bound.compensations) == ["reserve_budget"]
    # every type the flows on its topic name, not only what it handles
    assert {RequestSubmitted.event_type, VendorNotified.event_type} <= bound.kept
    assert bound.budget_policies == {"reserve_budget": "wait"}


def test_an_unannotated_handler_takes_the_registered_class(flows: list[Flow]) -> None:
    agent = Agent("budget-agent")

    @agent.handles(step="reserve_budget")
    async def reserve(event, ctx):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    @agent.compensates("reserve_budget")
    async def release(request, ctx):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    assert bind(agent, flows).handlers[RiskScored.event_type].event_class is RiskScored


def test_an_agent_no_flow_names_is_refused(flows: list[Flow]) -> None:
    agent = Agent("archive-agent")
    with pytest.raises(AgentContractError, match="'archive-agent' runs no step of the flows"):
        bind(agent, flows)


def test_the_old_event_argument_is_refused_with_the_new_form() -> None:
    with pytest.raises(ConfigurationError, match=r"write @agent.handles\(step='<name>'\)"):
        Agent("a").handles(RiskScored)  # type: ignore[arg-type]


def test_a_step_without_a_handler_is_refused(flows: list[Flow]) -> None:
    agent = budget_agent()
    del agent.steps["reserve_budget"]
    assert problems(agent, flows) == [
        "flow procurement v1, step 'reserve_budget': no handler; add "
        "@agent.handles(step='reserve_budget') (it starts on procurement.v1.RiskScored)"
    ]


def test_a_handler_annotated_with_another_event_than_the_step_starts_on_is_refused(
    flows: list[Flow],
) -> None:
    assert problems(budget_agent(takes=RequestSubmitted), flows) == [
        "flow procurement v1, step 'reserve_budget': reserve takes "
        "procurement.v1.RequestSubmitted, but the flow starts the step on "
        "procurement.v1.RiskScored; fix the annotation or the flow"
    ]


def test_a_handler_returning_an_event_the_step_does_not_complete_on_is_refused(
    flows: list[Flow],
) -> None:
    (found,) = problems(budget_agent(returns=BudgetReserved | VendorNotified), flows)
    assert found.startswith("flow procurement v1, step 'reserve_budget': reserve returns ")
    assert "procurement.v1.VendorNotified, which the flow does not wait for here" in found


def test_a_handler_that_can_never_complete_its_step_is_refused(flows: list[Flow]) -> None:
    agent = handling(Agent("intake-agent"), "classify_request", "classify", RequestSubmitted, None)
    assert problems(agent, flows) == [
        "flow procurement v1, step 'classify_request': classify returns none of "
        "procurement.v1.RequestClassified, so it could never complete the step"
    ]


def test_a_handler_that_may_return_nothing_but_also_completes_passes(flows: list[Flow]) -> None:
    agent = Agent("intake-agent")
    handling(agent, "classify_request", "classify", RequestSubmitted, RequestClassified | None)
    assert problems(agent, flows) == []


def test_a_missing_compensation_the_flow_requires_is_refused(flows: list[Flow]) -> None:
    agent = budget_agent()
    agent.compensations.clear()
    assert problems(agent, flows) == [
        "flow procurement v1, step 'reserve_budget': the flow undoes it ('release_budget', "
        "completed by procurement.v1.BudgetReleased) and the agent has no compensation; "
        "add @agent.compensates('reserve_budget')"
    ]


def test_a_missing_irreversible_follow_up_is_refused(flows: list[Flow]) -> None:
    agent = Agent("notification-agent")
    handling(agent, "notify_vendor", "notify", PurchaseOrderCreated, VendorNotified)
    (found,) = problems(agent, flows)
    assert found.startswith("flow procurement v1, step 'notify_vendor': the flow undoes it")
    assert "('send_correction_notice', completed by " in found


def test_a_compensation_returning_nothing_when_the_flow_waits_for_an_event_is_refused(
    flows: list[Flow],
) -> None:
    agent = budget_agent()
    agent.compensations.clear()

    @agent.compensates("reserve_budget")
    async def release(event: CompensationRequested, ctx: HandlerContext) -> None:
        raise NotImplementedError

    (found,) = problems(agent, flows)
    assert found.startswith("flow procurement v1, step 'reserve_budget': release returns ")
    assert "nothing on some path; the runtime then announces " in found
    assert "sagalog.v1.CompensationCompleted, which the flow does not name" in found


def test_a_handler_for_a_step_no_flow_gives_the_agent_is_refused(flows: list[Flow]) -> None:
    agent = handling(budget_agent(), "reserve_budgets", "typo", RequestSubmitted, BudgetReserved)
    assert problems(agent, flows) == [
        "step 'reserve_budgets': handler typo serves a step no flow gives agent "
        "'budget-agent' (its steps: reserve_budget); fix step= or the flow"
    ]


def test_a_compensation_of_a_step_the_flow_never_undoes_is_refused(flows: list[Flow]) -> None:
    agent = Agent("intake-agent")
    handling(agent, "classify_request", "classify", RequestSubmitted, RequestClassified)

    @agent.compensates("classify_request")
    async def unclassify(event: CompensationRequested, ctx: HandlerContext) -> None:
        raise NotImplementedError

    (found,) = problems(agent, flows)
    assert found.startswith("step 'classify_request': compensation unclassify undoes a step")


def test_refusal_is_one_configuration_error_listing_every_mismatch(flows: list[Flow]) -> None:
    agent = budget_agent()
    agent.compensations.clear()
    handling(agent, "reserve_budgets", "typo", Any, None)
    with pytest.raises(AgentContractError) as refused:
        bind(agent, flows)
    assert isinstance(refused.value, ConfigurationError) and refused.value.exit_code == 2
    lines = str(refused.value).splitlines()
    assert lines[0] == "agent 'budget-agent' does not fit its flows:"
    assert len(lines) == 4


def test_every_flow_version_naming_the_agent_is_checked(flows: list[Flow]) -> None:
    (v1,) = flows  # v2 renames the step: the agent serves v1 and must serve v2 too
    found = problems(budget_agent(), [v1, version_2(v1, name="book_budget")])
    assert [m.split(":")[0] for m in found] == [
        "flow procurement v2, step 'book_budget'",
        "flow procurement v2, step 'book_budget'",
    ]


def test_versions_disagreeing_on_the_budget_policy_are_refused(flows: list[Flow]) -> None:
    (v1,) = flows
    (found,) = problems(budget_agent(), [v1, version_2(v1, on_budget_exhausted="fail")])
    assert "says on_budget_exhausted: wait in procurement v1 and fail in procurement v2" in found


def test_a_handled_type_without_a_schema_is_refused(flows: list[Flow], tmp_path: Path) -> None:
    bound = bind(budget_agent(), flows)
    with pytest.raises(ConfigurationError, match=r"reserve \(procurement.v1.RiskScored\)"):
        bound.check(SchemaCatalog.load(tmp_path))


def test_an_agents_start_binds_it_to_its_projects_flows(repo_root: Path) -> None:
    misfit = budget_agent()
    misfit.compensations.clear()
    with pytest.raises(AgentContractError, match="step 'reserve_budget': the flow undoes it"):
        bind(misfit, project_flows(repo_root))
