"""A budget gate on a step that a gate's decision started (issue 49, item 4): the tracker's
rules and the agents' handlers together, in memory (``sagalog.testing``).

The drafting step starts on the ``GateDecided`` of the review gate, and is refused for
its budget: its budget gate opens and, approved, the tracker asks for the step again
(``StepRetryRequested``). The agent runs the handler again on the review's decision,
not on the budget gate's own (the later ``GateDecided``), and the handler sees the
workflow as when it first ran: the review's ``GateOpened`` and ``GateDecided``.
"""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path
from typing import Any

import pytest

from sagalog import Agent, Budget, HandlerContext
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.events import GateDecided, GateDecision, GateOpened, StepRetryRequested
from sagalog.flows.model import Flow
from sagalog.flows.states import WorkflowState
from sagalog.testing import FlowTestEnvironment

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "services"))
from filings.events import DocumentsRetrieved, FilingDrafted, FilingOpened  # noqa: E402

ANSWER = {
    "choices": [{"message": {"role": "assistant", "content": "The filing, drafted."}}],
    "usage": {"prompt_tokens": 20, "completion_tokens": 30},
}


def reviewed_flow() -> Flow:
    return Flow.model_validate(
        {
            "flow": "reviewed",
            "version": 1,
            "topic": "filings.events",
            "starts_on": FilingOpened.event_type,
            "deadline": "10d",
            "steps": [
                {
                    "name": "retrieve",
                    "agent": "records",
                    "starts_on": FilingOpened.event_type,
                    "completes_on": DocumentsRetrieved.event_type,
                    "timeout": "5m",
                    "effect": "none",
                },
                {
                    "gate": "review",
                    "starts_on": DocumentsRetrieved.event_type,
                    "assignee": "legal@filings.example",
                    "deadline": "24h",
                    "default": "reject",
                },
                {
                    "name": "draft_filing",
                    "agent": "drafter",
                    "starts_on": GateDecided.event_type,
                    "after": "review",
                    "completes_on": FilingDrafted.event_type,
                    "timeout": "10m",
                    "effect": "none",
                    "on_budget_exhausted": "gate",
                    "budget_gate": {
                        "assignee": "finance@filings.example",
                        "deadline": "24h",
                        "default": "reject",
                    },
                },
            ],
        }
    )


records = Agent("records")


@records.handles(step="retrieve")
async def retrieve(event: FilingOpened, ctx: HandlerContext) -> DocumentsRetrieved:
    return DocumentsRetrieved(filing_number=event.filing_number, hold_id="h-1", documents=[])


drafter = Agent(
    "drafter",
    # 10 tokens a minute: every call is over the budget, so every one is refused first.
    budgets=[Budget.of("model", tokens_per_minute=10)],
)
seen: list[dict[str, Any]] = []


@drafter.handles(step="draft_filing")
async def draft(event: GateDecided, ctx: HandlerContext) -> FilingDrafted | None:
    opened = ctx.workflow.latest(GateOpened)
    seen.append({"decided": event.gate, "opened": None if opened is None else opened.gate})
    if event.gate != "review" or event.decision is not GateDecision.APPROVED:
        return None  # another gate's decision, or a rejection
    assert opened is not None and opened.gate == event.gate, "a decision of a gate never opened"
    filing = ctx.workflow.require(FilingOpened)
    answer = await ctx.model_call(
        "model",
        lambda **request: ANSWER,
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": f"Draft filing {filing.filing_number}."}],
        max_tokens=30,
    )
    return FilingDrafted(
        filing_number=filing.filing_number,
        draft=answer["choices"][0]["message"]["content"],
        lineage=ctx.decision(model_id="gpt-4o-mini", prompt=filing.filing_number),
    )


@pytest.fixture
def env() -> Any:
    seen.clear()
    catalog = SchemaCatalog.load(REPO / "schemas")
    with FlowTestEnvironment([reviewed_flow()], [records, drafter], catalog=catalog) as env:
        yield env


def test_a_step_started_by_a_gates_decision_runs_again_after_its_budget_gate(
    env: FlowTestEnvironment,
) -> None:
    due = dt.datetime(2031, 1, 31, tzinfo=dt.UTC)
    env.start(FilingOpened(filing_number="F-1", regulator="ESMA", due=due), workflow_id="F-1")
    env.run_until_quiet()
    env.decide_gate("F-1", approve=True, by="lee@filings.example")  # the review
    env.run_until_quiet()
    record = env.record("F-1")
    assert (env.state("F-1"), record.current) == (
        WorkflowState.PENDING_APPROVAL,
        "draft_filing_budget",
    )
    assert env.effect_calls("model.model") == []  # refused before it reached the model

    env.decide_gate("F-1", approve=True, by="fran@filings.example")  # the budget gate
    env.run_until_quiet()

    assert env.dead_letters() == []
    assert env.state("F-1") == WorkflowState.COMPLETED
    assert len(env.effect_calls("model.model")) == 1  # the approved run, over the budget
    assert env.latest("F-1", StepRetryRequested) is not None
    drafted = env.latest("F-1", FilingDrafted)
    assert drafted is not None and drafted.draft == "The filing, drafted."
    # The review's decision ran the handler twice (refused, then approved over budget),
    # each time seeing the review's opening; the budget gate's decision, handled as it
    # arrived, is the only one that sees its own gate.
    assert seen == [
        {"decided": "review", "opened": "review"},
        {"decided": "draft_filing_budget", "opened": "draft_filing_budget"},
        {"decided": "review", "opened": "review"},
    ]
