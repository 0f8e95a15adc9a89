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

from dataclasses import dataclass

from sagalog import dead_letters
from sagalog.dead_letters import H_ORIGIN, RawHeaders
from sagalog.errors import EventValidationError
from sagalog.position import RecordPosition

H_ATTEMPT = "sagalog_attempt"
H_NOT_BEFORE = "sagalog_not_before_ms"
H_LAST_ERROR = "sagalog_last_error"

_OWN = {H_ATTEMPT, H_NOT_BEFORE, H_ORIGIN, H_LAST_ERROR}


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
    """The original headers, without this runtime's retry marks, plus why the record
    could not be processed (``sagalog.dead_letters``: the tracker writes the same)."""
    return dead_letters.dead_letter_headers(
        original,
        agent=agent,
        reason=reason,
        error_class=error_class,
        stack=stack,
        attempts=attempts,
        origin=origin,
        now_ms=now_ms,
        dropped=_OWN,
    )


def _text(value: bytes | str | None) -> str | None:
    if value is None:
        return None
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value
