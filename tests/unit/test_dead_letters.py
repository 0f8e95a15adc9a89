"""A dead-lettered record's headers are one contract, whichever runtime wrote them."""

from __future__ import annotations

from sagalog.agents.routing import dead_letter_headers as agent_dead_letter_headers
from sagalog.agents.routing import retry_headers
from sagalog.dead_letters import H_DLQ_AGENT, H_DLQ_TIME, H_ORIGIN, dead_letter_headers
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
