"""A reference run, observed: Prometheus counts it, and each workflow is one trace.

The procurement fleet (tracker, six agents, the gateway, as processes) runs a mix of
requests and a few poison records, while Debian's Prometheus scrapes every service's
``/metrics`` each second and every service exports its spans over OTLP/HTTP to a
receiver in the test. Then PromQL must agree with the run's own truth (the workflows
the driver saw complete and compensate, and the records on the dead-letter topic,
counted by reading it), and one compensated workflow's spans must form one connected
tree, from the request through the agents, the tracker, a person's decision in the
gateway and every compensation.
"""

from __future__ import annotations

import json
import secrets
import time
import uuid
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

from demo.driver import Driver
from demo.fleet import Fleet
from demo.scenario import FAILING_VENDOR, Plan, Request, build_mix
from sagalog.cli.gateway_client import GatewayClient, GatewayClientSettings
from sagalog.metrics import exported_names

from .otlp_receiver import OtlpReceiver, ReceivedSpan
from .project import REPO, Project
from .prometheus import Prometheus
from .test_reference_workflow import apply_reference_project, reference_fleet_config

POISONS = 3


@pytest.mark.tool("prometheus")
def test_promql_counts_the_reference_run_and_each_workflow_is_one_trace(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    receiver = OtlpReceiver().start()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)  # the fleet inherits
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "200")
    s = project.suffix
    apply_reference_project(project)
    api_key = secrets.token_urlsafe(16)
    topic, deadletters = f"procurement.events.{s}", f"deadletter.{s}"
    fleet = Fleet(reference_fleet_config(project, tmp_path / "run", api_key=api_key))
    requests = build_mix(f"m{s[:6]}", 24, seed=5)
    prometheus: Prometheus | None = None
    try:
        fleet.start_all()
        fleet.faults("erp", reject_when={"vendor": FAILING_VENDOR})
        fleet.wait_gateway_ready()
        targets = {name: url.removeprefix("http://") for name, url in fleet.health.items()}
        prometheus = Prometheus(tmp_path / "prometheus", targets)
        prometheus.wait_ready()
        _poison(project, topic)
        gateway = GatewayClient(
            GatewayClientSettings(url=fleet.urls["gateway"], api_key=api_key, timeout_s=30)
        )
        driver = Driver(
            settings=project.settings,
            catalog=project.catalog,
            gateway=gateway,
            topic=topic,
            tracker_app_id=f"saga-tracker-{s}",
            requests=requests,
        )
        driver.run(phase_timeout_s=180)
        ends = Counter(driver.states.get(r.workflow_id) for r in requests)
        assert ends == Counter(r.expected_end for r in requests), ends
        assert not fleet.dead(), [(d.name, d.tail()) for d in fleet.dead()]

        p = prometheus
        p.wait(
            lambda: p.scalar("count(up == 1)") == len(targets),
            what=f"all {len(targets)} services scraped",
        )

        def ended(state: str) -> float | None:
            return p.scalar(f'sum(sagalog_transitions_total{{to_state="{state}"}})')

        def dead_letters() -> float | None:
            return p.scalar("sum(sagalog_dead_letters_total)")

        lettered = _count(project, deadletters)
        assert lettered >= 1  # the poison records
        p.wait(
            lambda: (
                (ended("completed"), ended("compensated"), dead_letters())
                == (ends["completed"], ends["compensated"], lettered)
            ),
            what=(
                f"completed {ends['completed']}, compensated {ends['compensated']} and "
                f"{lettered} dead letters in PromQL"
            ),
        )
        # What the dashboard reads is there too, from the services that produce it.
        handled = p.scalar('sum(sagalog_agent_records_total{outcome="handled"})')
        assert handled is not None and handled > 0
        steps = p.scalar("sum(sagalog_step_duration_seconds_count)")
        assert steps is not None and steps > 0
        batches = p.scalar("sum(sagalog_tracker_batch_seconds_count)")
        assert batches is not None and batches > 0
        transactions = p.scalar('sum(sagalog_transactions_total{outcome="committed"})')
        assert transactions is not None and transactions > 0
        # a workflow's next event finds its record kept from the batch before
        remembered = p.scalar('sum(sagalog_tracker_record_reads_total{source="memory"})')
        assert remembered is not None and remembered > 0
        in_state = p.query("sagalog_time_in_state_seconds_count")
        assert {r["metric"]["state"] for r in in_state} >= {"pending_approval"}
        decisions = p.scalar('sum(sagalog_gateway_requests_total{route=~"/v1/gates.*"})')
        assert decisions is not None and decisions > 0
        names = {r["metric"]["__name__"] for r in p.query('{__name__=~"sagalog_.+"}')}
        assert names <= exported_names(), names - exported_names()
        # Every query of the Grafana dashboard runs, and those over what this run
        # produced answer with data.
        empty = [expr for expr in _dashboard_queries() if not p.query(expr)]
        # (the procurement agents make no model call under a budget)
        allowed = ("breaker", "rate_limit", "gateway_request_seconds", "time_in_state", "budget")
        assert all(any(a in expr for a in allowed) for expr in empty), empty
        _check_one_trace(receiver, requests, driver.states)
    finally:
        if prometheus is not None:
            prometheus.stop()
        fleet.stop_all()
        receiver.stop()


def _check_one_trace(
    receiver: OtlpReceiver, requests: list[Request], ends: Mapping[str, str]
) -> None:
    """A rejected request (gate, then compensation) is one connected tree of spans."""
    rejected = next(
        r.workflow_id
        for r in requests
        if r.plan is Plan.REJECT and ends.get(r.workflow_id) == "compensated"
    )

    def spans_of_workflow() -> list[ReceivedSpan]:
        return [
            s for s in receiver.received() if s.attributes.get("sagalog.workflow_id") == rejected
        ]

    def complete() -> bool:
        found = spans_of_workflow()
        services = {s.service for s in found}
        names = " ".join(s.name for s in found)
        return (
            "saga-tracker" in services
            and "sagalog-gateway" in services
            and "saga-tracker sagalog.v1.CompensationRequested" in names
            and "handle sagalog.v1.CompensationRequested" in names
            and "gateway sagalog.v1.GateDecided" in names
        )

    deadline = time.monotonic() + 60
    while not complete() and time.monotonic() < deadline:
        time.sleep(0.5)
    mine = spans_of_workflow()
    assert complete(), sorted({(s.service, s.name) for s in mine})
    traces = {s.trace_id for s in mine}
    assert len(traces) == 1, sorted((s.service, s.name, s.parent_id) for s in mine)
    tree = [s for s in receiver.received() if s.trace_id in traces]
    ids = {s.span_id for s in tree}
    # Connected: every span hangs off another of the trace, except those under the
    # request's own publish (the driver exports no spans of its own).
    tops = [s for s in tree if s.parent_id not in ids]
    assert len({s.parent_id for s in tops}) == 1, [(t.service, t.name) for t in tops]
    assert {t.name for t in tops} >= {"handle procurement.v1.RequestSubmitted"}
    services = {s.service for s in tree}
    assert len(services) >= 5, services  # the agents, the tracker, the gateway
    assert {s.attributes.get("sagalog.workflow_id") for s in tree} == {rejected}


def _dashboard_queries() -> list[str]:
    panels = json.loads((REPO / "deploy" / "grafana" / "sagalog-dashboard.json").read_text())
    return [target["expr"] for panel in panels["panels"] for target in panel["targets"]]


def _poison(project: Project, topic: str) -> None:
    """Records no one can read: routed as RequestSubmitted, but not Avro at all."""
    producer = Producer(project.settings.producer_config())
    for _ in range(POISONS):
        workflow_id = f"wf-poison-{uuid.uuid4().hex[:8]}"
        producer.produce(
            topic,
            key=workflow_id.encode(),
            value=b"\xde\xad\xbe\xef not avro",
            headers=[
                ("ce_specversion", b"1.0"),
                ("ce_id", str(uuid.uuid4()).encode()),
                ("ce_source", b"test/poison"),
                ("ce_type", b"procurement.v1.RequestSubmitted"),
                ("ce_workflowid", workflow_id.encode()),
                ("ce_time", b"2027-01-15T08:00:00Z"),
            ],
        )
    producer.flush(30)


def _count(project: Project, topic: str) -> int:
    """Committed records on every partition of ``topic``, read to its end (dead letters
    are written in transactions, so offsets would count commit markers too)."""
    consumer = Consumer(
        project.settings.kafka_config(
            **{
                "group.id": f"count-{uuid.uuid4().hex[:8]}",
                "isolation.level": "read_committed",
                "enable.partition.eof": True,
                "enable.auto.commit": False,
            }
        )
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        open_, total = set(partitions), 0
        while open_:
            message = consumer.poll(10)
            assert message is not None, f"{topic} was not read to its end"
            if message.error() is None:
                total += 1
            elif message.error().code() == KafkaError._PARTITION_EOF:
                open_.discard(message.partition())
        return total
    finally:
        consumer.close()
