"""Moving a running workflow to a new flow version: what changes, or why it must not.

A workflow normally finishes under the version it started with. A migration moves it
to a later version where it stands: same state, its current entry and the entries it
completed renamed by a mapping (``--map old=new``, by default the same names), its
timers computed again from the new version's durations, counted from when each
started (a step from when it started, the workflow deadline from the start).

``plan_migration`` is the whole rule and is pure. ``sagalog flows migrate`` runs it
for the dry run, and the tracker runs it again when it reads the
``sagalog.v1.WorkflowMigrated`` the apply publishes, so what the dry run lists is what
the tracker does, workflow by workflow; the event carries the state and entry the dry
run saw, and the tracker refuses a workflow that has moved on since.

A migration is refused, with every reason named, when it could not be carried out
safely:

- the workflow is compensating (its undo plan was made under the old version), has
  ended, or runs under another version than ``old``;
- its current entry, or an entry it completed, has no counterpart in the new version,
  or a counterpart of another kind (a step become a gate);
- a completed step has a compensation or follow-up the new version's step lacks: it
  could no longer be undone;
- the new version puts an entry the workflow never ran before its current one, or a
  completed one after it (the order is the flow's order);
- an open gate is renamed: its token, in a person's inbox, names the gate; a wait
  whose received signals the new version's wait does not expect.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sagalog.flows.model import Flow, Gate, Step, Wait
from sagalog.flows.states import WorkflowState
from sagalog.tracker.compensation import compensation_plan
from sagalog.tracker.record import CompletedEntry, WorkflowRecord
from sagalog.tracker.timers import Timer, TimerKind

MIGRATABLE = frozenset(
    {
        WorkflowState.QUEUED,
        WorkflowState.RUNNING,
        WorkflowState.PENDING_APPROVAL,
        WorkflowState.AWAITING_INPUT,
    }
)
"""The states a workflow rests in between inputs on its forward path."""


@dataclass(frozen=True)
class Migrated:
    """What a migration does to one workflow (the dry run prints it, the tracker applies it).

    Attributes:
        record: the workflow's record after the migration.
        timers: its timers after (they replace every timer it had).
        compensations: the steps the new version would undo if it failed now, in order.
    """

    record: WorkflowRecord
    before: WorkflowRecord
    timers: tuple[Timer, ...]
    compensations: tuple[str, ...]

    @property
    def workflow_id(self) -> str:
        return self.record.workflow_id

    @property
    def changes(self) -> dict[str, tuple[object, object]]:
        """``{what: (before, after)}`` for the fields a person checks in the dry run."""
        found: dict[str, tuple[object, object]] = {}
        pairs = {
            "flow_version": (self.before.flow_version, self.record.flow_version),
            "current": (self.before.current, self.record.current),
            "completed": (self.before.completed_names, self.record.completed_names),
            "timers": (
                tuple(f"{t.kind}:{t.ref}@{t.due_ms}" for t in self.before.timers),
                tuple(f"{t.kind}:{t.ref}@{t.due_ms}" for t in self.timers),
            ),
        }
        for what, (old, new) in pairs.items():
            if old != new:
                found[what] = (old, new)
        return found


@dataclass(frozen=True)
class Refused:
    """A workflow that must stay on its version, and every reason why."""

    workflow_id: str
    reasons: tuple[str, ...]


def plan_migration(
    record: WorkflowRecord, *, old: Flow, new: Flow, mapping: Mapping[str, str]
) -> Migrated | Refused:
    """Move ``record`` from ``old`` to ``new``, renaming entries by ``mapping``."""
    reasons: list[str] = []
    if (record.flow, record.flow_version) != (old.name, old.version):
        label = f"{record.flow} v{record.flow_version}"
        return Refused(record.workflow_id, (f"it runs under {label}, not {old.label}",))
    if record.state is WorkflowState.COMPENSATING:
        reasons.append(
            f"it is compensating: its undo plan was made under {old.label}; let it finish"
        )
    elif record.state not in MIGRATABLE:
        reasons.append(f"it is {record.state}: only a workflow in flight is migrated")
    if reasons:
        return Refused(record.workflow_id, tuple(reasons))

    def counterpart(name: str, what: str) -> Step | Gate | Wait | None:
        was = old.entry(name)
        target = mapping.get(name, name)
        now = new.entry(target)
        if now is None:
            hint = f" (map it: --map {name}=<entry of {new.label}>)" if target == name else ""
            reasons.append(f"{what} '{name}' has no counterpart '{target}' in {new.label}{hint}")
            return None
        if was is not None and was.kind != now.kind:
            reasons.append(f"{what} '{name}' is a {was.kind}, but '{target}' is a {now.kind}")
            return None
        return now

    completed: list[CompletedEntry] = []
    for done in record.completed:
        now = counterpart(done.name, "completed entry")
        if now is None:
            continue
        was = old.entry(done.name)
        if isinstance(was, Step) and isinstance(now, Step) and was.undo_action and not now.undo:
            reasons.append(
                f"completed step '{done.name}' is undone by '{was.undo_action}' in "
                f"{old.label}, but '{now.name}' in {new.label} says nothing about undoing it: "
                "a failure would leave its effect in place"
            )
        completed.append(done.model_copy(update={"name": now.name}))
    current = counterpart(record.current, "current entry") if record.current else None
    if current is not None:
        _order(record, new, current, [c.name for c in completed], reasons)
        gate = record.gate
        if isinstance(current, Gate) and gate is not None and current.name != gate.gate:
            reasons.append(
                f"open gate '{gate.gate}' would be renamed '{current.name}': the token a "
                "person holds names the gate; migrate once it is decided"
            )
        if isinstance(current, Wait) and record.waiting is not None:
            unknown = [
                r.signal
                for r in record.waiting.received
                if r.signal not in {s.name for s in current.signals}
            ]
            if unknown:
                reasons.append(
                    f"wait '{current.name}' of {new.label} expects no signal "
                    f"{', '.join(repr(u) for u in unknown)}, which arrived already"
                )
    if reasons:
        return Refused(record.workflow_id, tuple(reasons))
    after = record.model_copy(
        update={
            "flow_version": new.version,
            "current": current.name if current is not None else None,
            "completed": tuple(completed),
            "step_of_state": current.name if current is not None else record.step_of_state,
            "gate": _gate(record, current, new),
            "waiting": _waiting(record, current),
        }
    )
    timers = _timers(after, new, current)
    after = after.model_copy(update={"timers": timers})
    plan = compensation_plan(new, [c.name for c in completed])
    return Migrated(record=after, before=record, timers=timers, compensations=plan)


def check_mapping(mapping: Mapping[str, str], *, old: Flow, new: Flow) -> list[str]:
    """What is wrong with a mapping as a whole (refused before any workflow is looked at)."""
    problems = []
    for source, target in mapping.items():
        if old.entry(source) is None:
            problems.append(f"--map {source}={target}: {old.label} has no entry '{source}'")
        if new.entry(target) is None:
            problems.append(f"--map {source}={target}: {new.label} has no entry '{target}'")
    if old.name != new.name:
        problems.append(f"{old.label} and {new.label} are different flows")
    elif new.version <= old.version:
        problems.append(f"{new.label} is not later than {old.label}")
    return problems


def _order(
    record: WorkflowRecord,
    new: Flow,
    current: Step | Gate | Wait,
    completed: list[str],
    reasons: list[str],
) -> None:
    position = new.index(current.name)
    before = [e.name for e in new.entries[:position]]
    for name in before:
        if name not in completed:
            reasons.append(
                f"{new.label} runs '{name}' before '{current.name}', and this workflow never ran it"
            )
    for name in completed:
        if name not in before:
            reasons.append(
                f"{new.label} runs completed '{name}' after the current '{current.name}'"
            )


def _gate(record: WorkflowRecord, current: Step | Gate | Wait | None, new: Flow) -> object:
    gate = record.gate
    if gate is None or not isinstance(current, Gate) or current.name != gate.gate:
        return gate
    return gate.model_copy(update={"deadline_ms": gate.opened_at_ms + current.deadline})


def _waiting(record: WorkflowRecord, current: Step | Gate | Wait | None) -> object:
    waiting = record.waiting
    if waiting is None or not isinstance(current, Wait):
        return waiting
    return waiting.model_copy(
        update={"wait": current.name, "deadline_ms": waiting.opened_at_ms + current.timeout}
    )


def _timers(
    record: WorkflowRecord, new: Flow, current: Step | Gate | Wait | None
) -> tuple[Timer, ...]:
    """Every timer the workflow expects under ``new``, each from when its span began."""
    workflow_id = record.workflow_id

    def timer(kind: TimerKind, ref: str, due_ms: int) -> Timer:
        return Timer(workflow_id=workflow_id, kind=kind, ref=ref, due_ms=due_ms)

    timers = [timer(TimerKind.WORKFLOW_DEADLINE, "workflow", record.started_at_ms + new.deadline)]
    if current is None:
        return tuple(timers)
    entered = record.entered_current_state_at_ms
    if isinstance(current, Step):
        timers.append(timer(TimerKind.STEP_TIMEOUT, current.name, entered + current.timeout))
    elif isinstance(current, Wait) and record.waiting is not None:
        timers.append(timer(TimerKind.WAIT_TIMEOUT, current.name, record.waiting.deadline_ms))
    elif isinstance(current, Gate) and record.gate is not None:
        gate = record.gate
        for level in range(gate.escalation_level + 1, len(current.escalation) + 1):
            due = gate.opened_at_ms + current.escalation[level - 1].after
            ref = f"{current.name}#{gate.attempt}#{level}"
            timers.append(timer(TimerKind.GATE_ESCALATION, ref, due))
        ref = f"{current.name}#{gate.attempt}"
        timers.append(timer(TimerKind.GATE_DEADLINE, ref, gate.deadline_ms))
    starts = {new.entries[0].name: record.started_at_ms}
    starts.update({c.name: c.at_ms for c in _previous(record)})
    for segment in new.segments_of(current.name):
        first = segment.steps[0]
        began = entered if first == current.name else starts.get(first)
        if began is not None:
            timers.append(timer(TimerKind.SEGMENT_TIMEOUT, segment.name, began + segment.timeout))
    return tuple(timers)


def _previous(record: WorkflowRecord) -> list[CompletedEntry]:
    """Each completed entry, paired with when the entry after it started: its end."""
    nexts = [*(c.name for c in record.completed[1:]), record.current or ""]
    return [done.model_copy(update={"name": nexts[i]}) for i, done in enumerate(record.completed)]
