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
from sagalog.streams.record import StreamKind, StreamRecord, summarize
from sagalog.topic_names import stream_topic_for
from standins.model import serve
from waiting import poll

from .agent_harness import log_count, read_all
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


class StreamTail:
    """The lab's stream topic read from its start, open through the run: the kill loop
    asks it whether the running instance has a stream out, and the checks read every
    record from it at the end."""

    def __init__(self, lab: DraftingLab) -> None:
        self.topic = stream_topic_for(lab.topic)
        self._consumer = Consumer(
            lab.project.settings.kafka_config(**{"group.id": f"t-{secrets.token_hex(4)}"})
        )
        topics = self._consumer.list_topics(self.topic, timeout=10).topics
        self._partitions = sorted(topics[self.topic].partitions)
        self._consumer.assign(
            [TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in self._partitions]
        )
        self.records: list[StreamRecord] = []
        self._next: dict[int, int] = {}
        self._over: set[tuple[str, str, int]] = set()
        self._latest: dict[tuple[str, str, int], int] = {}  # attempt -> its newest delta's at_ms

    def read(self) -> None:
        for message in self._consumer.consume(500, 0.05):
            if message.error() is not None:
                continue
            record = StreamRecord.decode(message.value())
            self.records.append(record)
            self._next[message.partition()] = message.offset() + 1
            attempt = (record.workflow_id, record.call, record.attempt)
            if record.kind is StreamKind.DELTA:
                self._latest[attempt] = max(self._latest.get(attempt, 0), record.at_ms)
            else:  # its end, or the retry's mark that it was cut
                self._over.add(attempt)

    def running_since(self, at_ms: int) -> tuple[str, str, int] | None:
        """An attempt that wrote a delta at ``at_ms`` or later (so, of the instance
        started then), has not ended, and wrote a delta within the last second: a
        stream still running (the model sends a chunk every 80 ms), not one whose end
        the reader has yet to see."""
        self.read()
        now_ms = time.time() * 1000
        for attempt, latest in self._latest.items():
            if attempt not in self._over and latest >= at_ms and now_ms - latest < 1000:
                return attempt
        return None

    def drain(self) -> dict[str, list[StreamRecord]]:
        """Every record up to the topic's end now, by workflow, in offset order (a
        workflow's stream is in one partition)."""
        ends = {
            p: self._consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=10)[1]
            for p in self._partitions
        }

        def at_end() -> bool:
            self.read()
            return all(self._next.get(p, 0) >= end for p, end in ends.items() if end > 0)

        poll(at_end, what=f"{self.topic} read to its end", timeout=60, step=0.1)
        found: dict[str, list[StreamRecord]] = defaultdict(list)
        for record in self.records:
            found[record.workflow_id].append(record)
        return found

    def close(self) -> None:
        self._consumer.close()


KILLS = 10


@pytest.mark.extended
@pytest.mark.timeout(900)  # 163-458 s at load averages of 20 to 45 on 2 cores
def test_an_agent_sigkilled_mid_stream_leaves_interrupted_marks_and_one_answer(
    project: Project, tmp_path: Path
) -> None:
    """Three to eight minutes on a loaded machine, in ``make test-all``: ten kills,
    each once the instance running then has a stream out (a delta of its own, under
    1 s old, and the model still sending), so each waits for an agent process to start
    again, rejoin its group and open its first stream, which a loaded machine
    stretches from a few seconds to forty; then the four filings are drafted. The
    model pauses 80 ms between chunks, so a stream lasts about five seconds and a kill
    lands inside it. Fewer kills would not show what the issue asks."""
    model = serve(name="model")
    model.faults.chunk_delay_ms = 80
    lab = DraftingLab(project, model, tmp_path, policy="wait").setup()
    tail: StreamTail | None = None
    try:
        opened = lab.open_filings(4)
        # A budget that never waits: a kill's repeats are claims beside the cut calls'.
        started_ms = int(time.time() * 1000)
        agent = lab.agent("a", stream="true", max_tokens=60, tokens_per_minute=1_000_000)
        poll(lambda: log_count(agent, ASSIGNED), what="the agent assigned", timeout=60)
        tail = StreamTail(lab)  # the agent made the stream topic as it started
        targets: list[tuple[str, str, int]] = []  # (workflow, call, attempt) each kill cut
        kill_phase = time.monotonic()
        assert tail is not None

        def stream_out() -> tuple[str, str, int] | None:
            """A stream of the instance started last, still being written."""
            assert agent.alive, agent.log.read_text()[-2000:]
            attempt = tail.running_since(started_ms)
            return attempt if attempt is not None and model.book.in_flight > 0 else None

        while len(targets) < KILLS:
            running = poll(
                stream_out,
                what=f"a stream out before kill {len(targets) + 1}",
                timeout=120,
                step=0.05,
            )
            agent.signal(signal.SIGKILL)
            agent.process.wait(10)  # type: ignore[union-attr]
            assert running is not None
            targets.append(running)
            started_ms = int(time.time() * 1000)
            agent.start()
        kill_phase = time.monotonic() - kill_phase
        drafted: set[str] = set()

        def all_drafted() -> bool:
            assert agent.alive, agent.log.read_text()[-2000:]
            drafted.update(
                r["headers"]["ce_workflowid"] for r in read_all(lab) if r["type"] == DRAFTED
            )
            return drafted >= set(opened)

        poll(all_drafted, what=f"all {len(opened)} filings drafted", timeout=300, step=1)
        lab.stop()
        records = read_all(lab)
        served = lab.served()
        claims = logged_claims(lab, records)
        streams = tail.drain()
    finally:
        if tail is not None:
            tail.close()
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
            assert earlier.interrupted and not earlier.ended, (workflow_id, attempts)
            assert not earlier.gaps, (workflow_id, attempts)
        cut += len(attempts) - 1
    # Each kill landed inside the stream it waited for: that attempt was cut, not ended.
    for workflow_id, call, attempt in targets:
        [seen] = [
            a for a in summarize(streams[workflow_id]) if (a.call, a.attempt) == (call, attempt)
        ]
        assert seen.interrupted and not seen.ended and seen.deltas > 0, (workflow_id, seen)
    assert cut >= KILLS, f"{KILLS} kills mid-stream, {cut} interrupted attempts"
    print(
        "\n"
        + json.dumps(
            {
                "kills": len(targets),
                "kill_phase_s": round(kill_phase, 1),
                "interrupted_attempts": cut,
                "most_attempts": max(len(summarize(streams[w])) for w in opened),
                **counts,
            }
        )
    )
