"""A dead-lettered record's headers are one contract, whichever runtime wrote them."""

from __future__ import annotations

from sagalog.agents.routing import dead_letter_headers as agent_dead_letter_headers
from sagalog.agents.routing import retry_headers
from sagalog.dead_letters import (
    H_DLQ_AGENT,
    H_DLQ_TIME,
    H_ORIGIN,
    H_REPLAY_OF,
    MARKS,
    dead_letter_headers,
    read_dead_letter,
    replay_headers,
)
from sagalog.position import RecordPosition

ORIGIN = RecordPosition("procurement.events", 2, 41)


def test_the_original_headers_come_first_and_the_reason_after() -> None:
    headers = dead_letter_headers(
        [("ce_id", b"e1")],
        agent="saga-tracker",
        reason="x" * 5000,
        error_class="SchemaError",
        origin=ORIGIN,
        now_ms=1_700_000_000_000,
    )
    named = dict(headers)
    assert headers[0] == ("ce_id", b"e1")
    assert named[H_ORIGIN] == b"procurement.events/2/41"
    assert RecordPosition.parse(named[H_ORIGIN].decode()) == ORIGIN  # read back as written
    assert named[H_DLQ_AGENT] == b"saga-tracker" and named[H_DLQ_TIME] == b"1700000000000"
    assert len(named["sagalog_dlq_reason"]) == 4000
    assert named["sagalog_dlq_attempts"] == b"1"


def test_an_agent_writes_the_same_names_without_its_retry_marks() -> None:
    retried = retry_headers(
        [("ce_id", b"e1")], attempt=3, not_before_ms=5, origin=ORIGIN, error="boom"
    )
    by_agent = agent_dead_letter_headers(
        retried,
        agent="budget-agent",
        reason="failed",
        error_class="RetryableError",
        stack="Traceback",
        attempts=3,
        origin=ORIGIN,
        now_ms=7,
    )
    by_tracker = dead_letter_headers(
        [("ce_id", b"e1")],
        agent="saga-tracker",
        reason="failed",
        error_class="RetryableError",
        origin=ORIGIN,
        now_ms=7,
    )
    assert [name for name, _ in by_agent] == [name for name, _ in by_tracker]
    assert "sagalog_attempt" not in dict(by_agent)


ORIGINAL = [
    ("ce_id", b"e1"),
    ("ce_type", b"sagalog.v1.CompensationRequested"),
    ("ce_source", b"sagalog/saga-tracker"),
    ("ce_workflowid", b"wf-1"),
    ("traceparent", b"00-aa-bb-01"),
    ("sagalog_hash", b"h1"),
]
DEAD = RecordPosition("sagalog.deadletter", 0, 7)


def _dead_lettered() -> list[tuple[str, bytes | str | None]]:
    return dead_letter_headers(
        ORIGINAL,
        agent="budget-agent",
        reason="release failed",
        error_class="sagalog.agents.failures.NonRetryableError",
        origin=ORIGIN,
        now_ms=1_700_000_000_000,
        attempts=3,
        stack="Traceback ...",
    )


def test_a_dead_letter_reads_back_what_its_headers_say() -> None:
    letter = read_dead_letter(DEAD, _dead_lettered(), key=b"wf-1")
    assert letter is not None
    assert (letter.position, letter.origin, letter.agent) == (DEAD, ORIGIN, "budget-agent")
    assert (letter.reason, letter.attempts, letter.stack) == ("release failed", 3, "Traceback ...")
    assert letter.dead_lettered_at_ms == 1_700_000_000_000
    assert (letter.event_type, letter.event_id, letter.workflow_id) == (
        "sagalog.v1.CompensationRequested",
        "e1",
        "wf-1",
    )


def test_a_record_without_the_marks_or_a_readable_origin_is_no_dead_letter() -> None:
    assert read_dead_letter(DEAD, ORIGINAL) is None
    edited = [(n, b"nowhere" if n == H_ORIGIN else v) for n, v in _dead_lettered()]
    assert read_dead_letter(DEAD, edited) is None


def test_without_a_workflow_header_the_key_names_the_workflow() -> None:
    headers = [(n, v) for n, v in _dead_lettered() if n != "ce_workflowid"]
    letter = read_dead_letter(DEAD, headers, key=b"wf-9")
    assert letter is not None and letter.workflow_id == "wf-9"
    assert read_dead_letter(DEAD, headers, key=None).workflow_id is None  # type: ignore[union-attr]


def test_a_replay_is_the_original_record_with_a_new_id_and_the_dead_letter_named() -> None:
    replayed = replay_headers(_dead_lettered(), event_id="e2", replay_of=DEAD)
    named = dict(replayed)
    assert named["ce_id"] == b"e2" and named[H_REPLAY_OF] == b"sagalog.deadletter/0/7"
    assert not MARKS & named.keys()  # why it was dead-lettered is not the event's
    kept = {n: v for n, v in ORIGINAL if n != "ce_id"}
    assert {n: v for n, v in replayed if n in kept} == kept  # type, source, trace as they were
    assert [n for n, _ in replayed].count("ce_id") == 1


def test_a_replay_of_a_replay_names_only_the_last_dead_letter() -> None:
    first = replay_headers(_dead_lettered(), event_id="e2", replay_of=DEAD)
    again = dead_letter_headers(
        first, agent="a", reason="r", error_class="E", origin=ORIGIN, now_ms=1
    )
    second = replay_headers(again, event_id="e3", replay_of=DEAD._replace(offset=9))
    assert [v for n, v in second if n == H_REPLAY_OF] == [b"sagalog.deadletter/0/9"]
