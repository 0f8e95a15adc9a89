"""Crypto-shredding on the real broker: the procurement workflow with its requesters'
e-mail addresses sealed per requester, one requester erased afterwards.

The fleet and driver of ``make demo`` run a dozen requests on throwaway topics
(``requester_fleet``), every service sharing this test's own key file. Then
``sagalog erase`` deletes one requester's keys, and every reader is asked what it
shows: ``tail`` shows that requester's address as erased and everyone else's in
clear, every other field as written; ``audit --verify`` still verifies the hash
chain of an erased requester's workflow; ``replay rebuild`` still rebuilds the
tracker's state without a mismatch; ``analytics`` and its HTML report run. No topic
of the run, read byte by byte, holds any requester's address in clear.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from sagalog.cluster import connect_admin
from sagalog.personal.keys import LocalKeyService

from .project import Project
from .requester_fleet import (
    audit_the_erased,
    erase,
    run_requesters,
    shown_requester,
    tailed_requests,
)


@pytest.mark.extended
def test_an_erased_requester_reads_as_erased_everywhere_and_the_log_still_verifies(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """About a minute: the whole fleet runs (the purchasing agent reveals the address
    to the ERP, which refuses one vendor quoting the request), then every reader of
    the log is asked after the erasure."""
    s = project.suffix
    key_file = tmp_path / "personal-data.key"
    LocalKeyService.load(key_file, create=True)
    monkeypatch.setenv("SAGALOG_PERSONAL_DATA_KEY_FILE", str(key_file))
    settings = project.settings.model_copy(update={"personal_data_key_file": str(key_file)})
    run = run_requesters(
        project,
        tmp_path,
        monkeypatch,
        settings,
        prefix="pd",
        seed=5,
    )
    requests, erased, app_id = run.requests, run.erased, run.app_id
    # The ERP got the address in clear: the purchasing agent revealed it to call it.
    assert run.erp_orders
    assert {o["requester"] for o in run.erp_orders if o.get("requester")} <= {
        r.payload["requester"] for r in requests
    }

    erase(project, erased, reason="test erasure")

    # tail: the erased requester's address is gone, everyone else's reads, as do all fields.
    submitted = tailed_requests(project, run.topic)
    assert len(submitted) == len(requests)
    for request in requests:
        shown = submitted[request.payload["request_id"]]
        assert shown["requester"] == shown_requester(run, request)
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

    # audit: the erased requester's workflows still verify, and show no address.
    audit_the_erased(project, run)

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

    # No byte of any topic of the run holds a requester's address in clear, not even
    # its name before the @ (what an error quoting the first 200 bytes of an answer
    # keeps of it). The request ids, in clear by design, are the control: the scan
    # does find text.
    addresses = {r.payload["requester"].split("@")[0].encode() for r in requests}
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
