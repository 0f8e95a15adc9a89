"""``sagalog audit`` on the real broker: a workflow's history from the sealed positions,
and tamper evidence on copies of its log (Kafka's own log cannot be changed)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from sagalog.blobs.s3 import S3BlobStore
from sagalog.blobs.store import BlobRef, BlobStore, LocalBlobStore
from sagalog.cli.main import cli
from sagalog.contracts.hash_chain import signed
from sagalog.contracts.headers import header_dict
from sagalog.publisher import PublishedEvent
from sagalog.topic_names import records_changelog
from sagalog.tracker import gate_token

from .gateway_harness import API_KEY, GatewayLab, gateway_lab  # noqa: F401
from .s3_server import S3Server, s3_server  # noqa: F401
from .tracker_harness import FORWARD, PAYLOADS, SECRET, TrackerLab

SUBMITTED = "procurement.v1.RequestSubmitted"
GATE_OPENED = "sagalog.v1.GateOpened"
GATE_DECIDED = "sagalog.v1.GateDecided"
ORDER = [
    SUBMITTED,
    "procurement.v1.BudgetReserved",
    "procurement.v1.RequestClassified",
    "procurement.v1.PoliciesRetrieved",
    GATE_OPENED,
    GATE_DECIDED,
    "procurement.v1.RiskScored",
    "procurement.v1.PurchaseOrderCreated",
]
MANAGER = "ana.manager@example.com"


def _at(lab: TrackerLab, workflow_id: str, state: str, step: str | None) -> bool:
    moves = lab.transitions(workflow_id)
    return bool(moves) and moves[-1]["to_state"] == state and moves[-1]["step"] == step


def _run_workflow(
    lab: TrackerLab, workflow_id: str, extra: dict[str, dict[str, Any]] | None = None
) -> dict[str, str]:
    """Play the agents and the manager: each event names the one it reacts to (causation
    id and prev-hash); ``extra`` adds fields to the payloads of some types. Returns the
    event ids by type."""
    assert lab.publisher is not None
    publisher = lab.publisher
    ids: dict[str, str] = {}

    def react(event_type: str, cause: PublishedEvent | None, **payload: Any) -> PublishedEvent:
        published = publisher.publish(
            lab.topic,
            event_type,
            {**PAYLOADS.get(event_type, {}), **(extra or {}).get(event_type, {}), **payload},
            workflow_id=workflow_id,
            causation_id=cause.headers.id if cause else None,
            prev_hash=cause.content_hash if cause else None,
        )
        ids[event_type] = published.headers.id
        return published

    cause = react(SUBMITTED, None)
    for step, event_type in FORWARD[:3]:
        lab.wait(lambda s=step: _at(lab, workflow_id, "running", s), what=f"at {step}")
        cause = react(event_type, cause)
    lab.wait(lambda: bool(lab.events(workflow_id, GATE_OPENED)), what="GateOpened")
    opened = lab.events(workflow_id, GATE_OPENED)[0]
    ids[GATE_OPENED] = opened["id"]
    token = gate_token(SECRET.encode(), workflow_id=workflow_id, gate="manager_approval", attempt=1)
    decided = publisher.publish(
        lab.topic,
        GATE_DECIDED,
        {
            "gate": "manager_approval",
            "token": token,
            "decision": "APPROVED",
            "decided_by": MANAGER,
            "comment": "fits the budget",
        },
        workflow_id=workflow_id,
        causation_id=opened["id"],
        prev_hash=opened["headers"]["sagalog_hash"],
    )
    ids[GATE_DECIDED] = decided.headers.id
    cause = decided
    for step, event_type in FORWARD[3:]:
        lab.wait(lambda s=step: _at(lab, workflow_id, "running", s), what=f"at {step}")
        cause = react(event_type, cause)
    lab.wait_state(workflow_id, "completed")
    return ids


def _audit(lab: TrackerLab, *args: str, gateway: tuple[str, ...] = ("--no-gateway",)) -> Result:
    return lab.project.sagalog(
        "audit",
        *args,
        "--tracker-app-id",
        lab.app_id,
        "--transitions-topic",
        lab.transitions_topic,
        *gateway,
    )


def _settled_trail(lab: TrackerLab, workflow_id: str) -> dict[str, Any]:
    """The audit's JSON once the tracker stored its last record of the workflow (the
    completion is published before the record is written)."""
    deadline = time.monotonic() + 60
    body: dict[str, Any] = {}
    while time.monotonic() < deadline:
        result = _audit(lab, workflow_id, "--json")
        assert result.exit_code == 0, result.output
        body = json.loads(result.stdout)
        events = [h for h in body["history"] if h["kind"] == "event"]
        moves = [h for h in body["history"] if h["kind"] == "transition"]
        if len(events) == len(ORDER) and moves and moves[-1]["payload"]["to_state"] == "completed":
            return body
        time.sleep(0.5)
    raise AssertionError(f"the audit never showed the whole workflow: {body}")


def test_audit_shows_the_history_in_order_with_causes_gates_models_and_transitions(
    tracker_lab: TrackerLab,
) -> None:
    lab = tracker_lab
    lab.tracker()
    workflow_id = f"wf-audit-{uuid.uuid4().hex[:8]}"
    ids = _run_workflow(lab, workflow_id)

    body = _settled_trail(lab, workflow_id)
    events = [h for h in body["history"] if h["kind"] == "event"]
    assert [e["type"] for e in events] == ORDER
    assert [e["event_id"] for e in events] == [ids[t] for t in ORDER]
    assert body["workflow"]["state"] == "completed"
    assert body["workflow"]["record_source"].startswith(
        f"changelog {records_changelog(lab.app_id)}"
    )
    # Found by position, not by a scan: about one record read per event and transition.
    assert body["read"]["records_read"] < 60, body["read"]
    for event in events:
        headers = event["headers"]
        assert {"ce_id", "ce_type", "ce_source", "ce_time", "sagalog_hash"} <= set(headers)
        assert event["position"]["topic"] == lab.topic
    # The causation chain, through the tracker's own GateOpened, back to the request.
    order = events[-1]
    assert order["causation_path"] == [ids[t] for t in reversed(ORDER[:-1])]
    # Who decided the gate, what and when; to whom it was put.
    decided = events[ORDER.index(GATE_DECIDED)]
    assert decided["gate"] == {
        "gate": "manager_approval",
        "action": "decided",
        "at": decided["headers"]["ce_time"],
        "decision": "APPROVED",
        "decided_by": MANAGER,
        "comment": "fits the budget",
    }
    opened = events[ORDER.index(GATE_OPENED)]
    assert opened["gate"]["assignee"] == "managers@example.com"
    assert opened["source"] == "sagalog/saga-tracker"
    assert "sagalog_chain" in opened["headers"]
    # The model's decision and its lineage.
    scored = events[ORDER.index("procurement.v1.RiskScored")]
    assert scored["model_decision"]["model_id"] == "m"
    assert scored["model_decision"]["prompt_hash"] == "sha256:0"
    assert scored["model_decision"]["outcome"]["level"] == "LOW"
    # The tracker's transitions, each right after the event that caused it.
    position = {h["event_id"]: i for i, h in enumerate(body["history"])}
    moves = [h for h in body["history"] if h["kind"] == "transition"]
    assert [(m["payload"]["from_state"], m["payload"]["to_state"]) for m in moves] == [
        ("initiated", "running"),
        ("running", "running"),
        ("running", "running"),
        ("running", "pending_approval"),
        ("pending_approval", "approved"),
        ("approved", "running"),
        ("running", "running"),
        ("running", "completed"),
    ]
    for move in moves:
        assert position[move["causation_id"]] < position[move["event_id"]]

    text = _audit(lab, workflow_id)
    assert text.exit_code == 0, text.output
    assert f"GATE manager_approval: APPROVED by {MANAGER} at " in text.stdout
    assert "MODEL m decided at" in text.stdout
    assert "-> tracker: running -> completed" in text.stdout

    verified = _audit(lab, workflow_id, "--verify")
    assert verified.exit_code == 0, verified.output
    assert "verified: no modified, missing or reordered event" in verified.stdout


def test_through_the_gateway_the_record_and_transitions_come_by_point_lookups(
    gateway_lab: GatewayLab,  # noqa: F811
) -> None:
    gw, lab = gateway_lab, gateway_lab.lab
    gw.start_gateway()
    workflow_id = f"wf-audit-gw-{uuid.uuid4().hex[:8]}"
    ids = _run_workflow(lab, workflow_id)
    _settled_trail(lab, workflow_id)  # the tracker stored its last record

    def served() -> bool:
        reply = gw.call("GET", f"/v1/workflows/{workflow_id}")
        return (
            reply.status == 200
            and len(reply.body["seal"]["events"]) == len(ORDER)
            and len(reply.body["history"]) == 8
        )

    lab.wait(served, what="the gateway serves the whole workflow")
    via = ("--gateway-url", gw.url, "--api-key", API_KEY)
    result = _audit(lab, workflow_id, "--json", "--verify", gateway=via)
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert body["workflow"]["record_source"] == f"gateway {gw.url}"
    events = [h for h in body["history"] if h["kind"] == "event"]
    assert [e["event_id"] for e in events] == [ids[t] for t in ORDER]
    assert len([h for h in body["history"] if h["kind"] == "transition"]) == 8
    # One record per event and transition, no range read at all.
    assert body["read"]["records_read"] <= 20, body["read"]
    assert body["verification"]["ok"] is True

    # A gateway that does not know the workflow yet (or at all) is not the authority.
    unknown = _audit(lab, "wf-nobody", gateway=via)
    assert unknown.exit_code == 2
    assert "no workflow 'wf-nobody' is known to the tracker" in unknown.output


def test_an_unknown_workflow_is_a_clear_error(tracker_lab: TrackerLab) -> None:
    lab = tracker_lab
    lab.tracker()
    lab.start("wf-known")
    lab.wait_state("wf-known", "running")
    result = CliRunner().invoke(
        cli,
        [
            "--bootstrap-servers",
            lab.project.settings.bootstrap_servers,
            "--project-dir",
            str(lab.project.root),
            "audit",
            "wf-nobody-knows",
            "--tracker-app-id",
            lab.app_id,
            "--no-gateway",
        ],
    )
    assert result.exit_code == 2, result.output
    assert "no workflow 'wf-nobody-knows' is known to the tracker" in result.output
    assert records_changelog(lab.app_id) in result.output


# -- tampering with a copy -----------------------------------------------------------


def _workflow_records(lab: TrackerLab, workflow_id: str) -> list[tuple[bytes, bytes, list[Any]]]:
    """The workflow's records in log order: (key, value, headers) as they lie."""
    consumer = Consumer(
        {
            **lab.project.settings.kafka_config(),
            "group.id": f"copy-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    partitions = consumer.list_topics(lab.topic, timeout=10).topics[lab.topic].partitions
    consumer.assign([TopicPartition(lab.topic, p, OFFSET_BEGINNING) for p in partitions])
    found, ended = [], set()
    deadline = time.monotonic() + 30
    while len(ended) < len(partitions) and time.monotonic() < deadline:
        for message in consumer.consume(500, 0.5):
            if message.error() is not None:
                ended.add(message.partition())
            elif message.key() == workflow_id.encode():
                found.append((message.key(), message.value(), list(message.headers() or [])))
    consumer.close()
    return found


def _copy(lab: TrackerLab, name: str, records: list[tuple[bytes, bytes, list[Any]]]) -> str:
    topic = f"audit-copy-{name}.{lab.suffix}"
    admin = AdminClient(lab.project.settings.kafka_config())
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    producer = Producer(lab.project.settings.producer_config())
    for key, value, headers in records:
        producer.produce(topic, key=key, value=value, headers=headers)
    assert producer.flush(15) == 0
    return topic


def _id_of(record: tuple[bytes, bytes, list[Any]]) -> str:
    return header_dict(record[2])["ce_id"]


def _verify_copy(lab: TrackerLab, workflow_id: str, copy: str) -> tuple[int, dict[str, Any]]:
    result = _audit(lab, workflow_id, "--verify", "--json", "--from-topic", f"{lab.topic}={copy}")
    return result.exit_code, json.loads(result.stdout)


def test_a_modified_a_deleted_and_a_reordered_event_are_each_detected_and_named(
    tracker_lab: TrackerLab,
) -> None:
    lab = tracker_lab
    lab.tracker()
    workflow_id = f"wf-tamper-{uuid.uuid4().hex[:8]}"
    ids = _run_workflow(lab, workflow_id)
    _settled_trail(lab, workflow_id)
    records = _workflow_records(lab, workflow_id)
    assert [header_dict(r[2])["ce_type"] for r in records] == ORDER

    # An untampered copy verifies clean.
    code, body = _verify_copy(lab, workflow_id, _copy(lab, "clean", records))
    assert code == 0, body["verification"]
    assert body["verification"]["findings"] == []

    # Modified: the risk score lowered after the fact, and the hash header recomputed
    # by the forger: only the tracker's seal (and the chain) can tell.
    scored = ORDER.index("procurement.v1.RiskScored")
    key, value, headers = records[scored]
    assert lab.publisher is not None
    codec = lab.publisher.codec
    payload = codec.decode(value).payload
    forged = codec.encode(
        lab.topic, "procurement.v1.RiskScored", {**payload, "score": 0.01, "level": "LOW"}
    )
    modified = list(records)
    modified[scored] = (key, forged, signed(key, forged, headers))
    code, body = _verify_copy(lab, workflow_id, _copy(lab, "modified", modified))
    findings = body["verification"]["findings"]
    assert code == 1
    assert [f["event_id"] for f in findings if f["kind"] == "modified"] == [
        ids["procurement.v1.RiskScored"]
    ]
    assert "differs from what the tracker sealed" in findings[0]["message"]

    # Deleted: the classification is gone from the copy.
    classified = ORDER.index("procurement.v1.RequestClassified")
    deleted = records[:classified] + records[classified + 1 :]
    code, body = _verify_copy(lab, workflow_id, _copy(lab, "deleted", deleted))
    findings = body["verification"]["findings"]
    assert code == 1
    missing = [f for f in findings if f["kind"] == "missing"]
    assert [f["event_id"] for f in missing] == [ids["procurement.v1.RequestClassified"]]
    assert missing[0]["position"].startswith(f"{lab.topic}/")
    assert not [f for f in findings if f["kind"] in ("modified", "reordered")]

    # Reordered: the classification and the policies swapped.
    swapped = list(records)
    swapped[classified], swapped[classified + 1] = swapped[classified + 1], swapped[classified]
    code, body = _verify_copy(lab, workflow_id, _copy(lab, "swapped", swapped))
    findings = body["verification"]["findings"]
    assert code == 1
    reordered = [f for f in findings if f["kind"] == "reordered"]
    assert len(reordered) == 1
    named = {reordered[0]["event_id"], reordered[0]["other_event_id"]}
    assert named == {_id_of(records[classified]), _id_of(records[classified + 1])}
    assert not [f for f in findings if f["kind"] in ("modified", "missing")]

    text = _audit(
        lab, workflow_id, "--verify", "--from-topic", f"{lab.topic}=audit-copy-swapped.{lab.suffix}"
    )
    assert text.exit_code == 1
    assert "verification FAILED" in text.stdout
    assert "REORDERED" in text.stdout


# -- blobs ---------------------------------------------------------------------------------


@dataclass
class BlobPlace:
    """A blob store of a kind, the settings that name it, and how to harm a blob in it."""

    store: BlobStore
    environment: dict[str, str]
    damage: Callable[[BlobRef, bytes], object]
    remove: Callable[[BlobRef], object]
    where: str


@pytest.fixture(params=["directory", pytest.param("s3", marks=pytest.mark.tool("gofakes3"))])
def blob_place(request: pytest.FixtureRequest, tmp_path: Path) -> BlobPlace:
    if request.param == "directory":
        local = LocalBlobStore(tmp_path / "blobs")
        return BlobPlace(
            local,
            {"SAGALOG_BLOB_DIR": str(local.root)},
            lambda ref, data: local.path_of(ref).write_bytes(data),
            lambda ref: local.path_of(ref).unlink(),
            str(local.root),
        )
    server: S3Server = request.getfixturevalue("s3_server")
    url = f"s3://{server.bucket}/audit"
    bucket = S3BlobStore.from_url(url, endpoint_url=server.endpoint_url)
    return BlobPlace(
        bucket,
        {"SAGALOG_BLOB_URL": url, "SAGALOG_BLOB_ENDPOINT_URL": server.endpoint_url},
        lambda ref, data: bucket.client.put_object(
            Bucket=server.bucket, Key=bucket.key_of(ref), Body=data
        ),
        lambda ref: bucket.client.delete_object(Bucket=server.bucket, Key=bucket.key_of(ref)),
        str(bucket),
    )


def _rebuild(lab: TrackerLab, store: Path) -> Result:
    return lab.project.sagalog(
        "replay",
        "rebuild",
        "--store",
        str(store),
        "--app-id",
        lab.app_id,
        "--transitions-topic",
        lab.transitions_topic,
        "--json",
        "--quiet",
    )


def test_a_blob_an_event_refers_to_is_checked_against_its_hash(
    tracker_lab: TrackerLab, blob_place: BlobPlace, monkeypatch: Any, tmp_path: Path
) -> None:
    """The model's prompt (120 KB) travels as a reference; the audit rehashes the blob,
    and a replay reads it, in a local directory and in an S3-compatible bucket."""
    lab = tracker_lab
    lab.tracker()
    prompt = "Score the risk of this purchase request against the policies. " * 2000
    ref = blob_place.store.put(prompt.encode(), "text/plain; charset=utf-8")
    workflow_id = f"wf-blob-{uuid.uuid4().hex[:8]}"
    scored = "procurement.v1.RiskScored"
    ids = _run_workflow(lab, workflow_id, extra={scored: {"prompt": ref.as_avro()}})
    _settled_trail(lab, workflow_id)
    stored = [
        r for r in _workflow_records(lab, workflow_id) if header_dict(r[2])["ce_type"] == scored
    ]
    assert len(stored[0][1]) < 1_000, "the event holds the reference, not the 120 KB"

    def audit() -> tuple[int, dict[str, Any]]:
        result = _audit(lab, workflow_id, "--verify", "--json")
        return result.exit_code, json.loads(result.stdout)["verification"]

    for name in ("SAGALOG_BLOB_DIR", "SAGALOG_BLOB_URL", "SAGALOG_BLOB_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    code, verification = audit()
    assert (code, verification["findings"]) == (0, [])
    assert "1 blob reference(s) not checked: no blob store is configured" in " ".join(
        verification["notes"]
    )

    for name, value in blob_place.environment.items():
        monkeypatch.setenv(name, value)
    code, verification = audit()
    assert (code, verification["findings"], verification["notes"]) == (0, [], [])
    # Replay reads the blobs too: a history is whole only with its payloads.
    monkeypatch.setenv("SAGALOG_TRACKER_GATE_SECRET", SECRET)
    rebuilt = _rebuild(lab, tmp_path / "rebuild-1")
    assert rebuilt.exit_code == 0, rebuilt.output
    blobs = json.loads(rebuilt.stdout)["blobs"]
    assert (blobs["read"], blobs["bytes"], blobs["problems"]) == (1, len(prompt), [])

    blob_place.damage(ref, prompt.replace("risk", "RISK", 1).encode())
    rebuilt = _rebuild(lab, tmp_path / "rebuild-2")
    assert rebuilt.exit_code == 1, rebuilt.output
    report = json.loads(rebuilt.stdout)
    assert report["mismatches"] == []  # the tracker's state is whole; its payload is not
    [problem] = report["blobs"]["problems"]
    assert (problem["problem"], problem["event_id"], problem["field"]) == (
        "modified",
        ids[scored],
        "RiskScored.prompt",
    )
    code, verification = audit()
    assert code == 1
    assert [(f["kind"], f["event_id"]) for f in verification["findings"]] == [
        ("blob_modified", ids[scored])
    ]
    assert verification["findings"][0]["message"].startswith("RiskScored.prompt: blob ")

    blob_place.remove(ref)
    code, verification = audit()
    assert code == 1
    assert [f["kind"] for f in verification["findings"]] == ["blob_missing"]
    assert blob_place.where in verification["findings"][0]["message"]
