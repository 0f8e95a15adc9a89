"""What a handler revealed stays out of the failure texts the runtime writes to the log.

A handler reveals a requester's address to an ERP; the ERP refuses the order and, as
many systems do, quotes the request in its answer; the client quotes the answer in
its error. Without redaction that text reached the ``StepFailed`` reason (which the
tracker copies into its transitions and ``sagalog audit`` shows) and the dead
letter's reason and stack, in clear, where an erasure cannot reach it. The worker's
batch path runs here through the recording clients of ``test_agents_worker``, the ERP
is the stand-in over loopback, and the input's address is sealed by the codec.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from procurement.events import BudgetReserved, RequestSubmitted
from sagalog.agents import Agent, AgentSettings, HandlerContext, NonRetryableError
from sagalog.agents.state_store import StateStore
from sagalog.agents.worker import AgentWorker
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.personal.cipher import PersonalData
from sagalog.personal.keys import LocalKeyService
from sagalog.personal.redaction import REDACTED, redact
from standins.client import perform
from standins.server import StandinServer, serve

from .test_agents_worker import (
    DLQ,
    FLOWS,
    NOW_MS,
    TOPIC,
    Consumer,
    KnownIds,
    Producer,
    record,
    submitted,
    types,
)
from .test_personal_data import MemoryKeys

ADDRESS = "ada.lovelace@example.com"
BLOCKED = "Faultline Ltd"


@pytest.fixture
def erp() -> Iterator[str]:
    server: StandinServer = serve(name="erp")
    server.faults.reject_when = {"vendor": BLOCKED}
    host, port = server.server_address[:2]
    yield f"http://{host!s}:{port}"
    server.shutdown()
    server.server_close()


def ordering_agent(erp_url: str) -> Agent:
    agent = Agent("budget-agent")

    @agent.handles(step="reserve_budget", dependencies=["erp"])
    async def order(event: RequestSubmitted, ctx: HandlerContext) -> BudgetReserved:
        order = await ctx.effect(
            "erp.create_po",
            perform,
            erp_url,
            "create_po",
            {
                "request_id": event.request_id,
                "vendor": event.vendor,
                "requester": ctx.reveal(event.requester),  # the ERP needs the address
            },
        )
        assert "@" in order["requester"]  # the handler gets the echo whole, in clear
        return BudgetReserved(
            reservation_id=order["id"],
            cost_center="CC-1",
            amount=event.amount,
            currency=event.currency,
        )

    return agent


@pytest.fixture
def worker(tmp_path: Path, catalog: SchemaCatalog, erp: str) -> Iterator[AgentWorker]:
    settings = AgentSettings(
        instance_id="unit",
        data_dir=tmp_path,
        log_level="WARNING",
        tracing=False,
        max_attempts=3,
        deadletter_topic=DLQ,
    )
    built = AgentWorker(
        ordering_agent(erp), settings, catalog=catalog, wall_ms=lambda: NOW_MS, flows=FLOWS
    )
    service = LocalKeyService.load(tmp_path / "keys" / "personal.key", create=True)
    built.codec.registry = KnownIds(catalog)  # type: ignore[assignment]
    built.codec.personal = PersonalData(MemoryKeys(service), reveal=False)  # type: ignore[arg-type]
    built.clients.producer = Producer()  # type: ignore[assignment]
    built.clients.consumer = Consumer()  # type: ignore[assignment]
    built.store = store = StateStore(tmp_path / "store", folded_types=built.agent.folded_types())
    yield built
    store.close()


def _bytes_of(batch: list[tuple[str, Any, Any, Any]]) -> list[bytes]:
    """Every key, value and header value a committed batch holds."""
    found = []
    for _, key, value, headers in batch:
        found += [key or b"", value or b""]
        found += [v if isinstance(v, bytes) else str(v or "").encode() for _, v in headers]
    return found


def test_the_stand_ins_refusal_quotes_the_revealed_address(erp: str) -> None:
    """The control: the answer the runtime gets does hold the address."""
    with pytest.raises(NonRetryableError, match="422") as refused:
        perform(erp, "create_po", {"vendor": BLOCKED, "requester": ADDRESS}, idempotency_key="k")
    assert ADDRESS in str(refused.value)


def test_a_refusal_quoting_a_revealed_address_leaves_it_nowhere_in_the_log(
    worker: AgentWorker,
) -> None:
    event = submitted("wf-1", vendor=BLOCKED).model_copy(update={"requester": ADDRESS})
    consumed = record(worker, event, workflow_id="wf-1", event_id="e1", offset=5)
    assert ADDRESS.encode() not in consumed.value()  # sealed by the codec
    worker._process([consumed])
    [batch] = worker.clients.producer.committed  # type: ignore[attr-defined]
    assert types(batch) == [
        (DLQ, "procurement.v1.RequestSubmitted"),
        (TOPIC, "sagalog.v1.StepFailed"),
    ]
    for raw in _bytes_of(batch):
        assert ADDRESS.encode() not in raw
        assert ADDRESS[:8].encode() not in raw
    dead = {k: v.decode() if isinstance(v, bytes) else str(v) for k, v in batch[0][3]}
    reasons = [v for k, v in dead.items() if "reason" in k]
    assert reasons and all("422" in r and "refused" in r and REDACTED in r for r in reasons)
    failed = worker.codec.decode(batch[1][2]).payload
    assert "422" in failed["reason"] and REDACTED in failed["reason"]


def test_an_answer_echoing_a_revealed_address_is_recorded_without_it(
    worker: AgentWorker,
) -> None:
    """The ERP's order echoes the request: the handler gets it whole, the log's
    ``EffectRecorded`` holds it with the address redacted."""
    event = submitted("wf-1").model_copy(update={"requester": ADDRESS})
    worker._process([record(worker, event, workflow_id="wf-1", event_id="e1", offset=5)])
    [batch] = worker.clients.producer.committed  # type: ignore[attr-defined]
    assert types(batch) == [
        (TOPIC, "sagalog.v1.EffectRecorded"),
        (TOPIC, "procurement.v1.BudgetReserved"),
    ]
    for raw in _bytes_of(batch):
        assert ADDRESS.encode() not in raw
    recorded = json.loads(worker.codec.decode(batch[0][2]).payload["result_json"])
    assert recorded["requester"] == REDACTED and recorded["vendor"] == "Acme"


@pytest.mark.parametrize(
    "text",
    [
        f"answered 422: {ADDRESS}",
        'answered 422: b\'{"requester": "zo\\\\u00eb@example.com"}\'',  # JSON's escape
        "answered 422: b'zo\\xc3\\xab@example.com'",  # repr of the UTF-8 bytes
        f'answered 422: b\'{{"requester": "{ADDRESS[:12]}\'',  # a quote cut short
    ],
)
def test_redact_finds_a_value_as_written_escaped_or_cut_short(text: str) -> None:
    cleared = redact(text, [ADDRESS, "zoë@example.com"])
    assert cleared.startswith("answered 422: ") and REDACTED in cleared
    for leaked in (ADDRESS[:8], "zo\\u00eb@", "zo\\xc3\\xab", "zoë"):
        assert leaked not in cleared


def test_redact_leaves_a_text_without_revealed_values_as_it_is() -> None:
    text = "create_po answered 422: refused: vendor='Faultline Ltd'"
    assert redact(text, [ADDRESS, ""]) == text
    assert redact(text, []) == text
