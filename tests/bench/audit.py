"""The audit of one workflow among many: sealed positions against a full scan.

In a throwaway project (unique topic names, the test flow of the tracker's
integration tests), the saga tracker runs as its own process while ``noise``
events of other workflows are published (half before, half after the audited one,
each a ``RequestSubmitted`` and a ``BudgetReserved``, so the tracker tracks them and
its records changelog grows like a live one's). A gateway follows the tracker. Then,
in alternating rounds:

- ``sagalog audit --verify`` through the **gateway** (in process): the record by one
  HTTP call, the events and the transitions at their positions;
- ``sagalog audit --verify`` **without a gateway**: the record from the one changelog
  partition of the key (read from its end), the events at their sealed positions, the
  transitions from the one transitions partition of the key from the workflow's start;
- a **full scan**: what an audit without the positions must do, every record of
  the workflow topic and of the transitions topic read and filtered by key (the
  same reader, so only the amount read differs).

``python -m tests.bench.audit [--noise 50000] [--rounds 3]`` prints the figures.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from confluent_kafka import Producer
from tests.integration.gateway_harness import API_KEY, GatewayLab
from tests.integration.project import REPO, Project
from tests.integration.test_audit import ORDER, _run_workflow
from tests.integration.tracker_harness import PAYLOADS, TrackerLab

from sagalog.audit import ReadStats, audit_consumer
from sagalog.audit.reading import partitions_of, read_range, watermarks
from sagalog.cli.main import cli
from sagalog.contracts.hash_chain import signed
from sagalog.contracts.headers import EventHeaders
from sagalog.contracts.validation import to_avro_datum
from sagalog.settings import ClientSettings
from sagalog.topic_names import records_changelog

NOISE_TYPES = ("procurement.v1.RequestSubmitted", "procurement.v1.BudgetReserved")


def _publish_noise(lab: TrackerLab, count: int, tag: str) -> None:
    """``count`` events of ``count // 2`` other workflows, produced in bulk."""
    assert lab.publisher is not None
    codec, catalog = lab.publisher.codec, lab.publisher.catalog
    encoded = {
        t: codec.encode(
            lab.topic, t, to_avro_datum(catalog[t].definition, PAYLOADS[t], event_type=t)
        )
        for t in NOISE_TYPES
    }
    producer = Producer(
        lab.project.settings.producer_config(**{"linger.ms": 20, "compression.type": "lz4"})
    )
    for n in range(count // 2):
        workflow_id = f"noise-{tag}-{n}"
        key = workflow_id.encode()
        for event_type in NOISE_TYPES:
            headers = EventHeaders(
                id=str(uuid.uuid4()), type=event_type, source="bench/noise", workflow_id=workflow_id
            ).to_kafka()
            value = encoded[event_type]
            while True:
                try:
                    producer.produce(
                        lab.topic, key=key, value=value, headers=signed(key, value, headers)
                    )
                    break
                except BufferError:
                    producer.poll(0.1)
    producer.flush(60)


def _audit_once(
    lab: TrackerLab, workflow_id: str, gateway: list[str]
) -> tuple[float, dict[str, Any]]:
    settings = lab.project.settings
    started = time.perf_counter()
    result = CliRunner().invoke(
        cli,
        [
            "--bootstrap-servers",
            settings.bootstrap_servers,
            "--schema-registry-url",
            settings.schema_registry_url,
            "--project-dir",
            str(lab.project.root),
            "audit",
            workflow_id,
            "--json",
            "--verify",
            "--tracker-app-id",
            lab.app_id,
            "--transitions-topic",
            lab.transitions_topic,
            *gateway,
        ],
        catch_exceptions=False,
    )
    took = time.perf_counter() - started
    assert result.exit_code == 0, result.output
    return took, json.loads(result.stdout)


def _full_scan(settings: ClientSettings, topics: list[str], workflow_id: str) -> tuple[float, int]:
    """Every record of ``topics`` read, the workflow's kept: seconds, records read."""
    key = workflow_id.encode()
    consumer = audit_consumer(settings)
    stats = ReadStats()
    started = time.perf_counter()
    kept = 0
    try:
        for topic in topics:
            for partition in range(partitions_of(consumer, topic, timeout_s=15)):
                low, high = watermarks(consumer, topic, partition, timeout_s=15)
                kept += len(
                    read_range(
                        consumer,
                        topic,
                        partition,
                        low,
                        high,
                        keep=lambda m: m.key() == key,
                        timeout_s=15,
                        stats=stats,
                    )
                )
    finally:
        consumer.close()
    assert kept >= len(ORDER), kept
    return time.perf_counter() - started, stats.records_read


def measure_audit(*, noise: int, rounds: int) -> dict[str, Any]:
    settings = ClientSettings(connect_timeout_s=15)
    tmp = Path(tempfile.mkdtemp(prefix="audit-bench-"))
    shutil.copytree(REPO / "schemas", tmp / "project" / "schemas")
    (tmp / "project" / "topology").mkdir()
    suffix = f"auditbench{uuid.uuid4().hex[:8]}"
    project = Project(
        root=tmp / "project",
        settings=settings.model_copy(update={"project_dir": str(tmp / "project")}),
        suffix=suffix,
    )
    lab = TrackerLab(project, tmp).setup()
    gateway_lab = GatewayLab(lab, tmp)
    try:
        gateway_lab.setup()  # starts the tracker
        gateway_lab.start_gateway()
        via_gateway = ["--gateway-url", gateway_lab.url, "--api-key", API_KEY]
        _publish_noise(lab, noise // 2, "a")
        workflow_id = f"wf-audited-{uuid.uuid4().hex[:6]}"
        _run_workflow(lab, workflow_id)
        _publish_noise(lab, noise - noise // 2, "b")
        last = f"noise-b-{(noise - noise // 2) // 2 - 1}"
        lab.wait_state(last, "running", timeout=600)
        lab.wait(
            lambda: _gateway_has(gateway_lab, workflow_id), timeout=300, what="gateway caught up"
        )
        audits, gateway_audits, scans = [], [], []
        body: dict[str, Any] = {}
        gateway_body: dict[str, Any] = {}
        scanned = 0
        for _ in range(rounds):
            took, gateway_body = _audit_once(lab, workflow_id, via_gateway)
            gateway_audits.append(took)
            took, body = _audit_once(lab, workflow_id, ["--no-gateway"])
            audits.append(took)
            took, scanned = _full_scan(
                project.settings, [lab.topic, lab.transitions_topic], workflow_id
            )
            scans.append(took)
        consumer = audit_consumer(project.settings)
        sizes = {
            topic: sum(
                watermarks(consumer, topic, p, timeout_s=15)[1]
                for p in range(partitions_of(consumer, topic, timeout_s=15))
            )
            for topic in (lab.topic, lab.transitions_topic, records_changelog(lab.app_id))
        }
        consumer.close()
        return {
            "audit_noise_events": noise,
            "audit_log_sizes": sizes,
            "audit_gateway_seconds": round(statistics.median(gateway_audits), 3),
            "audit_gateway_records_read": gateway_body["read"]["records_read"],
            "audit_gateway_record_source": gateway_body["workflow"]["record_source"],
            "audit_seconds": round(statistics.median(audits), 3),
            "audit_records_read": body["read"]["records_read"],
            "audit_seeks": body["read"]["seeks"],
            "audit_events": sum(1 for h in body["history"] if h["kind"] == "event"),
            "audit_transitions": sum(1 for h in body["history"] if h["kind"] == "transition"),
            "audit_verified": body["verification"]["ok"],
            "full_scan_seconds": round(statistics.median(scans), 3),
            "full_scan_records_read": scanned,
            "rounds_audit_gateway_s": [round(a, 3) for a in gateway_audits],
            "rounds_audit_s": [round(a, 3) for a in audits],
            "rounds_full_scan_s": [round(s, 3) for s in scans],
        }
    finally:
        gateway_lab.close()
        lab.close()
        _delete(project)
        shutil.rmtree(tmp, ignore_errors=True)


def _gateway_has(gateway_lab: GatewayLab, workflow_id: str) -> bool:
    reply = gateway_lab.call("GET", f"/v1/workflows/{workflow_id}")
    if reply.status != 200:
        return False
    return (
        len(reply.body["seal"]["events"]) == len(ORDER)
        and len(reply.body["history"]) == len(ORDER)
        and gateway_lab.call("GET", "/healthz", key=None).body.get("lag") == 0
    )


def _delete(project: Project) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient

    from sagalog.cluster import connect_admin

    admin, metadata = connect_admin(project.settings)
    mine = [t for t in metadata.topics if project.suffix in t]
    if mine:
        for future in admin.delete_topics(mine, request_timeout=15).values():
            future.result(timeout=15)
    registry = SchemaRegistryClient(project.settings.registry_config())
    for subject in registry.get_subjects():
        if project.suffix in subject:
            registry.delete_subject(subject)
            registry.delete_subject(subject, permanent=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--noise", type=int, default=50_000, help="other workflows' events")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(json.dumps(measure_audit(noise=args.noise, rounds=args.rounds), indent=2))


if __name__ == "__main__":
    main()
