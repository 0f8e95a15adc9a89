"""What became of each input, counted, and logged without flooding the log.

Under at-least-once delivery duplicates, stale and parked inputs are normal: they
are logged at debug level only. The others (ignored, rejected, ...) are worth a
structured warning, but a misrouted producer can send thousands a second: at most
one warning per outcome and event type every ``warn_every_s``, saying how many like
it were suppressed.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter

from sagalog.tracker.actions import Decision, Outcome
from sagalog.tracker.inputs import TrackedEvent, TrackerInput

log = logging.getLogger("sagalog.tracker")

QUIET = frozenset({Outcome.APPLIED, Outcome.DUPLICATE, Outcome.STALE, Outcome.PARKED})
"""Outcomes that are normal under at-least-once delivery: logged at debug level only."""


class OutcomeLog:
    """Counts outcomes (``outcomes``) and logs the unusual ones, rate-limited."""

    def __init__(self, *, warn_every_s: float = 10.0) -> None:
        self.outcomes: Counter[Outcome] = Counter()
        self._warned: dict[tuple[str, str], tuple[float, int]] = {}
        self._warn_every_s = warn_every_s

    def note(self, event: TrackerInput, decision: Decision) -> None:
        self.outcomes[decision.outcome] += 1
        if decision.outcome in QUIET:
            if log.isEnabledFor(logging.DEBUG):
                log.debug("%s %s: %s", event.id, decision.outcome, decision.reason or "")
            return
        kind = event.event_type if isinstance(event, TrackedEvent) else type(event).__name__
        self._warn(decision.outcome, kind, event, decision.reason or "")

    def _warn(self, outcome: Outcome, kind: str, event: TrackerInput, reason: str) -> None:
        """A structured warning, at most one per outcome and type every ``warn_every_s``."""
        now = time.monotonic()
        last, suppressed = self._warned.get((outcome, kind), (-math.inf, 0))
        if now - last < self._warn_every_s:
            self._warned[(outcome, kind)] = (last, suppressed + 1)
            return
        self._warned[(outcome, kind)] = (now, 0)
        more = f" ({suppressed} more like it suppressed)" if suppressed else ""
        log.warning(
            "%s %s: %s%s",
            outcome,
            kind,
            reason,
            more,
            extra={
                "sagalog": {
                    "agent": "saga-tracker",
                    "action": f"input_{outcome}",
                    "workflow_id": event.workflow_id,
                    "event_type": kind,
                    "event_id": event.id,
                    "outcome": str(outcome),
                }
            },
        )
