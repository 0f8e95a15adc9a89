"""Model streams on the real broker (issue 49, items 1 and 2).

- The filing fleet (every service its own process, as ``make demo``): the drafting
  agent streams its draft; an SSE client of the gateway's
  ``GET /v1/workflows/{id}/stream`` reads it as it is written, and what it read is the
  ``FilingDrafted`` draft the log holds. A second client disconnects mid-stream and
  reconnects with ``Last-Event-ID``: it misses no delta and sees none twice; a third,
  after the step, replays what the topic holds.
- The drafting agent SIGKILLed mid-stream, again and again (``DraftingLab``): every
  stream a kill cut shows the cut attempt marked ``interrupted`` and the retry under
  the next attempt, ended; the log holds one answer per workflow, whose tokens its
  claims count once (``served_against_claims``, the budget tests' referee).
"""

from __future__ import annotations

import json
import secrets
import signal
import time
from collections import defaultdict
from pathlib import Path

import httpx
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from demo.filing_scenario import FilingPlan, build_filings
from demo.fleet import Fleet
from sagalog.contracts.codec import EventCodec
from sagalog.contracts.registry import SchemaRegistry
from sagalog.publisher import EventPublisher
from sagalog.streams.record import StreamRecord, summarize
from sagalog.topic_names import stream_topic_for
from standins.model import serve
from waiting import poll

from .agent_harness import log_count, log_size, read_all
from .project import Project
from .sse_client import Event, events, stream_url
from .test_filing_workflow import apply_filing_project
from .test_model_budgets import (
    ASSIGNED,
    DRAFTED,
    DraftingLab,
    keys_of,
    logged_claims,
    served_against_claims,
)
from .test_reference_workflow import reference_fleet_config


def _drafts(project: Project, topic: str) -> dict[str, str]:
    """workflow id -> the draft of its FilingDrafted, from the log."""
    codec = EventCodec(catalog=project.catalog, registry=SchemaRegistry(project.settings))
    consumer = Consumer(
        project.settings.kafka_config(
            **{"group.id": f"t-{secrets.token_hex(4)}", "enable.partition.eof": True}
        )
    )
    partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    drafts, ends = {}, set()
    try:
        while len(ends) < len(partitions):
            for message in consumer.consume(500, 0.5):
                if message.error() is not None:
                    if message.error().code() == KafkaError._PARTITION_EOF:
                        ends.add(message.partition())
                    continue
                headers = {k: (v or b"").decode() for k, v in message.headers() or []}
                if headers.get("ce_type") == DRAFTED:
                    payload = codec.decode(message.value()).payload
                    drafts[headers["ce_workflowid"]] = str(payload["draft"])
    finally:
        consumer.close()
    return drafts


def _read_until_end(response: httpx.Response, *, limit: int | None = None) -> list[Event]:
    """Events until the end of an attempt that had deltas (the answer's turn; the
    tool turns before it stream no text), or ``limit`` events."""
    seen: list[Event] = []
    for event in events(response):
        seen.append(event)
        if limit is not None and len(seen) >= limit:
            break
        if event.kind == "end" and event.data["seq"] > 0:
            break
    return seen


def _answer_text(seen: list[Event]) -> str:
    """The text of the last attempt of the last call that streamed text."""
    ended = [e for e in seen if e.kind == "end" and e.data["seq"] > 0][-1]
    call, attempt = ended.data["call"], ended.data["attempt"]
    deltas = [
        e
        for e in seen
        if e.kind == "delta" and (e.data["call"], e.data["attempt"]) == (call, attempt)
    ]
    assert [e.data["seq"] for e in deltas] == list(range(len(deltas)))
    return "".join(e.data["text"] for e in deltas)


@pytest.mark.extended
@pytest.mark.timeout(600)
def test_a_drafting_step_streams_to_sse_clients_and_a_reconnect_resumes_exactly(
    project: Project, tmp_path: Path
) -> None:
    """About three minutes on a loaded machine, in ``make test-all``: the filing fleet's
    ten processes start (the tracker's tables first), then two filings are drafted and
    read (about 6 s). The fleet is the point: the real drafting agent, tracker and
    gateway, as ``make demo`` runs them."""
    s = project.suffix
    apply_filing_project(project)
    api_key = secrets.token_urlsafe(16)
    topic = f"filings.events.{s}"
    config = reference_fleet_config(
        project,
        tmp_path / "run",
        api_key=api_key,
        workflows=("filing",),
        filing_topic=topic,
        blob_dir=tmp_path / "blobs",
    )
    fleet = Fleet(config)
    filings = [f for f in build_filings(f"st{s[:6]}", 8, seed=5) if f.plan is FilingPlan.FILE][:2]
    assert len(filings) == 2
    headers = {"X-API-Key": api_key}
    try:
        fleet.start_all()
        fleet.wait_gateway_ready()
        fleet.faults("model", chunk_delay_ms=40)  # a model writes a few dozen tokens a second
        gateway = fleet.urls["gateway"]
        with httpx.Client(timeout=httpx.Timeout(60, connect=10), headers=headers) as client:
            assert client.get(stream_url(gateway, "nobody")).status_code == 404
            bad = client.get(stream_url(gateway, "x"), headers={"Last-Event-ID": "abc"})
            assert bad.status_code == 400 and "Last-Event-ID" in bad.json()["error"]
            assert httpx.get(stream_url(gateway, "x")).status_code == 401  # no key
            out = EventPublisher(project.settings, catalog=project.catalog, source="tests/streams")
            try:
                for filing in filings:
                    out.publish(
                        topic,
                        "filings.v1.FilingOpened",
                        filing.payload,
                        workflow_id=filing.workflow_id,
                    )
            finally:
                out.close()
            first, second = (f.workflow_id for f in filings)
            for workflow_id in (first, second):
                poll(
                    lambda w=workflow_id: (
                        client.get(f"{gateway}/v1/workflows/{w}").status_code == 200
                    ),
                    what=f"the gateway knows {workflow_id}",
                    timeout=60,
                )
            # One client reads the first filing's step as it runs.
            started = time.monotonic()
            with client.stream("GET", stream_url(gateway, first)) as response:
                assert response.status_code == 200
                assert response.headers["content-type"].startswith("text/event-stream")
                whole = _read_until_end(response)
            # Another reads five events of the second, drops the connection, resumes.
            with client.stream("GET", stream_url(gateway, second)) as response:
                before = _read_until_end(response, limit=5)
            resume = {"Last-Event-ID": str(before[-1].id)}
            with client.stream("GET", stream_url(gateway, second), headers=resume) as response:
                after = _read_until_end(response)
            # A late subscriber, once the step is done, replays what the topic holds.
            with client.stream("GET", stream_url(gateway, second)) as response:
                replay = _read_until_end(response)
        took = time.monotonic() - started
        drafts = _drafts(project, topic)
    finally:
        fleet.stop_all()

    assert _answer_text(whole) == drafts[first]
    assert all(e.data["workflow_id"] == first and e.data["step"] == "draft_filing" for e in whole)
    resumed = before + after
    ids = [e.id for e in resumed]
    assert ids == sorted(set(ids)), "a delta seen twice or out of order"
    assert [(e.id, e.kind, e.data) for e in resumed] == [(e.id, e.kind, e.data) for e in replay]
    assert _answer_text(resumed) == drafts[second]
    print(
        "\n"
        + json.dumps(
            {
                "events_first": len(whole),
                "events_second": len(resumed),
                "read_s": round(took, 1),
                "deltas_text_chars": len(drafts[first]),
            }
        )
    )


def _stream_records(lab: DraftingLab) -> dict[str, list[StreamRecord]]:
    """Every record of the lab's stream topic by workflow, in offset order."""
    topic = stream_topic_for(lab.topic)
    consumer = Consumer(
        lab.project.settings.kafka_config(
            **{"group.id": f"t-{secrets.token_hex(4)}", "enable.partition.eof": True}
        )
    )
    partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    found: dict[str, list[StreamRecord]] = defaultdict(list)
    ends: set[int] = set()
    try:
        while len(ends) < len(partitions):
            for message in consumer.consume(500, 0.5):
                if message.error() is not None:
                    if message.error().code() == KafkaError._PARTITION_EOF:
                        ends.add(message.partition())
                    continue
                record = StreamRecord.decode(message.value())
                found[record.workflow_id].append(record)
    finally:
        consumer.close()
    return found


KILLS = 3


@pytest.mark.timeout(300)
def test_an_agent_sigkilled_mid_stream_leaves_interrupted_marks_and_one_answer(
    project: Project, tmp_path: Path
) -> None:
    """Ten kills, each while a stream is out (the model pauses 80 ms between chunks, so
    a stream lasts about two seconds); the agent starts again at once, on the same
    data directory. About a minute."""
    model = serve(name="model")
    model.faults.chunk_delay_ms = 80
    lab = DraftingLab(project, model, tmp_path, policy="wait").setup()
    try:
        opened = lab.open_filings(12)
        # A budget that never waits: a kill's repeats are claims beside the cut calls'.
        agent = lab.agent("a", stream="true", max_tokens=60, tokens_per_minute=1_000_000)
        poll(lambda: log_count(agent, ASSIGNED), what="the agent assigned", timeout=60)
        kills = landed = 0
        while kills < KILLS:
            poll(lambda: model.book.in_flight > 0, what="a stream out", timeout=60, step=0.01)
            time.sleep(0.3)  # a few deltas out
            landed += model.book.in_flight > 0
            since = log_size(agent)
            agent.signal(signal.SIGKILL)
            agent.process.wait(10)  # type: ignore[union-attr]
            kills += 1
            agent.start()
            poll(
                lambda s=since: log_count(agent, ASSIGNED, since=s) > 0,
                what="the restarted agent assigned",
                timeout=60,
            )
        drafted: set[str] = set()

        def all_drafted() -> bool:
            assert agent.alive, agent.log.read_text()[-2000:]
            drafted.update(
                r["headers"]["ce_workflowid"] for r in read_all(lab) if r["type"] == DRAFTED
            )
            return drafted >= set(opened)

        poll(all_drafted, what=f"all {len(opened)} filings drafted", timeout=180, step=2)
        lab.stop()
        records = read_all(lab)
        served = lab.served()
        claims = logged_claims(lab, records)
        streams = _stream_records(lab)
    finally:
        lab.stop()
        model.shutdown()

    # The log: one answer per workflow, its tokens counted once.
    per_filing: dict[str, int] = defaultdict(int)
    for record in records:
        if record["type"] == DRAFTED:
            per_filing[record["headers"]["ce_workflowid"]] += 1
    assert set(per_filing) == set(opened) and set(per_filing.values()) == {1}
    counts = served_against_claims(served, claims, set(keys_of(lab, opened)))
    # The streams: each workflow's last attempt ended whole; every attempt before it
    # was cut and says so, and the retry came under the next number.
    cut = 0
    for workflow_id in opened:
        attempts = summarize(streams[workflow_id])
        assert attempts, f"{workflow_id}: nothing streamed"
        last = attempts[-1]
        assert last.ended and not last.gaps and last.deltas > 0, (workflow_id, attempts)
        assert [a.attempt for a in attempts] == list(range(1, len(attempts) + 1)), attempts
        for earlier in attempts[:-1]:
            assert earlier.interrupted, (workflow_id, attempts)
            assert not earlier.gaps, (workflow_id, attempts)
        cut += len(attempts) - 1
    assert landed == KILLS, f"only {landed} of {KILLS} kills landed mid-stream"
    assert cut >= landed, f"{landed} kills mid-stream, {cut} interrupted attempts"
    print(
        "\n"
        + json.dumps({"kills": kills, "mid_stream": landed, "interrupted_attempts": cut, **counts})
    )
