"""The flows' SLA rules, fed by the transitions a tracker publishes, in bounded memory.

The saga tracker service feeds it every transition it publishes and evaluates it
on its ticks; a what-if run (``sagalog.replay.simulation``) feeds it one workflow's
transitions and evaluates it after each decision, so both say "this SLA fires"
by the same rules.

``sagalog.tracker.sla.evaluate`` does the statistics; this keeps its input, and
only the part some rule measures (a span in a state and at a step that no rule of
its flow looks at is not kept at all): the spans that ended inside the longest
window (at most ``max_closed`` per flow version), and the spans still open, of which
at most ``max_open`` are remembered by workflow. Open spans beyond that are counted
but not timed (they are the newest, so the shortest): they enter the statistics as
zero-length, which can only lower a percentile, never raise a false alarm. So
100,000 workflows waiting at a gate cost a bounded amount of memory, not one entry
each.

Keeping only measured spans matters twice. Spans no rule looks at no longer push
measured ones out of the bounded ring. And spans kept through a burst of transitions,
one small object at a time among the burst's short-lived ones, each pin the allocator's
memory around them, so a burst of workflows to a gate no rule measures would leave the
tracker's heap grown (docs/design/tuning-measurements.md).

A rule fires once when it starts firing and again only after it stopped. Each worker
evaluates the spans of its own partitions; after a restart the window refills.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from sagalog.events import StateTransition
from sagalog.flows.registry import FlowRegistry
from sagalog.flows.states import TERMINAL_STATES
from sagalog.tracker.sla import SlaAlert, Span, evaluate, measures

FlowKey = tuple[str, int]
_TERMINAL = frozenset(state.value for state in TERMINAL_STATES)


class SlaMonitor:
    """Spans of the flows' workflows as their transitions come; the rules that start firing."""

    def __init__(
        self, registry: FlowRegistry, *, max_closed: int = 100_000, max_open: int = 10_000
    ) -> None:
        self.registry = registry
        self.max_closed = max_closed
        self.max_open = max_open
        self.closed: dict[FlowKey, deque[Span]] = {}
        self.open: dict[str, tuple[FlowKey, Span]] = {}
        self.untimed: dict[tuple[FlowKey, str], int] = {}
        self.firing: set[tuple[FlowKey, str]] = set()
        self._window = {
            (flow.name, flow.version): max((r.window for r in flow.sla), default=0)
            for flow in registry
        }
        self._rules = {(flow.name, flow.version): flow.sla for flow in registry}

    def observe(self, workflow_id: str, transition: StateTransition) -> None:
        """One published transition: closes the workflow's open span, opens the next."""
        key = (transition.flow, transition.flow_version)
        if not self._window.get(key):
            return
        at_ms = int(transition.at.timestamp() * 1000)
        timed = self.open.pop(workflow_id, None) is not None
        moved = (
            transition.from_state != transition.to_state or transition.from_step != transition.step
        )
        if moved and self._measured(key, transition.from_state, transition.from_step):
            entered = at_ms - transition.time_in_previous_state_ms
            ended = Span(transition.from_state, transition.from_step, entered, at_ms)
            self.closed.setdefault(key, deque(maxlen=self.max_closed)).append(ended)
            if not timed:
                self._forget_untimed(key, transition.from_state)
        if transition.to_state in _TERMINAL:
            return  # an ended workflow has no open span
        if not self._measured(key, transition.to_state, transition.step):
            return
        span = Span(transition.to_state, transition.step, at_ms)
        if len(self.open) < self.max_open:
            self.open[workflow_id] = (key, span)
        else:
            slot = (key, transition.to_state)
            self.untimed[slot] = self.untimed.get(slot, 0) + 1

    def evaluate(self, now_ms: int) -> list[SlaAlert]:
        """The rules that start firing at ``now_ms``."""
        fresh = []
        for flow in self.registry:
            key = (flow.name, flow.version)
            window = self._window.get(key)
            if not window:
                continue
            closed = self.closed.get(key, deque())
            while closed and closed[0].left_ms is not None and closed[0].left_ms < now_ms - window:
                closed.popleft()
            untimed = {state: n for (k, state), n in self.untimed.items() if k == key and n}
            alerts = evaluate(flow, self._spans(key, closed), now_ms=now_ms, untimed=untimed)
            names = {a.name for a in alerts}
            for rule in flow.sla:
                if rule.name not in names:
                    self.firing.discard((key, rule.name))
            for alert in alerts:
                if (key, alert.name) not in self.firing:
                    self.firing.add((key, alert.name))
                    fresh.append(alert)
        return fresh

    def _measured(self, key: FlowKey, state: str, step: str | None) -> bool:
        return any(measures(rule, state, step) for rule in self._rules[key])

    def _spans(self, key: FlowKey, closed: Iterable[Span]) -> list[Span]:
        spans = list(closed)
        spans.extend(span for k, span in self.open.values() if k == key)
        return spans

    def _forget_untimed(self, key: FlowKey, state: str) -> None:
        slot = (key, state)
        if self.untimed.get(slot):
            self.untimed[slot] -= 1
