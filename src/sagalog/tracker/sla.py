"""Semantic SLA alerts: a flow's ``sla`` rules evaluated over a window of state spans.

The raw material is the ``StateTransition`` stream: each transition ends one span
(a workflow in a state, at an entry) and starts the next; ``sla_monitor`` keeps
them as the transitions are published, for the service and for what-if alike. A rule

- ``time_in_state`` looks at the spans in its ``state``;
- ``step_duration`` at the spans where its ``step`` was being worked on or waited
  for: ``running`` for a step, ``pending_approval`` for a gate (the time a person
  took), so the zero-length ``approved`` and the compensation of that step do not count.

Spans count when they ended inside the last ``window``, and so do spans still open
(measured up to ``now_ms``): otherwise the alert "approvals wait too long" could never
fire while nobody decides, which is exactly when it should. An open span's length is
a lower bound of its eventual duration, so counting it never raises a false alarm.

Statistics use the nearest-rank percentile (the ⌈p·n⌉-th smallest value): every
reported value is one that was observed, and the result does not depend on an
interpolation method.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from sagalog.durations import format_duration
from sagalog.flows.model import Flow, SlaRule
from sagalog.flows.states import WorkflowState

_PERCENT = {"p50": 50, "p95": 95, "p99": 99, "max": 100}
_WORKED_ON = frozenset({WorkflowState.RUNNING.value, WorkflowState.PENDING_APPROVAL.value})


@dataclass(frozen=True, slots=True)
class Span:
    """A workflow in ``state`` at entry ``step`` from ``entered_ms`` to ``left_ms`` (None: open)."""

    state: str
    step: str | None
    entered_ms: int
    left_ms: int | None = None

    def duration_ms(self, now_ms: int) -> int:
        end = self.left_ms if self.left_ms is not None else now_ms
        return max(0, end - self.entered_ms)


@dataclass(frozen=True, slots=True)
class SlaAlert:
    """A rule that fires: its statistic over the window is above its bound."""

    flow: str
    flow_version: int
    rule: SlaRule
    value_ms: int
    samples: int
    message: str

    @property
    def name(self) -> str:
        return self.rule.name


def percentile(values: Sequence[int], statistic: str, *, zeros: int = 0) -> int:
    """Nearest-rank ``p50``/``p95``/``p99``/``max`` of ``values`` (durations, never
    negative) together with ``zeros`` more values of 0, which need not be listed."""
    total = len(values) + zeros
    if not total:
        raise ValueError("no values to take a percentile of")
    rank = max(1, math.ceil(_PERCENT[statistic] / 100 * total))
    if rank <= zeros:
        return 0
    return sorted(values)[rank - zeros - 1]


def measures(rule: SlaRule, state: str, step: str | None) -> bool:
    """Whether ``rule`` measures a span in ``state`` at entry ``step``."""
    if rule.metric == "time_in_state":
        return rule.state is not None and state == rule.state.value
    return step == rule.step and state in _WORKED_ON


def observed(rule: SlaRule, spans: Iterable[Span], *, now_ms: int) -> list[int]:
    """The durations ``rule`` measures among ``spans``, for its window ending at ``now_ms``."""
    since = now_ms - rule.window
    durations = []
    for span in spans:
        if span.left_ms is not None and span.left_ms < since:
            continue  # ended before the window
        if span.entered_ms > now_ms:
            continue
        if measures(rule, span.state, span.step):
            durations.append(span.duration_ms(now_ms))
    return durations


def evaluate(
    flow: Flow,
    spans: Iterable[Span],
    *,
    now_ms: int,
    min_samples: int = 1,
    untimed: Mapping[str, int] | None = None,
) -> list[SlaAlert]:
    """The flow's rules that fire at ``now_ms`` over ``spans`` (of the flow's workflows).

    Args:
        flow: the flow version whose ``sla`` rules apply.
        spans: spans of that flow's workflows (several workflows mixed is fine).
        now_ms: the end of every rule's window.
        min_samples: a rule with fewer observations in its window does not fire.
        untimed: per state, open spans counted but not timed: each is a zero-length
            sample of that state's ``time_in_state`` rules (a tracker with 100,000
            workflows at a gate made 90,000 such spans every evaluation).
    """
    pool = list(spans)
    alerts = []
    for rule in flow.sla:
        values = observed(rule, pool, now_ms=now_ms)
        zeros = 0
        if untimed and rule.metric == "time_in_state" and rule.state is not None:
            zeros = untimed.get(rule.state.value, 0)
        if len(values) + zeros < max(1, min_samples):
            continue
        value = percentile(values, rule.statistic, zeros=zeros)
        if value <= rule.above:
            continue
        what = (
            f"time in {rule.state}"
            if rule.metric == "time_in_state"
            else f"duration of {rule.step}"
        )
        message = (
            f"{flow.label}: {rule.name}: {rule.statistic} {what} over the last "
            f"{format_duration(rule.window)} is {format_duration(value)}, above "
            f"{format_duration(rule.above)} ({len(values) + zeros} samples)"
            + (f". {rule.description}" if rule.description else "")
        )
        alerts.append(SlaAlert(flow.name, flow.version, rule, value, len(values) + zeros, message))
    return alerts
