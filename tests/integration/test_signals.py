"""External signals on the real broker (issue 21, item 1): the regulatory-filing flow.

The tracker runs the reference ``filing`` flow (on the lab's topic): a workflow waits
for the filed document, which the document service reports through the gateway's
signed webhook, and for the officer's signature, which the signing service publishes
on the topic itself. The gateway runs as its own process with one webhook source,
``docs``, and its secret.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sagalog.services.gateway.signatures import sign_webhook

from .gateway_harness import GatewayLab, Reply
from .project import Project
from .tracker_harness import NOW, TOPOLOGY, TrackerLab

pytestmark = pytest.mark.integration

DOCS_SECRET = b"docs-secret-for-the-integration-test"
SOURCES = json.dumps({"docs": {"secret": DOCS_SECRET.decode(), "kinds": ["document.filed"]}})
FILING_TOPOLOGY = TOPOLOGY.replace(
    "sagalog.v1.EffectRecorded",
    "sagalog.v1.EffectRecorded, sagalog.v1.WebhookReceived, sagalog.v1.WaitEnded, "
    "filings.v1.FilingOpened, filings.v1.SignatureCaptured",
)
DAY_MS = 86_400_000


@pytest.fixture
def filings(project: Project, tmp_path: Path) -> Iterator[tuple[TrackerLab, GatewayLab]]:
    lab = TrackerLab(project, tmp_path).setup(("filing.v1.yaml",), topology=FILING_TOPOLOGY)
    gateway = GatewayLab(lab, tmp_path)
    try:
        lab.tracker()
        gateway.start_gateway(webhook_sources=SOURCES)
        yield lab, gateway
    finally:
        gateway.close()
        lab.close()


def open_filing(lab: TrackerLab, gateway: GatewayLab, workflow_id: str) -> None:
    """Open a filing and wait until the gateway's read model knows it is waiting."""
    lab.publish(
        "filings.v1.FilingOpened",
        workflow_id,
        filing_number=f"F-{workflow_id}",
        regulator="SEC",
        due=NOW,
    )
    lab.wait_state(workflow_id, "awaiting_input")
    gateway.wait(
        lambda: gateway.call("GET", f"/v1/workflows/{workflow_id}").status == 200,
        what=f"the gateway knows {workflow_id}",
    )


def document_webhook(
    gateway: GatewayLab, workflow_id: str, *, secret: bytes = DOCS_SECRET
) -> Reply:
    """The document service's call: it knows the filing number, not the workflow id."""
    body = json.dumps({"document": "annual-report.pdf", "pages": 212}).encode()
    query = f"filing_number=F-{workflow_id}"
    signature = sign_webhook(
        secret, kind="document.filed", body=body, timestamp=int(time.time()), query=query
    )
    return gateway.call(
        "POST",
        f"/v1/webhooks/document.filed?{query}",
        raw=body,
        headers={"X-Webhook-Source": "docs", "X-Sagalog-Signature": signature},
    )


def sign(lab: TrackerLab, workflow_id: str) -> str:
    return lab.publish(
        "filings.v1.SignatureCaptured",
        workflow_id,
        filing_number=f"F-{workflow_id}",
        signed_by="cfo@example.com",
        signed_at=NOW,
    )


def test_a_filing_completes_when_the_signed_webhook_and_the_signature_arrive(
    filings: tuple[TrackerLab, GatewayLab],
) -> None:
    lab, gateway = filings
    open_filing(lab, gateway, "filing-1")
    reply = document_webhook(gateway, "filing-1")
    assert reply.status == 202, reply.body
    assert reply.body["workflow_id"] == "filing-1"  # found by its filing number
    signature_id = sign(lab, "filing-1")
    lab.wait_state("filing-1", "completed")
    # The transition and the WaitEnded are committed together but on two topics: the
    # lab's reader may see the transition first.
    lab.wait(
        lambda: bool(lab.events("filing-1", "sagalog.v1.WaitEnded")),
        what="filing-1's WaitEnded on the topic",
    )
    [ended] = lab.events("filing-1", "sagalog.v1.WaitEnded")
    assert sorted(ended["received"]) == ["document", "signature"]
    assert ended["timed_out"] is False and ended["missing"] == []
    assert signature_id in ended["signal_event_ids"]
    assert reply.body["event_id"] in ended["signal_event_ids"]
    moves = [(t["from_state"], t["to_state"]) for t in lab.transitions("filing-1")]
    assert moves == [("initiated", "awaiting_input"), ("awaiting_input", "completed")]


def test_a_late_signature_times_the_filing_out_to_its_default(
    filings: tuple[TrackerLab, GatewayLab],
) -> None:
    lab, gateway = filings
    open_filing(lab, gateway, "filing-2")
    assert document_webhook(gateway, "filing-2").status == 202
    # Committed to the log, not yet applied: the tick that follows must still find it
    # decided first (``caught_up``). CI saw the tracker fire the timeout on a tick
    # whose partition it had read to the end its consumer last fetched, the webhook
    # written after that fetch, then ignore the webhook as coming after the end.
    lab.wait(
        lambda: bool(lab.events("filing-2", "sagalog.v1.WebhookReceived")),
        what="the webhook on the topic",
    )
    lab.advance(5 * DAY_MS)  # the wait's timeout; its default is fail
    lab.wait_state("filing-2", "failed")
    gateway.wait(
        lambda: gateway.call("GET", "/v1/workflows/filing-2").body.get("state") == "failed",
        what="the gateway sees filing-2 failed",
    )
    record = gateway.call("GET", "/v1/workflows/filing-2")
    assert "without 'signature': default fail" in json.dumps(record.body)
    assert lab.events("filing-2", "sagalog.v1.WaitEnded") == []


def test_a_webhook_with_a_forged_signature_is_refused_and_writes_nothing(
    filings: tuple[TrackerLab, GatewayLab],
) -> None:
    lab, gateway = filings
    open_filing(lab, gateway, "filing-3")
    shown = gateway.call("GET", "/v1/workflows/filing-3").body
    assert shown["keys"] == {"filing_number": "F-filing-3"}
    assert shown["open_wait"]["wait"] == "document_and_signature"
    assert shown["open_wait"]["received"] == []
    before = gateway.end_offsets()
    forged = document_webhook(gateway, "filing-3", secret=b"a-guessed-secret-000000000000")
    assert forged.status == 401, forged.body
    assert "does not match its body" in forged.body["error"]
    assert "'docs'" in forged.body["error"]
    assert gateway.end_offsets() == before
    # The genuine call still goes through, and the workflow is still waiting for it.
    assert document_webhook(gateway, "filing-3").status == 202
    sign(lab, "filing-3")
    lab.wait_state("filing-3", "completed")
