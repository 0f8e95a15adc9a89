"""Drive the saga tracker as an OS process on the real broker, with a virtual clock.

A ``TrackerLab`` is a throwaway project (unique topic names), the five-step test
flow in ``tests/integration/flows/``, tracker worker processes, a publisher for the
agents' events, ``advance`` to move the tracker's virtual clock, and a background
reader that keeps every transition and workflow event decoded in memory, so a test
waits for "workflow X is compensated" instead of sleeping.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from processes import ServiceProcess
from sagalog import client_config
from sagalog.contracts.codec import EventCodec
from sagalog.contracts.headers import header_dict
from sagalog.contracts.registry import SchemaRegistry
from sagalog.errors import SagalogError
from sagalog.exit_codes import ExitCode
from sagalog.publisher import EventPublisher
from sagalog.topic_names import records_changelog
from sagalog.tracker import gate_token
from sagalog.tracker.ticks import clock_topic

from .project import REPO, Project

SECRET = "test-gate-secret-0123456789abcdef"
DAY_MS = 86_400_000
T0 = 1_800_000_000_000  # the virtual clock's start: 2027-01-15

PROCUREMENT = [
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
    "sagalog.v1.StepFailed",
    "sagalog.v1.GateOpened",
    "sagalog.v1.GateDecided",
    "sagalog.v1.CompensationRequested",
    "sagalog.v1.CompensationCompleted",
    "sagalog.v1.EffectRecorded",
    "sagalog.v1.WorkflowMigrated",
    "sagalog.v1.WorkflowCancelled",
]

TOPOLOGY = """
ignore: ["*"]
topics:
  orders.events.{s}:
    partitions: 3
    retention: forever
    schemas: [%s]
  transitions.{s}:
    partitions: 3
    schemas: [sagalog.v1.StateTransition]
  alerts.{s}:
    partitions: 1
    schemas: [sagalog.v1.TrackerAlert]
  deadletter.{s}:
    partitions: 1
    schemas: []
""".replace("%s", ", ".join(PROCUREMENT))

NOW = "2027-01-15T08:00:00Z"
PAYLOADS: dict[str, dict[str, Any]] = {
    "procurement.v1.RequestSubmitted": {
        "request_id": "PR-1",
        "requester": "ana@example.com",
        "department": "it",
        "title": "Laptops",
        "description": "ten laptops",
        "amount": "100.00",
        "currency": "EUR",
        "vendor": "Acme",
        "submitted_at": NOW,
    },
    "procurement.v1.BudgetReserved": {
        "reservation_id": "R-1",
        "cost_center": "it",
        "amount": "100.00",
        "currency": "EUR",
    },
    "procurement.v1.BudgetReleased": {"reservation_id": "R-1", "reason": "compensation"},
    "procurement.v1.RequestClassified": {
        "request_id": "PR-1",
        "category": "hardware",
        "confidence": 0.9,
        "extracted": {},
        "classifier": "test",
    },
    "procurement.v1.PoliciesRetrieved": {"request_id": "PR-1", "documents": [], "retriever": "t"},
    "procurement.v1.RiskScored": {
        "request_id": "PR-1",
        "score": 0.2,
        "level": "LOW",
        "rationale": "ok",
        "factors": [],
        "lineage": {
            "model_id": "m",
            "prompt_hash": "sha256:0",
            "input_refs": [],
            "decided_at": NOW,
        },
    },
    "procurement.v1.PurchaseOrderCreated": {
        "purchase_order_id": "PO-1",
        "request_id": "PR-1",
        "vendor": "Acme",
        "amount": "100.00",
        "currency": "EUR",
    },
    "procurement.v1.PurchaseOrderCancelled": {"purchase_order_id": "PO-1", "reason": "undo"},
}

FORWARD = [  # (step, the event that completes it) in flow order, the gate left out
    ("reserve_budget", "procurement.v1.BudgetReserved"),
    ("classify_request", "procurement.v1.RequestClassified"),
    ("retrieve_policies", "procurement.v1.PoliciesRetrieved"),
    ("score_risk", "procurement.v1.RiskScored"),
    ("create_purchase_order", "procurement.v1.PurchaseOrderCreated"),
]
UNDO = {  # step -> the event that completes its compensation
    "reserve_budget": "procurement.v1.BudgetReleased",
    "create_purchase_order": "procurement.v1.PurchaseOrderCancelled",
}


class TrackerProcess(ServiceProcess):
    """One tracker worker as an OS process."""

    def __init__(self, *, env: dict[str, str], log: Path) -> None:
        super().__init__(env=env, log=log, module="sagalog.services.tracker")

    def stop(self, timeout: float = 60) -> int | None:
        return super().stop(timeout)


@dataclass
class Seen:
    """What the background reader has seen, per workflow."""

    transitions: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    events: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    alerts: list[dict[str, Any]] = field(default_factory=list)
    deadletters: list[dict[str, str]] = field(default_factory=list)


class TrackerLab:
    def __init__(self, project: Project, tmp: Path) -> None:
        self.project = project
        self.tmp = tmp
        self.suffix = project.suffix
        self.app_id = f"saga-tracker-{self.suffix}"
        self.topic = project.topic("orders.events")
        self.transitions_topic = f"transitions.{self.suffix}"
        self.alerts_topic = f"alerts.{self.suffix}"
        self.deadletter_topic = f"deadletter.{self.suffix}"
        self.clock_topic = clock_topic(self.app_id)
        self.now_ms = T0
        self.processes: list[TrackerProcess] = []
        self.seen = Seen()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._reader: threading.Thread | None = None
        self.publisher: EventPublisher | None = None
        self._offsets: Consumer | None = None
        self.codec = EventCodec(catalog=project.catalog, registry=SchemaRegistry(project.settings))

    # -- setup ---------------------------------------------------------------

    def setup(
        self, flows: tuple[str, ...] = ("orders.v1.yaml",), *, topology: str = TOPOLOGY
    ) -> TrackerLab:
        self.project.write_topology(topology)
        flows_dir = self.project.root / "topology" / "flows"
        flows_dir.mkdir(parents=True, exist_ok=True)
        for name in flows:
            self.add_flow(name)
        self.project.apply()
        self.publisher = EventPublisher(
            self.project.settings, catalog=self.project.catalog, source="test/agents"
        )
        self._producer = Producer(self.project.settings.producer_config())
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        return self

    def add_flow(self, name: str, *, text: str | None = None) -> None:
        source = text if text is not None else (Path(__file__).parent / "flows" / name).read_text()
        target = self.project.root / "topology" / "flows" / name
        target.write_text(source.replace("{s}", self.suffix))

    def tracker(self, instance: str = "a", **settings: Any) -> TrackerProcess:
        if not self.processes:
            self._start_clock()
        env = {
            **os.environ,
            **client_config.environment(self.project.settings),
            "PYTHONPATH": os.pathsep.join(
                [str(REPO / "services"), os.environ.get("PYTHONPATH", "")]
            ),
            "SAGALOG_TRACKER_PROJECT_DIR": str(self.project.root),
            "SAGALOG_TRACKER_APP_ID": self.app_id,
            "SAGALOG_TRACKER_INSTANCE_ID": instance,
            "SAGALOG_TRACKER_DATA_DIR": str(self.tmp / f"tracker-{instance}"),
            "SAGALOG_TRACKER_GATE_SECRET": SECRET,
            "SAGALOG_TRACKER_CLOCK": "virtual",
            "SAGALOG_TRACKER_TRANSITIONS_TOPIC": self.transitions_topic,
            "SAGALOG_TRACKER_ALERTS_TOPIC": self.alerts_topic,
            "SAGALOG_TRACKER_DEADLETTER_TOPIC": self.deadletter_topic,
            "SAGALOG_TRACKER_COMMIT_INTERVAL_S": "0.5",
            "SAGALOG_TRACKER_SLA_INTERVAL_S": "60",
            **{f"SAGALOG_TRACKER_{k.upper()}": str(v) for k, v in settings.items()},
        }
        process = TrackerProcess(env=env, log=self.tmp / f"tracker-{instance}.log").start()
        self.processes.append(process)
        return process

    def _start_clock(self) -> None:
        """Create the clock topic and tick T0, so the tracker's virtual time starts there."""
        admin = AdminClient(self.project.settings.kafka_config())
        futures = admin.create_topics([NewTopic(self.clock_topic, 3)])
        for future in futures.values():
            try:
                future.result(timeout=15)
            except KafkaException as exc:
                if "TOPIC_ALREADY_EXISTS" not in str(exc):
                    raise
        self.advance(0)

    def close(self) -> None:
        for process in self.processes:
            try:
                process.stop(30)
            except Exception:
                process.kill()
        self._stop.set()
        if self._reader is not None:
            self._reader.join(10)
        if self.publisher is not None:
            self.publisher.close()

    # -- inputs --------------------------------------------------------------

    def publish(self, event_type: str, workflow_id: str, **payload: Any) -> str:
        assert self.publisher is not None
        body = {**PAYLOADS.get(event_type, {}), **payload}
        published = self.publisher.publish(
            self.topic,
            event_type,
            body,
            workflow_id=workflow_id,
        )
        return published.headers.id

    def start(self, workflow_id: str, **headers: Any) -> str:
        return self.publish("procurement.v1.RequestSubmitted", workflow_id)

    def complete(self, workflow_id: str, step: str) -> str:
        event_type = dict(FORWARD)[step]
        return self.publish(event_type, workflow_id)

    def fail(self, workflow_id: str, step: str, reason: str = "boom") -> str:
        return self.publish(
            "sagalog.v1.StepFailed",
            workflow_id,
            step=step,
            reason=reason,
            error_class="TestError",
            attempts=3,
        )

    def undo(self, workflow_id: str, step: str) -> str:
        if step in UNDO:
            return self.publish(UNDO[step], workflow_id)
        return self.publish(
            "sagalog.v1.CompensationCompleted", workflow_id, step=step, compensation="undo"
        )

    def decide_gate(
        self,
        workflow_id: str,
        decision: str,
        *,
        attempt: int = 1,
        token: str | None = None,
        gate: str = "manager_approval",
        by: str = "boss@example.com",
    ) -> str:
        token = token or gate_token(
            SECRET.encode(), workflow_id=workflow_id, gate=gate, attempt=attempt
        )
        return self.publish(
            "sagalog.v1.GateDecided",
            workflow_id,
            gate=gate,
            token=token,
            decision=decision,
            decided_by=by,
        )

    def advance(self, ms: int) -> int:
        """Move the virtual clock forward ``ms``: a tick to every clock partition.

        With a tracker running, wait until it committed past the ticks (processed
        them): an event published next is then decided at the new time, never raced
        by its own tick on the other topic.
        """
        self.now_ms += ms
        sent: dict[int, int] = {}

        def delivered(error: Any, message: Any) -> None:
            if error is None:
                sent[message.partition()] = message.offset()

        for partition in range(3):
            self._producer.produce(
                self.clock_topic,
                value=str(self.now_ms).encode(),
                partition=partition,
                on_delivery=delivered,
            )
        self._producer.flush(10)
        if any(p.alive and not p.stopped for p in self.processes):
            self.wait(lambda: self._committed_past(sent), timeout=60, what="ticks processed")
        return self.now_ms

    def _committed_past(self, sent: dict[int, int]) -> bool:
        if self._offsets is None:
            self._offsets = Consumer(
                {**self.project.settings.kafka_config(), "group.id": self.app_id}
            )
        wanted = [TopicPartition(self.clock_topic, p) for p in sent]
        committed = self._offsets.committed(wanted, timeout=10)
        return all(tp.offset > sent[tp.partition] for tp in committed)

    # -- observations --------------------------------------------------------

    def state(self, workflow_id: str) -> str | None:
        with self._lock:
            moves = self.seen.transitions.get(workflow_id)
            return moves[-1]["to_state"] if moves else None

    def transitions(self, workflow_id: str) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.seen.transitions.get(workflow_id, []))

    def events(self, workflow_id: str, event_type: str | None = None) -> list[dict[str, Any]]:
        with self._lock:
            found = list(self.seen.events.get(workflow_id, []))
        return [e for e in found if event_type is None or e["type"] == event_type]

    def wait_state(self, workflow_id: str, state: str, *, timeout: float = 60) -> None:
        self.wait(
            lambda: self.state(workflow_id) == state,
            timeout=timeout,
            what=f"{workflow_id}: {state}",
        )

    def wait(self, condition: Callable[[], bool], *, timeout: float = 60, what: str = "") -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                return
            for process in self.processes:
                if (
                    not process.stopped
                    and process.process is not None
                    and process.process.poll() is not None
                ):
                    if process.process.returncode == ExitCode.RESTART:  # as a supervisor would
                        process.start()
                        continue
                    pytest.fail(
                        f"tracker exited {process.process.returncode}:\n{process.logs()[-5000:]}"
                    )
            time.sleep(0.05)
        logs = "\n".join(p.logs()[-3000:] for p in self.processes)
        pytest.fail(f"timed out waiting for {what}\n{self.seen.transitions}\n{logs}")

    def _read(self) -> None:
        consumer = Consumer(
            {
                **self.project.settings.kafka_config(),
                "group.id": f"lab-{uuid.uuid4()}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            }
        )
        topics = [self.topic, self.transitions_topic, self.alerts_topic, self.deadletter_topic]
        assignment = []
        for topic in topics:
            meta = consumer.list_topics(topic, timeout=10).topics[topic]
            assignment += [TopicPartition(topic, p, OFFSET_BEGINNING) for p in meta.partitions]
        consumer.assign(assignment)
        try:
            while not self._stop.is_set():
                for message in consumer.consume(500, 0.1):
                    if message.error() is None:
                        self._keep(message)
        finally:
            consumer.close()

    def _keep(self, message: Any) -> None:
        headers = header_dict(message.headers())
        topic = message.topic()
        if topic == self.deadletter_topic:
            with self._lock:
                self.seen.deadletters.append(headers)
            return
        try:
            payload = self.codec.decode(message.value()).payload
        except SagalogError:
            payload = {"undecodable": True}
        row = {
            "type": headers.get("ce_type"),
            "id": headers.get("ce_id"),
            "headers": headers,
            "at": (message.partition(), message.offset()),
            **payload,
        }
        workflow_id = headers.get("ce_workflowid", "")
        with self._lock:
            if topic == self.transitions_topic:
                self.seen.transitions[workflow_id].append(row)
            elif topic == self.alerts_topic:
                self.seen.alerts.append(row)
            else:
                self.seen.events[workflow_id].append(row)


@pytest.fixture
def tracker_lab(project: Project, tmp_path: Path) -> Iterator[TrackerLab]:
    lab = TrackerLab(project, tmp_path).setup()
    try:
        yield lab
    finally:
        lab.close()
        shutil.rmtree(tmp_path / "tracker-a", ignore_errors=True)


def utc(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC)


# -- many workflows: a driver that plays every agent and person ------------------

EXPECTED = {0: "completed", 1: "compensated", 2: "compensated", 3: "compensated"}
"""Workflow ``i`` ends by ``EXPECTED[i % 4]``: 0 approved and done, 1 rejected at the
gate, 2 failing at step 4 (score_risk), 3 failing at step 2 (classify_request)."""


class Driver:
    """Reacts to each workflow's latest transition the way its agents and people would.

    Every reaction is keyed by the transition's id, so a transition seen twice (the
    tracker republishes after a crash) is answered once; answers are produced in
    batches without waiting for each acknowledgement.
    """

    def __init__(self, lab: TrackerLab) -> None:
        self.lab = lab
        self.answered: set[str] = set()
        assert lab.publisher is not None
        self.codec = lab.publisher.codec
        self.producer = Producer(lab.project.settings.producer_config(**{"linger.ms": 5}))

    def send(self, event_type: str, workflow_id: str, **payload: Any) -> None:
        from sagalog.contracts.headers import EventHeaders, new_event_id
        from sagalog.contracts.validation import to_avro_datum

        body = {**PAYLOADS.get(event_type, {}), **payload}
        definition = self.lab.project.catalog[event_type].definition
        datum = to_avro_datum(definition, body, event_type=event_type)
        headers = EventHeaders(
            id=new_event_id(), type=event_type, source="test/driver", workflow_id=workflow_id
        )
        self.producer.produce(
            self.lab.topic,
            key=workflow_id.encode(),
            value=self.codec.encode(self.lab.topic, event_type, datum),
            headers=headers.to_kafka(),
        )
        self.producer.poll(0)

    def start(self, count: int, *, first: int = 0) -> list[str]:
        ids = [f"wf-{i:05d}" for i in range(first, first + count)]
        for workflow_id in ids:
            self.send("procurement.v1.RequestSubmitted", workflow_id)
        self.producer.flush(30)
        return ids

    def step(self, ids: list[str]) -> int:
        """Answer every workflow whose latest transition is unanswered; how many answered."""
        answered = 0
        for workflow_id in ids:
            moves = self.lab.transitions(workflow_id)
            if not moves or moves[-1]["id"] in self.answered:
                continue
            last = moves[-1]
            self.answered.add(last["id"])
            if self._answer(int(workflow_id.split("-")[1]) % 4, workflow_id, last):
                answered += 1
        self.producer.flush(30)
        return answered

    def _answer(self, kind: int, workflow_id: str, last: dict[str, Any]) -> bool:
        state, step = last["to_state"], last["step"]
        if state == "running":
            if (kind, step) in ((2, "score_risk"), (3, "classify_request")):
                self.send(
                    "sagalog.v1.StepFailed",
                    workflow_id,
                    step=step,
                    reason="injected",
                    error_class="Test",
                    attempts=1,
                )
            else:
                self.send(dict(FORWARD)[step], workflow_id)
            return True
        if state == "pending_approval":
            token = gate_token(SECRET.encode(), workflow_id=workflow_id, gate=step, attempt=1)
            self.send(
                "sagalog.v1.GateDecided",
                workflow_id,
                gate=step,
                token=token,
                decision="REJECTED" if kind == 1 else "APPROVED",
                decided_by="boss",
            )
            return True
        if state == "compensating":
            if step in UNDO:
                self.send(UNDO[step], workflow_id)
            else:
                self.send(
                    "sagalog.v1.CompensationCompleted",
                    workflow_id,
                    step=step,
                    compensation="undo",
                )
            return True
        return False


class RebuildSource(Protocol):
    """What ``rebuild_from_log`` reads of a lab (a ``TrackerLab``, the chaos run's)."""

    @property
    def app_id(self) -> str: ...

    @property
    def project(self) -> Project: ...

    @property
    def topic(self) -> str: ...

    @property
    def codec(self) -> EventCodec: ...

    @property
    def transitions_topic(self) -> str: ...


def latest_records(lab: TrackerLab) -> dict[str, dict[str, Any]]:
    """The tracker's durable state: the last record per workflow in the records changelog."""

    topic = records_changelog(lab.app_id)
    consumer = Consumer(
        {
            **lab.project.settings.kafka_config(),
            "group.id": f"lab-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",  # the durable state, as a restore reads it
        }
    )
    records: dict[str, dict[str, Any]] = {}
    done: set[int] = set()
    try:
        # A generous wait: on a starved machine one metadata answer took over 10 s
        # (chaos short under stress --cpu 2), and a harness read is not what is tested.
        partitions = consumer.list_topics(topic, timeout=60).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        while len(done) < len(partitions):
            for message in consumer.consume(1000, 1.0):
                if message.error() is not None:
                    done.add(message.partition())
                    continue
                key = message.key().decode()
                if message.value() is None:
                    records.pop(key, None)
                else:
                    records[key] = json.loads(message.value())
    finally:
        consumer.close()
    return records


def rebuild_from_log(lab: RebuildSource, *, work_dir: Path) -> dict[str, dict[str, Any]]:
    """Every workflow's record as ``sagalog replay rebuild`` makes it from the log.

    The user's own tool, in process: the workflow topic through the tracker's
    processor, with the timer firings of its journal (the transitions topic; a
    rebuild from the workflow events alone cannot know when a gate expired or a
    step timed out live). Unreadable records (the chaos suite's poison) are counted,
    not fatal. Compare what comes back with ``sagalog.replay.diff.decided_fields``.
    """
    from sagalog.flows.loader import load_flows
    from sagalog.replay.rebuild import Rebuild, rebuild_meta
    from sagalog.replay.settings import ReplaySettings
    from sagalog.replay.store import RebuildStore
    from sagalog.topology.loader import load_topology

    catalog = lab.project.catalog
    topology = load_topology(lab.project.root / "topology", known_schemas=catalog)
    registry = load_flows(
        lab.project.root / "topology" / "flows", catalog=catalog, topology=topology
    )
    replay = ReplaySettings(
        app_id=lab.app_id, gate_secret=SECRET, transitions_topic=lab.transitions_topic
    )
    directory = Path(tempfile.mkdtemp(prefix="rebuild-", dir=work_dir))
    try:
        with RebuildStore.open(
            directory, meta=rebuild_meta(registry, replay, [lab.topic])
        ) as store:
            Rebuild(
                settings=lab.project.settings,
                codec=lab.codec,
                registry=registry,
                replay=replay,
                store=store,
            ).run()
            partitions = sorted({partition for _, partition in store.offsets()})
            return {
                workflow_id: json.loads(value)
                for partition in partitions
                for workflow_id, value in store.records(partition)
            }
    finally:
        shutil.rmtree(directory, ignore_errors=True)
