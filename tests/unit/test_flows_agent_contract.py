"""The agent-flow contract: an agent's declared handlers against the flow steps naming it.

Each kind of mismatch is refused with the agent, the flow and the step named; the
repository's six reference agents fit the reference flow.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
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
from sagalog.agents.context import HandlerContext
from sagalog.agents.declaration import Agent
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.errors import AgentContractError, ConfigurationError
from sagalog.events import CompensationRequested
from sagalog.flows.agent_contract import (
    UNKNOWN,
    Returns,
    check_agent_contract,
    check_agent_in_project,
    contract_mismatches,
    returns_of,
)
from sagalog.flows.loader import load_flows
from sagalog.flows.model import Flow
from sagalog.topology.loader import load_topology

# The purchasing agent's settings refuse to load without the tracker's gate secret.
os.environ.setdefault("PURCHASING_AGENT_GATE_SECRET", "unit-test-gate-secret-0123456789")

REFERENCE_AGENTS = (
    "intake_agent",
    "retrieval_agent",
    "risk_agent",
    "budget_agent",
    "purchasing_agent",
    "notification_agent",
)
TOPIC = "procurement.events"


@pytest.fixture(scope="module")
def flows(repo_root: Path) -> list[Flow]:
    catalog = SchemaCatalog.load(repo_root / "schemas")
    topology = load_topology(repo_root / "topology", known_schemas=catalog)
    loaded = load_flows(repo_root / "topology" / "flows", catalog=catalog, topology=topology)
    return [f for f in loaded if f.name == "procurement"]  # the budget agent's flows


def budget_agent(*, topics: Sequence[str] = (TOPIC,)) -> Agent:
    """A budget agent declared as the flow wants it: reserve on RiskScored, release."""
    agent = Agent("budget-agent", topics=topics)

    @agent.handles(RiskScored, step="reserve_budget")
    async def reserve(event: RiskScored, ctx: HandlerContext) -> BudgetReserved:
        raise NotImplementedError

    @agent.compensates("reserve_budget")
    async def release(event: CompensationRequested, ctx: HandlerContext) -> BudgetReleased:
        raise NotImplementedError

    return agent


def problems(agent: Agent, flows: list[Flow]) -> list[str]:
    return [str(m) for m in contract_mismatches(agent, flows)]


@pytest.mark.parametrize("name", REFERENCE_AGENTS)
def test_every_reference_agent_fits_the_reference_flows(name: str, flows: list[Flow]) -> None:
    agent = importlib.import_module(f"{name}.agent").agent
    assert problems(agent, flows) == []
    check_agent_contract(agent, flows)  # and so is not refused


def test_the_reference_flow_names_only_reference_agents(flows: list[Flow]) -> None:
    declared = {importlib.import_module(f"{n}.agent").agent.name for n in REFERENCE_AGENTS}
    assert {step.agent for flow in flows for step in flow.steps} == declared


def test_a_matching_agent_passes(flows: list[Flow]) -> None:
    assert problems(budget_agent(), flows) == []


def test_an_agent_no_flow_names_has_nothing_to_fit(flows: list[Flow]) -> None:
    agent = Agent("archive-agent", topics=["archive.events"])

    @agent.handles(RiskScored, step="archive")
    async def archive(event: RiskScored, ctx: HandlerContext) -> None:
        raise NotImplementedError

    assert problems(agent, flows) == []


def test_a_step_without_a_handler_is_refused(flows: list[Flow]) -> None:
    agent = Agent("budget-agent", topics=[TOPIC])

    @agent.compensates("reserve_budget")
    async def release(event: CompensationRequested, ctx: HandlerContext) -> BudgetReleased:
        raise NotImplementedError

    assert problems(agent, flows) == [
        "agent 'budget-agent', flow procurement v1, step 'reserve_budget': no handler is "
        "declared for this step; the flow starts it on procurement.v1.RiskScored: add "
        "@agent.handles(<that event class>, step='reserve_budget')"
    ]


def test_a_handler_of_another_event_than_the_step_starts_on_is_refused(
    flows: list[Flow],
) -> None:
    agent = budget_agent()
    spec = agent.handlers.pop(RiskScored.event_type)

    @agent.handles(RequestSubmitted, step="reserve_budget")
    async def reserve(event: RequestSubmitted, ctx: HandlerContext) -> BudgetReserved:
        raise NotImplementedError

    assert spec.step == "reserve_budget"
    (found,) = problems(agent, flows)
    assert found.startswith("agent 'budget-agent', flow procurement v1, step 'reserve_budget':")
    assert "takes procurement.v1.RequestSubmitted, but the flow starts the step on " in found
    assert "procurement.v1.RiskScored, so it would never run" in found


def test_a_handler_returning_an_event_the_step_does_not_complete_on_is_refused(
    flows: list[Flow],
) -> None:
    agent = Agent("budget-agent", topics=[TOPIC])

    @agent.handles(RiskScored, step="reserve_budget")
    async def reserve(event: RiskScored, ctx: HandlerContext) -> BudgetReserved | VendorNotified:
        raise NotImplementedError

    @agent.compensates("reserve_budget")
    async def release(event: CompensationRequested, ctx: HandlerContext) -> BudgetReleased:
        raise NotImplementedError

    (found,) = problems(agent, flows)
    assert "flow procurement v1, step 'reserve_budget'" in found
    assert (
        "reserve returns procurement.v1.VendorNotified, which the flow does not wait for" in found
    )


def test_a_handler_that_can_never_complete_its_step_is_refused(flows: list[Flow]) -> None:
    agent = Agent("intake-agent", topics=[TOPIC])

    @agent.handles(RequestSubmitted, step="classify_request")
    async def classify(event: RequestSubmitted, ctx: HandlerContext) -> None:
        raise NotImplementedError

    assert problems(agent, flows) == [
        "agent 'intake-agent', flow procurement v1, step 'classify_request': classify returns "
        "none of procurement.v1.RequestClassified, the events that complete it, so it could "
        "never complete"
    ]


def test_a_handler_that_may_return_nothing_but_also_completes_passes(flows: list[Flow]) -> None:
    agent = Agent("intake-agent", topics=[TOPIC])

    @agent.handles(RequestSubmitted, step="classify_request")
    async def classify(event: RequestSubmitted, ctx: HandlerContext) -> RequestClassified | None:
        raise NotImplementedError

    assert problems(agent, flows) == []


def test_a_missing_compensation_the_flow_requires_is_refused(flows: list[Flow]) -> None:
    agent = budget_agent()
    agent.compensations.clear()
    assert problems(agent, flows) == [
        "agent 'budget-agent', flow procurement v1, step 'reserve_budget': the flow requires a "
        "compensation ('release_budget', completed by procurement.v1.BudgetReleased) and the "
        "agent declares none: add @agent.compensates('reserve_budget')"
    ]


def test_a_missing_irreversible_follow_up_is_refused(flows: list[Flow]) -> None:
    agent = Agent("notification-agent", topics=[TOPIC])

    @agent.handles(PurchaseOrderCreated, step="notify_vendor")
    async def notify(event: PurchaseOrderCreated, ctx: HandlerContext) -> VendorNotified:
        raise NotImplementedError

    (found,) = problems(agent, flows)
    assert found.startswith(
        "agent 'notification-agent', flow procurement v1, step 'notify_vendor':"
    )
    assert "requires an irreversible follow-up ('send_correction_notice', completed by " in found


def test_a_compensation_returning_nothing_when_the_flow_waits_for_an_event_is_refused(
    flows: list[Flow],
) -> None:
    agent = budget_agent()
    agent.compensations.clear()

    @agent.compensates("reserve_budget")
    async def release(event: CompensationRequested, ctx: HandlerContext) -> None:
        raise NotImplementedError

    (found,) = problems(agent, flows)
    assert found.startswith("agent 'budget-agent', flow procurement v1, step 'reserve_budget':")
    assert "release returns nothing on some path; the runtime then announces " in found
    assert "sagalog.v1.CompensationCompleted, which the flow does not name" in found


def test_a_handler_for_a_step_no_flow_gives_the_agent_is_refused(flows: list[Flow]) -> None:
    agent = budget_agent()

    @agent.handles(RequestSubmitted, step="reserve_budgets")
    async def typo(event: RequestSubmitted, ctx: HandlerContext) -> BudgetReserved:
        raise NotImplementedError

    assert problems(agent, flows) == [
        "agent 'budget-agent', step 'reserve_budgets': handler typo "
        "(procurement.v1.RequestSubmitted) is declared for this step, but no flow gives it to "
        "agent 'budget-agent' (its steps: reserve_budget); fix step= or the flow's agent:"
    ]


def test_a_compensation_of_a_step_the_flow_never_undoes_is_refused(flows: list[Flow]) -> None:
    agent = Agent("intake-agent", topics=[TOPIC])

    @agent.handles(RequestSubmitted, step="classify_request")
    async def classify(event: RequestSubmitted, ctx: HandlerContext) -> RequestClassified:
        raise NotImplementedError

    @agent.compensates("classify_request")
    async def unclassify(event: CompensationRequested, ctx: HandlerContext) -> None:
        raise NotImplementedError

    (found,) = problems(agent, flows)
    assert found.startswith("agent 'intake-agent', step 'classify_request': compensation ")
    assert "no flow undoes this step" in found


def test_an_agent_not_reading_the_flows_topic_is_refused(flows: list[Flow]) -> None:
    (found,) = problems(budget_agent(topics=["other.events"]), flows)
    assert found == (
        "agent 'budget-agent', flow procurement v1, step 'reserve_budget': the flow runs on "
        "topic 'procurement.events', which the agent does not read (topics: other.events); "
        "add it to Agent(topics=...)"
    )


def test_refusal_is_one_configuration_error_listing_every_mismatch(flows: list[Flow]) -> None:
    agent = budget_agent(topics=["other.events"])
    agent.compensations.clear()
    with pytest.raises(AgentContractError) as refused:
        check_agent_contract(agent, flows)
    assert isinstance(refused.value, ConfigurationError) and refused.value.exit_code == 2
    lines = str(refused.value).splitlines()
    assert lines[0] == "agent 'budget-agent' does not fit its flows:"
    assert len([line for line in lines if "step 'reserve_budget'" in line]) == 2


def test_every_flow_version_naming_the_agent_is_checked(flows: list[Flow]) -> None:
    (v1,) = flows  # v2 renames the step: the agent serves v1 and must serve v2 too
    v2 = v1.model_copy(
        update={
            "version": 2,
            "entries": tuple(
                e.model_copy(update={"name": "book_budget"})
                if e.kind == "step" and e.name == "reserve_budget"
                else e
                for e in v1.entries
            ),
        }
    )
    found = problems(budget_agent(), [v1, v2])
    assert [m.split(":")[0] for m in found] == [
        "agent 'budget-agent', flow procurement v2, step 'book_budget'",
        "agent 'budget-agent', flow procurement v2, step 'book_budget'",
    ]


async def _event(event: RiskScored, ctx: Any) -> BudgetReserved:
    raise NotImplementedError


async def _optional(event: RiskScored, ctx: Any) -> BudgetReserved | None:
    raise NotImplementedError


async def _several(event: RiskScored, ctx: Any) -> list[BudgetReserved | VendorNotified]:
    raise NotImplementedError


async def _unannotated(event, ctx):  # type: ignore[no-untyped-def]
    raise NotImplementedError


async def _anything(event: RiskScored, ctx: Any) -> Any:
    raise NotImplementedError


@pytest.mark.parametrize(
    ("func", "expected"),
    [
        (_event, Returns(frozenset({BudgetReserved.event_type}))),
        (_optional, Returns(frozenset({BudgetReserved.event_type}), may_return_nothing=True)),
        (
            _several,
            Returns(
                frozenset({BudgetReserved.event_type, VendorNotified.event_type}),
                may_return_nothing=True,
            ),
        ),
        (_unannotated, UNKNOWN),
        (_anything, UNKNOWN),
    ],
)
def test_return_annotations_are_read_or_left_unknown(func: Any, expected: Returns) -> None:
    assert returns_of(func) == expected


def test_an_unreadable_return_annotation_checks_the_rest_only(flows: list[Flow]) -> None:
    agent = Agent("budget-agent", topics=[TOPIC])

    @agent.handles(RiskScored, step="reserve_budget")
    async def reserve(event, ctx):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    assert problems(agent, flows) == [
        "agent 'budget-agent', flow procurement v1, step 'reserve_budget': the flow requires a "
        "compensation ('release_budget', completed by procurement.v1.BudgetReleased) and the "
        "agent declares none: add @agent.compensates('reserve_budget')"
    ]


def test_an_agents_start_checks_it_against_its_projects_flows(
    repo_root: Path, tmp_path: Path
) -> None:
    misfit = budget_agent()
    misfit.compensations.clear()
    with pytest.raises(AgentContractError, match="step 'reserve_budget': the flow requires"):
        check_agent_in_project(misfit, repo_root)
    check_agent_in_project(budget_agent(), repo_root)
    check_agent_in_project(misfit, tmp_path)  # no topology/flows: nothing to fit
