"""Pure rules of the runtime: failure classes, retry/dead-letter headers, idempotency keys."""

from __future__ import annotations

import datetime as dt

import pytest

from sagalog.agents.context import idempotency_key
from sagalog.agents.failures import NonRetryableError, RetryableError, StepTimeout, is_retryable
from sagalog.agents.lineage import decision_lineage, prompt_hash
from sagalog.agents.routing import dead_letter_headers, read_mark, retry_headers
from sagalog.errors import EventValidationError
from sagalog.position import RecordPosition
from sagalog.topic_names import retry_topic_for


def test_failure_classes() -> None:
    assert is_retryable(TimeoutError()) and is_retryable(TimeoutError())
    assert is_retryable(ConnectionResetError()) and is_retryable(StepTimeout("slow"))
    assert is_retryable(RuntimeError("unknown: retried, bounded by the policy"))
    assert not is_retryable(EventValidationError("bad field"))
    assert not is_retryable(ValueError("bad value"))
    assert not is_retryable(NonRetryableError("rule says no"))
    assert is_retryable(RetryableError("try again"))
    assert not is_retryable(RetryableError("explicit wins", retryable=False))


def test_retry_marks_replace_earlier_marks_and_keep_original_headers() -> None:
    original = [("ce_id", b"e1"), ("ce_type", b"t")]
    first = retry_headers(
        original, attempt=1, not_before_ms=1000, origin=RecordPosition("t", 0, 5), error="boom"
    )
    second = retry_headers(
        first, attempt=2, not_before_ms=3000, origin=RecordPosition("t", 0, 5), error="again"
    )
    mark = read_mark(second)
    assert mark is not None and (mark.attempt, mark.not_before_ms, mark.origin) == (
        2,
        3000,
        RecordPosition("t", 0, 5),
    )
    assert [name for name, _ in second].count("sagalog_attempt") == 1
    assert ("ce_id", b"e1") in second
    assert read_mark(original) is None
    assert retry_topic_for("budget-agent") == "sagalog.agent.budget-agent.retry"


def test_dead_letter_headers_say_why() -> None:
    headers = dict(
        dead_letter_headers(
            [("ce_id", b"e1"), ("sagalog_attempt", b"3")],
            agent="budget-agent",
            reason="no",
            error_class="x.Error",
            stack="Traceback ...",
            attempts=3,
            origin=RecordPosition("t", 1, 9),
            now_ms=5,
        )
    )
    assert headers["sagalog_dlq_reason"] == b"no" and headers["sagalog_dlq_attempts"] == b"3"
    assert headers["sagalog_origin"] == b"t/1/9" and headers["ce_id"] == b"e1"
    assert "sagalog_attempt" not in headers


def test_idempotency_keys_are_stable_and_distinct() -> None:
    key = idempotency_key(agent="a", event_id="e1", effect="ledger.reserve", occurrence=0)
    assert key == idempotency_key(agent="a", event_id="e1", effect="ledger.reserve", occurrence=0)
    assert key != idempotency_key(agent="a", event_id="e1", effect="ledger.reserve", occurrence=1)
    assert key != idempotency_key(agent="a", event_id="e2", effect="ledger.reserve", occurrence=0)
    assert key != idempotency_key(agent="b", event_id="e1", effect="ledger.reserve", occurrence=0)


def test_decision_lineage() -> None:
    at = dt.datetime(2026, 11, 29, tzinfo=dt.UTC)
    lineage = decision_lineage(
        model_id="gpt-x", prompt="score this", input_refs=["e1"], decided_at=at
    )
    assert lineage.prompt_hash == prompt_hash("score this")
    assert lineage.prompt_hash.startswith("sha256:") and len(lineage.prompt_hash) == 71
    assert (lineage.parameters, lineage.template_hash, lineage.input_hashes) == ({}, None, {})


def test_decision_lineage_names_parameters_template_and_each_input_by_hash() -> None:
    at = dt.datetime(2026, 12, 6, tzinfo=dt.UTC)
    lineage = decision_lineage(
        model_id="gpt-x",
        prompt="score this",
        input_refs=["e1", "POL-001"],
        decided_at=at,
        parameters={"temperature": 0, "response_format": {"type": "json_object"}},
        template="You are a risk analyst.",
        inputs={"e1": '{"amount":"7200.00"}', "POL-001": b"Policy text"},
    )

    assert lineage.parameters == {
        "temperature": "0",
        "response_format": '{"type":"json_object"}',
    }, "JSON text: the same prompt at another temperature is another decision"
    assert lineage.template_hash == prompt_hash("You are a risk analyst.")
    assert lineage.input_hashes == {
        "e1": prompt_hash('{"amount":"7200.00"}'),
        "POL-001": prompt_hash("Policy text"),
    }


def test_a_retry_mark_with_an_unreadable_origin_reads_as_none() -> None:
    for origin in (b"", b"t/5", b"t/x/5", b"/0/5", b"t/0/-1"):
        mark = read_mark([("sagalog_attempt", b"1"), ("sagalog_origin", origin)])
        assert mark is not None and mark.origin is None, origin
    mark = read_mark([("sagalog_attempt", b"1")])
    assert mark is not None and (mark.attempt, mark.origin) == (1, None)


def test_record_positions_read_back_what_they_write() -> None:
    position = RecordPosition("procurement.events", 3, 1234)
    assert str(position) == "procurement.events/3/1234"
    assert RecordPosition.parse(str(position)) == position
    assert position == ("procurement.events", 3, 1234)  # as the state store keeps it
    for text in ("", "t", "t/0", "t/a/1", "t/0/b", "/0/1", "t/-1/0"):
        with pytest.raises(EventValidationError):
            RecordPosition.parse(text)
