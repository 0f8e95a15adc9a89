"""Waits for outside events (issue 21): all-of and any-of, early signals, timeouts and defaults.

Pure rules, driven through ``TrackerHarness`` (the service's ``Processor``, a manual
clock): the reference ``filing`` flow waits for a document webhook and a signature,
all of them, failing after 5 days; the ``paperwork`` flow below puts a wait between
two steps, so an early signal and the step after a wait can be seen.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from sagalog.contracts.catalog import SchemaCatalog
from sagalog.errors import FlowDefinitionError
from sagalog.events import WaitEnded
from sagalog.flows.loader import load_flow_file
from sagalog.flows.model import WAIT_ENDED, WEBHOOK_RECEIVED, Flow
from sagalog.flows.states import WorkflowState
from sagalog.testing import TrackerHarness
from sagalog.topology.loader import load_topology
from sagalog.topology.model import Topology
from sagalog.tracker import Outcome
from sagalog.tracker.record import WorkflowRecord

SECRET = b"wait-secret"
T0 = 1_800_000_000_000
MIN = 60_000
H = 60 * MIN
D = 24 * H
OPENED = "filings.v1.FilingOpened"
SIGNED = "filings.v1.SignatureCaptured"
SUBMITTED = "procurement.v1.RequestSubmitted"
CLASSIFIED = "procurement.v1.RequestClassified"
NOTIFIED = "procurement.v1.VendorNotified"
RESERVED = "procurement.v1.BudgetReserved"

PAPERWORK: dict[str, Any] = {
    "flow": "paperwork",
    "version": 1,
    "topic": "procurement.events",
    "starts_on": SUBMITTED,
    "deadline": "1d",
    "steps": [
        {
            "name": "classify_request",
            "agent": "intake-agent",
            "starts_on": SUBMITTED,
            "completes_on": CLASSIFIED,
            "timeout": "5m",
            "effect": "none",
        },
        {
            "wait": "paperwork",
            "for": [
                {"name": "receipt", "event": WEBHOOK_RECEIVED, "webhook": "receipt.sent"},
                {"name": "vendor", "event": NOTIFIED},
            ],
            "mode": "all",
            "timeout": "1h",
            "default": "continue",
        },
        {
            "name": "reserve_budget",
            "agent": "budget-agent",
            "after": "paperwork",
            "completes_on": RESERVED,
            "timeout": "10m",
            "effect": "none",
        },
    ],
}


@pytest.fixture(scope="module")
def topology(repo_root: Path, catalog: SchemaCatalog) -> Topology:
    return load_topology(repo_root / "topology", known_schemas=catalog)


def load(tmp_path: Path, catalog: SchemaCatalog, topology: Topology, **changes: Any) -> Flow:
    document = copy.deepcopy(PAPERWORK)
    document["steps"][1].update(changes)
    path = tmp_path / "paperwork.v1.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return load_flow_file(path, catalog=catalog, topology=topology)


@pytest.fixture
def filing(repo_root: Path, catalog: SchemaCatalog, topology: Topology) -> TrackerHarness:
    """Version 1 of the filing flow alone: the wait for a document and a signature
    (version 2, which new filings start on, is the agents' workflow: docs/filing.md)."""
    flow = load_flow_file(
        repo_root / "topology" / "flows" / "filing.v1.yaml", catalog=catalog, topology=topology
    )
    return TrackerHarness([flow], secret=SECRET, now_ms=T0)


def webhook(tracker: TrackerHarness, workflow_id: str, kind: str, **extra: Any) -> Any:
    return tracker.send(
        WEBHOOK_RECEIVED,
        workflow_id,
        kind=kind,
        source="docs",
        payload_json="{}",
        received_at=tracker.now_ms,
        **extra,
    )


def ended(tracker: TrackerHarness, workflow_id: str) -> list[WaitEnded]:
    return [
        p.event
        for p in tracker.published
        if isinstance(p.event, WaitEnded) and p.workflow_id == workflow_id
    ]


@pytest.mark.parametrize("order", ["document first", "signature first"])
def test_a_filing_completes_when_both_signals_arrive_in_either_order(
    filing: TrackerHarness, order: str
) -> None:
    filing.send(OPENED, "f-1")
    assert filing.state("f-1") is WorkflowState.AWAITING_INPUT
    first, second = (
        (lambda: webhook(filing, "f-1", "document.filed"), lambda: filing.send(SIGNED, "f-1"))
        if order == "document first"
        else (lambda: filing.send(SIGNED, "f-1"), lambda: webhook(filing, "f-1", "document.filed"))
    )
    assert first().outcome is Outcome.APPLIED
    assert filing.state("f-1") is WorkflowState.AWAITING_INPUT  # all of them, not any
    assert second().outcome is Outcome.APPLIED
    assert filing.state("f-1") is WorkflowState.COMPLETED
    [end] = ended(filing, "f-1")
    assert end.timed_out is False and end.missing == []
    assert sorted(end.received) == ["document", "signature"] and len(end.signal_event_ids) == 2
    assert filing.transitions("f-1") == [
        ("initiated", "awaiting_input", "document_and_signature"),
        ("awaiting_input", "completed", None),
    ]
    assert filing.timers == []  # the wait's timeout went with it


def test_a_late_signature_times_the_filing_out_to_its_default_and_names_what_is_missing(
    filing: TrackerHarness,
) -> None:
    filing.send(OPENED, "f-2")
    webhook(filing, "f-2", "document.filed")
    filing.advance(5 * D - 1)
    assert filing.state("f-2") is WorkflowState.AWAITING_INPUT
    filing.advance(1)
    record = filing.record("f-2")
    assert record.state is WorkflowState.FAILED  # default fail, nothing to undo
    assert "wait 'document_and_signature' timed out after 5d without 'signature'" in (
        record.terminal_reason or ""
    )
    assert ended(filing, "f-2") == []
    # The signature that comes afterwards changes nothing.
    assert filing.send(SIGNED, "f-2").outcome is Outcome.IGNORED


def test_a_repeated_signal_counts_once_and_another_webhook_kind_not_at_all(
    filing: TrackerHarness,
) -> None:
    filing.send(OPENED, "f-3")
    assert webhook(filing, "f-3", "document.filed").outcome is Outcome.APPLIED
    again = webhook(filing, "f-3", "document.filed")
    assert again.outcome is Outcome.STALE and "the first one counts" in (again.reason or "")
    other = webhook(filing, "f-3", "invoice.paid")
    assert other.outcome is Outcome.IGNORED
    waiting = filing.record("f-3").waiting
    assert waiting is not None and waiting.received_names == ("document",)
    duplicate = filing.feed(filing.event(SIGNED, "f-3", event_id="sig-1"))
    assert duplicate.outcome is Outcome.APPLIED
    assert filing.feed(filing.event(SIGNED, "f-3", event_id="sig-1")).outcome is (Outcome.DUPLICATE)


def test_a_signal_before_its_wait_opens_is_held_and_counts_when_it_does(
    tmp_path: Path, catalog: SchemaCatalog, topology: Topology
) -> None:
    flow = load(tmp_path, catalog, topology, mode="any")
    tracker = TrackerHarness([flow], secret=SECRET, now_ms=T0)
    tracker.send(SUBMITTED, "p-1")
    early = webhook(tracker, "p-1", "receipt.sent")
    assert early.outcome is Outcome.PARKED
    assert "is signal 'receipt' of wait 'paperwork' while 'classify_request' is still running" in (
        early.reason or ""
    )
    tracker.send(CLASSIFIED, "p-1")  # opens the wait; the held webhook ends it (any)
    record = tracker.record("p-1")
    assert (record.state, record.current) == (WorkflowState.RUNNING, "reserve_budget")
    [end] = ended(tracker, "p-1")
    assert (end.received, end.missing) == (["receipt"], ["vendor"])
    assert [c.name for c in record.completed] == ["classify_request", "paperwork"]


def test_a_wait_that_times_out_with_default_continue_moves_on_with_what_came(
    tmp_path: Path, catalog: SchemaCatalog, topology: Topology
) -> None:
    flow = load(tmp_path, catalog, topology)
    tracker = TrackerHarness([flow], secret=SECRET, now_ms=T0)
    tracker.send(SUBMITTED, "p-2")
    tracker.send(CLASSIFIED, "p-2")
    tracker.send(NOTIFIED, "p-2")
    tracker.advance(H)
    record = tracker.record("p-2")
    assert (record.state, record.current) == (WorkflowState.RUNNING, "reserve_budget")
    [end] = ended(tracker, "p-2")
    assert end.timed_out is True and (end.received, end.missing) == (["vendor"], ["receipt"])
    late = webhook(tracker, "p-2", "receipt.sent")
    assert late.outcome is Outcome.STALE and "after wait 'paperwork' ended" in (late.reason or "")
    tracker.send(RESERVED, "p-2")
    assert tracker.state("p-2") is WorkflowState.COMPLETED


def test_the_step_after_a_wait_starts_on_wait_ended_naming_that_wait(
    tmp_path: Path, catalog: SchemaCatalog, topology: Topology
) -> None:
    flow = load(tmp_path, catalog, topology)
    step = flow.entry("reserve_budget")
    assert step is not None and step.starts_on == (WAIT_ENDED,)
    assert flow.step_for_start(WAIT_ENDED, gate="paperwork") is step
    assert flow.step_for_start(WAIT_ENDED, gate="another") is None


def test_the_open_wait_survives_a_stored_round_trip(filing: TrackerHarness) -> None:
    filing.send(OPENED, "f-4")
    webhook(filing, "f-4", "document.filed")
    record = filing.record("f-4")
    again = WorkflowRecord.from_json(record.model_dump_json().encode())
    assert again == record and again.waiting is not None
    assert again.waiting.deadline_ms == T0 + 5 * D


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"for": [{"name": "receipt", "event": WEBHOOK_RECEIVED}]},
            "names the webhook kind it waits for",
        ),
        (
            {"for": [{"name": "done", "event": "sagalog.v1.StepFailed"}]},
            "which the platform publishes for its own steps and gates",
        ),
        (
            {"for": [{"name": "classified", "event": CLASSIFIED}]},
            "which completes step 'classify_request'",
        ),
        ({"timeout": "2d"}, "timeout 2d is longer than the workflow deadline 1d"),
        ({"starts_on": CLASSIFIED}, "a wait opens when the entry before it completes"),
        ({"default": "approve"}, "default"),
        (
            {
                "for": [
                    {"name": "a", "event": NOTIFIED},
                    {"name": "b", "event": NOTIFIED},
                ]
            },
            "expects the same event as another",
        ),
    ],
)
def test_a_wrong_wait_is_refused_at_load_naming_it(
    tmp_path: Path,
    catalog: SchemaCatalog,
    topology: Topology,
    change: dict[str, Any],
    message: str,
) -> None:
    with pytest.raises(FlowDefinitionError) as caught:
        load(tmp_path, catalog, topology, **change)
    assert "wait 'paperwork'" in str(caught.value) and message in str(caught.value)


def test_a_filing_keeps_its_correlation_key_from_the_starting_event(
    filing: TrackerHarness,
) -> None:
    filing.send(OPENED, "f-5", filing_number="F-2026-0042", regulator="SEC")
    assert filing.record("f-5").keys == {"filing_number": "F-2026-0042"}
    filing.send(OPENED, "f-6")  # a start without the field: no key, no failure
    assert filing.record("f-6").keys == {}


def test_a_correlation_key_must_be_a_field_of_the_starting_event(
    tmp_path: Path, catalog: SchemaCatalog, topology: Topology
) -> None:
    document = copy.deepcopy(PAPERWORK)
    document["correlation_keys"] = ["request_id", "order_number"]
    path = tmp_path / "paperwork.v1.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    with pytest.raises(FlowDefinitionError) as caught:
        load_flow_file(path, catalog=catalog, topology=topology)
    message = str(caught.value)
    assert "field 'correlation_keys': 'order_number' is not a field of the starting event" in (
        message
    )
    assert "'request_id'" not in message.split("order_number")[0]
