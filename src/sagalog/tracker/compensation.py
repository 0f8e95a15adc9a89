"""Undoing a workflow: the plan, one compensation at a time, retries, and the end state.

When a step fails, a step or segment times out, a gate rejects (or defaults to
reject or fail) or the workflow's deadline passes, the tracker undoes what was done:

- **The plan** is the completed steps in reverse order, each by its compensation,
  or by its follow-up when it is irreversible; steps with ``effect: none`` are passed
  over. A step that was *running* when a timeout or the deadline struck is undone
  first: it may have taken effect without saying so yet, and compensations are
  idempotent ("nothing to undo" is a fine answer). A step that reported its own
  failure (``StepFailed``) is not: the agent runtime failed it for good.
- **One at a time**: ``CompensationRequested`` for the first, then nothing until its
  completion event arrives; only then the next. Reverse order matters (cancel the
  order before releasing the budget that paid for it).
- **Retries**: each request has a timeout (the flow's, growing by
  ``CompensationRetry.multiplier`` per attempt up to ``max_wait_ms``). When it passes,
  an alert says the compensation is stuck and it is requested again with the next
  attempt number; after ``max_attempts`` the tracker gives up: an alert, and the
  workflow ends ``failed`` with the steps still to undo in its reason and record.
- **A late completion** of a step the plan does not cover (it ran ahead while the
  tracker was already compensating) joins the plan, next after the one in flight,
  with an alert: its effect happened and must be undone too.

Terminal states:

=====================  ==========================  ==========================
cause                  plan had steps to undo      nothing to undo
=====================  ==========================  ==========================
failure, timeout,      ``compensated``             ``failed``
rejection, cancellation
workflow deadline      ``timed_out``               ``timed_out``
compensation given up  ``failed`` (+ alert)        --
=====================  ==========================  ==========================
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sagalog.durations import format_duration
from sagalog.errors import ConfigurationError
from sagalog.events import CompensationRequested
from sagalog.flows.model import Flow, Step
from sagalog.flows.states import WorkflowState
from sagalog.tracker._change import Change
from sagalog.tracker.actions import Decision, Outcome
from sagalog.tracker.record import CompensationCause, CompensationProgress
from sagalog.tracker.timers import TimerKind

_DAY_MS = 86_400_000


@dataclass(frozen=True)
class CompensationRetry:
    """How patiently a stuck compensation is requested again.

    Attributes:
        max_attempts: requests in all, the first included; then the tracker gives up.
        multiplier: growth of the wait per attempt (attempt 1 waits the flow's timeout).
        max_wait_ms: no wait exceeds this, however many attempts.
    """

    max_attempts: int = 5
    multiplier: float = 2.0
    max_wait_ms: int = _DAY_MS

    def __post_init__(self) -> None:
        if self.max_attempts < 1 or self.multiplier < 1 or self.max_wait_ms < 1:
            raise ConfigurationError(
                f"compensation retry: max_attempts={self.max_attempts}, multiplier="
                f"{self.multiplier}, max_wait_ms={self.max_wait_ms}; need max_attempts >= 1, "
                "multiplier >= 1 and max_wait_ms >= 1"
            )

    def wait_ms(self, timeout_ms: int, attempt: int) -> int:
        """How long attempt ``attempt`` (1 = the first request) may take before it is stuck."""
        cap = max(timeout_ms, self.max_wait_ms)  # never less than the flow's own timeout
        try:
            wait = timeout_ms * self.multiplier ** (attempt - 1)
        except OverflowError:
            return cap
        return int(min(cap, wait))

    def exhausted(self, attempts_made: int) -> bool:
        return attempts_made >= self.max_attempts


def compensation_plan(
    flow: Flow, completed: Sequence[str], *, in_flight: str | None = None
) -> tuple[str, ...]:
    """The steps to undo, first one first.

    Args:
        flow: the workflow's flow version.
        completed: the entries completed, in flow order (gates included; they undo nothing).
        in_flight: the step that was running when a timeout or deadline struck, if any.
    """
    names = ([in_flight] if in_flight is not None else []) + list(reversed(completed))
    plan = []
    for name in names:
        entry = flow.entry(name)
        if isinstance(entry, Step) and entry.undo_action is not None and name not in plan:
            plan.append(name)
    return tuple(plan)


def start(
    change: Change,
    cause: CompensationCause,
    reason: str,
    *,
    include_current: bool,
    retry: CompensationRetry,
) -> None:
    """Leave the forward path: cancel every timer and undo the completed steps, or end."""
    record = change.record
    change.cancel()
    running = record.current if record.state is WorkflowState.RUNNING else None
    plan = compensation_plan(
        change.flow, record.completed_names, in_flight=running if include_current else None
    )
    if not plan:
        end = (
            WorkflowState.TIMED_OUT if cause is CompensationCause.DEADLINE else WorkflowState.FAILED
        )
        change.set(compensation=CompensationProgress(cause=cause, reason=reason))
        change.move(end, step=None, terminal_reason=f"{reason}; nothing to undo")
        return
    first, *rest = plan
    change.set(
        compensation=CompensationProgress(
            cause=cause,
            reason=reason,
            in_flight=first,
            attempt=1,
            requested_at_ms=change.now_ms,
            remaining=tuple(rest),
        )
    )
    change.move(WorkflowState.COMPENSATING, step=first)
    _request(change, first, attempt=1, retry=retry)


def on_undone(
    change: Change, step: Step, *, event_id: str, event_time_ms: int, retry: CompensationRetry
) -> Decision:
    """A compensation (or follow-up) completion event for ``step``."""
    progress = change.record.compensation
    assert progress is not None  # compensating
    if step.name in progress.undone:
        return Decision(None, (), Outcome.STALE, f"step '{step.name}' is already undone")
    if step.name in progress.remaining:
        return Decision(
            None,
            (),
            Outcome.REJECTED,
            f"the undo of step '{step.name}' completed before it was requested (in flight: "
            f"'{progress.in_flight}'); compensations run one at a time, in reverse order",
        )
    if step.name != progress.in_flight:
        return Decision(
            None,
            (),
            Outcome.REJECTED,
            f"step '{step.name}' is not in the compensation plan of workflow {change.workflow_id}",
        )
    change.cancel(lambda t: t.kind is TimerKind.COMPENSATION_TIMEOUT)
    undone = (*progress.undone, step.name)
    if progress.remaining:
        following, *rest = progress.remaining
        change.set(
            compensation=progress.model_copy(
                update={
                    "in_flight": following,
                    "attempt": 1,
                    "requested_at_ms": change.now_ms,
                    "remaining": tuple(rest),
                    "undone": undone,
                }
            )
        )
        change.move(WorkflowState.COMPENSATING, step=following)
        _request(change, following, attempt=1, retry=retry)
    else:
        end = (
            WorkflowState.TIMED_OUT
            if progress.cause is CompensationCause.DEADLINE
            else WorkflowState.COMPENSATED
        )
        change.set(compensation=progress.model_copy(update={"in_flight": None, "undone": undone}))
        change.move(
            end, step=None, terminal_reason=f"{progress.reason}; undone: {', '.join(undone)}"
        )
    return change.decision(event_id=event_id, event_time_ms=event_time_ms)


def on_late_completion(
    change: Change, step: Step, *, event_id: str, event_time_ms: int
) -> Decision:
    """A step completed after the workflow began compensating: undo it too, if it did anything."""
    record = change.record
    progress = record.compensation
    assert progress is not None
    accounted = {*record.completed_names, *progress.remaining, *progress.undone}
    if progress.in_flight is not None:
        accounted.add(progress.in_flight)
    if step.name in accounted:
        return Decision(
            None,
            (),
            Outcome.STALE,
            f"step '{step.name}' completed late; the compensation already covers it",
        )
    if step.undo_action is None:
        return Decision(
            None,
            (),
            Outcome.STALE,
            f"step '{step.name}' completed after the workflow began compensating; it has no "
            "effect to undo",
        )
    change.set(
        compensation=progress.model_copy(update={"remaining": (step.name, *progress.remaining)})
    )
    message = (
        f"workflow {change.workflow_id}: step '{step.name}' completed after the workflow began "
        f"compensating ({progress.reason}); its '{step.undo_action}' is queued next"
    )
    change.alert("late_completion", message)
    return change.decision(event_id=event_id, event_time_ms=event_time_ms, reason=message)


def on_timeout(change: Change, retry: CompensationRetry) -> Decision:
    """The compensation in flight did not complete in time: alert, then retry or give up."""
    record = change.record
    progress = record.compensation
    assert progress is not None and progress.in_flight is not None
    step = change.flow.entry(progress.in_flight)
    assert isinstance(step, Step) and step.undo is not None
    waited = format_duration(max(1, change.now_ms - progress.requested_at_ms))
    what = (
        f"workflow {change.workflow_id} ({change.flow.label}): '{step.undo_action}' of step "
        f"'{step.name}'"
    )
    change.alert(
        "compensation_stuck",
        f"{what} has not completed {waited} after attempt {progress.attempt} was requested",
    )
    if retry.exhausted(progress.attempt):
        left = [progress.in_flight, *progress.remaining]
        reason = (
            f"{progress.reason}; gave up on {what} after {progress.attempt} attempts; "
            f"still to undo by hand: {', '.join(left)}"
        )
        change.alert("compensation_abandoned", reason)
        change.move(WorkflowState.FAILED, step=None, terminal_reason=reason)
        return change.decision(reason=reason)
    attempt = progress.attempt + 1
    change.set(
        compensation=progress.model_copy(
            update={"attempt": attempt, "requested_at_ms": change.now_ms}
        )
    )
    _request(change, step.name, attempt=attempt, retry=retry)
    return change.decision()


def _request(change: Change, name: str, *, attempt: int, retry: CompensationRetry) -> None:
    step = change.flow.entry(name)
    assert isinstance(step, Step) and step.undo is not None and step.undo_action is not None
    progress = change.record.compensation
    change.publish(
        CompensationRequested(
            step=name,
            compensation=step.undo_action,
            attempt=attempt,
            reason=progress.reason if progress is not None else "",
        )
    )
    wait = retry.wait_ms(step.undo.timeout, attempt)
    change.schedule(TimerKind.COMPENSATION_TIMEOUT, f"{name}#{attempt}", change.now_ms + wait)
