"""A topic's event types follow from its flows and the platform's workflow events; the
repository's topics carry exactly what their hand-written lists said."""

from __future__ import annotations

from pathlib import Path

import pytest

from sagalog.contracts.catalog import SchemaCatalog
from sagalog.flows.model import STEP_RETRY_REQUESTED, WORKFLOW_TOPIC_EVENTS
from sagalog.topology.loader import load_topology
from sagalog.topology.topic_schemas import effective_schemas, flow_event_types

PLATFORM = [
    "sagalog.v1.StepFailed",
    "sagalog.v1.GateOpened",
    "sagalog.v1.GateDecided",
    "sagalog.v1.CompensationRequested",
    "sagalog.v1.CompensationCompleted",
    "sagalog.v1.EffectRecorded",
    "sagalog.v1.WebhookReceived",
    "sagalog.v1.WaitEnded",
    "sagalog.v1.WorkflowMigrated",
    "sagalog.v1.WorkflowCancelled",
    "sagalog.v1.DeadLetterReplayed",
]

# topology/topics.yaml at 8dae552, the last commit whose topics listed their schemas by
# hand (`git show 8dae552:topology/topics.yaml`): what was registered and documented.
LISTED_AT_8DAE552 = {
    "procurement.events": [
        "procurement.v1.RequestSubmitted",
        "procurement.v1.RequestClassified",
        "procurement.v1.PoliciesRetrieved",
        "procurement.v1.RiskScored",
        "procurement.v1.BudgetReserved",
        "procurement.v1.BudgetReleased",
        "procurement.v1.PurchaseOrderCreated",
        "procurement.v1.PurchaseOrderCancelled",
        "procurement.v1.VendorNotified",
        "procurement.v1.CorrectionNoticeSent",
        *PLATFORM,
    ],
    "filings.events": [
        "filings.v1.FilingOpened",
        "filings.v1.DocumentsRetrieved",
        "filings.v1.DocumentsReleased",
        "filings.v1.FilingDrafted",
        "filings.v1.SignatureCaptured",
        "filings.v1.FilingSubmitted",
        "filings.v1.FilingWithdrawn",
        "sagalog.v1.GateOpened",
        "sagalog.v1.GateDecided",
        "sagalog.v1.EffectRecorded",
        "sagalog.v1.WebhookReceived",
        "sagalog.v1.WaitEnded",
        "sagalog.v1.WorkflowMigrated",
        "sagalog.v1.WorkflowCancelled",
        "sagalog.v1.DeadLetterReplayed",
        "sagalog.v1.StepFailed",
        "sagalog.v1.CompensationRequested",
        "sagalog.v1.CompensationCompleted",
    ],
    "sagalog.transitions": ["sagalog.v1.StateTransition"],
    "sagalog.alerts": ["sagalog.v1.TrackerAlert"],
    "sagalog.erasures": ["sagalog.v1.SubjectErased"],
    "sagalog.personal-keys": [],
    "sagalog.deadletter": [],
}


def test_the_repository_topics_carry_what_their_lists_said(
    repo_root: Path, catalog: SchemaCatalog
) -> None:
    topology = load_topology(repo_root / "topology", known_schemas=catalog)
    carried = {spec.name: sorted(spec.schemas) for spec in topology.topics}
    assert carried == {name: sorted(types) for name, types in LISTED_AT_8DAE552.items()}
    for spec in topology.topics:
        assert len(set(spec.schemas)) == len(spec.schemas), f"{spec.name} lists a type twice"


def test_the_workflow_topics_list_no_schema_by_hand(repo_root: Path) -> None:
    import yaml

    document = yaml.safe_load((repo_root / "topology" / "topics.yaml").read_text())
    for topic in ("procurement.events", "filings.events"):
        assert "schemas" not in document["topics"][topic], f"{topic}: derived from its flows"


def test_the_platform_events_of_a_workflow_topic_are_one_list() -> None:
    assert list(WORKFLOW_TOPIC_EVENTS) == PLATFORM


def _topology(tmp_path: Path, flow: str, topics: str) -> Path:
    (tmp_path / "flows").mkdir()
    (tmp_path / "flows" / "orders.v1.yaml").write_text(flow)
    (tmp_path / "topics.yaml").write_text(topics)
    return tmp_path


FLOW = """
flow: orders
version: 1
topic: shop.orders
starts_on: shop.v1.OrderPlaced
deadline: 1d
steps:
  - name: take_payment
    agent: order-agent
    starts_on: shop.v1.OrderPlaced
    completes_on: shop.v1.PaymentTaken
    timeout: 5m
    compensation: {action: refund_payment, completes_on: shop.v1.PaymentRefunded}
    on_budget_exhausted: gate
    budget_gate: {assignee: boss, deadline: 1h, default: reject}
"""


def test_a_workflow_topic_carries_its_flows_types_then_the_platform_s(tmp_path: Path) -> None:
    root = _topology(
        tmp_path,
        FLOW,
        "topics:\n  shop.orders: {schemas: [shop.v1.Extra]}\n  shop.other: {}\n",
    )
    topology = load_topology(root)
    orders = topology.topic("shop.orders")
    other = topology.topic("shop.other")
    assert orders is not None and other is not None
    assert orders.schemas == (
        "shop.v1.OrderPlaced",
        "shop.v1.PaymentTaken",
        "shop.v1.PaymentRefunded",
        STEP_RETRY_REQUESTED,  # only a flow with a budget gate makes the tracker write it
        *PLATFORM,
        "shop.v1.Extra",  # what the entry lists is added
    )
    assert other.schemas == (), "no flow runs on it, and it lists nothing"


def test_a_listed_type_that_has_no_schema_is_refused(tmp_path: Path) -> None:
    from sagalog.errors import TopologyError

    root = _topology(tmp_path, FLOW, "topics:\n  shop.orders: {schemas: [shop.v1.Nowhere]}\n")
    with pytest.raises(TopologyError, match=r"no schema declares event type 'shop\.v1\.Nowhere'"):
        load_topology(root, known_schemas={})


def test_a_topic_without_flows_keeps_its_list_and_the_flows_are_read_once_per_topic() -> None:
    derived = {"a": ("x.v1.A", "x.v1.B")}
    assert effective_schemas("a", ["x.v1.B", "x.v1.C"], derived) == ("x.v1.A", "x.v1.B", "x.v1.C")
    assert effective_schemas("b", ["x.v1.C"], derived) == ("x.v1.C",)
    assert flow_event_types([]) == {}
