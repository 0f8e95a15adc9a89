"""A wrong flow definition is refused at load, naming file, flow, version, step and problem.

Each test breaks the reference flow in one way and reads the message a person would.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from sagalog.contracts.catalog import SchemaCatalog
from sagalog.errors import ConfigurationError, FlowDefinitionError
from sagalog.flows.loader import check_flows, load_flow_file, load_flows
from sagalog.topology.loader import load_topology
from sagalog.topology.model import Topology

Doc = dict[str, Any]


@pytest.fixture(scope="module")
def topology(repo_root: Path, catalog: SchemaCatalog) -> Topology:
    return load_topology(repo_root / "topology", known_schemas=catalog)


@pytest.fixture(scope="module")
def reference(repo_root: Path) -> Doc:
    text = (repo_root / "topology/flows/procurement.v1.yaml").read_text()
    document: Doc = yaml.safe_load(text)
    return document


def entry(document: Doc, name: str) -> Doc:
    found: Doc = next(e for e in document["steps"] if name in (e.get("name"), e.get("gate")))
    return found


def write(directory: Path, document: Doc, file_name: str | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    name = file_name or f"{document.get('flow')}.v{document.get('version')}.yaml"
    path = directory / name
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


Refuse = Callable[[Callable[[Doc], object]], tuple[str, str]]


@pytest.fixture
def refuse(tmp_path: Path, reference: Doc, catalog: SchemaCatalog, topology: Topology) -> Refuse:
    """Break a copy of the reference flow with ``change``; the message and the file."""

    def run(change: Callable[[Doc], object]) -> tuple[str, str]:
        document = copy.deepcopy(reference)
        change(document)
        path = write(tmp_path / "flows", document)
        with pytest.raises(FlowDefinitionError) as caught:
            load_flows(tmp_path / "flows", catalog=catalog, topology=topology)
        return str(caught.value), str(path)

    return run


def test_the_reference_flow_loads(
    repo_root: Path, catalog: SchemaCatalog, topology: Topology
) -> None:
    registry = load_flows(repo_root / "topology/flows", catalog=catalog, topology=topology)
    flow = registry.latest("procurement")
    assert (flow.name, flow.version, flow.topic) == ("procurement", 1, "procurement.events")
    assert [e.name for e in flow.entries] == [
        "classify_request",
        "retrieve_policies",
        "score_risk",
        "reserve_budget",
        "manager_approval",
        "create_purchase_order",
        "notify_vendor",
    ]
    assert flow.deadline == 5 * 86_400_000
    [gate] = flow.gates
    assert gate.deadline == 72 * 3_600_000 and gate.default == "reject"
    assert [(e.after, e.to) for e in gate.escalation] == [
        (24 * 3_600_000, "director@procurement.example")
    ]
    budget = flow.steps[3]
    assert budget.compensation is not None
    assert budget.compensation.completes_on == ("procurement.v1.BudgetReleased",)
    assert budget.fails_on == ("sagalog.v1.StepFailed",)
    notify = flow.steps[-1]
    assert notify.irreversible is not None
    assert notify.irreversible.follow_up == "send_correction_notice"


def test_after_and_starts_on_both_load_as_both(
    repo_root: Path, catalog: SchemaCatalog, topology: Topology
) -> None:
    flow = load_flow_file(
        repo_root / "topology/flows/procurement.v1.yaml", catalog=catalog, topology=topology
    )
    first, second = flow.entries[:2]
    assert (first.after, first.starts_on) == (None, ("procurement.v1.RequestSubmitted",))
    assert (second.after, second.starts_on) == (
        "classify_request",
        ("procurement.v1.RequestClassified",),
    )
    purchase = flow.entry("create_purchase_order")
    assert purchase is not None
    assert (purchase.after, purchase.starts_on) == ("manager_approval", ("sagalog.v1.GateDecided",))
    gate = flow.entry("manager_approval")
    assert gate is not None and gate.starts_on == ("procurement.v1.BudgetReserved",)


def test_a_compensation_event_without_schema_is_named_like_the_style_guide(
    refuse: Refuse,
) -> None:
    def misspell(d: Doc) -> None:
        entry(d, "reserve_budget")["compensation"]["completes_on"] = "procurement.v1.BudgetRelesed"

    message, path = refuse(misspell)
    assert (
        f"{path}: flow 'procurement' v1, step 'reserve_budget': compensation 'release_budget' "
        f"completes on 'procurement.v1.BudgetRelesed', which has no schema in "
    ) in message
    assert "did you mean 'procurement.v1.BudgetReleased'?" in message


@pytest.mark.parametrize(
    ("change", "located", "problem"),
    [
        pytest.param(
            lambda d: entry(d, "reserve_budget").pop("compensation"),
            "step 'reserve_budget'",
            "has an external effect but says nothing about undoing it: add compensation",
            id="external-effect-without-compensation",
        ),
        pytest.param(
            lambda d: entry(d, "score_risk").update(
                compensation={"action": "forget", "timeout": "1m"}
            ),
            "step 'score_risk'",
            "says effect: none but also how to undo its effect",
            id="effect-none-with-compensation",
        ),
        pytest.param(
            lambda d: entry(d, "reserve_budget").update(irreversible={"follow_up": "apologize"}),
            "step 'reserve_budget'",
            "has both a compensation and irreversible",
            id="compensation-and-irreversible",
        ),
        pytest.param(
            lambda d: entry(d, "notify_vendor")["irreversible"].pop("follow_up"),
            "step 'notify_vendor', field 'irreversible.follow_up'",
            "required",
            id="irreversible-without-follow-up",
        ),
        pytest.param(
            lambda d: entry(d, "score_risk").update(timeout="soon"),
            "step 'score_risk', field 'timeout'",
            "'soon' is not a positive duration; use e.g. 72h",
            id="bad-duration",
        ),
        pytest.param(
            lambda d: entry(d, "score_risk").update(timeout=0),
            "step 'score_risk', field 'timeout'",
            "0 is not a positive duration",
            id="zero-duration",
        ),
        pytest.param(
            lambda d: entry(d, "score_risk").update(timeout="forever"),
            "step 'score_risk', field 'timeout'",
            "'forever' is not a positive duration",
            id="forever-is-no-timeout",
        ),
        pytest.param(
            lambda d: entry(d, "score_risk").update(timout="1m"),
            "step 'score_risk', field 'timout'",
            "unknown field",
            id="unknown-step-field",
        ),
        pytest.param(
            lambda d: entry(d, "score_risk").update(agent="risk agent!"),
            "step 'score_risk', field 'agent'",
            "is not an agent name",
            id="bad-agent-name",
        ),
        pytest.param(
            lambda d: entry(d, "score_risk").update(completes_on="RiskScored"),
            "step 'score_risk', field 'completes_on'",
            "'RiskScored' is not an event type; use its Avro full name",
            id="event-type-without-namespace",
        ),
        pytest.param(
            lambda d: entry(d, "retrieve_policies").update(
                starts_on="procurement.v1.RequestClassified"
            ),
            "step 'retrieve_policies'",
            "give starts_on: <event type> or after: <the step or gate before it>, exactly one",
            id="starts-on-and-after",
        ),
        pytest.param(
            lambda d: entry(d, "retrieve_policies").pop("after"),
            "step 'retrieve_policies'",
            "exactly one",
            id="neither-starts-on-nor-after",
        ),
        pytest.param(
            lambda d: entry(d, "manager_approval").update(
                starts_on="procurement.v1.BudgetReserved"
            ),
            "gate 'manager_approval'",
            "a gate opens when the entry before it completes; drop starts_on",
            id="gate-with-starts-on",
        ),
        pytest.param(
            lambda d: entry(d, "manager_approval").update(
                escalation=[
                    {"after": "24h", "to": "director@x"},
                    {"after": "12h", "to": "ceo@x"},
                ]
            ),
            "gate 'manager_approval'",
            "escalation to 'ceo@x' after 12h is not later than the one to 'director@x' after 1d",
            id="escalations-not-increasing",
        ),
        pytest.param(
            lambda d: entry(d, "manager_approval").update(
                escalation=[{"after": "96h", "to": "director@x"}]
            ),
            "gate 'manager_approval'",
            "escalation to 'director@x' after 4d is not before the gate's deadline 3d, when "
            "the default (reject) applies: it could never happen",
            id="escalation-after-deadline",
        ),
        pytest.param(
            lambda d: entry(d, "manager_approval").update(default="maybe"),
            "gate 'manager_approval', field 'default'",
            "Input should be 'approve', 'reject' or 'fail' (got 'maybe')",
            id="gate-default",
        ),
        pytest.param(
            lambda d: entry(d, "manager_approval").pop("assignee"),
            "gate 'manager_approval', field 'assignee'",
            "required",
            id="gate-without-assignee",
        ),
    ],
)
def test_an_entry_is_refused_naming_file_flow_version_and_entry(
    refuse: Refuse, change: Callable[[Doc], object], located: str, problem: str
) -> None:
    message, path = refuse(change)
    assert f"{path}: flow 'procurement' v1, {located}: " in message
    assert problem in message


@pytest.mark.parametrize(
    ("change", "located", "problem"),
    [
        pytest.param(
            lambda d: (
                entry(d, "score_risk").update(
                    completes_on=["procurement.v1.RiskScored", "sagalog.v1.EffectRecorded"]
                ),
                entry(d, "reserve_budget").pop("after"),
                entry(d, "reserve_budget").update(starts_on="procurement.v1.RiskScored"),
            ),
            "step 'score_risk'",
            "completes on 'sagalog.v1.EffectRecorded', which nothing consumes: the next "
            "entry, step 'reserve_budget', starts on 'procurement.v1.RiskScored' only",
            id="completion-without-consumer",
        ),
        pytest.param(
            lambda d: (
                entry(d, "reserve_budget").pop("after"),
                entry(d, "reserve_budget").update(starts_on="procurement.v1.VendorNotified"),
            ),
            "step 'reserve_budget'",
            "starts on 'procurement.v1.VendorNotified', which only the later step "
            "'notify_vendor' produces",
            id="start-produced-later",
        ),
        pytest.param(
            lambda d: (
                entry(d, "reserve_budget").pop("after"),
                entry(d, "reserve_budget").update(starts_on="procurement.v1.RequestClassified"),
            ),
            "step 'reserve_budget'",
            "starts on 'procurement.v1.RequestClassified', which step 'classify_request' "
            "produces, but entries run in the listed order and the one before it is step "
            "'score_risk'; start it on what step 'score_risk' produces "
            "('procurement.v1.RiskScored') or write after: score_risk",
            id="start-produced-by-an-earlier-step",
        ),
        pytest.param(
            lambda d: (
                entry(d, "reserve_budget").pop("after"),
                entry(d, "reserve_budget").update(starts_on="procurement.v1.BudgetReleased"),
            ),
            "step 'reserve_budget'",
            "starts on 'procurement.v1.BudgetReleased', which nothing in the flow produces",
            id="start-without-producer",
        ),
        pytest.param(
            lambda d: entry(d, "reserve_budget").update(after="classify_request"),
            "step 'reserve_budget'",
            "after 'classify_request', but the entry before it is step 'score_risk': "
            "entries run in the listed order",
            id="after-a-step-further-up",
        ),
        pytest.param(
            lambda d: entry(d, "reserve_budget").update(after="notify_vendor"),
            "step 'reserve_budget'",
            "after 'notify_vendor', which comes later in the list",
            id="after-a-later-step",
        ),
        pytest.param(
            lambda d: entry(d, "reserve_budget").update(after="score_risks"),
            "step 'reserve_budget'",
            "after 'score_risks': no step or gate of that name in this flow",
            id="after-an-unknown-step",
        ),
        pytest.param(
            lambda d: entry(d, "manager_approval").update(after="score_risk"),
            "gate 'manager_approval'",
            "after 'score_risk', but the entry before it is step 'reserve_budget'",
            id="gate-after-a-step-further-up",
        ),
        pytest.param(
            lambda d: entry(d, "retrieve_policies").update(
                completes_on="procurement.v1.RequestClassified"
            ),
            "step 'score_risk'",
            "starts on 'procurement.v1.RequestClassified', which also starts step "
            "'retrieve_policies'; no two steps start on the same event",
            id="two-steps-start-on-one-event",
        ),
        pytest.param(
            lambda d: entry(d, "retrieve_policies").update(
                completes_on="procurement.v1.RequestClassified"
            ),
            "step 'retrieve_policies'",
            "completes on 'procurement.v1.RequestClassified', which also completes step "
            "'classify_request'",
            id="two-steps-complete-on-one-event",
        ),
        pytest.param(
            lambda d: entry(d, "notify_vendor").update(
                completes_on="procurement.v1.RequestSubmitted"
            ),
            "step 'notify_vendor'",
            "completes on 'procurement.v1.RequestSubmitted', which starts the flow",
            id="completion-restarts-the-flow",
        ),
        pytest.param(
            lambda d: entry(d, "notify_vendor").update(
                fails_on=["sagalog.v1.StepFailed", "procurement.v1.PurchaseOrderCreated"]
            ),
            "step 'create_purchase_order'",
            "completes on 'procurement.v1.PurchaseOrderCreated', which fails step 'notify_vendor'",
            id="event-completes-and-fails",
        ),
        pytest.param(
            lambda d: entry(d, "notify_vendor").update(completes_on="sagalog.v1.StepFailed"),
            "step 'notify_vendor'",
            "completes on 'sagalog.v1.StepFailed', which the platform publishes for every step",
            id="completion-on-a-platform-event",
        ),
        pytest.param(
            lambda d: entry(d, "notify_vendor").update(name="score_risk"),
            "step 'score_risk' (entry 7)",
            "the name is already used by the step at entry 3",
            id="duplicate-name",
        ),
        pytest.param(
            lambda d: entry(d, "score_risk").update(timeout="6d"),
            "step 'score_risk'",
            "timeout 6d is longer than the workflow deadline 5d, so it could never fire",
            id="timeout-beyond-deadline",
        ),
        pytest.param(
            lambda d: entry(d, "manager_approval").update(deadline="8d"),
            "gate 'manager_approval'",
            "deadline 8d is longer than the workflow deadline 5d",
            id="gate-deadline-beyond-deadline",
        ),
    ],
)
def test_a_broken_edge_or_role_is_refused(
    refuse: Refuse, change: Callable[[Doc], object], located: str, problem: str
) -> None:
    message, path = refuse(change)
    assert f"{path}: flow 'procurement' v1, {located}: {problem}" in message


def test_a_step_event_without_schema_is_named_once(refuse: Refuse) -> None:
    message, path = refuse(
        lambda d: entry(d, "score_risk").update(completes_on="procurement.v1.RiskScord")
    )
    assert (
        f"{path}: flow 'procurement' v1, step 'score_risk': completes on "
        "'procurement.v1.RiskScord', which has no schema in "
    ) in message
    # reserve_budget starts on it too (after: score_risk); one line says it all.
    assert message.count("RiskScord'") == 1


@pytest.mark.parametrize(
    ("change", "located", "problem"),
    [
        pytest.param(
            lambda d: d["segments"][0].update(steps=["classify_request", "score_risk"]),
            "segment 'assessment'",
            "names 'classify_request', 'score_risk', which are not consecutive entries in flow "
            "order ('retrieve_policies' comes between them)",
            id="segment-not-consecutive",
        ),
        pytest.param(
            lambda d: d["segments"][0].update(steps=["score_risk", "retrieve_policies"]),
            "segment 'assessment'",
            "names 'score_risk', 'retrieve_policies', which are not consecutive entries in "
            "flow order (they are out of order)",
            id="segment-out-of-order",
        ),
        pytest.param(
            lambda d: d["segments"][0].update(steps=["classify_request", "retrieve"]),
            "segment 'assessment'",
            "names 'retrieve', which is not a step or gate of this flow",
            id="segment-unknown-step",
        ),
        pytest.param(
            lambda d: d["segments"][1].update(timeout="1 hour"),
            "segment 'fulfilment', field 'timeout'",
            "'1 hour' is not a positive duration",
            id="segment-bad-timeout",
        ),
        pytest.param(
            lambda d: d["sla"][1].update(step="score_risks"),
            "sla rule 'slow_risk_scoring'",
            "measures 'score_risks', which is not a step or gate of this flow",
            id="sla-unknown-step",
        ),
        pytest.param(
            lambda d: d["sla"][0].update(state="pending"),
            "sla rule 'approvals_waiting', field 'state'",
            "Input should be 'queued', 'initiated', 'running'",
            id="sla-unknown-state",
        ),
        pytest.param(
            lambda d: d["sla"][0].update(state="completed"),
            "sla rule 'approvals_waiting'",
            "state 'completed' is terminal",
            id="sla-terminal-state",
        ),
        pytest.param(
            lambda d: d["sla"][0].update(statistic="p90"),
            "sla rule 'approvals_waiting', field 'statistic'",
            "Input should be 'p50', 'p95', 'p99' or 'max'",
            id="sla-statistic",
        ),
        pytest.param(
            lambda d: d["sla"][0].update(step="score_risk"),
            "sla rule 'approvals_waiting'",
            "metric time_in_state needs state: <state> and no step",
            id="sla-state-and-step",
        ),
        pytest.param(
            lambda d: d["sla"].append(dict(d["sla"][0])),
            "sla rule 'approvals_waiting'",
            "another sla rule has the same name",
            id="sla-duplicate-name",
        ),
        pytest.param(
            lambda d: d.update(deadline="-1"),
            "field 'deadline'",
            "'-1' is not a positive duration",
            id="flow-deadline",
        ),
        pytest.param(
            lambda d: d.update(priority="asap"),
            "field 'priority'",
            "'asap' is not a priority; use one of low, normal, high, urgent",
            id="flow-priority",
        ),
        pytest.param(
            lambda d: d.update(topic="procurement.workflows"),
            "field 'topic'",
            "topic 'procurement.workflows' is not declared in the topology (declared: "
            "filings.events, procurement.events,",
            id="topic-not-declared",
        ),
        pytest.param(
            lambda d: d.update(owner="me"),
            None,
            "unknown top-level key(s) ['owner']",
            id="unknown-top-level-key",
        ),
        pytest.param(
            lambda d: d.update(steps=[]),
            "field 'steps'",
            "Tuple should have at least 1 item",
            id="no-steps",
        ),
    ],
)
def test_flow_level_problems_are_located(
    refuse: Refuse, change: Callable[[Doc], object], located: str | None, problem: str
) -> None:
    message, path = refuse(change)
    prefix = f"{path}: flow 'procurement' v1" + (f", {located}" if located else "")
    assert f"{prefix}: {problem}" in message


def test_an_sla_rule_on_a_state_the_flow_never_enters_is_refused(refuse: Refuse) -> None:
    def without_gate(d: Doc) -> None:
        d["steps"] = [e for e in d["steps"] if "gate" not in e]
        entry(d, "create_purchase_order")["after"] = "reserve_budget"

    message, path = refuse(without_gate)
    assert (
        f"{path}: flow 'procurement' v1, sla rule 'approvals_waiting': state "
        "'pending_approval' needs a human gate, and this flow has none"
    ) in message


def test_the_topic_must_carry_every_event_the_flow_names(
    tmp_path: Path, reference: Doc, catalog: SchemaCatalog, topology: Topology
) -> None:
    events = topology.topic("procurement.events")
    assert events is not None
    narrowed = topology.model_copy(
        update={
            "topics": tuple(
                t.model_copy(
                    update={
                        "schemas": tuple(
                            s
                            for s in t.schemas
                            if s not in ("procurement.v1.BudgetReleased", "sagalog.v1.GateOpened")
                        )
                    }
                )
                for t in topology.topics
            )
        }
    )
    path = write(tmp_path, reference)
    with pytest.raises(FlowDefinitionError) as caught:
        load_flows(tmp_path, catalog=catalog, topology=narrowed)
    message = str(caught.value)
    assert (
        f"{path}: flow 'procurement' v1, step 'reserve_budget': compensation 'release_budget' "
        "completes on 'procurement.v1.BudgetReleased', which topic 'procurement.events' does "
        "not carry; add it to that topic's schemas: list in the topology"
    ) in message
    assert (
        f"{path}: flow 'procurement' v1, gate 'manager_approval': opens with "
        "'sagalog.v1.GateOpened', which topic 'procurement.events' does not carry"
    ) in message


def test_every_problem_of_every_file_is_reported_at_once(
    tmp_path: Path, reference: Doc, catalog: SchemaCatalog, topology: Topology
) -> None:
    first = copy.deepcopy(reference)
    entry(first, "reserve_budget").pop("compensation")
    entry(first, "score_risk")["timeout"] = "soon"
    first["segments"][0]["timeout"] = "later"
    second = copy.deepcopy(reference)
    second["version"] = 2
    entry(second, "notify_vendor")["completes_on"] = "procurement.v1.VendorNotifed"
    write(tmp_path, first)
    write(tmp_path, second)
    result = check_flows(tmp_path, catalog=catalog, topology=topology)
    lines = [str(p) for p in result.problems]
    assert len(lines) == 4, lines
    assert [p.version for p in result.problems] == [1, 1, 1, 2]
    assert result.flows == ()
    message = str(result.error())
    assert message.endswith(
        "4 problem(s) in 2 of 2 flow file(s); fix them and rerun `sagalog flows check`"
    )
    assert isinstance(result.error(), ConfigurationError) and result.error().exit_code == 2


def test_a_good_version_loads_beside_a_broken_one_in_the_check(
    tmp_path: Path, reference: Doc, catalog: SchemaCatalog, topology: Topology
) -> None:
    broken = copy.deepcopy(reference)
    broken["version"] = 2
    broken["deadline"] = "soon"
    write(tmp_path, reference)
    write(tmp_path, broken)
    result = check_flows(tmp_path, catalog=catalog, topology=topology)
    assert [f.label for f in result.flows] == ["procurement v1"]
    assert [(p.flow, p.version, p.where) for p in result.problems] == [
        ("procurement", 2, "field 'deadline'")
    ]


def test_the_file_is_named_after_flow_and_version(
    tmp_path: Path, reference: Doc, catalog: SchemaCatalog, topology: Topology
) -> None:
    write(tmp_path, reference, "procurement.yaml")
    with pytest.raises(
        FlowDefinitionError,
        match=re.escape(
            "procurement.yaml: flow 'procurement' v1: the file must be named 'procurement.v1.yaml'"
        ),
    ):
        load_flows(tmp_path, catalog=catalog, topology=topology)


def test_unreadable_files_are_named(
    tmp_path: Path, catalog: SchemaCatalog, topology: Topology
) -> None:
    (tmp_path / "a.v1.yaml").write_text("flow: a\nsteps: [\n")
    (tmp_path / "b.v1.yaml").write_text("- just a list\n")
    result = check_flows(tmp_path, catalog=catalog, topology=topology)
    first, second = (str(p) for p in result.problems)
    assert first.startswith(f"{tmp_path / 'a.v1.yaml'}: not valid YAML at line")
    assert second.startswith(f"{tmp_path / 'b.v1.yaml'}: expected a mapping with keys")


def test_an_entry_that_is_neither_step_nor_gate_is_named(refuse: Refuse) -> None:
    message, path = refuse(lambda d: d["steps"].insert(1, {"agent": "x"}))
    assert (
        f"{path}: flow 'procurement' v1, entry 2: expected a step (a mapping with name:), "
        "a gate (a mapping with gate:) or a wait (a mapping with wait:)"
    ) in message


def test_two_flows_starting_on_one_event_in_one_topic_are_refused(
    tmp_path: Path, reference: Doc, catalog: SchemaCatalog, topology: Topology
) -> None:
    twin = copy.deepcopy(reference)
    twin["flow"] = "purchasing"
    write(tmp_path, reference)
    path = write(tmp_path, twin)
    with pytest.raises(FlowDefinitionError) as caught:
        load_flows(tmp_path, catalog=catalog, topology=topology)
    assert (
        f"{path}: flow 'purchasing' v1, field 'starts_on': starts on "
        "'procurement.v1.RequestSubmitted' in topic 'procurement.events', like flow "
        "'procurement' v1"
    ) in str(caught.value)


def test_a_missing_or_empty_folder_is_refused(
    tmp_path: Path, catalog: SchemaCatalog, topology: Topology
) -> None:
    with pytest.raises(FlowDefinitionError, match="does not exist"):
        load_flows(tmp_path / "nope", catalog=catalog, topology=topology)
    with pytest.raises(FlowDefinitionError, match="no flow files"):
        load_flows(tmp_path, catalog=catalog, topology=topology)


def _yaml_example(text: str) -> str:
    block = re.search(r"```yaml\n(.*?)```", text, re.S)
    assert block is not None
    return block.group(1)


def test_the_documented_examples_load(
    tmp_path: Path, repo_root: Path, catalog: SchemaCatalog, topology: Topology
) -> None:
    """The flow-format reference and the loader's docstring show flows that load, so neither
    rots."""
    from sagalog.flows import loader

    readme = _yaml_example((repo_root / "docs/reference/flow-format.md").read_text())
    docstring = (loader.__doc__ or "").split("The format::\n", 1)[1].split("\nErrors name", 1)[0]
    for i, text in enumerate((readme, docstring)):
        folder = tmp_path / str(i)
        folder.mkdir()
        (folder / "procurement.v1.yaml").write_text(text)
        flow = load_flows(folder, catalog=catalog, topology=topology).latest("procurement")
        expected = ["step", "step", "gate", "wait", "step"]  # the reference shows a wait
        if i == 1:
            expected.remove("wait")
        assert [e.kind for e in flow.entries] == expected


def test_the_flow_format_reference_names_every_field(repo_root: Path) -> None:
    """Its field tables are written by hand: a field added to a model must be added there.
    A gate's and a wait's ``starts_on`` and ``after`` are the loader's, never written."""
    from sagalog.flows import model

    text = (repo_root / "docs/reference/flow-format.md").read_text()
    fields = text.split("### Every field", 1)[1].split("\n### ", 1)[0]
    derived = {(model.Gate, "starts_on"), (model.Gate, "after")}
    derived |= {(model.Wait, "starts_on"), (model.Wait, "after"), (model.Flow, "source")}
    models = (model.Flow, model.Step, model.Compensation, model.Irreversible, model.Gate)
    models += (model.Escalation, model.Wait, model.Signal, model.Segment, model.SlaRule)
    missing = [
        f"{cls.__name__}.{name}"
        for cls in models
        for name, info in cls.model_fields.items()
        if (cls, name) not in derived
        and f"`{info.alias or name}`" not in fields
        and not re.search(rf"[{{,] ?{info.alias or name}[,}}:]", fields)
    ]
    assert missing == []
