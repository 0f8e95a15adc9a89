"""The live tracker's journal: when it decided each input, and in what order its timers fired.

A replay must decide every input at the time the live tracker did and fire the
timers it fired where it fired them, or it rebuilds a different state:

- **time**: a record's times and every timer's due time come from the tracker's
  clock when it decided (``now_ms``), not from the event's ``ce_time`` (a virtual
  clock is days away from the agents' clocks; a wall clock lags under load);
- **firings**: a live tracker fires a due timer on its next tick, after the events
  of that batch. Firing by a replay clock ("everything due before this event")
  would fire a step timeout that live never fired because the completion came first
  in the same tick, and turn a completed workflow into a compensated one.

Both are on record. Every ``StateTransition`` names its cause (an event id,
``timer:<key>`` or ``admit:<workflow>``) and when it happened (``at``: the tracker's
clock). The transitions topic is keyed by workflow, so one workflow's transitions
are in the order the tracker decided. Folding them numbers each workflow's causes
in that order (``Recorded.seq``) and lists the timers that fired with an effect on
the workflow's state (``RecordedFiring``). A replay fires such a timer before the
first input of its workflow that the journal places after it (see ``engine``).

A firing whose only effect went to the workflow topic (a gate escalation's
``GateOpened``, a compensation's repeated request) made no transition: the replay
fires it where it reads that output back (its ``ce_causationid`` names the timer,
its ``ce_time`` is the tracker's clock then).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

TIMER_CAUSE = "timer:"
"""The prefix of a fired timer's cause id (``TimerFired.id``)."""


@dataclass(frozen=True, slots=True)
class Decided:
    """One decision of the live tracker, from one ``StateTransition``."""

    workflow_id: str
    cause_id: str
    at_ms: int
    flow: str = ""
    flow_version: int = 0
    to_state: str = ""


@dataclass(frozen=True, slots=True)
class Recorded:
    """A cause on record: its place among its workflow's decisions, and the clock then."""

    seq: int
    at_ms: int


@dataclass(frozen=True, slots=True)
class RecordedFiring:
    """A timer the live tracker fired (its table key), its clock then and its place.

    ``seq`` is its place among its workflow's decisions (``Recorded.seq``); -1 for a
    firing read back from the workflow topic, which the journal does not list.
    """

    timer_key: str
    at_ms: int
    seq: int = -1

    @property
    def order(self) -> tuple[int, str]:
        """Within one tick the tracker fires timers in key order (the due time first)."""
        return (self.at_ms, self.timer_key)


def decisions_from(payloads: Sequence[Mapping[str, Any]], keys: Sequence[Any]) -> list[Decided]:
    """``StateTransition`` payloads (``at`` in epoch ms) and their keys as decisions.

    A payload without a cause or a time is left out: it cannot place anything.
    """
    found = []
    for payload, key in zip(payloads, keys, strict=True):
        cause, at = payload.get("cause_event_id"), payload.get("at")
        if not isinstance(cause, str) or not isinstance(at, int) or key is None:
            continue
        workflow = key.decode("utf-8", "replace") if isinstance(key, bytes) else str(key)
        found.append(
            Decided(
                workflow_id=workflow,
                cause_id=cause,
                at_ms=at,
                flow=str(payload.get("flow") or ""),
                flow_version=int(payload.get("flow_version") or 0),
                to_state=str(payload.get("to_state") or ""),
            )
        )
    return found


@dataclass
class JournalFold:
    """What a run of decisions adds to the journal (see ``fold``).

    Attributes:
        causes: cause id -> its first decision on record.
        firings: workflow id -> the timers that fired with an effect, in order.
        last: workflow id -> (seq, cause) of its latest decision.
    """

    causes: dict[str, Recorded] = field(default_factory=dict)
    firings: dict[str, list[RecordedFiring]] = field(default_factory=dict)
    last: dict[str, tuple[int, str]] = field(default_factory=dict)


def fold(
    decisions: Iterable[Decided], last_of: Callable[[str], tuple[int, str] | None]
) -> JournalFold:
    """Fold decisions, in the order of their partition, into numbered causes and firings.

    ``last_of(workflow)`` answers for workflows whose earlier decisions were folded
    before (an earlier chunk): their latest (seq, cause). Several transitions of one
    decision share a cause and count once.
    """
    out = JournalFold()
    for decided in decisions:
        cause, workflow = decided.cause_id, decided.workflow_id
        previous = out.last[workflow] if workflow in out.last else last_of(workflow)
        if previous is not None and previous[1] == cause:
            continue
        seq = previous[0] + 1 if previous is not None else 0
        out.causes.setdefault(cause, Recorded(seq, decided.at_ms))
        if cause.startswith(TIMER_CAUSE):
            firing = RecordedFiring(cause[len(TIMER_CAUSE) :], decided.at_ms, seq)
            out.firings.setdefault(workflow, []).append(firing)
        out.last[workflow] = (seq, cause)
    return out


class Journal(Protocol):
    """What a replay asks of the journal, and where it marks the firings it replayed."""

    def recorded(self, cause_id: str) -> Recorded | None:
        """Where and when the live tracker decided ``cause_id``; None if not on record."""

    def firings_of(self, workflow_id: str) -> Sequence[RecordedFiring]:
        """The timers of ``workflow_id`` that fired with an effect, in order."""

    def all_firings(self) -> Iterator[RecordedFiring]:
        """Every recorded firing, workflow by workflow."""

    def is_fired(self, timer_key: str) -> bool:
        """Whether the replay fired this recorded timer already (an earlier chunk or run)."""

    def mark_fired(self, timer_key: str) -> None:
        """Remember that the replay fired it (with the chunk's other writes)."""


class MemoryJournal:
    """A ``Journal`` in dicts: for what-if runs over one flow's history, and for tests."""

    def __init__(self) -> None:
        self.causes: dict[str, Recorded] = {}
        self.firings: dict[str, list[RecordedFiring]] = {}
        self.last: dict[str, tuple[int, str]] = {}
        self.fired: set[str] = set()
        self.first: dict[str, Decided] = {}
        """workflow id -> its first decision on record (its flow version)."""
        self.latest: dict[str, Decided] = {}
        """workflow id -> its latest decision on record (the state it was left in)."""

    def add(self, decisions: Sequence[Decided]) -> None:
        folded = fold(decisions, self.last.get)
        for cause, recorded in folded.causes.items():
            self.causes.setdefault(cause, recorded)
        for workflow, firings in folded.firings.items():
            self.firings.setdefault(workflow, []).extend(firings)
        self.last.update(folded.last)
        for decided in decisions:
            self.first.setdefault(decided.workflow_id, decided)
            self.latest[decided.workflow_id] = decided

    def recorded(self, cause_id: str) -> Recorded | None:
        return self.causes.get(cause_id)

    def firings_of(self, workflow_id: str) -> Sequence[RecordedFiring]:
        return self.firings.get(workflow_id, ())

    def all_firings(self) -> Iterator[RecordedFiring]:
        for firings in self.firings.values():
            yield from firings

    def is_fired(self, timer_key: str) -> bool:
        return timer_key in self.fired

    def mark_fired(self, timer_key: str) -> None:
        self.fired.add(timer_key)

    @property
    def horizon_ms(self) -> int:
        """The latest decision on record: when the recording was last known current."""
        return max((r.at_ms for r in self.causes.values()), default=0)
