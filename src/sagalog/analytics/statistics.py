"""Time-in-state analytics as plain functions over a list of ``Transition`` records.

No Kafka, no clock: the records and ``now_ms`` are passed in, so every figure can be
checked by hand on a few transitions. Everything is per flow version, because a
workflow finishes under the version it started with and two versions are two
different processes.

Definitions:

- **Dwell time** of a state is the ``time_in_previous_state_ms`` of the transitions
  that leave it. ``initiated`` is left in the decision that creates the workflow, so
  it has none and is not reported.
- **Per step**: the time spent working on (``running``), waiting for a person at
  (``pending_approval``), waiting for input at (``awaiting_input``) or undoing
  (``compensating``) a step: the ``from_step`` of the transitions leaving those states.
- Percentiles are nearest-rank (the ⌈p·n⌉-th smallest value), as in the tracker's SLA
  rules: every figure is one that was observed.
- **Started**: a transition out of ``initiated`` (a workflow's first). **Ended**: one
  into a terminal state. **In flight**: workflows whose last transition in the records
  entered a non-terminal state; a workflow that did not move at all in the records is
  not seen.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sagalog.analytics.records import Transition, flow_versions
from sagalog.flows.states import TERMINAL_STATES, WorkflowState
from sagalog.tracker.sla import percentile

HOUR_MS = 3_600_000

_STATE_ORDER = {state.value: i for i, state in enumerate(WorkflowState)}
_WORKED_ON = frozenset(
    {
        WorkflowState.RUNNING.value,
        WorkflowState.PENDING_APPROVAL.value,
        WorkflowState.AWAITING_INPUT.value,
        WorkflowState.COMPENSATING.value,
    }
)
_LEAVING_FORWARD_PATH = frozenset(
    {
        WorkflowState.COMPENSATING.value,
        WorkflowState.COMPENSATED.value,
        WorkflowState.FAILED.value,
        WorkflowState.TIMED_OUT.value,
    }
)


@dataclass(frozen=True, slots=True)
class Dwell:
    """How long workflows of one flow version stayed in ``state`` (at ``step``, if set)."""

    flow: str
    flow_version: int
    state: str
    step: str | None
    count: int
    p50_ms: int
    p95_ms: int
    p99_ms: int
    max_ms: int


@dataclass(frozen=True, slots=True)
class SlowTransition:
    """One of the longest stays: ``workflow_id`` was in ``state`` for ``duration_ms``."""

    flow: str
    flow_version: int
    workflow_id: str
    state: str
    step: str | None
    to_state: str
    duration_ms: int
    left_at_ms: int


@dataclass(frozen=True, slots=True)
class TerminalCount:
    """How many workflows of a flow version ended in ``state``; ``share`` of all that ended."""

    flow: str
    flow_version: int
    state: str
    count: int
    share: float
    error: bool


@dataclass(frozen=True, slots=True)
class Exit:
    """Workflows that left the forward path from ``state`` at ``step`` into ``to_state``.

    ``compensating`` from a working state is a failure or a rejection being undone;
    ``failed`` from ``compensating`` is an undo given up on.
    """

    flow: str
    flow_version: int
    state: str
    step: str | None
    to_state: str
    count: int


@dataclass(frozen=True, slots=True)
class HourThroughput:
    """Workflows started and ended in the hour beginning at ``hour_ms`` (UTC)."""

    flow: str
    flow_version: int
    hour_ms: int
    started: int
    ended: int
    completed: int


@dataclass(frozen=True, slots=True)
class InFlight:
    """Workflows whose last move entered ``state`` (at ``step``) and that have not ended.

    ``oldest_ms``: the longest any of them has been there, at ``now_ms``;
    ``oldest_workflow``: which one.
    """

    flow: str
    flow_version: int
    state: str
    step: str | None
    count: int
    oldest_ms: int
    oldest_workflow: str


@dataclass(frozen=True, slots=True)
class FlowSummary:
    """The headline figures of one flow version."""

    flow: str
    flow_version: int
    transitions: int
    workflows: int
    started: int
    ended: int
    completed: int
    in_flight: int

    @property
    def completion_rate(self) -> float | None:
        """Completed among the ended (None when none ended)."""
        return self.completed / self.ended if self.ended else None


@dataclass(frozen=True, slots=True)
class Analytics:
    """Every table of the report, each row naming its flow version."""

    summaries: tuple[FlowSummary, ...]
    states: tuple[Dwell, ...]
    steps: tuple[Dwell, ...]
    slowest: tuple[SlowTransition, ...]
    terminals: tuple[TerminalCount, ...]
    exits: tuple[Exit, ...]
    hours: tuple[HourThroughput, ...]
    in_flight: tuple[InFlight, ...]

    @property
    def empty(self) -> bool:
        return not self.summaries


def analyse(transitions: Iterable[Transition], *, now_ms: int, top: int = 10) -> Analytics:
    """All the statistics of ``transitions``; ``now_ms`` ages what is in flight.

    ``transitions`` may come in any order across workflows; a workflow's own are
    ordered by ``at_ms``, ties kept in the given order (the log's).
    """
    ordered = sorted(transitions, key=lambda t: t.at_ms)
    flying = in_flight(ordered, now_ms=now_ms)
    return Analytics(
        summaries=tuple(summaries(ordered, flying)),
        states=tuple(dwell_by_state(ordered)),
        steps=tuple(dwell_by_step(ordered)),
        slowest=tuple(slowest(ordered, top=top)),
        terminals=tuple(terminal_states(ordered)),
        exits=tuple(exits(ordered)),
        hours=tuple(throughput_by_hour(ordered)),
        in_flight=tuple(flying),
    )


def dwell_by_state(transitions: Iterable[Transition]) -> list[Dwell]:
    """Time in each state per flow version, states in lifecycle order."""
    groups: dict[tuple[str, int, str], list[int]] = defaultdict(list)
    for t in transitions:
        if t.from_state != WorkflowState.INITIATED.value:
            groups[(t.flow, t.flow_version, t.from_state)].append(t.duration_ms)
    rows = [
        _dwell(flow, version, state, None, values)
        for (flow, version, state), values in groups.items()
    ]
    return sorted(rows, key=lambda d: (d.flow, d.flow_version, _state_rank(d.state)))


def dwell_by_step(transitions: Sequence[Transition]) -> list[Dwell]:
    """Time at each step per flow version and state (working, waiting, undoing).

    Steps come in the order workflows reach them (their mean position in their
    workflow's transitions), undoing after the forward path.
    """
    groups: dict[tuple[str, int, str, str], list[int]] = defaultdict(list)
    positions: dict[tuple[str, int, str, str], list[int]] = defaultdict(list)
    seen: Counter[str] = Counter()
    for t in transitions:
        position = seen[t.workflow_id]
        seen[t.workflow_id] += 1
        if t.from_step is None or t.from_state not in _WORKED_ON:
            continue
        key = (t.flow, t.flow_version, t.from_step, t.from_state)
        groups[key].append(t.duration_ms)
        positions[key].append(position)

    def order(key: tuple[str, int, str, str]) -> tuple[str, int, bool, float]:
        flow, version, _, state = key
        mean = sum(positions[key]) / len(positions[key])
        return (flow, version, state == WorkflowState.COMPENSATING.value, mean)

    return [
        _dwell(flow, version, state, step, groups[(flow, version, step, state)])
        for flow, version, step, state in sorted(groups, key=order)
    ]


def slowest(transitions: Iterable[Transition], *, top: int = 10) -> list[SlowTransition]:
    """The ``top`` longest stays in a state per flow version, longest first."""
    groups: dict[tuple[str, int], list[Transition]] = defaultdict(list)
    for t in transitions:
        if t.from_state != WorkflowState.INITIATED.value:
            groups[t.flow_key].append(t)
    rows: list[SlowTransition] = []
    for (flow, version), group in sorted(groups.items()):
        group.sort(key=lambda t: (-t.duration_ms, t.at_ms))
        rows.extend(
            SlowTransition(
                flow=flow,
                flow_version=version,
                workflow_id=t.workflow_id,
                state=t.from_state,
                step=t.from_step,
                to_state=t.to_state,
                duration_ms=t.duration_ms,
                left_at_ms=t.at_ms,
            )
            for t in group[:top]
        )
    return rows


def terminal_states(transitions: Iterable[Transition]) -> list[TerminalCount]:
    """How workflows ended per flow version, most frequent first."""
    counts: Counter[tuple[str, int, str]] = Counter(
        (t.flow, t.flow_version, t.to_state) for t in transitions if t.to_state in TERMINAL_STATES
    )
    ended: Counter[tuple[str, int]] = Counter()
    for (flow, version, _), count in counts.items():
        ended[(flow, version)] += count
    rows = [
        TerminalCount(
            flow=flow,
            flow_version=version,
            state=state,
            count=count,
            share=count / ended[(flow, version)],
            error=state != WorkflowState.COMPLETED.value,
        )
        for (flow, version, state), count in counts.items()
    ]
    return sorted(rows, key=lambda r: (r.flow, r.flow_version, -r.count, _state_rank(r.state)))


def exits(transitions: Iterable[Transition]) -> list[Exit]:
    """Where workflows left the forward path, per flow version, most frequent first."""
    counts: Counter[tuple[str, int, str, str | None, str]] = Counter()
    for t in transitions:
        if t.to_state not in _LEAVING_FORWARD_PATH:
            continue
        undoing = t.from_state == WorkflowState.COMPENSATING.value
        if undoing and t.to_state != WorkflowState.FAILED.value:
            continue  # the next undo, or the end of undoing: not a new exit
        counts[(t.flow, t.flow_version, t.from_state, t.from_step, t.to_state)] += 1
    rows = [
        Exit(flow, version, state, step, to_state, count)
        for (flow, version, state, step, to_state), count in counts.items()
    ]
    return sorted(rows, key=lambda r: (r.flow, r.flow_version, -r.count, r.step or "", r.to_state))


def throughput_by_hour(transitions: Iterable[Transition]) -> list[HourThroughput]:
    """Workflows started and ended per hour (UTC), per flow version, busy hours only.

    Quiet hours have no row: a stray transition far from the others (a virtual clock
    that started at zero) must not fill the table with empty hours; a chart fills
    the gaps it draws (``charts.bucket_hours``).
    """
    started: Counter[tuple[str, int, int]] = Counter()
    ended: Counter[tuple[str, int, int]] = Counter()
    completed: Counter[tuple[str, int, int]] = Counter()
    for t in transitions:
        hour = t.at_ms - t.at_ms % HOUR_MS
        key = (t.flow, t.flow_version, hour)
        if t.from_state == WorkflowState.INITIATED.value:
            started[key] += 1
        if t.to_state in TERMINAL_STATES:
            ended[key] += 1
            if t.to_state == WorkflowState.COMPLETED.value:
                completed[key] += 1
    return [
        HourThroughput(flow, version, hour, started[key], ended[key], completed[key])
        for key in sorted({*started, *ended})
        for flow, version, hour in [key]
    ]


def in_flight(transitions: Sequence[Transition], *, now_ms: int) -> list[InFlight]:
    """Workflows not ended, by the state their last transition entered.

    ``transitions`` must be in time order (``analyse`` sorts them).
    """
    last: dict[str, Transition] = {}
    for t in transitions:
        last[t.workflow_id] = t
    groups: dict[tuple[str, int, str, str | None], list[Transition]] = defaultdict(list)
    for t in last.values():
        if t.to_state not in TERMINAL_STATES:
            groups[(t.flow, t.flow_version, t.to_state, t.step)].append(t)
    rows = []
    for (flow, version, state, step), group in groups.items():
        oldest = min(group, key=lambda t: t.at_ms)
        rows.append(
            InFlight(
                flow=flow,
                flow_version=version,
                state=state,
                step=step,
                count=len(group),
                oldest_ms=max(0, now_ms - oldest.at_ms),
                oldest_workflow=oldest.workflow_id,
            )
        )
    return sorted(rows, key=lambda r: (r.flow, r.flow_version, _state_rank(r.state), r.step or ""))


def summaries(
    transitions: Sequence[Transition], flying: Sequence[InFlight] | None = None, *, now_ms: int = 0
) -> list[FlowSummary]:
    """The headline figures per flow version (``flying``: ``in_flight`` of the same records)."""
    if flying is None:
        flying = in_flight(transitions, now_ms=now_ms)
    rows = []
    for flow, version in flow_versions(transitions):
        mine = [t for t in transitions if t.flow == flow and t.flow_version == version]
        rows.append(
            FlowSummary(
                flow=flow,
                flow_version=version,
                transitions=len(mine),
                workflows=len({t.workflow_id for t in mine}),
                started=sum(t.from_state == WorkflowState.INITIATED.value for t in mine),
                ended=sum(t.to_state in TERMINAL_STATES for t in mine),
                completed=sum(t.to_state == WorkflowState.COMPLETED.value for t in mine),
                in_flight=sum(
                    f.count for f in flying if f.flow == flow and f.flow_version == version
                ),
            )
        )
    return rows


def is_error_state(state: str) -> bool:
    """A terminal state other than ``completed``."""
    return state in TERMINAL_STATES and state != WorkflowState.COMPLETED.value


def _dwell(flow: str, version: int, state: str, step: str | None, values: list[int]) -> Dwell:
    ordered = sorted(values)
    return Dwell(
        flow=flow,
        flow_version=version,
        state=state,
        step=step,
        count=len(ordered),
        p50_ms=percentile(ordered, "p50"),
        p95_ms=percentile(ordered, "p95"),
        p99_ms=percentile(ordered, "p99"),
        max_ms=ordered[-1],
    )


def _state_rank(state: str) -> tuple[int, str]:
    return (_STATE_ORDER.get(state, len(_STATE_ORDER)), state)
