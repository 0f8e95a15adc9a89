"""The tracker's questions, answered from the flow definition alone, and flow versions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sagalog.agents.lineage import LINEAGE_AVRO_TYPE
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.durations import format_duration, positive_duration_ms
from sagalog.errors import FlowDefinitionError
from sagalog.flows.model import Flow, Gate, Step
from sagalog.flows.registry import FlowRegistry
from sagalog.priority import Priority
from sagalog.topology.loader import load_topology


@pytest.fixture(scope="module")
def flow(repo_root: Path, catalog: SchemaCatalog) -> Flow:
    from sagalog.flows.loader import load_flow_file

    topology = load_topology(repo_root / "topology", known_schemas=catalog)
    return load_flow_file(
        repo_root / "topology/flows/procurement.v1.yaml", catalog=catalog, topology=topology
    )


def names(entries: tuple[Step | Gate, ...] | tuple[Step, ...]) -> list[str]:
    return [e.name for e in entries]


def test_steps_started_and_completed_by_events(flow: Flow) -> None:
    start = flow.step_for_start("procurement.v1.RequestSubmitted")
    assert start is not None and start.name == "classify_request"
    budget = flow.step_for_start("procurement.v1.RiskScored")
    assert budget is not None and budget.name == "reserve_budget"
    after_gate = flow.step_for_start("sagalog.v1.GateDecided", gate="manager_approval")
    assert after_gate is not None and after_gate.name == "create_purchase_order"
    assert flow.step_for_start("sagalog.v1.GateDecided", gate="other_gate") is None
    assert flow.step_for_start("procurement.v1.VendorNotified") is None
    done = flow.step_for_completion("procurement.v1.BudgetReserved")
    assert done is not None and done.name == "reserve_budget"
    assert flow.step_for_completion("procurement.v1.RequestSubmitted") is None


def test_step_failed_fails_the_step_it_names(flow: Flow) -> None:
    failed = flow.step_for_failure("sagalog.v1.StepFailed", step="score_risk")
    assert failed is not None and failed.name == "score_risk"
    assert flow.step_for_failure("sagalog.v1.StepFailed", step="nobody") is None
    assert flow.step_for_failure("procurement.v1.RiskScored", step="score_risk") is None


def test_next_after_walks_the_flow_and_ends_it(flow: Flow) -> None:
    nxt = flow.next_after("reserve_budget")
    assert isinstance(nxt, Gate) and nxt.name == "manager_approval"
    nxt = flow.next_after("manager_approval")
    assert isinstance(nxt, Step) and nxt.name == "create_purchase_order"
    assert flow.next_after("notify_vendor") is None  # the workflow completes
    with pytest.raises(KeyError, match="flow procurement v1 has no step or gate 'nope'"):
        flow.next_after("nope")


def test_completed_steps_before_are_in_compensation_order(flow: Flow) -> None:
    assert names(flow.completed_steps_before("notify_vendor")) == [
        "create_purchase_order",
        "reserve_budget",
        "score_risk",
        "retrieve_policies",
        "classify_request",
    ]
    # A gate rejecting undoes what ran before the gate; gates themselves undo nothing.
    before_gate = flow.completed_steps_before("manager_approval")
    assert [s.undo_action for s in before_gate] == ["release_budget", None, None, None]
    assert flow.completed_steps_before("classify_request") == ()


def test_lookups(flow: Flow) -> None:
    assert names(flow.steps)[-1] == "notify_vendor" and names(flow.gates) == ["manager_approval"]
    assert flow.entry("nope") is None
    assert [s.name for s in flow.segments_of("score_risk")] == ["assessment"]
    assert flow.segments_of("manager_approval") == ()
    assert flow.priority is Priority.NORMAL
    notify = flow.entry("notify_vendor")
    assert isinstance(notify, Step)
    assert notify.undo_completes_on == ("procurement.v1.CorrectionNoticeSent",)


def test_event_types_include_what_the_tracker_publishes(flow: Flow) -> None:
    types = flow.event_types()
    assert {
        "sagalog.v1.GateOpened",
        "sagalog.v1.GateDecided",
        "sagalog.v1.CompensationRequested",
        "procurement.v1.CorrectionNoticeSent",
    } <= types
    assert "sagalog.v1.CompensationCompleted" not in types  # no step completes on it


def test_a_flow_survives_a_round_trip_through_json(flow: Flow) -> None:
    again = Flow.model_validate(json.loads(flow.model_dump_json()))
    assert again == flow


def test_an_undo_timeout_defaults_to_the_step_timeout() -> None:
    step = Step.model_validate(
        {
            "name": "reserve",
            "agent": "a",
            "starts_on": "x.v1.A",
            "completes_on": "x.v1.B",
            "timeout": "10m",
            "compensation": {"action": "release"},
        }
    )
    assert step.compensation is not None
    assert step.compensation.timeout == 600_000
    assert step.compensation.completes_on == ("sagalog.v1.CompensationCompleted",)


@pytest.mark.parametrize(
    ("text", "ms", "shown"),
    [("72h", 259_200_000, "3d"), ("90s", 90_000, "90s"), ("1500ms", 1500, "1500ms"), (5, 5, "5ms")],
)
def test_durations(text: str | int, ms: int, shown: str) -> None:
    assert positive_duration_ms(text) == ms
    assert format_duration(ms) == shown


@pytest.mark.parametrize("bad", ["0s", 0, -5, "forever", "soon", True, None])
def test_durations_must_be_positive(bad: object) -> None:
    with pytest.raises(ValueError, match="is not a positive duration"):
        positive_duration_ms(bad)


def test_registry_keeps_every_version_and_starts_new_work_on_the_latest(flow: Flow) -> None:
    v2 = flow.model_copy(update={"version": 2, "source": "procurement.v2.yaml"})
    registry = FlowRegistry([v2, flow])
    assert registry.versions("procurement") == (1, 2)
    assert registry.latest("procurement") is v2
    assert registry.get("procurement", 1) is flow
    assert ("procurement", 1) in registry and len(registry) == 2
    assert [f.version for f in registry] == [1, 2]
    assert registry.names() == ("procurement",)
    started = registry.started_by("procurement.v1.RequestSubmitted", topic="procurement.events")
    assert started is v2
    assert registry.started_by("procurement.v1.RequestSubmitted", topic="other") is None
    assert registry.versions("nope") == ()


def test_registry_names_what_is_loaded_when_asked_for_what_is_not(flow: Flow) -> None:
    registry = FlowRegistry([flow])
    with pytest.raises(
        FlowDefinitionError, match=r"flow 'procurement' v7 is not loaded \(loaded: v1\)"
    ):
        registry.get("procurement", 7)
    with pytest.raises(FlowDefinitionError, match="no flow 'sales' is loaded"):
        registry.latest("sales")
    with pytest.raises(FlowDefinitionError, match="defined twice"):
        FlowRegistry([flow, flow])


def test_risk_scored_inlines_the_decision_lineage_record(catalog: SchemaCatalog) -> None:
    fields = {f["name"]: f for f in catalog["procurement.v1.RiskScored"].definition["fields"]}
    assert fields["lineage"]["type"] == LINEAGE_AVRO_TYPE
