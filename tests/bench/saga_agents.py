"""Relay agents for the saga benchmark: step N's start event in, step N's completion out.

Each step of a bench flow is one agent process running the full sagalog runtime
(transactions, projection, dedup, tracing, flow control), with a handler that does
nothing but build the completion event, so what the benchmark measures is the
platform, not business logic. Two chains are known:

- ``benchsaga``: five steps, no gate, each ``effect: none`` (``bench_flow`` writes
  its flow file into the saga benchmark's throwaway project);
- ``orders``: the agents of the tracker's five-step test flow
  (``tests/integration/flows/orders.v1.yaml``), used to measure idle agents next to
  workflows waiting at its gate.

Run one step as its own process (settings from ``BENCH_SAGA_AGENT_*``, see
``SagaAgentSettings``), or several steps co-hosted in one (``--step`` again)::

    BENCH_SAGA_AGENT_NAME_SUFFIX=-x BENCH_SAGA_AGENT_PROJECT_DIR=... \\
        python -m tests.bench.saga_agents --step 3
    ... python -m tests.bench.saga_agents --step 1 --step 2 --step 3 --step 4 --step 5
"""

from __future__ import annotations

import argparse
import datetime as dt
import decimal
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from pydantic_settings import SettingsConfigDict

from procurement.events import (
    BudgetReserved,
    PoliciesRetrieved,
    PurchaseOrderCreated,
    RequestClassified,
    RequestSubmitted,
    RiskLevel,
    RiskScored,
)
from sagalog.agents import Agent, AgentSettings, DecisionLineage, HandlerContext, run_agent
from sagalog.agents.running import run_together
from sagalog.contracts.models import Event
from sagalog.events import GateDecided
from sagalog.flows.model import Flow

AMOUNT = decimal.Decimal("100.00")
DECIDED_AT = dt.datetime(2027, 1, 15, 8, tzinfo=dt.UTC)
Build = Callable[[Event, HandlerContext], Event | None]


def _classified(_event: Event, ctx: HandlerContext) -> Event:
    return RequestClassified(
        request_id=ctx.workflow_id,
        category="hardware",
        confidence=0.9,
        extracted={},
        classifier="bench-relay",
    )


def _retrieved(_event: Event, ctx: HandlerContext) -> Event:
    return PoliciesRetrieved(request_id=ctx.workflow_id, documents=[], retriever="bench-relay")


def _scored(_event: Event, ctx: HandlerContext) -> Event:
    return RiskScored(
        request_id=ctx.workflow_id,
        score=0.2,
        level=RiskLevel.LOW,
        rationale="bench relay",
        factors=[],
        lineage=DecisionLineage(
            model_id="bench", prompt_hash="sha256:0", input_refs=[], decided_at=DECIDED_AT
        ),
    )


def _scored_if_approved(event: Event, ctx: HandlerContext) -> Event | None:
    approved = isinstance(event, GateDecided) and str(event.decision) == "APPROVED"
    return _scored(event, ctx) if approved else None


def _reserved(_event: Event, ctx: HandlerContext) -> Event:
    return BudgetReserved(
        reservation_id=f"R-{ctx.workflow_id}", cost_center="CC-BENCH", amount=AMOUNT, currency="EUR"
    )


def _ordered(_event: Event, ctx: HandlerContext) -> Event:
    return PurchaseOrderCreated(
        purchase_order_id=f"PO-{ctx.workflow_id}",
        request_id=ctx.workflow_id,
        vendor="Acme",
        amount=AMOUNT,
        currency="EUR",
    )


@dataclass(frozen=True)
class RelayStep:
    """One step: the event that starts it, the one that completes it, and how to build it."""

    name: str
    starts_on: type[Event]
    completes_on: type[Event]
    build: Build


CHAINS: dict[str, tuple[RelayStep, ...]] = {
    "benchsaga": (
        RelayStep("classify", RequestSubmitted, RequestClassified, _classified),
        RelayStep("retrieve", RequestClassified, PoliciesRetrieved, _retrieved),
        RelayStep("score", PoliciesRetrieved, RiskScored, _scored),
        RelayStep("reserve", RiskScored, BudgetReserved, _reserved),
        RelayStep("order", BudgetReserved, PurchaseOrderCreated, _ordered),
    ),
    "orders": (
        RelayStep("reserve_budget", RequestSubmitted, BudgetReserved, _reserved),
        RelayStep("classify_request", BudgetReserved, RequestClassified, _classified),
        RelayStep("retrieve_policies", RequestClassified, PoliciesRetrieved, _retrieved),
        RelayStep("score_risk", GateDecided, RiskScored, _scored_if_approved),
        RelayStep("create_purchase_order", RiskScored, PurchaseOrderCreated, _ordered),
    ),
}


def bench_flow(topic: str, suffix: str) -> str:
    """The saga benchmark's flow file: the five ``benchsaga`` relay steps, no gate, each
    run by the agent ``agent_name("benchsaga", step, suffix)``."""
    chain = CHAINS["benchsaga"]
    lines = [
        "# The saga benchmark's flow: five relay steps, no gate, nothing to undo.",
        "flow: benchsaga",
        "version: 1",
        f"topic: {topic}",
        f"starts_on: {chain[0].starts_on.event_type}",
        "deadline: 1d",
        "steps:",
    ]
    for number, (before, step) in enumerate(zip((None, *chain), chain, strict=False), 1):
        start = (
            f"starts_on: {step.starts_on.event_type}" if before is None else f"after: {before.name}"
        )
        lines += [
            f"  - name: {step.name}",
            f"    agent: {agent_name('benchsaga', number, suffix)}",
            f"    {start}",
            f"    completes_on: {step.completes_on.event_type}",
            "    timeout: 10m",
            "    effect: none",
        ]
    return "\n".join(lines) + "\n"


def chain_flow(chain: str, topic: str, agents: dict[str, str]) -> Flow:
    """``chain``'s relay steps as one flow on ``topic`` (no gate), built in memory for a
    bench's in-process worker; ``agents``: step name -> the agent that runs it."""
    steps = CHAINS[chain]
    return Flow.model_validate(
        {
            "flow": chain,
            "version": 1,
            "topic": topic,
            "starts_on": steps[0].starts_on.event_type,
            "deadline": "1d",
            "steps": [
                {
                    "name": step.name,
                    "agent": agents.get(step.name, f"bench-{step.name}"),
                    "starts_on": step.starts_on.event_type,
                    "completes_on": step.completes_on.event_type,
                    "timeout": "10m",
                    "effect": "none",
                }
                for step in steps
            ],
        }
    )


def named_for_bench(flow: str, chain: str, suffix: str) -> str:
    """``flow``'s text with the steps of ``chain`` given to the bench's relay agents
    (``agent_name``), which run the steps a flow names them on."""
    for number, step in enumerate(CHAINS[chain], 1):
        flow = re.sub(
            rf"(- name: {step.name}\n\s+agent: )\S+",
            rf"\g<1>{agent_name(chain, number, suffix)}",
            flow,
        )
    return flow


class SagaAgentSettings(AgentSettings):
    """A bench relay agent (env prefix ``BENCH_SAGA_AGENT_``)."""

    model_config = SettingsConfigDict(
        env_prefix="BENCH_SAGA_AGENT_", env_file=".env", extra="ignore"
    )

    chain: Literal["benchsaga", "orders"] = "benchsaga"
    name_suffix: str = ""
    """Appended to the agent's name, hence to its group, transactional id and retry topic."""


def agent_name(chain: str, step: int, suffix: str) -> str:
    return f"saga-{chain}-{CHAINS[chain][step - 1].name.replace('_', '-')}{suffix}"


def build_agent(settings: SagaAgentSettings, step: int) -> Agent:
    """The relay agent of step ``step`` (1-based) of ``settings.chain``."""
    relay = CHAINS[settings.chain][step - 1]
    # Its topic and the event it takes come from the project's flow, which names it.
    agent = Agent(agent_name(settings.chain, step, settings.name_suffix))

    @agent.handles(step=relay.name)
    async def handle(event: Event, ctx: HandlerContext) -> Event | None:
        return relay.build(event, ctx)

    return agent


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--step",
        type=int,
        action="append",
        required=True,
        choices=range(1, 6),
        help="the step to run; given more than once, those steps' agents co-hosted",
    )
    args = parser.parse_args(argv)
    settings = SagaAgentSettings()
    if len(args.step) == 1:
        run_agent(build_agent(settings, args.step[0]), settings)
    else:
        run_together([(build_agent(settings, step), settings) for step in args.step], settings)


if __name__ == "__main__":
    main()
