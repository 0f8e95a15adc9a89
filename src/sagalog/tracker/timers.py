"""Durable timers as the keys of an ordered table, so a tick reads only the timers that are due.

Timeouts, deadlines and gate escalations are state, never in-process sleeps: they
survive a restart because they live in a RocksDB table (with its changelog). A
tracker holding 1,000,000 waiting workflows holds a few million pending timers, and
a tick must not scan them. So the key *starts with the due time*, zero-padded to a
fixed width: byte order is time order, and the due timers are exactly the keys below
``due_range(now_ms)[1]``. A tick seeks to the start of the table and stops at the
first key that is not due; its work is the number of due timers, whatever the
number pending.

Key layout::

    {due_ms:015d}|{workflow_id}|{kind}|{ref}     e.g.
    000000086400000|wf-42|gate_escalation|manager_approval#1#1

Fifteen digits cover every millisecond up to the year 33658. ``kind`` and ``ref``
never contain ``|`` (refs are built from flow names, which are snake_case, and
integers), so a key is decoded from the right and a workflow id may contain anything.
The key is ASCII up to the workflow id; encoded as UTF-8 it sorts the same as text.

A timer firing is one more input to ``decide``: the workflow record lists the
timers it still expects, so a timer it no longer expects (the step completed, the
timer was cancelled, or it fired already and the delete was lost in a crash) is a
no-op. Firing twice is harmless: exactly once in effect.

**One wake-up key per workflow.** The table does not hold every timer: the record lists
them, and the table holds one *wake-up* key per workflow with timers, due at or before
the earliest of them (``TimerKind.WAKE``, ``arm``). A tick that reaches it fires the
record's due timers and arms the next wake-up. A workflow that moves from step to step
cancels one step's timeout and schedules the next one's, ten minutes later than the
first: its wake-up stays where it is, so the step costs no table write and no changelog
record. A key per timer would put one key and delete another at every step: two
changelog records per step, a large share of a saga's records
(docs/design/tuning-measurements.md). The price is an early wake-up, when the earliest
timer was cancelled: it fires nothing, reads one record and arms the wake-up again, once
per such timer and never per event. Keys of single timers, written by releases before
this one, still fire as they did.
"""

from __future__ import annotations

import enum

from pydantic import BaseModel, ConfigDict, Field

DUE_DIGITS = 15
MAX_DUE_MS = 10**DUE_DIGITS - 1
SEPARATOR = "|"


class TimerKind(enum.StrEnum):
    """What a timer bounds; part of its key and its ref format.

    ``ref`` names what the timer belongs to, so a stale timer is recognizable:
    a step name (step timeout), a segment name (segment timeout), ``workflow``
    (workflow deadline), ``<gate>#<attempt>#<level>`` (escalation to that level),
    ``<gate>#<attempt>`` (gate deadline), ``<step>#<attempt>`` (compensation timeout),
    a wait's name (wait timeout).
    """

    STEP_TIMEOUT = "step_timeout"
    SEGMENT_TIMEOUT = "segment_timeout"
    WORKFLOW_DEADLINE = "workflow_deadline"
    GATE_ESCALATION = "gate_escalation"
    GATE_DEADLINE = "gate_deadline"
    COMPENSATION_TIMEOUT = "compensation_timeout"
    WAIT_TIMEOUT = "wait_timeout"
    WAKE = "wake"
    """Not a timer of the rules: the workflow's one key in the table (``arm``)."""


class Timer(BaseModel):
    """One pending timer of a workflow: kept in its record and, by key, in the timer table."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    workflow_id: str = Field(min_length=1)
    kind: TimerKind
    ref: str = Field(min_length=1)
    due_ms: int = Field(ge=0, le=MAX_DUE_MS)

    @property
    def key(self) -> str:
        """The table key; see the module docstring for the layout."""
        return timer_key(
            due_ms=self.due_ms, workflow_id=self.workflow_id, kind=self.kind, ref=self.ref
        )


def timer_key(*, due_ms: int, workflow_id: str, kind: TimerKind | str, ref: str) -> str:
    """The table key of a timer, built from its parts.

    Raises:
        ValueError: when the due time does not fit the fixed width (negative, or past
            the year 33658), or ``kind``/``ref`` contain the separator and would make
            the key ambiguous.
    """
    if not 0 <= due_ms <= MAX_DUE_MS:
        raise ValueError(f"timer due time {due_ms} ms is outside 0..{MAX_DUE_MS}")
    kind = str(kind)
    if SEPARATOR in kind or SEPARATOR in ref:
        raise ValueError(f"timer kind {kind!r} and ref {ref!r} must not contain {SEPARATOR!r}")
    return f"{due_ms:0{DUE_DIGITS}d}{SEPARATOR}{workflow_id}{SEPARATOR}{kind}{SEPARATOR}{ref}"


def encode_timer(timer: Timer) -> str:
    """``timer.key``; a function for symmetry with ``decode_timer``."""
    return timer.key


def decode_timer(key: str | bytes) -> Timer:
    """The timer a table key stands for (bytes are read as UTF-8).

    Raises:
        ValueError: when ``key`` is not a timer key, naming it.
    """
    text = key.decode("utf-8") if isinstance(key, bytes) else key
    due, sep, rest = text.partition(SEPARATOR)
    parts = rest.rsplit(SEPARATOR, 2)
    if not sep or len(due) != DUE_DIGITS or not due.isdigit() or len(parts) != 3:
        raise ValueError(f"{text!r} is not a timer key ({{due_ms:015d}}|workflow|kind|ref)")
    workflow_id, kind, ref = parts
    try:
        return Timer(workflow_id=workflow_id, kind=TimerKind(kind), ref=ref, due_ms=int(due))
    except ValueError as exc:
        raise ValueError(f"{text!r} is not a timer key: {exc}") from None


def due_range(now_ms: int) -> tuple[str, str]:
    """The half-open key range ``[lower, upper)`` holding every timer due at ``now_ms``.

    Iterate the table from ``lower`` and stop at the first key ``>= upper`` (with
    RocksDB: seek to ``lower`` and set ``upper`` as the iterate upper bound). A timer
    due exactly at ``now_ms`` is included.
    """
    return "", f"{min(now_ms + 1, MAX_DUE_MS + 1):0{DUE_DIGITS}d}"


WAKE_REF = "next"


def wake_timer(workflow_id: str, due_ms: int) -> Timer:
    """The wake-up key of ``workflow_id`` at ``due_ms``, as a timer (see the module docstring)."""
    return Timer(workflow_id=workflow_id, kind=TimerKind.WAKE, ref=WAKE_REF, due_ms=due_ms)


def arm(armed_ms: int | None, timers: tuple[Timer, ...]) -> int | None:
    """When the workflow's wake-up key should be due, given the one armed now.

    A wake-up at or before the earliest timer stays (an early one costs a wasted
    wake-up, a moved one a delete and a put); one later than it, or none, moves to
    it; with no timer left it goes.
    """
    if not timers:
        return None
    earliest = min(timer.due_ms for timer in timers)
    if armed_ms is not None and armed_ms <= earliest:
        return armed_ms
    return earliest
