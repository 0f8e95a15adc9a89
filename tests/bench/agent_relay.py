"""The sagalog side of the handoff benchmark: a real agent as a relay.

The agent reads ``RequestSubmitted`` events from the bench's input topic and, for each,
publishes a ``BudgetReserved`` to the output topic, through the full runtime
(transactions, projection, dedup, telemetry, flow control); the handler records when
it started against the ``bench_sent_ns`` header. Run as its own process by
``start_agent_relay`` (``python -m tests.bench.agent_relay``).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import subprocess
import sys
import time
from array import array
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from procurement.events import BudgetReserved, RequestSubmitted
from sagalog.agents.context import HandlerContext
from sagalog.agents.declaration import Agent
from sagalog.agents.settings import AgentSettings
from sagalog.agents.worker import AgentWorker
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.contracts.codec import EventCodec
from sagalog.contracts.headers import EventHeaders
from sagalog.contracts.registry import SchemaRegistry
from sagalog.contracts.subjects import subject_for
from sagalog.flows.model import Flow
from sagalog.settings import ClientSettings

from .handoff import RelayJob, StartRelay
from .harness import Headers, RecordFactory, write_pickups

REPO = Path(__file__).resolve().parents[2]
IN_TYPE = RequestSubmitted.event_type
OUT_TYPE = BudgetReserved.event_type
ID_SUBJECT = "sagalog-bench-ids"


def register(
    settings: ClientSettings, catalog: SchemaCatalog, *topics_and_types: tuple[str, str]
) -> None:
    registry = SchemaRegistry(settings)
    for topic, event_type in topics_and_types:
        registry.register(subject_for(topic, event_type), catalog[event_type])


def agent_records(settings: ClientSettings) -> RecordFactory:
    """Registry-encoded RequestSubmitted events (~200 bytes) with CloudEvents headers."""
    catalog = SchemaCatalog.load(REPO / "schemas")
    register(settings, catalog, (ID_SUBJECT, IN_TYPE))
    codec = EventCodec(catalog=catalog, registry=SchemaRegistry(settings))
    at = dt.datetime(2026, 11, 29, 9, tzinfo=dt.UTC)

    def record(i: int) -> tuple[bytes, bytes, Headers]:
        workflow = f"wf-{i % 5000}"
        event = RequestSubmitted(
            request_id=f"PR-{i}",
            requester="bench@example.com",
            department="engineering",
            title="Bench request",
            description="x" * 40,
            amount=decimal.Decimal("100.00"),
            currency="EUR",
            vendor="Acme",
            submitted_at=at,
        )
        value = codec.encode(ID_SUBJECT, IN_TYPE, event.to_avro())
        headers = EventHeaders(
            id=f"bench-{i}-{time.time_ns()}",
            type=IN_TYPE,
            source="bench/load",
            workflow_id=workflow,
        )
        return workflow.encode(), value, headers.to_kafka()

    return record


def start_agent_relay(kafka_config: Mapping[str, Any], settings: ClientSettings) -> StartRelay:
    def start(job: RelayJob) -> subprocess.Popen[bytes]:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                [str(REPO / "services"), os.environ.get("PYTHONPATH", "")]
            ),
            "SAGALOG_AGENT_BOOTSTRAP_SERVERS": settings.bootstrap_servers,
            "SAGALOG_AGENT_SCHEMA_REGISTRY_URL": settings.schema_registry_url,
            "SAGALOG_AGENT_PROJECT_DIR": str(REPO),
            "SAGALOG_AGENT_LOG_JSON": "true",
            "BENCH_JOB": json.dumps({**job.__dict__, "result_path": str(job.result_path)}),
        }
        return subprocess.Popen(
            [sys.executable, "-m", "tests.bench.agent_relay"],
            cwd=REPO,
            env=env,
            stderr=subprocess.DEVNULL,
        )

    return start


def main() -> None:
    job = RelayJob(**{**json.loads(os.environ["BENCH_JOB"])})
    job = RelayJob(
        job.in_topic, job.out_topic, job.group_id, job.transactional_id, Path(job.result_path)
    )
    settings = AgentSettings(
        instance_id="bench",
        group_id=job.group_id,
        data_dir=Path(str(job.result_path) + ".data"),
        deadletter_topic=job.out_topic,
        log_level="WARNING",  # a log line per event would dominate the profile
    )
    catalog = SchemaCatalog.load(REPO / "schemas")
    register(
        settings,
        catalog,
        (job.in_topic, IN_TYPE),
        (job.out_topic, OUT_TYPE),
        (job.out_topic, "sagalog.v1.StepFailed"),
    )
    sent_ns, picked_ns = array("q"), array("q")
    name = f"bench-{job.group_id.replace('.', '-')}"
    agent = Agent(name, output_topic=job.out_topic)
    flow = Flow.model_validate(
        {
            "flow": "relay",
            "version": 1,
            "topic": job.in_topic,
            "starts_on": IN_TYPE,
            "deadline": "1d",
            "steps": [
                {
                    "name": "relay",
                    "agent": name,
                    "starts_on": IN_TYPE,
                    "completes_on": OUT_TYPE,
                    "timeout": "10m",
                    "effect": "none",
                }
            ],
        }
    )

    @agent.handles(step="relay")
    async def relay(event: RequestSubmitted, ctx: HandlerContext) -> BudgetReserved:
        picked_ns.append(time.time_ns())
        sent_ns.append(int(ctx.record_headers.get("bench_sent_ns", "0")))
        return BudgetReserved(
            reservation_id=event.request_id,
            cost_center="CC-BENCH",
            amount=event.amount,
            currency=event.currency,
        )

    AgentWorker(agent, settings, catalog=catalog, flows=[flow]).run()
    write_pickups(job.result_path, [(s, p) for s, p in zip(sent_ns, picked_ns, strict=True) if s])


if __name__ == "__main__":
    main()
