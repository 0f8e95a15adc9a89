"""Where a record goes when its handler does not succeed: the retry topic or the
dead-letter topic, with everything needed to act on it in the headers.

Retries go through a retry topic instead of pausing the input partition, so one slow
or failing workflow never holds up the others in its partition. The retry topic is
keyed by workflow id like the input, so a workflow's retried and parked events stay
in order, and its records say when they are due (``sagalog_not_before``); the worker
pauses a retry partition until its head is due instead of spinning. Dead-lettered
records keep the original key, value and headers byte for byte, plus the reason, the
error class, the stack, the attempt count and where they came from, so an operator
can read them with ``sagalog tail`` and replay them by hand.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sagalog.agents.position import RecordPosition
from sagalog.errors import EventValidationError

H_ATTEMPT = "sagalog_attempt"
H_NOT_BEFORE = "sagalog_not_before_ms"
H_ORIGIN = "sagalog_origin"
H_LAST_ERROR = "sagalog_last_error"
H_DLQ_REASON = "sagalog_dlq_reason"
H_DLQ_ERROR_CLASS = "sagalog_dlq_error_class"
H_DLQ_STACK = "sagalog_dlq_stack"
H_DLQ_ATTEMPTS = "sagalog_dlq_attempts"
H_DLQ_AGENT = "sagalog_dlq_agent"
H_DLQ_TIME = "sagalog_dlq_time_ms"

_OWN = {H_ATTEMPT, H_NOT_BEFORE, H_ORIGIN, H_LAST_ERROR}
RawHeaders = Sequence[tuple[str, bytes | str | None]]


@dataclass(frozen=True)
class RetryMark:
    """The retry state a record carries."""

    attempt: int  # attempts already made; 0 for a record parked behind its workflow
    not_before_ms: int
    origin: RecordPosition | None  # the original input record; None when unreadable


def read_mark(headers: RawHeaders | None) -> RetryMark | None:
    """The retry state in ``headers``, or None for a record that never was retried.

    An origin that is missing or not a position reads as None rather than raising:
    the record is still a retry, and the triage dead-letters it, saying why.
    """
    values = {name: value for name, value in headers or () if name in _OWN}
    if H_ATTEMPT not in values:
        return None
    origin: RecordPosition | None = None
    text = _text(values.get(H_ORIGIN))
    if text:
        try:
            origin = RecordPosition.parse(text)
        except EventValidationError:
            origin = None
    return RetryMark(
        attempt=int(_text(values[H_ATTEMPT]) or 0),
        not_before_ms=int(_text(values.get(H_NOT_BEFORE)) or 0),
        origin=origin,
    )


def retry_headers(
    original: RawHeaders | None,
    *,
    attempt: int,
    not_before_ms: int,
    origin: RecordPosition,
    error: str,
) -> list[tuple[str, bytes | str | None]]:
    """The original headers (minus earlier retry marks) plus this retry's mark."""
    kept = [(name, value) for name, value in original or () if name not in _OWN]
    return [
        *kept,
        (H_ATTEMPT, str(attempt).encode()),
        (H_NOT_BEFORE, str(not_before_ms).encode()),
        (H_ORIGIN, str(origin).encode()),
        (H_LAST_ERROR, error[:1000].encode()),
    ]


def dead_letter_headers(
    original: RawHeaders | None,
    *,
    agent: str,
    reason: str,
    error_class: str,
    stack: str,
    attempts: int,
    origin: RecordPosition,
    now_ms: int,
) -> list[tuple[str, bytes | str | None]]:
    """The original headers plus why the record could not be processed."""
    kept = [(name, value) for name, value in original or () if name not in _OWN]
    return [
        *kept,
        (H_DLQ_REASON, reason[:4000].encode()),
        (H_DLQ_ERROR_CLASS, error_class.encode()),
        (H_DLQ_STACK, stack[-8000:].encode()),
        (H_DLQ_ATTEMPTS, str(attempts).encode()),
        (H_DLQ_AGENT, agent.encode()),
        (H_ORIGIN, str(origin).encode()),
        (H_DLQ_TIME, str(now_ms).encode()),
    ]


def _text(value: bytes | str | None) -> str | None:
    if value is None:
        return None
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value
