"""One workflow's recorded history, run again through a flow version on a simulated clock.

A what-if run cannot replay the log as it lies: under the candidate, entries start
at other times, so the answers to them come at other times too. So the history is
turned into *cues*: each recorded input is tied to the entry it answers (the step
it completes or fails, the gate it decides, the compensation it completes) and to
how long after that entry started it came (its *dwell*). Run again, an input is
delivered that long after its entry starts under the flow being tried; an entry
that never starts never gets its answer. The start event keeps its time.

Time is a discrete-event clock: the next thing to happen is the earliest delivery
or the earliest pending timer (a timer due at the same instant as a delivery fires
after it). The workflow runs in a ``sagalog.testing.TrackerHarness``: the tracker's
own processor, with the decision code the tracker runs, over in-memory tables, its
timers fired at their due time by ``Processor.fire``; nothing is published.

SLA rules are judged by the tracker's own ``SlaMonitor``, fed the run's
transitions and evaluated after each decision and at the end, as the service
evaluates it on its ticks: an ending lists the rules that would have fired had
this workflow been the flow's only one.
While the recording still holds answers for the workflow (delivered or waiting for
their entry to start), time runs on as far as they need; once it holds none,
timers fire only up to the *horizon*, the end of the recording: what the workflow
would have done after that is not known, so it stays where it stands.

Entries that the recorded version never started have no answer to replay; an
``Assumption`` (see ``assumptions``) supplies one. An entry that started and got
no answer is recorded silence and stays silent.
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sagalog.events import CompensationRequested, GateDecision, StateTransition
from sagalog.flows.model import (
    COMPENSATION_COMPLETED,
    GATE_DECIDED,
    STEP_FAILED,
    Flow,
    Gate,
    Wait,
)
from sagalog.flows.states import WorkflowState
from sagalog.replay.assumptions import Answer, Assumption
from sagalog.testing.tracker_harness import TrackerHarness
from sagalog.tracker.compensation import CompensationRetry
from sagalog.tracker.gates import gate_token
from sagalog.tracker.inputs import GateVerdict, TrackedEvent
from sagalog.tracker.sla_monitor import SlaMonitor

Trigger = tuple[str, str]
"""What an input answers: ``("step", name)``, ``("gate", name)``, ``("undo", step)``."""

MAX_DECISIONS = 10_000
"""A workflow deciding more than this in one run is looping: a bug, stopped loudly."""

_SYNTHETIC = uuid.uuid5(uuid.NAMESPACE_URL, "https://sagalog.dev/replay/what-if/assumed")


@dataclass(frozen=True, slots=True)
class Cue:
    """A recorded input and when to deliver it: ``offset_ms`` after ``trigger`` starts,
    or at ``offset_ms`` (an absolute time) when ``trigger`` is None."""

    event: TrackedEvent
    trigger: Trigger | None
    offset_ms: int


@dataclass(frozen=True, slots=True)
class Ending:
    """How a workflow ended (or where it stood at the horizon), as a what-if compares it.

    Attributes:
        state: its state; ``not started`` when the flow did not take its start event.
        step: where it stands, while not ended.
        compensations: the steps whose compensation (or follow-up) was requested, in order.
        alerts: the tracker's alerts about it (stuck compensation, late completion, ...).
        sla: the flow's SLA rules that one of its own spans exceeds (a rule fires on a
            statistic over many workflows; this is the workflow's part in it).
    """

    state: str
    step: str | None = None
    compensations: tuple[str, ...] = ()
    alerts: tuple[str, ...] = ()
    sla: tuple[str, ...] = ()

    def changes(self, other: Ending) -> list[str]:
        """The aspects in which ``other`` differs from this ending."""
        found = []
        if (self.state, self.step) != (other.state, other.step):
            found.append("state")
        for name in ("compensations", "alerts", "sla"):
            if getattr(self, name) != getattr(other, name):
                found.append(name)
        return found

    def summary(self) -> str:
        text = self.state + (f" at {self.step}" if self.step else "")
        if self.compensations:
            text += f"; undo {', '.join(self.compensations)}"
        if self.alerts:
            text += f"; alerts {', '.join(self.alerts)}"
        if self.sla:
            text += f"; sla {', '.join(self.sla)}"
        return text

    def to_json(self) -> dict[str, object]:
        return {
            "state": self.state,
            "step": self.step,
            "compensations": list(self.compensations),
            "alerts": list(self.alerts),
            "sla": list(self.sla),
        }


@dataclass
class Run:
    """One simulated run: its ending, and when each entry started (for dwell times)."""

    ending: Ending
    starts: dict[Trigger, int] = field(default_factory=dict)
    decisions: int = 0


def trigger_of(flow: Flow, event: TrackedEvent) -> Trigger | None:
    """The entry of ``flow`` that ``event`` answers; None for the start and the rest."""
    kind = event.event_type
    if kind == flow.starts_on:
        return None
    if kind == GATE_DECIDED:
        return ("gate", event.gate.gate) if event.gate is not None else None
    if kind == COMPENSATION_COMPLETED:
        return ("undo", event.step) if event.step else None
    undone = next((s for s in flow.steps if kind in s.undo_completes_on), None)
    if undone is not None:
        return ("undo", undone.name)
    step = flow.step_for_completion(kind) or flow.step_for_failure(kind, step=event.step)
    return ("step", step.name) if step is not None else None


def started_trigger(flow: Flow, transition: StateTransition) -> Trigger | None:
    """The entry a transition starts: a step or gate entered, or a step being undone."""
    if transition.step is None:
        return None
    if transition.to_state == WorkflowState.COMPENSATING.value:
        return ("undo", transition.step)
    if transition.to_state in (WorkflowState.RUNNING.value, WorkflowState.PENDING_APPROVAL.value):
        entry = flow.entry(transition.step)
        return ("gate" if isinstance(entry, Gate) else "step", transition.step)
    return None


Responder = Callable[[Trigger, int], Sequence[tuple[int, TrackedEvent]]]
"""Answers for an entry that started at a time: (when, event) pairs to deliver."""


class Simulator:
    """Runs one workflow at a time through ``flow`` (see the module docstring)."""

    def __init__(
        self, flow: Flow, *, secret: bytes, retry: CompensationRetry, horizon_ms: int
    ) -> None:
        self.flow = flow
        self.secret = secret
        self.retry = retry
        self.horizon_ms = horizon_ms

    def run(self, workflow_id: str, cues: Sequence[Cue], respond: Responder | None = None) -> Run:
        tracker = TrackerHarness([self.flow], secret=self.secret, retry=self.retry)
        sla = SlaMonitor(tracker.registry)
        breached: set[str] = set()
        deliveries: list[tuple[int, int, TrackedEvent]] = []
        waiting: dict[Trigger, list[Cue]] = {}
        for order, cue in enumerate(cues):
            if cue.trigger is None:
                deliveries.append((cue.offset_ms, order, cue.event))
            else:
                waiting.setdefault(cue.trigger, []).append(cue)
        heapq.heapify(deliveries)
        run, seen, order = Run(Ending("not started")), 0, len(cues)
        while True:
            due = tracker.next_due_ms()
            next_delivery = deliveries[0][0] if deliveries else None
            if due is not None and (
                due < next_delivery
                if next_delivery is not None
                else due <= self.horizon_ms or bool(waiting)
            ):
                tracker.fire_next()
            elif deliveries:
                at, _, event = heapq.heappop(deliveries)
                tracker.now_ms = max(tracker.now_ms, at)  # no timer is due before ``at``
                tracker.feed(event, topic=self.flow.topic)
            else:
                break
            now = tracker.now_ms
            run.decisions += 1
            if run.decisions > MAX_DECISIONS:
                raise RuntimeError(f"what-if of {workflow_id} did not settle: a bug")
            for action in tracker.published[seen:]:
                if not isinstance(action.event, StateTransition):
                    continue
                sla.observe(action.workflow_id, action.event)
                trigger = started_trigger(self.flow, action.event)
                if trigger is None or trigger in run.starts:
                    continue
                run.starts[trigger] = action.time_ms
                for cue in waiting.pop(trigger, ()):
                    at = max(now, action.time_ms + cue.offset_ms)
                    heapq.heappush(deliveries, (at, order, cue.event))
                    order += 1
                for at, event in respond(trigger, action.time_ms) if respond else ():
                    heapq.heappush(deliveries, (max(now, at), order, event))
                    order += 1
            seen = len(tracker.published)
            breached.update(alert.name for alert in sla.evaluate(now))
        run.ending = self._ending(tracker, workflow_id, sla, breached)
        return run

    def answer(
        self, workflow_id: str, trigger: Trigger, at_ms: int, assumption: Assumption
    ) -> list[tuple[int, TrackedEvent]]:
        """The event an ``assumption`` stands for, for an entry that started at ``at_ms``."""
        kind, name = trigger
        if assumption.answer is Answer.NEVER:
            return []
        when = at_ms + assumption.after_ms
        event_id = str(uuid.uuid5(_SYNTHETIC, f"{workflow_id}\x1f{kind}\x1f{name}"))
        base = {"event_id": event_id, "workflow_id": workflow_id, "time_ms": when}
        entry = self.flow.entry(name)
        if kind == "gate":
            decision = (
                GateDecision.APPROVED
                if assumption.answer is Answer.APPROVE
                else GateDecision.REJECTED
            )
            verdict = GateVerdict(
                gate=name,
                token=gate_token(self.secret, workflow_id, name, 1),
                decision=decision,
                decided_by="sagalog what-if (assumed)",
            )
            return [(when, TrackedEvent(event_type=GATE_DECIDED, gate=verdict, **base))]
        if entry is None or isinstance(entry, (Gate, Wait)):
            return []  # a wait's signals come from outside: only the recorded ones replay
        if kind == "undo":
            completes = entry.undo_completes_on[0]
            return [(when, TrackedEvent(event_type=completes, step=name, **base))]
        if assumption.answer is Answer.FAIL:
            failed = STEP_FAILED if STEP_FAILED in entry.fails_on else entry.fails_on[0]
            payload = {"step": name, "reason": "assumed to fail (what-if --assume)"}
            return [(when, TrackedEvent(event_type=failed, step=name, payload=payload, **base))]
        return [(when, TrackedEvent(event_type=entry.completes_on[0], **base))]

    # -- internals ------------------------------------------------------------------

    def _ending(
        self, tracker: TrackerHarness, workflow_id: str, sla: SlaMonitor, breached: set[str]
    ) -> Ending:
        record = tracker.get(workflow_id)
        if record is None:
            return Ending("not started")
        requested = [
            a.event.step
            for a in tracker.published
            if isinstance(a.event, CompensationRequested) and a.event.attempt == 1
        ]
        last = max((a.time_ms for a in tracker.published), default=0)
        breached.update(alert.name for alert in sla.evaluate(max(self.horizon_ms, last)))
        return Ending(
            state=record.state.value,
            step=None if record.is_terminal else record.current,
            compensations=tuple(requested),
            alerts=tuple(sorted({a.name for a in tracker.alerts})),
            sla=tuple(rule.name for rule in self.flow.sla if rule.name in breached),
        )
