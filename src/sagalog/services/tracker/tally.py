"""What the tracker committed, counted for Prometheus.

A batch's transitions, decisions and dead letters are counted only once its
transactions committed: an aborted batch is decided again (``Tracker.decide``), and
counting as it decided would count it twice. Each transition also tells how long
its workflow stayed in the state it left, observed into
``sagalog_time_in_state_seconds`` at the same moment.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from sagalog.events import StateTransition
from sagalog.metrics import TIME_IN_STATE
from sagalog.tracker import Outcome

TransitionKey = tuple[str, str, str, str]
"""Flow, version, from-state, to-state: ``sagalog_transitions_total``'s labels."""


@dataclass
class Tally:
    """Args:
    decided: the processor's running count of decisions by outcome
        (``Processor.outcomes``), which an aborted batch has already added to; the
        tally keeps what committed batches added (``decisions``).
    """

    decided: Counter[Outcome] = field(default_factory=Counter)
    transitions: Counter[TransitionKey] = field(default_factory=Counter)
    decisions: Counter[Outcome] = field(default_factory=Counter)
    dead_lettered: int = 0
    _pending: list[StateTransition] = field(default_factory=list)
    _pending_dead: int = 0
    _decided_before: Counter[Outcome] = field(default_factory=Counter)

    def begin(self) -> None:
        """A batch starts (again, after an abort): forget what the last one held."""
        self._pending.clear()
        self._pending_dead = 0
        self._decided_before = self.decided.copy()

    def transitioned(self, workflow_id: str, transition: StateTransition) -> None:
        self._pending.append(transition)

    def dead_letter(self) -> None:
        self._pending_dead += 1

    def committed(self) -> None:
        """The batch is durable: count it."""
        for t in self._pending:
            version = str(t.flow_version)
            self.transitions[(t.flow, version, t.from_state, t.to_state)] += 1
            TIME_IN_STATE.labels(t.flow, version, t.from_state).observe(
                t.time_in_previous_state_ms / 1000
            )
        self.dead_lettered += self._pending_dead
        self.decisions.update(self.decided - self._decided_before)
        self.begin()
