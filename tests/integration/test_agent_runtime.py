"""The agent runtime on the real broker: exactly-once hand-offs, idempotent effects,
retries, dead letters and circuit breaking, with agents as separate processes.

The budget agent handles ``RiskScored`` and reads the amount from the workflow's
``RequestSubmitted``; ``submit`` publishes the pair."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from sagalog.publisher import EventPublisher
from sagalog.topic_names import retry_topic_for
from waiting import poll

from .agent_harness import (
    REQUEST,
    SCORED,
    AgentLab,
    count_by,
    log_count,
    request,
    risk_scored,
    submit,
)

RESERVED = "procurement.v1.BudgetReserved"
RECORDED = "sagalog.v1.EffectRecorded"
FAILED = "sagalog.v1.StepFailed"
RELEASED = "procurement.v1.BudgetReleased"


def publisher(lab: AgentLab) -> EventPublisher:
    return EventPublisher(lab.project.settings, catalog=lab.project.catalog, source="tests/agents")


def test_same_event_delivered_five_times_one_effect_one_output(lab_factory: Any) -> None:
    lab: AgentLab = lab_factory()
    out = publisher(lab)
    out.publish(lab.topic, REQUEST, request(1), workflow_id="wf-dup")
    for _ in range(5):  # an at-least-once upstream delivering the same event (same id) 5 times
        out.publish(lab.topic, SCORED, risk_scored(1), workflow_id="wf-dup", event_id="evt-dup-1")
    lab.agent()
    records = lab.records(expect=lambda rs: len(lab.outputs(RESERVED, rs)) >= 1)
    time.sleep(3)  # give a wrongly duplicated output time to appear
    records = lab.records(expect=lambda rs: False, timeout=3)
    assert len(lab.outputs(RESERVED, records)) == 1
    assert len(lab.outputs(RECORDED, records)) == 1
    assert len(lab.ledger.book.effects) == 1
    assert sum(lab.ledger.book.calls.values()) == 1
    assert '"action": "duplicate"' in lab.logs()


def test_dependency_failing_three_times_then_succeeding(lab_factory: Any) -> None:
    """The only caller, failing with nobody else answered meanwhile: for all it can
    tell an outage, so it waits and spends no attempt (``circuit_breaker``)."""
    lab: AgentLab = lab_factory()
    lab.faults(fail_next=3)
    lab.agent(breaker_failure_threshold=10)
    submit(publisher(lab), lab.topic, 2, workflow_id="wf-flaky")
    records = lab.records(expect=lambda rs: len(lab.outputs(RESERVED, rs)) == 1)
    assert len(lab.outputs(RESERVED, records)) == 1
    assert lab.ledger.book.failures_injected == 3
    assert len(lab.ledger.book.effects) == 1
    logs = lab.logs()
    assert logs.count('"action": "defer"') == 3
    assert '"action": "retry"' not in logs and '"attempt": 2' not in logs


def test_always_failing_event_is_dead_lettered_without_blocking_its_partition(
    lab_factory: Any,
) -> None:
    lab: AgentLab = lab_factory(partitions=1)
    lab.faults(fail_when={"request_id": "PR-poison"})
    # The healthy events may all be answered before the poison's first call: then
    # nothing tells its failures from an outage's until the doubt runs out.
    lab.agent(breaker_failure_threshold=100, max_attempts=4, breaker_outage_doubt_s=2.0)
    out = publisher(lab)
    submit(
        out, lab.topic, 0, workflow_id="wf-poison", request_overrides={"request_id": "PR-poison"}
    )
    for n in range(3):
        submit(out, lab.topic, n, workflow_id=f"wf-{n}")

    records = lab.records(expect=lambda rs: len(lab.outputs(FAILED, rs)) == 1)
    reserved = lab.outputs(RESERVED, records)
    failed = lab.outputs(FAILED, records)
    assert sorted(r["headers"]["ce_workflowid"] for r in reserved) == ["wf-0", "wf-1", "wf-2"]
    # The later events finished before the poisoned one gave up: the partition kept flowing.
    assert max(r["offset"] for r in reserved) < failed[0]["offset"]
    assert failed[0]["headers"]["ce_workflowid"] == "wf-poison"

    dead = lab.records(lab.deadletter, expect=lambda rs: len(rs) == 1)
    headers = dead[0]["headers"]
    assert headers["sagalog_dlq_attempts"] == "4"
    assert "step 'reserve_budget' failed after 4 attempt(s)" in headers["sagalog_dlq_reason"]
    assert "RetryableError" in headers["sagalog_dlq_error_class"]
    assert "Traceback" in headers["sagalog_dlq_stack"]
    assert headers["ce_workflowid"] == "wf-poison"  # the original headers travel along
    # 4 counted attempts, after failures that met no answer to anyone (free) for up
    # to the 2 s of doubt.
    assert lab.ledger.book.failures_injected >= 4


def test_invalid_events_are_dead_lettered_at_once_and_the_partition_flows(
    lab_factory: Any,
) -> None:
    lab: AgentLab = lab_factory(partitions=1)
    lab.agent()
    out = publisher(lab)
    submit(out, lab.topic, 1, workflow_id="wf-zero", request_overrides={"amount": "0.00"})
    # Scored, but the workflow has no request: nothing to reserve, whatever the retries.
    out.publish(lab.topic, SCORED, risk_scored(3), workflow_id="wf-orphan")
    from confluent_kafka import Producer

    raw = Producer(lab.project.settings.producer_config())
    raw.produce(
        lab.topic,
        key=b"wf-garbage",
        value=b"\x00\x00\x00\x00\x01garbage",
        headers=[
            ("ce_id", b"g-1"),
            ("ce_type", SCORED.encode()),
            ("ce_source", b"tests/garbage"),
            ("ce_time", b"2026-11-29T09:00:00Z"),
            ("ce_workflowid", b"wf-garbage"),
        ],
    )
    raw.flush(10)
    submit(out, lab.topic, 2, workflow_id="wf-fine")

    dead = lab.records(lab.deadletter, expect=lambda rs: len(rs) == 3)
    by_workflow = {r["headers"]["ce_workflowid"]: r["headers"] for r in dead}
    assert sorted(by_workflow) == ["wf-garbage", "wf-orphan", "wf-zero"]
    assert "amount must be positive" in by_workflow["wf-zero"]["sagalog_dlq_reason"]
    orphan = by_workflow["wf-orphan"]["sagalog_dlq_reason"]
    assert "requires an earlier procurement.v1.RequestSubmitted" in orphan, orphan
    reason = by_workflow["wf-garbage"]["sagalog_dlq_reason"]
    assert "does not decode" in reason or "unknown schema id" in reason
    # non-retryable: no retries
    assert by_workflow["wf-zero"]["sagalog_dlq_attempts"] == "1"
    assert by_workflow["wf-orphan"]["sagalog_dlq_attempts"] == "1"
    records = lab.records(expect=lambda rs: len(lab.outputs(RESERVED, rs)) == 1)
    assert [r["headers"]["ce_workflowid"] for r in lab.outputs(RESERVED, records)] == ["wf-fine"]
    failed = count_by(lab.outputs(FAILED, records), "ce_workflowid")
    assert failed["wf-zero"] == 1 and failed["wf-orphan"] == 1


def wait_for_log(lab: AgentLab, text: str, timeout: float = 30.0) -> bool:
    """Whether the agent's log shows ``text`` within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while text not in lab.logs() and time.monotonic() < deadline:
        time.sleep(0.2)
    return text in lab.logs()


def test_circuit_breaker_opens_during_an_outage_and_closes_after(lab_factory: Any) -> None:
    lab: AgentLab = lab_factory()
    lab.faults(outage=True)
    lab.agent(breaker_failure_threshold=3, breaker_open_for_s=2, max_attempts=50)
    out = publisher(lab)
    for n in range(10):
        submit(out, lab.topic, n, workflow_id=f"wf-o{n}")
    assert wait_for_log(lab, '"transition": "closed->open"')
    calls_when_open = lab.ledger.book.failures_injected
    time.sleep(3)
    # While open, work waits: at most a probe per open period reaches the dependency.
    assert lab.ledger.book.failures_injected - calls_when_open <= 3
    lab.faults(outage=False)
    records = lab.records(expect=lambda rs: len(lab.outputs(RESERVED, rs)) == 10, timeout=90)
    assert len(lab.outputs(RESERVED, records)) == 10
    assert len(lab.ledger.book.effects) == 10
    logs = lab.logs()
    assert '"transition": "half_open->closed"' in logs
    assert '"action": "defer"' in logs
    assert '"action": "dead_letter"' not in logs


@pytest.mark.extended
def test_a_minute_long_outage_at_the_default_settings_dead_letters_nothing(
    lab_factory: Any,
) -> None:
    """Outages wait, they do not fail: failed half-open probes spend no attempt.

    With the defaults (5 attempts, a probe every 10 s) a 60 s outage is six failed
    probes; counted as attempts, they dead-lettered every waiting workflow. Over a
    minute by design: the defaults are what is tested, and they make it a minute.
    """
    lab: AgentLab = lab_factory()
    lab.faults(outage=True)
    lab.agent()
    out = publisher(lab)
    for n in range(50):
        submit(out, lab.topic, n, workflow_id=f"wf-long{n}")
    assert wait_for_log(lab, '"transition": "closed->open"')
    time.sleep(60)  # the outage: six probe periods
    probes_failed = lab.logs().count('"transition": "half_open->open"')
    lab.faults(outage=False)
    records = lab.records(expect=lambda rs: len(lab.outputs(RESERVED, rs)) == 50, timeout=120)
    assert len(lab.outputs(RESERVED, records)) == 50
    assert len(lab.ledger.book.effects) == 50  # the dependency's own books
    logs = lab.logs()
    # Several probes met the outage and failed (how many depends on the machine's
    # load: each waits for its deferred event to come back from the retry topic).
    assert probes_failed >= 2, f"only {probes_failed} failed probes in a 60 s outage"
    assert "its probe failed" in logs  # deferred, not retried
    assert '"action": "dead_letter"' not in logs
    assert not lab.outputs(FAILED, records)


def test_outputs_carry_causation_trace_and_lineage_of_the_input(lab_factory: Any) -> None:
    lab: AgentLab = lab_factory()
    lab.agent()
    traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    sent = submit(
        publisher(lab),
        lab.topic,
        5,
        workflow_id="wf-trace",
        traceparent=traceparent,
        flow_version=3,
        priority="HIGH",
    )
    records = lab.records(expect=lambda rs: len(lab.outputs(RESERVED, rs)) == 1)
    [reserved] = lab.outputs(RESERVED, records)
    headers = reserved["headers"]
    assert headers["ce_causationid"] == sent.headers.id
    assert headers["ce_flowversion"] == "3" and headers["ce_priority"] == "HIGH"
    assert headers["ce_source"] == f"sagalog/{lab.name}"
    # Same trace, new span: the handler's span continues the producer's trace.
    assert headers["traceparent"].split("-")[1] == traceparent.split("-")[1]
    assert headers["traceparent"] != traceparent
    log_lines = [json.loads(line) for line in lab.logs().splitlines() if line.startswith("{")]
    handled = [line for line in log_lines if line["action"] == "handled"]
    assert handled and set(handled[0]) >= {
        "workflow_id",
        "step",
        "event_type",
        "transition",
        "duration_ms",
        "outcome",
        "attempt",
    }
    assert handled[0]["step"] == "reserve_budget"


def test_urgent_workflows_move_ahead_when_the_agent_is_saturated(lab_factory: Any) -> None:
    lab: AgentLab = lab_factory(partitions=1)
    lab.faults(latency_ms=30)
    out = publisher(lab)
    for n in range(30):  # a backlog of background work...
        submit(
            out,
            lab.topic,
            n,
            workflow_id=f"wf-bg-{n}",
            request_overrides={"request_id": f"bg-{n}"},
            priority="LOW",
        )
    for n in range(5):  # ...then urgent requests, published last
        submit(
            out,
            lab.topic,
            n,
            workflow_id=f"wf-ur-{n}",
            request_overrides={"request_id": f"ur-{n}"},
            priority="URGENT",
        )
    lab.agent(max_in_flight=1)  # saturated: one handler at a time
    lab.records(expect=lambda rs: len(lab.outputs(RESERVED, rs)) == 35, timeout=90)
    applied = sorted(lab.ledger.book.effects.values(), key=lambda e: e["applied_at"])
    order = [e["body"]["request_id"] for e in applied]
    assert sorted(order[:5]) == [f"ur-{n}" for n in range(5)], order


def test_batches_with_nothing_to_produce_open_no_transaction_and_their_offsets_follow(
    lab_factory: Any,
) -> None:
    """The budget agent handles one type of the several on its topic. A batch of
    records it only folds opens no transaction (four round trips and a marker on the
    broker each); their offsets ride with the next transaction or, when none comes,
    are committed on their own after ``offsets_commit_s``."""
    lab: AgentLab = lab_factory(partitions=1)
    agent = lab.agent(offsets_commit_s=0.5)
    poll(lambda: log_count(agent, '"outcome": "assigned"') > 0, what="assigned", timeout=30)
    out = publisher(lab)
    for n in range(12):  # one at a time, so each arrives in a batch of its own
        out.publish(lab.topic, REQUEST, request(n), workflow_id=f"wf-fold-{n}")
        time.sleep(0.15)
    end = 12
    poll(lambda: committed(lab) == end, what=f"offset {end} committed", timeout=30)

    submit(out, lab.topic, 99, workflow_id="wf-handled")
    records = lab.records(expect=lambda rs: len(lab.outputs(RESERVED, rs)) == 1)
    assert len(lab.outputs(RESERVED, records)) == 1
    poll(lambda: committed(lab) == end + 2, what=f"offset {end + 2} committed", timeout=30)

    assert agent.stop() == 0
    counts = dict(re.findall(r"(\w+) (\d+)", lab.logs().split("stopped;", 1)[1].split('"')[0]))
    # twelve requests, the handled one's request, and the agent's own two outputs read back
    assert int(counts["ignored"]) == 15, counts
    assert int(counts["handled"]) == 1
    # One per handled batch plus the offsets-only commits (one per half second at most
    # while records waited); a transaction per batch would be fourteen or more.
    assert 1 <= int(counts["transactions"]) <= 6, counts


def test_an_agent_pacing_its_fetches_hands_every_workflow_on_once(lab_factory: Any) -> None:
    """With ``queued_fetch_pause_ms`` a record the agent has not taken yet stops its
    consumer's fetching for a while: what is committed meanwhile must come in a later
    fetch, all of it, and none of it twice."""
    lab: AgentLab = lab_factory()
    lab.agent(queued_fetch_pause_ms=20)
    out = publisher(lab)
    workflows = [f"wf-paced-{n}" for n in range(40)]
    for n, workflow_id in enumerate(workflows):
        submit(out, lab.topic, n, workflow_id=workflow_id)
    records = lab.records(expect=lambda rs: len(lab.outputs(RESERVED, rs)) >= len(workflows))
    reserved = lab.outputs(RESERVED, records)
    assert sorted(r["key"].decode() for r in reserved) == sorted(workflows)


def committed(lab: AgentLab) -> int:
    """The budget agent's group's committed offset of partition 0 (-1: none yet)."""
    reader = Consumer(
        lab.project.settings.kafka_config(
            **{"group.id": f"sagalog-agent-{lab.name}", "client.id": f"probe-{uuid.uuid4()}"}
        )
    )
    try:
        [tp] = reader.committed([TopicPartition(lab.topic, 0)], timeout=10)
        return tp.offset
    finally:
        reader.close()


def test_a_replacement_on_a_new_disk_rebuilds_what_its_handlers_read(lab_factory: Any) -> None:
    """The first instance reserves for 30 workflows and stops. A replacement with an
    empty data dir and the smallest read-ahead rebuilds the projection from the log
    before it handles anything, so each compensation finds the reservation the first
    instance made (its own output, kept by ``workflow_context``) and releases it, not
    ``none``."""
    lab: AgentLab = lab_factory(partitions=3)
    first = lab.agent(instance="a")
    out = publisher(lab)
    workflows = [f"wf-rebuild-{n}" for n in range(30)]
    for n, workflow_id in enumerate(workflows):
        submit(out, lab.topic, n, workflow_id=workflow_id)
    records = lab.records(expect=lambda rs: len(lab.outputs(RESERVED, rs)) >= 30)
    assert first.stop() == 0
    codec = out.codec
    reserved = {
        r["headers"]["ce_workflowid"]: codec.decode(r["value"]).payload["reservation_id"]
        for r in lab.outputs(RESERVED, records)
    }
    assert set(reserved) == set(workflows)

    replacement = lab.agent(
        instance="b", data_dir=str(lab.tmp / "data-new-disk"), rebuild_read_ahead_kb=64
    )
    for workflow_id in workflows:
        out.publish(
            lab.topic,
            "sagalog.v1.CompensationRequested",
            {"step": "reserve_budget", "compensation": "release_budget", "reason": "test"},
            workflow_id=workflow_id,
        )
    records = lab.records(expect=lambda rs: len(lab.outputs(RELEASED, rs)) >= 30)
    released = {
        r["headers"]["ce_workflowid"]: codec.decode(r["value"]).payload["reservation_id"]
        for r in lab.outputs(RELEASED, records)
    }
    assert replacement.stop() == 0
    assert released == reserved
    folded = [int(n) for n in re.findall(r"folded (\d+) event", replacement.log.read_text())]
    # each workflow's request and reservation at least, read back before the first release
    assert sum(folded) >= 60, folded


def test_a_replacement_rebuilds_the_context_before_it_handles_a_retry_already_due(
    lab_factory: Any,
) -> None:
    """The first instance defers a scored request to the retry topic (its ledger is
    down) and stops. A replacement on a new disk rebuilds the input partition, not
    the retry partition (it holds copies of input events and flows at once), and the
    due retry finds the request folded back from the log: the budget is reserved, not
    dead-lettered as "no RequestSubmitted". (The order inside one poll, which the
    chaos herd's second instance got wrong, is pinned by
    test_agents_worker::test_records_polled_with_an_assignment_wait_for_the_rebuild.)"""
    lab: AgentLab = lab_factory(partitions=1)
    lab.faults(outage=True)
    first = lab.agent(instance="a")
    submit(publisher(lab), lab.topic, 1, workflow_id="wf-due")
    assert wait_for_log(lab, '"action": "defer"'), lab.logs()[-3000:]
    assert first.stop() == 0
    lab.faults(outage=False)

    replacement = lab.agent(instance="b", data_dir=str(lab.tmp / "data-new-disk"))
    records = lab.records(expect=lambda rs: len(lab.outputs(RESERVED, rs)) >= 1)
    assert replacement.stop() == 0
    assert [r["headers"]["ce_workflowid"] for r in lab.outputs(RESERVED, records)] == ["wf-due"]
    assert lab.outputs(FAILED, records) == []
    assert lab.records(lab.deadletter, expect=lambda rs: False, timeout=2) == []
    log = replacement.log.read_text()
    assert re.search(r"folded [1-9]\d* event\(s\)", log), log[-3000:]


def test_input_and_retry_partitions_held_open_get_a_closing_record_then_a_report(
    lab_factory: Any,
) -> None:
    """An agent writes to a partition of its input only when it handles that partition's
    events, and to its retry topic only when it retries, so a transaction of its own
    left open there (a commit marker lost in a broker failure) would hold it for good.
    Past ``open_transaction_after_s`` it writes an ``OpenTransactionClosed`` to each
    held partition in a transaction of its own id (``sagalog.open_transactions``);
    held by another producer, as here, the partition stays held and the agent says so
    once. When the holder ends it, the work behind it is handled, and the closing
    records read back, from the input and the retry topic, are skipped."""
    lab: AgentLab = lab_factory()
    agent = lab.agent(open_transaction_after_s=2)
    out = publisher(lab)
    submit(out, lab.topic, 1, workflow_id="wf-before")
    lab.records(expect=lambda rs: len(lab.outputs(RESERVED, rs)) == 1)
    retry = retry_topic_for(lab.name)  # created by the agent at its start
    admin = AdminClient(lab.project.settings.kafka_config())
    held = {
        topic: sorted(admin.list_topics(topic, timeout=10).topics[topic].partitions)
        for topic in (lab.topic, retry)
    }
    holder = Producer(
        lab.project.settings.producer_config(
            **{"transactional.id": f"holder-{lab.name}", "transaction.timeout.ms": 300_000}
        )
    )
    holder.init_transactions(30)
    holder.begin_transaction()
    for topic, partitions in held.items():
        for partition in partitions:
            holder.produce(topic, key=b"held", value=None, partition=partition)
    holder.flush(30)
    try:
        submit(out, lab.topic, 2, workflow_id="wf-behind")  # behind the open range
        every = sum(len(partitions) for partitions in held.values())
        poll(
            lambda: log_count(agent, "by another producer's transaction") >= every,
            what=f"{every} partitions reported held by another producer's transaction",
            timeout=90,
        )
        reported = lab.logs()
        for topic, partitions in held.items():
            for partition in partitions:
                assert f"{topic}/{partition} is held open" in reported, (topic, partition)
        assert log_count(agent, "closing the transaction") >= 1
        assert len(lab.outputs(RESERVED, lab.records(expect=lambda rs: False, timeout=1))) == 1
    finally:
        holder.abort_transaction(30)
    records = lab.records(expect=lambda rs: len(lab.outputs(RESERVED, rs)) == 2)
    assert len(lab.outputs(RESERVED, records)) == 2
    closed = "sagalog.v1.OpenTransactionClosed"

    def each_closed(partitions: list[int]) -> Callable[[list[dict[str, Any]]], bool]:
        return lambda rs: {r["partition"] for r in lab.outputs(closed, rs)} >= set(partitions)

    for topic, partitions in held.items():
        closers = lab.outputs(closed, lab.records(topic, expect=each_closed(partitions)))
        assert sorted(r["partition"] for r in closers) == partitions, topic
        assert {r["key"] for r in closers} == {
            f"sagalog.{lab.name}.p{p}".encode() for p in partitions
        }
        assert all(r["value"] is None for r in closers)
    assert '"action": "dead_letter"' not in lab.logs()  # read back: skipped, not refused
    assert agent.alive
