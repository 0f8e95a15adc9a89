"""Run agent services as real processes against the real broker, and observe them.

Agents run as separate OS processes (``python -m budget_agent``) so tests can SIGKILL,
SIGSTOP and restart them. The budget agent reserves on ``RiskScored`` and reads the
amount from the workflow's ``RequestSubmitted``, so each test workflow is the pair
(``submit`` publishes both); the RiskScored is the event handled, and its id keys the
effect. The dependency stand-in runs in the test process and counts
effects and calls; the dependency stand-in runs in the test process and counts
effects and calls; outputs are read back by a read_committed consumer, which is the
only view that counts for exactly-once.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from processes import ServiceProcess
from sagalog import client_config
from sagalog.contracts.headers import header_dict
from sagalog.publisher import EventPublisher, PublishedEvent
from standins.server import StandinServer, serve

from .project import REPO, Project

REQUEST = "procurement.v1.RequestSubmitted"
SCORED = "procurement.v1.RiskScored"

AGENT_TOPICS = """
ignore: ["*"]
topics:
  procurement.events.{s}:
    partitions: {partitions}
    schemas: [procurement.v1.RequestSubmitted, procurement.v1.RiskScored,
              procurement.v1.BudgetReserved,
              procurement.v1.BudgetReleased, sagalog.v1.StepFailed, sagalog.v1.EffectRecorded,
              sagalog.v1.CompensationRequested, sagalog.v1.CompensationCompleted]
  deadletter.{s}:
    partitions: 1
"""


def request(n: int, **overrides: Any) -> dict[str, Any]:
    return {
        "request_id": f"PR-{n}",
        "requester": "ana@example.com",
        "department": "it",
        "title": f"Request {n}",
        "description": "test",
        "amount": "100.00",
        "currency": "EUR",
        "vendor": "Acme",
        "submitted_at": "2026-11-29T09:00:00Z",
        **overrides,
    }


def risk_scored(n: int, **overrides: Any) -> dict[str, Any]:
    """The ``RiskScored`` that follows ``request(n)`` and starts the budget step."""
    return {
        "request_id": f"PR-{n}",
        "score": 0.1,
        "level": "LOW",
        "rationale": "test",
        "factors": [],
        "lineage": {
            "model_id": "tests",
            "prompt_hash": "sha256:0",
            "input_refs": [],
            "decided_at": "2026-11-29T09:01:00Z",
        },
        **overrides,
    }


def submit(
    out: EventPublisher,
    topic: str,
    n: int,
    *,
    workflow_id: str,
    request_overrides: dict[str, Any] | None = None,
    event_id: str | None = None,
    **metadata: Any,
) -> PublishedEvent:
    """Publish a workflow's ``RequestSubmitted`` and then its ``RiskScored``; return the
    RiskScored (the event the budget agent handles). ``event_id`` and the metadata
    (priority, traceparent, flow version) apply to the RiskScored; the priority to both.
    """
    payload = request(n, **(request_overrides or {}))
    priority = metadata.get("priority")
    out.publish(topic, REQUEST, payload, workflow_id=workflow_id, priority=priority)
    return out.publish(
        topic,
        SCORED,
        risk_scored(n, request_id=payload["request_id"]),
        workflow_id=workflow_id,
        event_id=event_id,
        **metadata,
    )


class AgentProcess(ServiceProcess):
    """One agent instance as an OS process: ``python -m <module>`` (the budget agent
    unless told otherwise)."""

    def __init__(
        self, *, env: dict[str, str], log: Path, cwd: Path, module: str = "budget_agent"
    ) -> None:
        super().__init__(env=env, log=log, module=module, cwd=cwd)

    def start(self) -> AgentProcess:
        super().start()
        return self


@dataclass
class AgentLab:
    """A throwaway topic set, a ledger stand-in, and agent processes on them."""

    project: Project
    ledger: StandinServer
    tmp: Path
    name: str
    processes: list[AgentProcess] = field(default_factory=list)

    @property
    def topic(self) -> str:
        return self.project.topic("procurement.events")

    @property
    def deadletter(self) -> str:
        return self.project.topic("deadletter")

    @property
    def ledger_url(self) -> str:
        host, port = self.ledger.server_address[:2]
        return f"http://{host!s}:{port}"

    def agent(self, instance: str = "a", **settings: Any) -> AgentProcess:
        env = {
            **os.environ,
            **client_config.environment(self.project.settings),
            "PYTHONPATH": os.pathsep.join(
                [str(REPO / "services"), os.environ.get("PYTHONPATH", "")]
            ),
            "BUDGET_AGENT_NAME": self.name,  # on the steps of the project's flow
            "BUDGET_AGENT_LEDGER_URL": self.ledger_url,
            "BUDGET_AGENT_INSTANCE_ID": instance,
            "BUDGET_AGENT_DATA_DIR": str(self.tmp / "data"),
            "BUDGET_AGENT_PROJECT_DIR": str(self.project.root),
            "BUDGET_AGENT_DEADLETTER_TOPIC": self.deadletter,
            "BUDGET_AGENT_RETRY_BASE_DELAY_S": "0.2",
            "BUDGET_AGENT_RETRY_MAX_DELAY_S": "1.0",
            **{f"BUDGET_AGENT_{k.upper()}": str(v) for k, v in settings.items()},
        }
        process = AgentProcess(
            env=env, log=self.tmp / f"agent-{instance}.log", cwd=self.project.root
        )
        self.processes.append(process)
        return process.start()

    def faults(self, **faults: Any) -> None:
        for name, value in faults.items():
            setattr(self.ledger.faults, name, value)

    def records(
        self,
        topic: str | None = None,
        *,
        expect: Callable[[list[dict[str, Any]]], bool],
        timeout: float = 60.0,
    ) -> list[dict[str, Any]]:
        """Read ``topic`` (read_committed) until ``expect(records)`` holds or time runs out."""
        return read_until(
            self.project.settings.kafka_config(),
            topic or self.topic,
            expect=expect,
            timeout=timeout,
        )

    def outputs(self, event_type: str, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [r for r in records if r["type"] == event_type]

    def logs(self) -> str:
        return "\n".join(p.log.read_text() for p in self.processes if p.log.exists())


def committed_reader(
    config: dict[str, Any], topic: str, *, eof: bool
) -> tuple[Consumer, list[int]]:
    """A read_committed consumer assigned to every partition of ``topic`` from the start
    (no group membership, so it never disturbs the agents' offsets)."""
    consumer = Consumer(
        {
            **config,
            "group.id": f"test-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": eof,
        }
    )
    partitions = list(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    return consumer, partitions


def read_until(
    config: dict[str, Any],
    topic: str,
    *,
    expect: Callable[[list[dict[str, Any]]], bool],
    timeout: float,
) -> list[dict[str, Any]]:
    consumer, _ = committed_reader(config, topic, eof=False)
    records: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            for message in consumer.consume(500, 0.2):
                if message.error() is None:
                    headers = header_dict(message.headers())
                    records.append(
                        {
                            "type": headers.get("ce_type"),
                            "headers": headers,
                            "key": message.key(),
                            "value": message.value(),
                            "partition": message.partition(),
                            "offset": message.offset(),
                        }
                    )
            if expect(records):
                return records
        return records
    finally:
        consumer.close()


def count_by(records: list[dict[str, Any]], header: str) -> Counter[str]:
    return Counter(r["headers"].get(header, "") for r in records)


@pytest.fixture
def lab_factory(project: Project, tmp_path: Path) -> Iterator[Callable[..., AgentLab]]:
    labs: list[AgentLab] = []

    def make(*, partitions: int = 3) -> AgentLab:
        project.write_topology(AGENT_TOPICS.replace("{partitions}", str(partitions)))
        name = f"budget-{project.suffix}"
        project.write_reference_flow("procurement.v1", budget_agent=name)
        project.apply()
        ledger = serve(name="ledger")
        lab = AgentLab(project=project, ledger=ledger, tmp=tmp_path, name=name)
        labs.append(lab)
        return lab

    yield make
    for lab in labs:
        for process in lab.processes:
            process.kill()
        lab.ledger.shutdown()


# -- helpers for the resilience tests (tests/integration/test_agent_resilience.py) ---------


@dataclass(frozen=True)
class SentRequest:
    """A workflow the test started: its id and the id of its ``RiskScored``, the event
    the budget agent handles (whose id keys the reservation)."""

    workflow_id: str
    event_id: str


def publish_requests(
    lab: AgentLab, count: int, *, prefix: str = "wf", start: int = 0
) -> list[SentRequest]:
    """Publish ``count`` workflows (a RequestSubmitted, then its RiskScored) with
    distinct workflow ids, flushing once.

    ``EventPublisher.publish`` waits for every acknowledgement; hundreds of events are
    sent here in one go so the agent finds a backlog rather than a trickle.
    """
    from sagalog.contracts.headers import EventHeaders, new_event_id
    from sagalog.contracts.validation import to_avro_datum

    out = EventPublisher(lab.project.settings, catalog=lab.project.catalog, source="tests/load")
    sent: list[SentRequest] = []
    failures: list[str] = []

    def delivered(error: Any, message: Any) -> None:
        if error is not None:
            failures.append(str(error))

    def produce(event_type: str, payload: dict[str, Any], workflow_id: str) -> str:
        headers = EventHeaders(
            id=new_event_id(), type=event_type, source=out.source, workflow_id=workflow_id
        )
        definition = lab.project.catalog[event_type].definition
        datum = to_avro_datum(definition, payload, event_type=event_type)
        out.producer.produce(
            lab.topic,
            key=workflow_id.encode(),
            value=out.codec.encode(lab.topic, event_type, datum),
            headers=headers.to_kafka(),
            on_delivery=delivered,
        )
        out.producer.poll(0)
        return headers.id

    for n in range(start, start + count):
        workflow_id = f"{prefix}-{n}"
        produce(REQUEST, request(n), workflow_id)
        scored = produce(SCORED, risk_scored(n), workflow_id)
        sent.append(SentRequest(workflow_id=workflow_id, event_id=scored))
    remaining = out.producer.flush(30)
    assert remaining == 0 and not failures, f"publishing failed: {remaining} left, {failures[:3]}"
    return sent


def log_size(process: AgentProcess) -> int:
    """The log's length in bytes now; pass it to ``log_count`` to skip earlier lines."""
    return process.log.stat().st_size if process.log.exists() else 0


def join_seconds(process: AgentProcess, *, since: int = 0) -> float:
    """Seconds from the agent's ``start`` line to its first ``assigned`` one, after byte
    ``since`` of its log (the JSON lines' own ``ts``); call it once it has joined.

    This is the group join alone: the process's start before it (Python, RocksDB, the
    transactional producer) varies with the machine's load, the join does not.
    """
    with process.log.open("rb") as handle:
        handle.seek(since)
        lines = handle.read().decode(errors="replace").splitlines()
    started = assigned = None
    for line in lines:
        if not line.startswith("{"):
            continue
        record = json.loads(line)
        at = dt.datetime.fromisoformat(record["ts"])
        if started is None and record.get("action") == "start":
            started = at
        elif started is not None and record.get("outcome") == "assigned":
            assigned = at
            break
    assert started is not None and assigned is not None, f"no start then assigned in {process.log}"
    return (assigned - started).total_seconds()


def log_count(process: AgentProcess, text: str, *, since: int = 0) -> int:
    """How often ``text`` occurs in ``process``'s log after byte ``since``.

    Restarts with the same instance id append to the same log file, so ``since``
    separates one incarnation from the ones before it.
    """
    if not process.log.exists():
        return 0
    with process.log.open("rb") as handle:
        handle.seek(since)
        return handle.read().decode(errors="replace").count(text)


def read_all(
    lab: AgentLab, topic: str | None = None, *, timeout: float = 60.0
) -> list[dict[str, Any]]:
    """Everything committed in ``topic`` now (read_committed), up to each partition's end.

    Stops at the end of every partition rather than at a predicate, so nothing written
    before the call is missed; call it once the agents are stopped.
    """
    from confluent_kafka import KafkaError

    topic = topic or lab.topic
    consumer, partitions = committed_reader(lab.project.settings.kafka_config(), topic, eof=True)
    records: list[dict[str, Any]] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        while len(at_end) < len(partitions):
            assert time.monotonic() < deadline, f"{topic}: no end of partitions in {timeout}s"
            for message in consumer.consume(500, 0.2):
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        at_end.add(int(message.partition() or 0))
                    continue
                at_end.discard(int(message.partition() or 0))
                headers = header_dict(message.headers())
                records.append(
                    {
                        "type": headers.get("ce_type"),
                        "headers": headers,
                        "key": message.key(),
                        "value": message.value(),
                        "partition": message.partition(),
                        "offset": message.offset(),
                    }
                )
        return records
    finally:
        consumer.close()


def track_requests(lab: AgentLab) -> Counter[str]:
    """Count effect requests as they *arrive* at the ledger stand-in, by idempotency key.

    The stand-in counts a call only once it is answered (after any injected latency);
    this counter moves the moment a request comes in, so a test can tell that an
    agent is inside a slow call.
    """
    from standins.server import _Handler

    arrived: Counter[str] = Counter()

    class _Tracking(_Handler):
        def do_POST(self) -> None:
            if self.path.startswith("/effects/"):
                arrived[self.headers.get("Idempotency-Key") or ""] += 1
            super().do_POST()

    lab.ledger.RequestHandlerClass = _Tracking
    return arrived


def ignore_hung_up_clients(lab: AgentLab) -> None:
    """Keep the ledger stand-in quiet when an agent dies before reading its answer.

    A killed agent leaves the stand-in writing to a closed socket; socketserver prints
    a traceback for each, which is expected here and says nothing.
    """
    report = lab.ledger.handle_error

    def handle_error(request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            report(request, client_address)

    lab.ledger.handle_error = handle_error  # type: ignore[method-assign]
