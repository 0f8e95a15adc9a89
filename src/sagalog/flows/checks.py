"""What makes a flow definition right, beyond the shape of its fields.

A flow is a contract between services that never call each other: the tracker
expects events agents publish, agents expect events the tracker publishes. Every
edge therefore needs a producer, a consumer and a schema, and the topic it travels
on must carry it; otherwise a workflow would wait for an event nobody sends, or
send one nobody reads, and nobody would notice until a deadline passed in
production. ``check_flow`` returns every problem, each naming the file, the flow,
its version and the step or gate, so one run of ``sagalog flows check`` lists all
that needs fixing.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from dataclasses import dataclass

from sagalog.contracts.catalog import SchemaCatalog
from sagalog.durations import format_duration
from sagalog.flows.model import (
    COMPENSATION_COMPLETED,
    COMPENSATION_REQUESTED,
    GATE_DECIDED,
    GATE_OPENED,
    NAMED_ENDINGS,
    STEP_FAILED,
    STEP_RETRY_REQUESTED,
    WAIT_ENDED,
    Flow,
    Gate,
    Step,
    Wait,
)
from sagalog.flows.states import COMPENSATION_STATES, GATE_STATES, TERMINAL_STATES, WAIT_STATES
from sagalog.topology.model import Topology

# Events the platform publishes with the step or gate in their payload: one type
# serves every step, so they may appear in several places, but never complete a step.
_PLATFORM_EVENTS = frozenset(
    {
        STEP_FAILED,
        COMPENSATION_REQUESTED,
        COMPENSATION_COMPLETED,
        GATE_OPENED,
        GATE_DECIDED,
        WAIT_ENDED,
        STEP_RETRY_REQUESTED,
    }
)


@dataclass(frozen=True)
class FlowProblem:
    """One thing wrong with a flow definition, located for the person who fixes it."""

    source: str
    message: str
    flow: str | None = None
    version: int | None = None
    where: str | None = None

    def __str__(self) -> str:
        parts = []
        if self.flow is not None:
            parts.append(
                f"flow '{self.flow}'" + (f" v{self.version}" if self.version is not None else "")
            )
        if self.where:
            parts.append(self.where)
        located = f"{self.source}: {', '.join(parts)}" if parts else self.source
        return f"{located}: {self.message}"


def where(entry: Step | Gate | Wait) -> str:
    """``step 'reserve_budget'`` or ``gate 'manager_approval'``."""
    return f"{entry.kind} '{entry.name}'"


def check_flow(flow: Flow, *, catalog: SchemaCatalog, topology: Topology) -> list[FlowProblem]:
    """Every problem of one loaded flow version; empty when it may run.

    Args:
        flow: the flow, its entries resolved (``starts_on`` and ``after`` filled in).
        catalog: the schema catalog; every event type the flow names must be in it.
        topology: the declared topics; the flow's topic must be one and carry every
            event type the flow names.
    """
    found: list[FlowProblem] = []
    for located, message in (
        *_names(flow),
        *_edges(flow),
        *_roles(flow),
        *_signals(flow),
        *_durations(flow),
        *_segments(flow),
        *_sla(flow),
        *_contracts(flow, catalog, topology),
    ):
        found.append(
            FlowProblem(
                source=flow.source or "<flow>",
                message=message,
                flow=flow.name,
                version=flow.version,
                where=located,
            )
        )
    return found


Finding = tuple[str | None, str]


def _names(flow: Flow) -> Iterator[Finding]:
    seen: dict[str, int] = {}
    for i, entry in enumerate(flow.entries):
        if entry.name in seen:
            first = flow.entries[seen[entry.name]]
            yield (
                f"{entry.kind} '{entry.name}' (entry {i + 1})",
                f"the name is already used by the {first.kind} at entry {seen[entry.name] + 1}; "
                "step and gate names are unique in a flow",
            )
        else:
            seen[entry.name] = i
    for step in flow.steps:
        gate = step.budget_gate
        if gate is not None and gate.name in seen:
            yield (
                f"step '{step.name}'",
                f"its budget gate is named '{gate.name}', which entry {seen[gate.name] + 1} "
                "already is; rename that entry",
            )
    for kind, names in (
        ("segment", [s.name for s in flow.segments]),
        ("sla rule", [r.name for r in flow.sla]),
    ):
        for i, name in enumerate(names):
            if name in names[:i]:
                yield f"{kind} '{name}'", f"another {kind} has the same name; names are unique"


def _edges(flow: Flow) -> Iterator[Finding]:
    """Entries run in the listed order: each consumes what the one before it produces."""
    misplaced: set[int] = set()
    for i, entry in enumerate(flow.entries):
        before = flow.entries[i - 1] if i else None
        problem = _after_problem(flow, i, entry, before)
        if problem is not None:
            misplaced.add(i)
            yield where(entry), problem
            continue
        if isinstance(entry, Step):
            produced = (flow.starts_on,) if before is None else before.completes_on
            for event_type in entry.starts_on:
                if event_type not in produced:
                    yield where(entry), _no_producer(flow, i, event_type, before, produced)
    for i, entry in enumerate(flow.entries[:-1]):
        consumer = flow.entries[i + 1]
        if i + 1 in misplaced or not isinstance(consumer, Step):
            continue  # a gate opens on any completion of the entry before it
        for event_type in entry.completes_on:
            if event_type not in consumer.starts_on:
                yield (
                    where(entry),
                    f"completes on '{event_type}', which nothing consumes: the next entry, "
                    f"step '{consumer.name}', starts on {_listed(consumer.starts_on)} only; "
                    f"start it on '{event_type}' too or drop it from completes_on",
                )
    starts: dict[tuple[str, str | None], str] = {}
    completions: dict[str, str] = {}
    for step in flow.steps:
        for event_type in step.starts_on:
            key = (event_type, step.after if event_type in NAMED_ENDINGS else None)
            if key in starts:
                yield (
                    where(step),
                    f"starts on '{event_type}', which also starts step '{starts[key]}'; "
                    "no two steps start on the same event",
                )
            starts.setdefault(key, step.name)
        for event_type in step.completes_on:
            if event_type in completions:
                yield (
                    where(step),
                    f"completes on '{event_type}', which also completes step "
                    f"'{completions[event_type]}': the tracker could not tell which step "
                    "it completes",
                )
            completions.setdefault(event_type, step.name)


def _after_problem(
    flow: Flow, i: int, entry: Step | Gate | Wait, before: Step | Gate | Wait | None
) -> str | None:
    if entry.after == (before.name if before is not None else None):
        return None
    if before is None:
        return (
            f"is the first entry, so the flow start ('{flow.starts_on}') starts it; "
            f"drop after: {entry.after}"
        )
    if entry.after is None:
        return f"follows {where(before)} but says after: nothing; set after: {before.name}"
    if entry.after == entry.name:
        return "comes after itself; name the entry before it"
    target = flow.entry(entry.after)
    if target is None:
        return (
            f"after '{entry.after}': no step or gate of that name in this flow "
            f"(the entry before it is {where(before)})"
        )
    if flow.index(entry.after) > i:
        return (
            f"after '{entry.after}', which comes later in the list: entries run in the "
            "listed order, so move it below that entry"
        )
    return (
        f"after '{entry.after}', but the entry before it is {where(before)}: entries run in "
        f"the listed order, one at a time; move it right below '{entry.after}' or start it "
        f"after '{before.name}'"
    )


def _no_producer(
    flow: Flow,
    i: int,
    event_type: str,
    before: Step | Gate | Wait | None,
    produced: tuple[str, ...],
) -> str:
    by = "the flow start" if before is None else where(before)
    fix = f"start it on what {by} produces ({_listed(produced)})" + (
        f" or write after: {before.name}" if before is not None else ""
    )
    producers = [
        (j, e) for j, e in enumerate(flow.entries) if j != i and event_type in e.completes_on
    ]
    if not producers:
        return (
            f"starts on '{event_type}', which nothing in the flow produces (neither the flow "
            f"start nor any step or gate completes on it); {fix}"
        )
    j, producer = producers[0]
    if j > i:
        return (
            f"starts on '{event_type}', which only the later {where(producer)} produces; "
            f"entries run in the listed order, so {fix}"
        )
    return (
        f"starts on '{event_type}', which {where(producer)} produces, but entries run in "
        f"the listed order and the one before it is {by}; {fix}"
    )


def _roles(flow: Flow) -> Iterator[Finding]:
    """A business event plays one part in a flow, so the tracker can tell what it means."""
    completes = {e: s.name for s in flow.steps for e in s.completes_on}
    fails = {e: s.name for s in flow.steps for e in s.fails_on if e != STEP_FAILED}
    for step in flow.steps:
        for event_type in step.completes_on:
            if event_type == flow.starts_on:
                yield (
                    where(step),
                    f"completes on '{event_type}', which starts the flow: a workflow "
                    "cannot start itself again",
                )
            elif event_type in _PLATFORM_EVENTS:
                yield (
                    where(step),
                    f"completes on '{event_type}', which the platform publishes for every "
                    "step or gate; complete it on the business event its agent publishes",
                )
            elif event_type in fails:
                yield (
                    where(step),
                    f"completes on '{event_type}', which fails step '{fails[event_type]}'",
                )
        for event_type in step.fails_on:
            if event_type == flow.starts_on:
                yield where(step), f"fails on '{event_type}', which starts the flow"
        undo = step.undo
        if undo is None:
            continue
        for event_type in undo.completes_on:
            if event_type in completes:
                yield (
                    where(step),
                    f"{_undo_role(step)} completes on '{event_type}', which completes step "
                    f"'{completes[event_type]}'",
                )


def _signals(flow: Flow) -> Iterator[Finding]:
    """A signal is an outside event the tracker must recognize as that and nothing else."""
    expected: dict[tuple[str, str | None], str] = {}
    roles = {flow.starts_on: "starts the flow"}
    for step in flow.steps:
        roles.update({e: f"starts step '{step.name}'" for e in step.starts_on})
        roles.update({e: f"completes step '{step.name}'" for e in step.completes_on})
        roles.update({e: f"fails step '{step.name}'" for e in step.fails_on})
        roles.update({e: f"ends the undo of step '{step.name}'" for e in step.undo_completes_on})
    for wait in flow.waits:
        for signal in wait.signals:
            located = f"{where(wait)}, signal '{signal.name}'"
            key = (signal.event, signal.webhook)
            if key in expected:
                yield located, f"expects the same event as {expected[key]}; one event is one signal"
            expected.setdefault(key, f"signal '{signal.name}' of {where(wait)}")
            if signal.event in _PLATFORM_EVENTS:
                yield (
                    located,
                    f"waits for '{signal.event}', which the platform publishes for its own "
                    "steps and gates; wait for a business event or a webhook",
                )
            elif signal.event in roles:
                yield (
                    located,
                    f"waits for '{signal.event}', which {roles[signal.event]}: the tracker "
                    "could not tell a signal from that; publish a distinct event",
                )


def _durations(flow: Flow) -> Iterator[Finding]:
    """A timer longer than the workflow's deadline never fires: the deadline comes first."""
    deadline = format_duration(flow.deadline)

    def longer(what: str, ms: int) -> str:
        return (
            f"{what} {format_duration(ms)} is longer than the workflow deadline {deadline}, "
            "so it could never fire"
        )

    for entry in flow.entries:
        if isinstance(entry, Step) and entry.timeout > flow.deadline:
            yield where(entry), longer("timeout", entry.timeout)
        if isinstance(entry, Gate) and entry.deadline > flow.deadline:
            yield where(entry), longer("deadline", entry.deadline)
        budget_gate = entry.budget_gate if isinstance(entry, Step) else None
        if budget_gate is not None and budget_gate.deadline > flow.deadline:
            yield where(entry), longer("budget gate deadline", budget_gate.deadline)
        if isinstance(entry, Wait) and entry.timeout > flow.deadline:
            yield where(entry), longer("timeout", entry.timeout)
    for segment in flow.segments:
        if segment.timeout > flow.deadline:
            yield f"segment '{segment.name}'", longer("timeout", segment.timeout)


def _segments(flow: Flow) -> Iterator[Finding]:
    names = [e.name for e in flow.entries]
    for segment in flow.segments:
        located = f"segment '{segment.name}'"
        unknown = [n for n in segment.steps if n not in names]
        for name in unknown:
            yield located, f"names '{name}', which is not a step or gate of this flow"
        if unknown:
            continue
        if len(set(segment.steps)) != len(segment.steps):
            yield located, "names a step twice"
            continue
        positions = [names.index(n) for n in segment.steps]
        expected = list(range(positions[0], positions[0] + len(positions)))
        if positions != expected:
            first, last = min(positions), max(positions)
            between = [n for n in names[first : last + 1] if n not in segment.steps]
            detail = f"'{between[0]}' comes between them" if between else "they are out of order"
            yield (
                located,
                f"names {_listed(segment.steps)}, which are not consecutive entries in flow "
                f"order ({detail}); a segment is a run of consecutive steps, listed in order",
            )


def _sla(flow: Flow) -> Iterator[Finding]:
    for rule in flow.sla:
        located = f"sla rule '{rule.name}'"
        if rule.step is not None and flow.entry(rule.step) is None:
            yield located, f"measures '{rule.step}', which is not a step or gate of this flow"
        state = rule.state
        if state is None:
            continue
        if state in TERMINAL_STATES:
            yield (
                located,
                f"state '{state}' is terminal: workflows never leave it, so time in it "
                "has no end to measure",
            )
        elif state in GATE_STATES and not flow.gates:
            yield located, f"state '{state}' needs a human gate, and this flow has none"
        elif state in WAIT_STATES and not flow.waits:
            yield (
                located,
                f"state '{state}' needs a wait for outside events, and this flow has none",
            )
        elif state in COMPENSATION_STATES and not any(s.undo_action for s in flow.steps):
            yield (
                located,
                f"state '{state}' needs a step with a compensation or follow-up, and this "
                "flow has none",
            )


def _contracts(flow: Flow, catalog: SchemaCatalog, topology: Topology) -> Iterator[Finding]:
    """Every event the flow names has a schema, and its topic carries it."""
    topic = topology.topic(flow.topic)
    if topic is None:
        declared = ", ".join(sorted(t.name for t in topology.topics)) or "none"
        yield (
            "field 'topic'",
            f"topic '{flow.topic}' is not declared in the topology (declared: {declared}); "
            "declare it in topology/*.yaml or fix the name",
        )
    start = catalog.get(flow.starts_on)
    if start is not None:
        for key in flow.correlation_keys:
            if key not in start.field_names:
                yield (
                    "field 'correlation_keys'",
                    f"'{key}' is not a field of the starting event {flow.starts_on} (its "
                    f"fields: {', '.join(start.field_names)}); a correlation key is read "
                    "from the event that starts the workflow",
                )
    reported: set[str] = set()
    for located, role, event_type in _mentions(flow):
        if event_type in reported:
            continue
        if event_type not in catalog:
            reported.add(event_type)
            close = difflib.get_close_matches(event_type, list(catalog), n=1, cutoff=0.8)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            yield (
                located,
                f"{role} '{event_type}', which has no schema in {catalog.root}/{hint}",
            )
        elif topic is not None and event_type not in topic.schemas:
            reported.add(event_type)
            yield (
                located,
                f"{role} '{event_type}', which topic '{topic.name}' does not carry; add it "
                "to that topic's schemas: list in the topology",
            )


def _mentions(flow: Flow) -> Iterator[tuple[str | None, str, str]]:
    yield "field 'starts_on'", "starts on", flow.starts_on
    for entry in flow.entries:
        if isinstance(entry, Gate):
            yield where(entry), "opens with", GATE_OPENED
            yield where(entry), "is decided by", GATE_DECIDED
            continue
        if isinstance(entry, Wait):
            for signal in entry.signals:
                yield f"{where(entry)}, signal '{signal.name}'", "waits for", signal.event
            yield where(entry), "ends with", WAIT_ENDED
            continue
        for event_type in entry.starts_on:
            yield where(entry), "starts on", event_type
        for event_type in entry.completes_on:
            yield where(entry), "completes on", event_type
        for event_type in entry.fails_on:
            yield where(entry), "fails on", event_type
        if entry.budget_gate is not None:
            yield where(entry), "opens its budget gate with", GATE_OPENED
            yield where(entry), "has its budget gate decided by", GATE_DECIDED
            yield where(entry), "is run again after its budget gate with", STEP_RETRY_REQUESTED
        undo = entry.undo
        if undo is not None:
            yield where(entry), f"{_undo_role(entry)} is requested with", COMPENSATION_REQUESTED
            for event_type in undo.completes_on:
                yield where(entry), f"{_undo_role(entry)} completes on", event_type


def _undo_role(step: Step) -> str:
    if step.compensation is not None:
        return f"compensation '{step.compensation.action}'"
    return f"follow-up '{step.undo_action}'"


def _listed(event_types: tuple[str, ...]) -> str:
    return ", ".join(f"'{e}'" for e in event_types)
