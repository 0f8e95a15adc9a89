"""An agent's declaration bound to the flows that name it, as it starts.

The flows say which agent runs each step, on which events the step starts and
completes, and whether it is undone; the tracker reads them without importing any
agent. So an agent says none of this again: binding reads it from the flows, once,
when the agent starts (``sagalog run agent``, ``FlowTestEnvironment``, ``sagalog flows
check --agent``):

- its topics are the topics of the flows that name it on a step;
- each handler takes the events its step starts on (every flow version that names
  the step: older versions still run in-flight work), decoded into their classes;
- its workflow context keeps every event type the flows on those topics name.

One check runs with it, for the mistakes that would otherwise show days later as a
stuck workflow: a handler or compensation for a step no flow gives the agent, a step
(or an undo) the agent has no handler for, and a handler's annotations (plain Python
typing, optional) contradicting the flow: a parameter of another event type than the
step starts on, a return of an event the flow does not wait for. An annotation the
check cannot read (none, ``Any``, a name imported only for type checking) says nothing.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sagalog.agents.declaration import COMPENSATION_TYPE, Agent, Declared, HandlerSpec
from sagalog.budgets.declaration import Budget
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.contracts.models import Event
from sagalog.errors import AgentContractError, ConfigurationError
from sagalog.flows.loader import load_flows
from sagalog.flows.model import (
    COMPENSATION_COMPLETED,
    STEP_FAILED,
    STEP_RETRY_REQUESTED,
    Flow,
    Step,
)
from sagalog.flows.registry import FlowRegistry
from sagalog.topology.loader import load_topology
from sagalog.topology.topic_schemas import flow_event_types


@dataclass(frozen=True)
class BoundAgent:
    """An agent as its flows give it work; what the runtime runs.

    Attributes:
        handlers: the step handlers by the event type they take.
        compensations: the compensation handlers by the step they undo.
        kept: the event types its workflow context keeps.
        budget_policies: step -> what its flows say to do when a budget runs out.
    """

    name: str
    topics: tuple[str, ...]
    output_topic: str | None
    budgets: Mapping[str, Budget]
    handlers: Mapping[str, HandlerSpec]
    compensations: Mapping[str, HandlerSpec]
    kept: frozenset[str]
    budget_policies: Mapping[str, str]

    def handler_for(
        self, event_type: str, payload: Mapping[str, Any] | None = None
    ) -> HandlerSpec | None:
        """The handler of an event, or None when this agent ignores it.

        A compensation is taken by the handler of the compensation its payload names,
        and a ``StepRetryRequested`` by the handler of the step it names (which then
        runs on the event that started that step).
        """
        if event_type == COMPENSATION_TYPE and payload is not None:
            return self.compensations.get(str(payload.get("step")))
        if event_type == STEP_RETRY_REQUESTED and payload is not None:
            step = payload.get("step")
            return next((s for s in self.handlers.values() if s.step == step), None)
        return self.handlers.get(event_type)

    def wants(self, event_type: str) -> bool:
        """Whether any handler takes ``event_type`` (decided from the header alone)."""
        return (
            event_type in self.handlers
            or (event_type == COMPENSATION_TYPE and bool(self.compensations))
            or (event_type == STEP_RETRY_REQUESTED and bool(self.handlers))
        )

    def folded_types(self) -> frozenset[str]:
        """The event types the projection keeps: the flows' and the handled ones."""
        return self.kept

    def check(self, catalog: SchemaCatalog) -> None:
        """Refuse to start when a handled event type has no schema.

        Raises:
            ConfigurationError: naming the handler and the missing schema.
        """
        specs = [*self.handlers.values(), *self.compensations.values()]
        missing = [s for s in specs if s.event_type not in catalog]
        if missing:
            listed = ", ".join(f"{s.func.__name__} ({s.event_type})" for s in missing)
            raise ConfigurationError(
                f"agent '{self.name}' cannot start: no schema under {catalog.root} for the "
                f"event type(s) its handlers take: {listed}; run `sagalog schemas generate`"
            )


def bind(agent: Agent, flows: Iterable[Flow]) -> BoundAgent:
    """``agent`` as ``flows`` give it work (see the module's docstring).

    Raises:
        AgentContractError: naming the agent, the flow and the step of every way
            the agent and the flows disagree, one line each.
    """
    every = list(flows)
    named: dict[str, list[tuple[Flow, Step]]] = {}
    for flow in every:
        for step in flow.steps:
            if step.agent == agent.name:
                named.setdefault(step.name, []).append((flow, step))
    if not named:
        labels = ", ".join(f.label for f in every) or "none"
        raise AgentContractError(
            f"agent '{agent.name}' runs no step of the flows ({labels}), so it would read "
            f"nothing; name it on a step (agent: {agent.name}) or fix Agent's name"
        )
    problems = [*_unserved(agent, named), *_policy_conflicts(named)]
    handlers: dict[str, HandlerSpec] = {}
    compensations: dict[str, HandlerSpec] = {}
    for step_name, versions in named.items():
        declared = agent.steps.get(step_name)
        if declared is not None:
            for spec in _step_specs(declared, versions, problems):
                other = handlers.setdefault(spec.event_type, spec)
                if other.step != spec.step:
                    problems.append(
                        f"steps '{other.step}' and '{spec.step}' both start on "
                        f"{spec.event_type}; one agent takes an event type in one step"
                    )
        undo = agent.compensations.get(step_name)
        if undo is not None and any(s.undo is not None for _, s in versions):
            compensations[step_name] = _undo_spec(undo, versions, problems)
    if problems:
        raise AgentContractError(
            f"agent '{agent.name}' does not fit its flows:\n"
            + "\n".join(f"  {p}" for p in problems)
            + "\nfix the handlers or the flow files, then rerun "
            "`sagalog flows check --agent <module>`"
        )
    topics = tuple(dict.fromkeys(flow.topic for vs in named.values() for flow, _ in vs))
    on_topics = flow_event_types(every)
    kept = {t for topic in topics for t in on_topics.get(topic, ())} | set(handlers)
    kept |= {COMPENSATION_TYPE, STEP_RETRY_REQUESTED}
    return BoundAgent(
        name=agent.name,
        topics=topics,
        output_topic=agent.output_topic,
        budgets=dict(agent.budgets),
        handlers=handlers,
        compensations=compensations,
        kept=frozenset(kept),
        budget_policies={n: vs[0][1].on_budget_exhausted for n, vs in named.items()},
    )


def _unserved(agent: Agent, named: Mapping[str, list[tuple[Flow, Step]]]) -> list[str]:
    """Handlers for steps no flow gives the agent, and steps (or undos) with none."""
    found: list[str] = []
    undone = {n for n, vs in named.items() if any(s.undo is not None for _, s in vs)}
    for name, declared in agent.steps.items():
        if name not in named:
            found.append(
                f"step '{name}': handler {declared.func.__name__} serves a step no flow gives "
                f"agent '{agent.name}' (its steps: {_listed(named)}); fix step= or the flow"
            )
    for name, declared in agent.compensations.items():
        if name not in undone:
            found.append(
                f"step '{name}': compensation {declared.func.__name__} undoes a step no flow "
                f"undoes for agent '{agent.name}' (undone: {_listed(sorted(undone))}), so it "
                "would never be requested; drop it or give the step a compensation"
            )
    for name, versions in named.items():
        flow, step = versions[0]
        if name not in agent.steps:
            found.append(
                f"flow {flow.label}, step '{name}': no handler; add "
                f"@agent.handles(step='{name}') (it starts on {_listed(step.starts_on)})"
            )
        undo = next(((f, s) for f, s in versions if s.undo is not None), None)
        if undo is not None and name not in agent.compensations:
            f, s = undo
            found.append(
                f"flow {f.label}, step '{name}': the flow undoes it ('{s.undo_action}', "
                f"completed by {_listed(s.undo_completes_on)}) and the agent has no "
                f"compensation; add @agent.compensates('{name}')"
            )
    return found


def _policy_conflicts(named: Mapping[str, list[tuple[Flow, Step]]]) -> list[str]:
    """One handler serves every version of a step, so their budget policies must agree."""
    found = []
    for name, versions in named.items():
        (first, step), *rest = versions
        for flow, other in rest:
            if other.on_budget_exhausted != step.on_budget_exhausted:
                found.append(
                    f"step '{name}' says on_budget_exhausted: {step.on_budget_exhausted} in "
                    f"{first.label} and {other.on_budget_exhausted} in {flow.label}; one "
                    "handler serves both, so make them agree"
                )
    return found


def _step_specs(
    declared: Declared, versions: Sequence[tuple[Flow, Step]], problems: list[str]
) -> list[HandlerSpec]:
    name = declared.func.__name__
    starts = tuple(dict.fromkeys(t for _, step in versions for t in step.starts_on))
    taken = _taken_classes(declared.func)
    where = f"flow {versions[0][0].label}, step '{declared.step}'"
    if taken is not None and set(taken) != set(starts):
        problems.append(
            f"{where}: {name} takes {_listed(taken)}, but the flow starts the step on "
            f"{_listed(starts)}; fix the annotation or the flow"
        )
    for flow, step in versions:
        problems += _return_problems(declared, flow, step.completes_on, step.fails_on, undo=False)
    specs = []
    for event_type in starts:
        event_class = (taken or {}).get(event_type) or Event.class_for(event_type)
        if event_class is None:
            problems.append(
                f"{where}: no event class of {event_type} is imported; import the module "
                f"defining it in the agent's module (or annotate {name}'s event with it)"
            )
            continue
        specs.append(
            HandlerSpec(
                event_type=event_type,
                event_class=event_class,
                func=declared.func,
                step=declared.step,
                dependencies=declared.dependencies,
                timeout_s=declared.timeout_s,
            )
        )
    return specs


def _undo_spec(
    declared: Declared, versions: Sequence[tuple[Flow, Step]], problems: list[str]
) -> HandlerSpec:
    from sagalog.events import CompensationRequested

    for flow, step in versions:
        if step.undo is not None:
            problems += _return_problems(
                declared, flow, step.undo_completes_on, (STEP_FAILED,), undo=True
            )
    return HandlerSpec(
        event_type=COMPENSATION_TYPE,
        event_class=CompensationRequested,
        func=declared.func,
        step=declared.step,
        dependencies=declared.dependencies,
        timeout_s=declared.timeout_s,
        compensates=declared.step,
    )


def _return_problems(
    declared: Declared,
    flow: Flow,
    completes: tuple[str, ...],
    fails: tuple[str, ...],
    *,
    undo: bool,
) -> list[str]:
    """What ``declared``'s return annotation contradicts in the flow, if it says anything.

    A step handler may return nothing (it fails, or the step completes later); an
    undo that returns nothing is announced with ``CompensationCompleted``, which ends
    the compensation only when the flow names it under ``completes_on``.
    """
    returned = _returned(declared.func)
    if returned is None:
        return []
    types_, nothing = returned
    where = f"flow {flow.label}, step '{declared.step}': {declared.func.__name__} returns"
    stray = sorted(types_ - set(completes) - set(fails))
    if stray:
        return [
            f"{where} {_listed(stray)}, which the flow does not wait for here (it completes "
            f"on {_listed(completes)}); the workflow would wait until the timeout"
        ]
    if undo and nothing and COMPENSATION_COMPLETED not in completes:
        return [
            f"{where} nothing on some path; the runtime then announces "
            f"{COMPENSATION_COMPLETED}, which the flow does not name under completes_on "
            f"({_listed(completes)}), so the compensation would never complete"
        ]
    if not (types_ & set(completes) or (undo and nothing)):
        return [f"{where} none of {_listed(completes)}, so it could never complete the step"]
    return []


def _hints(func: Callable[..., Any]) -> dict[str, Any] | None:
    try:
        return typing.get_type_hints(func)
    except Exception:  # a name the module imports only for type checking
        return None


def _taken_classes(func: Callable[..., Any]) -> dict[str, type[Event]] | None:
    """The event classes the handler's first parameter is annotated with, by type;
    None when the annotation says nothing the check can read (absent, ``Event``)."""
    hints = _hints(func)
    params = list(inspect.signature(func).parameters)
    if hints is None or not params or params[0] not in hints:
        return None
    annotation = hints[params[0]]
    union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    classes = typing.get_args(annotation) if union else (annotation,)
    if not all(isinstance(c, type) and issubclass(c, Event) for c in classes):
        return None
    if not all("event_type" in c.__dict__ for c in classes):
        return None  # the base class: any event
    return {c.event_type: c for c in classes}


def _returned(func: Callable[..., Any]) -> tuple[frozenset[str], bool] | None:
    """The event types the return annotation names, and whether it may return nothing;
    None when it cannot be read. ``X``, ``X | None``, ``list[X | Y]`` are understood."""
    hints = _hints(func)
    if hints is None or "return" not in hints:
        return None
    return _types_of(hints["return"])


def _types_of(annotation: Any) -> tuple[frozenset[str], bool] | None:
    if annotation is None or annotation is type(None):
        return frozenset(), True
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        parts = [_types_of(a) for a in typing.get_args(annotation)]
        if any(p is None for p in parts):
            return None
        known = [p for p in parts if p is not None]
        return frozenset().union(*(p[0] for p in known)), any(p[1] for p in known)
    if origin in (list, tuple, Sequence, typing.Sequence):
        args = [a for a in typing.get_args(annotation) if a is not Ellipsis]
        inner = _types_of(typing.Union[tuple(args)]) if args else None  # noqa: UP007
        return None if inner is None else (inner[0], True)
    if isinstance(annotation, type) and issubclass(annotation, Event):
        event_type = annotation.__dict__.get("event_type")
        return None if event_type is None else (frozenset({event_type}), False)
    return None


def _listed(items: Iterable[str]) -> str:
    names = list(items)
    return ", ".join(names) if names else "none"


def project_flows(project_dir: Path, catalog: SchemaCatalog | None = None) -> FlowRegistry:
    """The checked flows of the project at ``project_dir`` (``schemas/``, ``topology/``):
    what an agent is bound to when it starts.

    Raises:
        FlowDefinitionError: the flow files are refused.
        TopologyError: the topology files are.
    """
    catalog = catalog or SchemaCatalog.load(project_dir / "schemas")
    topology = load_topology(project_dir / "topology", known_schemas=catalog)
    return load_flows(project_dir / "topology" / "flows", catalog=catalog, topology=topology)
