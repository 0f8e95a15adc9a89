"""Crypto-shredding on the real broker: the procurement workflow with its requesters'
e-mail addresses sealed per requester, one requester erased afterwards.

The fleet and driver of ``make demo`` run a dozen requests on throwaway topics, every
service sharing this test's own key file. Then ``sagalog erase`` deletes one
requester's keys, and every reader is asked what it shows: ``tail`` shows that
requester's address as erased and everyone else's in clear, every other field as
written; ``audit --verify`` still verifies the hash chain of an erased requester's
workflow; ``replay rebuild`` still rebuilds the tracker's state without a mismatch;
``analytics`` and its HTML report run. No topic of the run, read byte by byte, holds
any requester's address in clear.
"""

from __future__ import annotations

import json
import secrets
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from demo.driver import Driver
from demo.fleet import Fleet
from demo.scenario import FAILING_VENDOR, Plan, build_mix
from sagalog.cli.gateway_client import GatewayClient, GatewayClientSettings
from sagalog.cluster import connect_admin
from sagalog.personal import ERASED
from sagalog.personal.keys import LocalKeyService

from .project import REPO, Project
from .test_reference_workflow import apply_reference_project, reference_fleet_config

ERASURES = """
  erasures.{s}:
    partitions: 1
    retention: forever
    schemas: [sagalog.v1.SubjectErased]
"""


@pytest.mark.extended
def test_an_erased_requester_reads_as_erased_everywhere_and_the_log_still_verifies(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """About a minute: the whole fleet runs (the purchasing agent reveals the address
    to the ERP), then every reader of the log is asked after the erasure."""
    s = project.suffix
    key_file = tmp_path / "personal-data.key"
    LocalKeyService.load(key_file, create=True)
    monkeypatch.setenv("SAGALOG_PERSONAL_DATA_KEY_FILE", str(key_file))
    monkeypatch.setenv("PYTHONPATH", str(REPO / "services"))
    settings = project.settings.model_copy(update={"personal_data_key_file": str(key_file)})
    apply_reference_project(project, more_topics=ERASURES.replace("{s}", s))
    topic, app_id = f"procurement.events.{s}", f"saga-tracker-{s}"
    requests = build_mix(f"pd{s[:6]}", 12, seed=5)
    for n, request in enumerate(requests):  # addresses of this run only
        request.payload["requester"] = f"person{n % 4}.{s}@example.com"
    erased = next(r for r in requests if r.plan is Plan.APPROVE).payload["requester"]
    api_key, gate_secret = secrets.token_urlsafe(16), secrets.token_urlsafe(32)
    monkeypatch.setenv("SAGALOG_TRACKER_GATE_SECRET", gate_secret)  # the replay checks gates
    fleet = Fleet(
        reference_fleet_config(
            project, tmp_path / "run", api_key=api_key, gate_secret=gate_secret, settings=settings
        )
    )
    try:
        fleet.start_all()
        fleet.faults("erp", reject_when={"vendor": FAILING_VENDOR})
        fleet.wait_gateway_ready()
        gateway = GatewayClient(
            GatewayClientSettings(url=fleet.urls["gateway"], api_key=api_key, timeout_s=30)
        )
        driver = Driver(
            settings=settings,
            catalog=project.catalog,
            gateway=gateway,
            topic=topic,
            tracker_app_id=app_id,
            requests=requests,
        )
        driver.run(phase_timeout_s=180)
        wrong = {
            r.workflow_id: driver.states.get(r.workflow_id)
            for r in requests
            if driver.states.get(r.workflow_id) != r.expected_end
        }
        assert not wrong, wrong
        # The ERP got the address in clear: the purchasing agent revealed it to call it.
        orders = [e["body"] for e in fleet.effects("erp")["effects"].values()]
        assert {o["requester"] for o in orders if o.get("requester")} <= {
            r.payload["requester"] for r in requests
        }
        assert orders
    finally:
        fleet.stop_all()

    result = project.sagalog(
        "erase", erased, "--reason", "test erasure", "--by", "dpo", "--topic", f"erasures.{s}"
    )
    assert result.exit_code == 0, result.output
    assert "1 key(s) deleted" in result.output

    # tail: the erased requester's address is gone, everyone else's reads, as do all fields.
    tailed = project.sagalog("tail", topic, "--idle-timeout", "3")
    assert tailed.exit_code == 0, tailed.output
    submitted = {
        r["payload"]["request_id"]: r["payload"]
        for r in map(json.loads, tailed.stdout.splitlines())
        if r.get("type") == "procurement.v1.RequestSubmitted"
    }
    assert len(submitted) == len(requests)
    for request in requests:
        shown = submitted[request.payload["request_id"]]
        want = request.payload["requester"]
        assert shown["requester"] == (ERASED if want == erased else want)
        assert (shown["title"], shown["vendor"], shown["amount"]) == (
            request.payload["title"],
            request.payload["vendor"],
            request.payload["amount"],
        )
    erasure = project.sagalog("tail", f"erasures.{s}", "--idle-timeout", "2")
    [record] = [json.loads(line) for line in erasure.stdout.splitlines()]
    assert record["payload"]["reason"] == "test erasure"
    assert record["payload"]["requested_by"] == "dpo"
    assert erased not in erasure.stdout

    # audit: the erased requester's workflow still verifies, and shows no address.
    mine = next(r for r in requests if r.payload["requester"] == erased)
    audited = project.sagalog(
        "audit",
        mine.workflow_id,
        "--verify",
        "--tracker-app-id",
        app_id,
        "--transitions-topic",
        f"transitions.{s}",
        "--json",
    )
    assert audited.exit_code == 0, audited.output
    assert erased not in audited.output
    trail = json.loads(audited.stdout)
    assert trail["verification"]["ok"] is True
    assert ERASED in audited.stdout

    # replay: the tracker's state rebuilds from the log without a mismatch.
    replayed = project.sagalog(
        "replay",
        "rebuild",
        "--store",
        str(tmp_path / "replay"),
        "--app-id",
        app_id,
        "--transitions-topic",
        f"transitions.{s}",
    )
    assert replayed.exit_code == 0, replayed.output
    assert "no mismatches" in replayed.output
    assert erased not in replayed.output

    # what-if: the recorded workflows run through a flow version, none unexplained.
    candidate = tmp_path / "procurement.v2.yaml"
    recorded = (project.root / "topology" / "flows" / "procurement.v1.yaml").read_text()
    candidate.write_text(recorded.replace("version: 1", "version: 2", 1))
    tried = project.sagalog(
        "replay",
        "whatif",
        "--candidate",
        str(candidate),
        "--transitions-topic",
        f"transitions.{s}",
        "--json",
    )
    assert tried.exit_code == 0, tried.output
    assert erased not in tried.output
    report = json.loads(tried.stdout)
    assert report["workflows"] == len(requests) and report["not_reproduced"] == []

    # analytics and the HTML report run over the run's transitions.
    html = tmp_path / "report.html"
    analysed = project.sagalog(
        "analytics", "--topic", f"transitions.{s}", "--since", "1d", "--html", str(html)
    )
    assert analysed.exit_code == 0, analysed.output
    assert erased not in analysed.output
    assert erased not in html.read_text()

    # No byte of any topic of the run holds a requester's address in clear.
    # The request ids, in clear by design, are the control: the scan does find text.
    addresses = {r.payload["requester"].encode() for r in requests}
    request_id = requests[0].payload["request_id"].encode()
    found = _raw_matches(settings_topics(project, s), project, {*addresses, request_id})
    assert [f for f in found if f[2] in addresses] == []
    assert any(f[2] == request_id for f in found)


def settings_topics(project: Project, s: str) -> list[str]:
    """Every topic this run wrote: declared, the tracker's, the agents' retry topics."""
    _, metadata = connect_admin(project.settings)
    return sorted(t for t in metadata.topics if s in t)


def _raw_matches(topics: list[str], project: Project, needles: set[bytes]) -> list[Any]:
    consumer = Consumer(
        project.settings.kafka_config(
            **{
                "group.id": f"raw-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "isolation.level": "read_uncommitted",  # aborted records too
                "enable.partition.eof": True,
            }
        )
    )
    found = []
    try:
        _, metadata = connect_admin(project.settings)
        ends = {}
        for topic in topics:
            for partition in metadata.topics[topic].partitions:
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), timeout=10
                )
                if high > low:
                    ends[(topic, partition)] = high
        consumer.assign([TopicPartition(t, p, 0) for t, p in ends])
        left = dict(ends)
        idle = 0
        while left and idle < 100:
            message = consumer.poll(0.2)
            if message is None:
                idle += 1
                continue
            where = (message.topic(), message.partition())
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    left.pop(where, None)
                continue
            raw = b"".join(
                [
                    message.key() or b"",
                    message.value() or b"",
                    *(v or b"" for _, v in message.headers() or []),
                ]
            )
            found += [(where, message.offset(), n) for n in needles if n in raw]
        assert not left, f"not read to the end: {left}"
    finally:
        consumer.close()
    return found
