"""Flows as frozen objects: the steps, gates, timeouts and SLA rules of one flow version.

A flow is an ordered list of entries, steps and human gates, that run one after the
other: each entry starts when the one before it completes (the first when the flow
starts), and the workflow completes with the last. That order is also the order of
compensation, backwards. Frozen, because an in-flight workflow finishes under the
version it started with, and that version must not change under it.

The models check what one entry can know about itself (names, durations, that a step
with an external effect says how to undo it, that escalations come before the gate's
deadline). What needs the whole flow, the schema catalog or the topology (edges,
schemas, topics) is checked by ``sagalog.flows.checks`` when ``load_flows`` reads a
file; a ``Flow`` built by hand is not checked until ``check_flow`` is called on it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cached_property
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    PositiveInt,
    Tag,
    model_validator,
)

from sagalog.durations import PositiveDurationMs, format_duration, is_positive_duration
from sagalog.flows.states import WorkflowState
from sagalog.priority import Priority
from sagalog.validators import checked

STEP_FAILED = "sagalog.v1.StepFailed"
COMPENSATION_REQUESTED = "sagalog.v1.CompensationRequested"
COMPENSATION_COMPLETED = "sagalog.v1.CompensationCompleted"
GATE_OPENED = "sagalog.v1.GateOpened"
GATE_DECIDED = "sagalog.v1.GateDecided"
WAIT_ENDED = "sagalog.v1.WaitEnded"
WEBHOOK_RECEIVED = "sagalog.v1.WebhookReceived"
WORKFLOW_MIGRATED = "sagalog.v1.WorkflowMigrated"
WORKFLOW_CANCELLED = "sagalog.v1.WorkflowCancelled"
STEP_RETRY_REQUESTED = "sagalog.v1.StepRetryRequested"
EFFECT_RECORDED = "sagalog.v1.EffectRecorded"
DEAD_LETTER_REPLAYED = "sagalog.v1.DeadLetterReplayed"
WORKFLOW_TOPIC_EVENTS = (
    STEP_FAILED,
    GATE_OPENED,
    GATE_DECIDED,
    COMPENSATION_REQUESTED,
    COMPENSATION_COMPLETED,
    EFFECT_RECORDED,
    WEBHOOK_RECEIVED,
    WAIT_ENDED,
    WORKFLOW_MIGRATED,
    WORKFLOW_CANCELLED,
    DEAD_LETTER_REPLAYED,
)
"""The platform's events on every topic a flow runs on, whatever the flow says: the agent
runtime writes StepFailed, EffectRecorded and CompensationCompleted; the tracker
GateOpened, CompensationRequested, WaitEnded (and StepFailed for a gate that fails); the
gateway GateDecided, WebhookReceived, WorkflowCancelled and DeadLetterReplayed; ``sagalog
flows migrate`` WorkflowMigrated. A topic's schema list follows from these and its flows
(``topology.topic_schemas``). StepRetryRequested is not among them: only a flow with a
budget gate makes the tracker write it, and ``Flow.event_types`` says so."""
BUDGET_REFUSED = "BudgetRefused"
"""The ``error_class`` of a ``StepFailed`` whose step found its model budget exhausted
(``sagalog.agents.BudgetRefused``): what opens a step's budget gate."""
BUDGET_GATE_SUFFIX = "_budget"
"""A step's budget gate is named after it: ``draft_filing_budget``."""

NAMED_ENDINGS = frozenset({GATE_DECIDED, WAIT_ENDED})
"""Platform events that end any gate (any wait): their payload names which one."""

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_FLOW_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")
_AGENT_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
_EVENT_TYPE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")


def is_event_type(value: Any) -> bool:
    """Whether ``value`` looks like an event type: an Avro full name such as ``ns.v1.Name``."""
    return isinstance(value, str) and bool(_EVENT_TYPE.match(value))


def _event_types(value: Any) -> Any:
    """One event type or a list of them; always a tuple of checked names."""
    items = [value] if isinstance(value, str) else value
    if isinstance(items, (list, tuple)):
        for item in items:
            if not isinstance(item, str) or not _EVENT_TYPE.match(item):
                raise ValueError(
                    f"{item!r} is not an event type; use its Avro full name, "
                    "e.g. procurement.v1.BudgetReserved"
                )
        return tuple(items)
    return value


def _priority(value: Any) -> Any:
    if isinstance(value, str):
        member = Priority.__members__.get(value.strip().upper())
        if member is None:
            names = ", ".join(p.name.lower() for p in Priority)
            raise ValueError(f"{value!r} is not a priority; use one of {names}")
        return member
    return value


Name = Annotated[str, checked(_NAME, "a name of lowercase letters, digits and '_' (snake_case)")]
FlowName = Annotated[
    str, checked(_FLOW_NAME, "a flow name of lowercase letters, digits, '_' and '-'")
]
AgentName = Annotated[str, checked(_AGENT_NAME, "an agent name of letters, digits, '-', '_'")]
EventType = Annotated[str, checked(_EVENT_TYPE, "an event type such as procurement.v1.X")]
EventTypes = Annotated[tuple[str, ...], BeforeValidator(_event_types), Field(min_length=1)]
Assignee = Annotated[str, Field(min_length=1)]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy without the values its ``cached_property`` indexes hold: they were
        derived from the fields an ``update`` may replace."""
        copied = super().model_copy(update=update, deep=deep)
        for name in _cached_names(type(self)):
            copied.__dict__.pop(name, None)
        return copied


def _cached_names(cls: type) -> tuple[str, ...]:
    return tuple(
        name
        for klass in cls.__mro__
        for name, value in vars(klass).items()
        if isinstance(value, cached_property)
    )


class Compensation(_Frozen):
    """How the agent that ran a step undoes it, when the workflow compensates.

    The tracker publishes ``CompensationRequested(step, compensation=action)``, waits
    for one of ``completes_on``, and alerts when that takes longer than ``timeout``
    (in the file, the step's own timeout unless given).
    """

    action: Name
    completes_on: EventTypes = (COMPENSATION_COMPLETED,)
    timeout: PositiveDurationMs


class Irreversible(_Frozen):
    """A step whose effect cannot be undone (a sent message); its follow-up amends it.

    Requested like a compensation, with ``follow_up`` as the action.
    """

    follow_up: Name
    completes_on: EventTypes = (COMPENSATION_COMPLETED,)
    timeout: PositiveDurationMs


class Step(_Frozen):
    """Work an agent does: started by one event, completed or failed by others.

    After loading, ``starts_on`` holds the event types that start the step and
    ``after`` the entry it follows (None for the first), whichever form the file used.
    """

    kind: ClassVar[Literal["step"]] = "step"

    name: Name
    agent: AgentName
    description: str = ""
    starts_on: EventTypes
    after: Name | None = None
    completes_on: EventTypes
    fails_on: EventTypes = Field(
        default=(STEP_FAILED,),
        description="StepFailed counts only when its `step` field names this step.",
    )
    timeout: PositiveDurationMs
    effect: Literal["external", "none"] = "external"
    compensation: Compensation | None = None
    irreversible: Irreversible | None = None
    on_budget_exhausted: Literal["wait", "fail", "gate"] = Field(
        default="wait",
        description="When a model call's budget has no room (sagalog.budgets): wait "
        "(deferred until the window refills, no attempt spent), fail (the step fails "
        "and the workflow compensates), or gate (the step's budget_gate opens: approved, "
        "the step runs again over the budget; rejected, the workflow compensates).",
    )
    budget_gate: Gate | None = Field(
        default=None,
        description="The person who may let the step go over its budget, with on_budget_"
        "exhausted: gate: {assignee, deadline, default, escalation}. Named "
        "<step>_budget; opened by the step's StepFailed for want of budget.",
    )

    @model_validator(mode="before")
    @classmethod
    def _budget_gate_is_named_for_the_step(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("budget_gate"), dict):
            derived = {
                "gate": f"{data.get('name')}{BUDGET_GATE_SUFFIX}",
                "starts_on": [STEP_FAILED],
                "after": None,
            }
            gate = dict(data["budget_gate"])
            given = {  # as a dumped flow holds them: the same
                k: list(v) if isinstance(v, tuple) else v for k, v in gate.items() if k in derived
            }
            if "name" in gate or {**derived, **given} != derived:
                raise ValueError(
                    "budget_gate takes assignee, deadline, default and escalation only: it "
                    f"is named <step>{BUDGET_GATE_SUFFIX} and opens when the step runs out of "
                    "budget"
                )
            data = {**data, "budget_gate": {**gate, **derived}}
        return data

    @model_validator(mode="after")
    def _gate_policy_has_its_gate(self) -> Step:
        if (self.on_budget_exhausted == "gate") != (self.budget_gate is not None):
            raise ValueError(
                "on_budget_exhausted: gate and budget_gate go together: the gate says who "
                "may let the step go over its budget (budget_gate: {assignee: <who>, "
                "deadline: 24h, default: reject}), and only that policy opens it"
            )
        return self

    @model_validator(mode="before")
    @classmethod
    def _undo_timeout_defaults_to_step_timeout(cls, data: Any) -> Any:
        if isinstance(data, dict) and is_positive_duration(data.get("timeout")):
            for key in ("compensation", "irreversible"):
                undo = data.get(key)
                if isinstance(undo, dict) and "timeout" not in undo:
                    data = {**data, key: {**undo, "timeout": data["timeout"]}}
        return data

    @model_validator(mode="after")
    def _says_how_to_undo(self) -> Step:
        if self.effect == "none":
            if self.compensation is not None or self.irreversible is not None:
                raise ValueError(
                    "says effect: none but also how to undo its effect; drop effect: none "
                    "or the compensation/irreversible entry"
                )
        elif self.compensation is None and self.irreversible is None:
            raise ValueError(
                "has an external effect but says nothing about undoing it: add "
                "compensation: {action, completes_on, timeout}, or irreversible: "
                "{follow_up: <action>} when it cannot be undone, or effect: none when "
                "it changes nothing outside the workflow"
            )
        elif self.compensation is not None and self.irreversible is not None:
            raise ValueError(
                "has both a compensation and irreversible: a step is either undone or "
                "followed up, keep one"
            )
        return self

    @property
    def undo(self) -> Compensation | Irreversible | None:
        """The compensation or follow-up of this step, if it has one."""
        return self.compensation or self.irreversible

    @property
    def undo_action(self) -> str | None:
        """The action the tracker requests when compensating past this step, if any."""
        if self.compensation is not None:
            return self.compensation.action
        if self.irreversible is not None:
            return self.irreversible.follow_up
        return None

    @cached_property
    def undo_completes_on(self) -> tuple[str, ...]:
        """The events that end this step's compensation or follow-up (empty if none)."""
        return self.undo.completes_on if self.undo is not None else ()


class Escalation(_Frozen):
    """Hand the gate to ``to`` once it has waited ``after`` (counted from its opening)."""

    after: PositiveDurationMs
    to: Assignee


class Gate(_Frozen):
    """A person's decision: opened when the entry before it completes.

    Decided by ``sagalog.v1.GateDecided`` (APPROVED continues with the next entry,
    REJECTED compensates); at ``deadline`` the tracker applies ``default``: approve
    or reject as if a person had, or fail the gate like a failed step.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    kind: ClassVar[Literal["gate"]] = "gate"

    name: Name = Field(alias="gate")
    description: str = ""
    starts_on: EventTypes
    after: Name | None = None
    assignee: Assignee
    escalation: tuple[Escalation, ...] = ()
    deadline: PositiveDurationMs
    default: Literal["approve", "reject", "fail"]

    @property
    def completes_on(self) -> tuple[str, ...]:
        return (GATE_DECIDED,)

    @model_validator(mode="after")
    def _escalations_in_time(self) -> Gate:
        previous: Escalation | None = None
        for escalation in self.escalation:
            if previous is not None and escalation.after <= previous.after:
                raise ValueError(
                    f"escalation to '{escalation.to}' after {format_duration(escalation.after)}"
                    f" is not later than the one to '{previous.to}' after "
                    f"{format_duration(previous.after)}: list escalations in the order "
                    "they happen, each later than the last"
                )
            if escalation.after >= self.deadline:
                raise ValueError(
                    f"escalation to '{escalation.to}' after {format_duration(escalation.after)}"
                    f" is not before the gate's deadline {format_duration(self.deadline)}, "
                    f"when the default ({self.default}) applies: it could never happen"
                )
            previous = escalation
        return self


class Signal(_Frozen):
    """One event a wait expects, matched to its workflow by the workflow id (the Kafka key).

    ``webhook`` narrows a ``sagalog.v1.WebhookReceived`` to the webhook kind it names
    (the gateway's ``POST /v1/webhooks/{kind}``): one event type carries every
    outside system's calls, the kind tells them apart.
    """

    name: Name
    event: EventType
    webhook: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_.-]{0,63}$")] | None = None

    @model_validator(mode="after")
    def _webhook_only_for_webhooks(self) -> Signal:
        if (self.webhook is None) == (self.event == WEBHOOK_RECEIVED):
            raise ValueError(
                f"a signal on {WEBHOOK_RECEIVED} names the webhook kind it waits for "
                "(webhook: document.filed), and only such a signal does"
            )
        return self

    def matches(self, event_type: str, webhook_kind: str | None) -> bool:
        """Whether an event of ``event_type`` (a webhook of ``webhook_kind``) is this signal."""
        return event_type == self.event and (self.webhook is None or webhook_kind == self.webhook)


class Wait(_Frozen):
    """A pause for events from outside the flow: webhooks, other publishers, other workflows.

    Opened when the entry before it completes; ``mode: all`` ends it when every signal
    has arrived, ``any`` at the first. A signal that arrives before the wait opens is
    held (parked) until it does, so a fast webhook is never lost to a slow step. At
    ``timeout`` the tracker applies ``default``: ``continue`` moves on with what
    arrived, ``fail`` compensates like a failed step. The tracker publishes
    ``sagalog.v1.WaitEnded`` either way; the entry after the wait starts on it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    kind: ClassVar[Literal["wait"]] = "wait"

    name: Name = Field(alias="wait")
    description: str = ""
    starts_on: EventTypes
    after: Name | None = None
    signals: tuple[Signal, ...] = Field(alias="for", min_length=1)
    mode: Literal["all", "any"] = "all"
    timeout: PositiveDurationMs
    default: Literal["continue", "fail"]

    @property
    def completes_on(self) -> tuple[str, ...]:
        return (WAIT_ENDED,)

    @model_validator(mode="after")
    def _signals_distinct(self) -> Wait:
        names = [s.name for s in self.signals]
        for i, signal in enumerate(self.signals):
            if signal.name in names[:i]:
                raise ValueError(f"two signals are named '{signal.name}'; name each once")
            if any(signal.matches(o.event, o.webhook) for o in self.signals[:i]):
                raise ValueError(
                    f"signal '{signal.name}' expects the same event as another; the tracker "
                    "could not tell which one arrived"
                )
        return self

    def signal_for(self, event_type: str, webhook_kind: str | None) -> Signal | None:
        """The signal an event is, or None."""
        return next((s for s in self.signals if s.matches(event_type, webhook_kind)), None)

    def is_satisfied(self, received: tuple[str, ...]) -> bool:
        """Whether the signals named in ``received`` end the wait."""
        if self.mode == "any":
            return bool(received)
        return all(s.name in received for s in self.signals)


def _entry_kind(value: Any) -> str:
    """A gate is written ``gate: <name>`` (dumped with ``assignee``), a wait ``wait: <name>``
    (dumped with ``signals``); a step has none of these."""
    if isinstance(value, Gate) or (
        isinstance(value, dict) and ("gate" in value or "assignee" in value)
    ):
        return "gate"
    if isinstance(value, Wait) or (
        isinstance(value, dict) and ("wait" in value or "signals" in value)
    ):
        return "wait"
    return "step"


Entry = Annotated[
    Annotated[Step, Tag("step")] | Annotated[Gate, Tag("gate")] | Annotated[Wait, Tag("wait")],
    Discriminator(_entry_kind),
]


class Segment(_Frozen):
    """Consecutive entries that together must finish within ``timeout``."""

    name: Name
    steps: tuple[Name, ...] = Field(min_length=1)
    timeout: PositiveDurationMs


class SlaRule(_Frozen):
    """A semantic alert evaluated from the flow's state transitions.

    ``time_in_state`` bounds how long workflows stay in ``state``; ``step_duration``
    how long ``step`` (a step or a gate) takes. The rule fires when ``statistic`` of
    the durations observed over the last ``window`` is above ``above``.
    """

    name: Name
    description: str = ""
    metric: Literal["time_in_state", "step_duration"]
    state: WorkflowState | None = None
    step: Name | None = None
    statistic: Literal["p50", "p95", "p99", "max"]
    window: PositiveDurationMs
    above: PositiveDurationMs

    @model_validator(mode="after")
    def _names_what_it_measures(self) -> SlaRule:
        if self.metric == "time_in_state" and (self.state is None or self.step is not None):
            raise ValueError("metric time_in_state needs state: <state> and no step")
        if self.metric == "step_duration" and (self.step is None or self.state is not None):
            raise ValueError("metric step_duration needs step: <step or gate> and no state")
        return self


class Flow(_Frozen):
    """One version of a flow, as loaded from ``topology/flows/<flow>.v<version>.yaml``.

    The helpers answer the tracker's questions from the definition alone, so its
    rules stay pure functions of (state, event, flow).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    name: FlowName = Field(alias="flow")
    version: PositiveInt
    description: str = ""
    topic: str
    starts_on: EventType
    deadline: PositiveDurationMs
    priority: Annotated[Priority, BeforeValidator(_priority)] = Priority.NORMAL
    correlation_keys: tuple[Name, ...] = Field(
        default=(),
        description="Fields of the starting event that name a workflow outside sagalog (an "
        "order number): a webhook may name its workflow by one of them instead of its id.",
    )
    entries: tuple[Entry, ...] = Field(alias="steps", min_length=1)
    segments: tuple[Segment, ...] = ()
    sla: tuple[SlaRule, ...] = ()
    source: str = Field(default="", description="The file it was loaded from.")

    @property
    def label(self) -> str:
        """``procurement v1``, as messages and graphs name it."""
        return f"{self.name} v{self.version}"

    @cached_property
    def steps(self) -> tuple[Step, ...]:
        """The steps alone, in flow order."""
        return tuple(e for e in self.entries if isinstance(e, Step))

    @cached_property
    def gates(self) -> tuple[Gate, ...]:
        """The human gates alone, in flow order."""
        return tuple(e for e in self.entries if isinstance(e, Gate))

    @cached_property
    def budget_gates(self) -> tuple[Gate, ...]:
        """The steps' budget gates (``on_budget_exhausted: gate``), in flow order."""
        return tuple(s.budget_gate for s in self.steps if s.budget_gate is not None)

    @cached_property
    def waits(self) -> tuple[Wait, ...]:
        """The waits for outside events alone, in flow order."""
        return tuple(e for e in self.entries if isinstance(e, Wait))

    def wait_for_signal(
        self, event_type: str, webhook_kind: str | None = None
    ) -> tuple[Wait, Signal] | None:
        """The wait (and its signal) an event is expected by, or None.

        A flow check keeps one event from being two waits' signal, so the answer is unique.
        """
        for wait in self.waits:
            signal = wait.signal_for(event_type, webhook_kind)
            if signal is not None:
                return wait, signal
        return None

    def entry(self, name: str) -> Step | Gate | Wait | None:
        """The step, gate or wait called ``name``, a step's budget gate included, or
        None (say, a StepFailed for a stranger)."""
        found = self.entries_by_name.get(name)
        if found is None and name.endswith(BUDGET_GATE_SUFFIX):
            step = self.step_of_budget_gate(name)
            return step.budget_gate if step is not None else None
        return found

    @cached_property
    def entries_by_name(self) -> dict[str, Step | Gate | Wait]:
        """The entries by name (the first of a name, as ``entry`` always answered)."""
        index: dict[str, Step | Gate | Wait] = {}
        for entry in self.entries:
            index.setdefault(entry.name, entry)
        return index

    def step_of_budget_gate(self, gate: str) -> Step | None:
        """The step whose budget gate is called ``gate``, or None."""
        return next(
            (s for s in self.steps if s.budget_gate is not None and s.budget_gate.name == gate),
            None,
        )

    def index(self, name: str) -> int:
        """The position of the step or gate ``name`` in the flow.

        Raises:
            KeyError: when the flow has no such step or gate.
        """
        for i, entry in enumerate(self.entries):
            if entry.name == name:
                return i
        step = self.step_of_budget_gate(name)
        if step is not None:  # open while its step waits, it stands where the step does
            return self.index(step.name)
        raise KeyError(f"flow {self.label} has no step or gate '{name}'")

    def step_for_start(self, event_type: str, *, gate: str | None = None) -> Step | None:
        """The step that ``event_type`` starts, or None.

        A ``GateDecided`` (a ``WaitEnded``) starts the step after the gate (the wait) it
        names: pass that name as ``gate``.
        """
        for step in self.steps:
            if event_type in step.starts_on and (
                event_type not in NAMED_ENDINGS or step.after == gate
            ):
                return step
        return None

    def step_for_completion(self, event_type: str) -> Step | None:
        """The step that ``event_type`` completes, or None."""
        return self.completing.get(event_type)

    @cached_property
    def completing(self) -> dict[str, Step]:
        """Each completion event type's step (the first in flow order): the tracker asks
        for every completion it reads, so the flow's frozen models answer from an index
        built once (``cached_property`` is safe on them: they never change)."""
        index: dict[str, Step] = {}
        for step in self.steps:
            for event_type in step.completes_on:
                index.setdefault(event_type, step)
        return index

    def step_for_failure(self, event_type: str, *, step: str | None = None) -> Step | None:
        """The step that ``event_type`` fails, or None.

        A ``StepFailed`` fails the step its ``step`` field names: pass that name.
        """
        for candidate in self.steps:
            if event_type in candidate.fails_on and (
                event_type != STEP_FAILED or candidate.name == step
            ):
                return candidate
        return None

    def next_after(self, name: str) -> Step | Gate | Wait | None:
        """The entry that runs when ``name`` completes; None when the workflow completes.

        Raises:
            KeyError: when the flow has no step or gate ``name``.
        """
        i = self.index(name)
        return self.entries[i + 1] if i + 1 < len(self.entries) else None

    def completed_steps_before(self, name: str) -> tuple[Step, ...]:
        """The steps that completed before ``name`` started, most recent first.

        That is the order of compensation: when ``name`` fails (or the workflow times
        out or a gate rejects while at ``name``), these are undone one at a time, in
        this order, each by its compensation or follow-up (steps with no effect have
        neither and are passed over).

        Raises:
            KeyError: when the flow has no step or gate ``name``.
        """
        before = self.entries[: self.index(name)]
        return tuple(e for e in reversed(before) if isinstance(e, Step))

    def segments_of(self, name: str) -> tuple[Segment, ...]:
        """The segments the step or gate ``name`` belongs to."""
        return tuple(s for s in self.segments if name in s.steps)

    def event_types(self) -> frozenset[str]:
        """Every event type the flow names or makes the tracker publish."""
        return frozenset(self.named_event_types())

    def named_event_types(self) -> tuple[str, ...]:
        """``event_types`` in the order the flow first names each (its start, then entry
        by entry: what starts it, what completes it, what fails or undoes it), the
        platform's events the flow's shape implies last."""
        named = [self.starts_on]
        for entry in self.entries:
            named += entry.starts_on
            if isinstance(entry, Wait):
                named += [s.event for s in entry.signals]
            named += entry.completes_on
            if isinstance(entry, Step):
                named += entry.fails_on
                named += entry.undo_completes_on
        if self.gates or self.budget_gates:
            named += (GATE_OPENED, GATE_DECIDED)
        if self.budget_gates:
            named.append(STEP_RETRY_REQUESTED)
        if any(s.undo_action for s in self.steps):
            named.append(COMPENSATION_REQUESTED)
        return tuple(dict.fromkeys(named))


Step.model_rebuild()  # its budget_gate is a Gate, defined after it
