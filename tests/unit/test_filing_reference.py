"""The regulatory-filing reference workflow's pure parts: the demo's plan of filings,
what the drafting agent asks and under which budget, the tools' lookups, and the
agents against the flow that names them (``topology/flows/filing.v2.yaml``)."""

from __future__ import annotations

import datetime as dt
import importlib
from collections import Counter
from pathlib import Path

import pytest

from demo.filing_scenario import TRIAL_TENANT, WEIGHTS, FilingPlan, build_filings
from filings import drafting
from filings.events import FilingOpened
from filings.rulebook import facts_of, rule_for
from filings.sources import documents_for, excerpt
from filings.tools import filing_tools
from sagalog.agents.binding import bind
from sagalog.budgets.declaration import FREE, Budget
from sagalog.budgets.estimate import estimate
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.flows.loader import load_flows
from sagalog.flows.model import Flow
from sagalog.topology.loader import load_topology
from standins.model import complete

FILING_AGENTS = ("records_agent", "drafting_agent", "submission_agent")
PARTITIONS = 6  # filings.events in topology/topics.yaml


def opened(**changes: object) -> FilingOpened:
    fields: dict[str, object] = {
        "filing_number": "F-2026-0042",
        "regulator": "ESMA",
        "due": dt.datetime(2027, 1, 31, tzinfo=dt.UTC),
        "company": "Acme Holdings",
        "tenant": "northwind-legal",
    }
    return FilingOpened.model_validate(fields | changes)


def first_turn(filing: FilingOpened) -> list[dict[str, object]]:
    sources = documents_for(filing.company, filing.regulator, 2026)
    return drafting.messages(filing, [(s.title, s.text) for s in sources])


# -- the demo's plan ---------------------------------------------------------------


def test_the_plan_has_every_outcome_in_its_proportion_and_only_trial_filings_overspend() -> None:
    filings = build_filings("run1", 40)
    counts = Counter(f.plan for f in filings)
    assert counts == {plan: 40 * weight // 100 for plan, weight in WEIGHTS.items()}
    assert {f.plan for f in filings if f.payload["tenant"] == TRIAL_TENANT} == {
        FilingPlan.OVER_BUDGET
    }
    assert all(
        drafting.budget_for(f.payload["tenant"]) == "trial" for f in filings if not f.drafted
    )
    assert {f.expected_end for f in filings if f.plan is not FilingPlan.FILE} == {"compensated"}


def test_the_plan_is_the_same_for_the_same_seed_and_its_ids_are_unique() -> None:
    first, again = build_filings("run1", 30, seed=5), build_filings("run1", 30, seed=5)
    assert [(f.workflow_id, f.plan) for f in first] == [(f.workflow_id, f.plan) for f in again]
    assert len({f.workflow_id for f in first}) == 30
    assert all(FilingOpened.model_validate(f.payload) for f in first)


# -- what the model is asked, under which budget -------------------------------------


def test_the_request_names_the_regulator_and_the_company_where_a_quoting_model_reads() -> None:
    # The stand-in model fills a tool's string arguments with the request's first 80
    # characters: the lookups must still find both names there.
    head = drafting.request_text(opened())[:80]
    assert rule_for(head)["regulator"] == "ESMA"
    assert facts_of(head)["company"] == "Acme Holdings"


def test_the_prompt_carries_an_excerpt_of_each_document_not_the_whole_report() -> None:
    filing = opened()
    sources = documents_for(filing.company, filing.regulator, 2026)
    assert len(sources[0].text.encode()) > 16 * 1024  # over the blob threshold
    prompt = str(first_turn(filing)[1]["content"])
    assert excerpt(sources[0].text) in prompt
    assert len(prompt) < 2_000


def test_a_trial_filing_can_never_afford_its_first_call_and_a_standard_one_can() -> None:
    """The over-budget outcome is deterministic: the first model turn's estimate is
    over the trial budget's part at any partition, and far under the standard one's."""
    settings = importlib.import_module("drafting_agent.agent").settings
    tools = [tool.spec() for tool in filing_tools("http://registers.invalid")]
    guess = estimate(
        first_turn(opened()),
        model=settings.llm_model,
        max_tokens=settings.max_tokens,
        price=FREE,
        tools=tools,
    )
    trial = Budget.of("trial", tokens_per_minute=settings.trial_tokens_per_minute)
    standard = Budget.of("model", tokens_per_minute=settings.tokens_per_minute)
    assert guess.tokens > (trial.limits.share(1, 1).tokens_per_minute or 0)
    assert guess.tokens * 40 * 3 < (standard.limits.share(1, PARTITIONS).tokens_per_minute or 0)


def test_the_stand_in_model_calls_each_tool_once_then_answers() -> None:
    specs = [tool.spec() for tool in filing_tools("http://registers.invalid")]
    conversation = list(first_turn(opened()))
    asked = []
    for _ in range(5):
        message = complete({"model": "m", "messages": conversation, "tools": specs})["choices"][0][
            "message"
        ]
        conversation.append(message)
        if not message.get("tool_calls"):
            break
        asked += [call["function"]["name"] for call in message["tool_calls"]]
        conversation.append({"role": "tool", "content": "{}"})
    assert asked == ["lookup_rule", "company_facts"]
    assert "lookup_rule, company_facts" in conversation[-1]["content"]


# -- the tools' lookups --------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "regulator"),
    [("ESMA", "ESMA"), ("the fca rule", "FCA"), ("BaFin Initech AG: draft", "BaFin"), ("?", "")],
)
def test_a_rule_is_found_by_a_regulator_named_anywhere_in_the_query(
    query: str, regulator: str
) -> None:
    found = rule_for(query)
    assert found["regulator"] == regulator
    assert found["found"] == ("yes" if regulator else "no")


def test_a_company_unknown_to_the_register_is_reported_not_found() -> None:
    assert facts_of("Contoso SE")["officer"] == "CFO L. Martin"
    assert facts_of("Umbrella Corp") == {"company": "", "found": "no"}


# -- the agents against the flow -----------------------------------------------------


@pytest.fixture(scope="module")
def filing_flows(repo_root: Path) -> list[Flow]:
    catalog = SchemaCatalog.load(repo_root / "schemas")
    topology = load_topology(repo_root / "topology", known_schemas=catalog)
    loaded = load_flows(repo_root / "topology" / "flows", catalog=catalog, topology=topology)
    return [f for f in loaded if f.name == "filing"]


@pytest.mark.parametrize("name", FILING_AGENTS)
def test_every_filing_agent_fits_the_filing_flows(name: str, filing_flows: list[Flow]) -> None:
    agent = importlib.import_module(f"{name}.agent").agent
    assert bind(agent, filing_flows).topics == ("filings.events",)


def test_the_filing_flow_names_only_the_filing_agents(filing_flows: list[Flow]) -> None:
    declared = {importlib.import_module(f"{n}.agent").agent.name for n in FILING_AGENTS}
    assert {step.agent for flow in filing_flows for step in flow.steps} == declared
