"""The contract between an agent's declared handlers and the flows that name the agent.

A flow says which agent runs each step, which events start and complete it, and
whether the step is undone; the agent says, in its ``@agent.handles`` and
``@agent.compensates`` declarations, which events it takes and returns. The two are
written apart, often by different people, and nothing at run time compares them: a
handler declared for the wrong event never runs, and a handler returning an event
the flow does not wait for leaves the workflow waiting until its timeout. Both show
up days later as a stuck workflow. So the comparison is made before anything starts,
when an agent starts (``sagalog run agent``) and in ``sagalog flows check``.

This module reads an agent only through the public attributes of its declaration
(``name``, ``topics``, ``handlers``, ``compensations``: see ``AgentDeclaration``), so
the flows layer does not import the agent runtime that sits above it.

What is checked, for each flow version that names the agent on a step:

- the flow's topic is one the agent reads;
- the agent has a handler for that step, and it takes an event that starts the step;
- every event type the handler's return annotation names completes or fails the
  step, and at least one completes it;
- a step the flow undoes (``compensation`` or ``irreversible``) has the agent's
  compensation, whose returned events (or ``CompensationCompleted``, when it may
  return nothing) are ones the flow waits for;

and, across all the flows that name the agent: that every handler and compensation
declared for a step serves a step of the agent in one of them.

A return annotation the check cannot read (none, ``Any``, a name it cannot resolve)
is not guessed at: the handled event and the step are still checked.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from sagalog.contracts.catalog import SchemaCatalog
from sagalog.errors import AgentContractError
from sagalog.flows.loader import load_flows
from sagalog.flows.model import COMPENSATION_COMPLETED, STEP_FAILED, Flow, Step
from sagalog.topology.loader import load_topology


class HandlerDeclaration(Protocol):
    """What the check reads of one declared handler (``agents.declaration.HandlerSpec``)."""

    @property
    def event_type(self) -> str: ...
    @property
    def func(self) -> Callable[..., Any]: ...
    @property
    def step(self) -> str: ...


class AgentDeclaration(Protocol):
    """What the check reads of an agent (``agents.declaration.Agent``)."""

    @property
    def name(self) -> str: ...
    @property
    def topics(self) -> tuple[str, ...]: ...
    @property
    def handlers(self) -> Mapping[str, HandlerDeclaration]: ...
    @property
    def compensations(self) -> Mapping[str, HandlerDeclaration]: ...


@dataclass(frozen=True)
class Returns:
    """What a handler's return annotation says it may return.

    Attributes:
        event_types: the event types it may return.
        may_return_nothing: None or an empty sequence is among the possibilities.
        known: False when the annotation could not be read; then the other two
            say nothing.
    """

    event_types: frozenset[str] = frozenset()
    may_return_nothing: bool = False
    known: bool = True


UNKNOWN = Returns(known=False)


@dataclass(frozen=True)
class ContractMismatch:
    """One way an agent and a flow disagree, with the names an operator looks for."""

    agent: str
    flow: str | None
    step: str
    problem: str

    def __str__(self) -> str:
        where = f"flow {self.flow}, step '{self.step}'" if self.flow else f"step '{self.step}'"
        return f"agent '{self.agent}', {where}: {self.problem}"


def returns_of(func: Callable[..., Any]) -> Returns:
    """Read the event types a handler may return from its return annotation.

    ``BudgetReserved``, ``VendorNotified | None``, ``list[X]`` and
    ``Sequence[X | Y]`` are understood; anything else is ``UNKNOWN``.
    """
    try:
        hints = typing.get_type_hints(func)
    except Exception:  # an annotation naming what the module imports only for type checking
        return UNKNOWN
    if "return" not in hints:
        return UNKNOWN
    return _returns(hints["return"])


def _returns(annotation: Any) -> Returns:
    if annotation is None or annotation is type(None):
        return Returns(may_return_nothing=True)
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        parts = [_returns(arg) for arg in typing.get_args(annotation)]
        if not all(part.known for part in parts):
            return UNKNOWN
        return Returns(
            event_types=frozenset().union(*(p.event_types for p in parts)),
            may_return_nothing=any(p.may_return_nothing for p in parts),
        )
    if origin in (list, tuple, Sequence, typing.Sequence):
        args = [a for a in typing.get_args(annotation) if a is not Ellipsis]
        if not args:
            return UNKNOWN
        inner = _returns(typing.Union[tuple(args)] if len(args) > 1 else args[0])  # noqa: UP007
        return Returns(inner.event_types, may_return_nothing=True, known=inner.known)
    event_type = getattr(annotation, "event_type", None)
    if isinstance(annotation, type) and isinstance(event_type, str):
        return Returns(event_types=frozenset({event_type}))
    return UNKNOWN


def contract_mismatches(agent: AgentDeclaration, flows: Iterable[Flow]) -> list[ContractMismatch]:
    """Every disagreement between ``agent`` and the flow versions that name it.

    Args:
        agent: the declaration, read through its public attributes.
        flows: every loaded flow version (older versions still run in-flight work,
            so the agent must serve each).

    Returns:
        The mismatches in flow and step order; empty when the agent fits, and when
        no flow names the agent (nothing to check it against).
    """
    named = [(flow, step) for flow in flows for step in flow.steps if step.agent == agent.name]
    found: list[ContractMismatch] = []
    unread: set[str] = set()
    for flow, step in named:
        if flow.topic not in agent.topics and flow.label not in unread:
            unread.add(flow.label)
            found.append(
                _mismatch(
                    agent,
                    flow.label,
                    step.name,
                    f"the flow runs on topic '{flow.topic}', which the agent does not read "
                    f"(topics: {_listed(agent.topics)}); add it to Agent(topics=...)",
                )
            )
        found += _step_mismatches(agent, flow, step)
    if not named:
        return found
    served = {step.name for _, step in named}
    undone = {step.name for _, step in named if step.undo is not None}
    for spec in agent.handlers.values():
        if spec.step not in served:
            found.append(
                _mismatch(
                    agent,
                    None,
                    spec.step,
                    f"handler {spec.func.__name__} ({spec.event_type}) is declared for this "
                    f"step, but no flow gives it to agent '{agent.name}' "
                    f"(its steps: {_listed(sorted(served))}); fix step= or the flow's agent:",
                )
            )
    for step_name, spec in agent.compensations.items():
        if step_name not in undone:
            found.append(
                _mismatch(
                    agent,
                    None,
                    step_name,
                    f"compensation {spec.func.__name__} is declared, but no flow undoes this "
                    f"step of agent '{agent.name}' (undone: {_listed(sorted(undone))}), so it "
                    "would never be requested; drop it or give the step a compensation",
                )
            )
    return found


def check_agent_contract(agent: AgentDeclaration, flows: Iterable[Flow]) -> None:
    """Refuse an agent whose handlers do not fit the flows that name it.

    Raises:
        AgentContractError: naming the agent, the flow and the step of every mismatch,
            one line each.
    """
    found = contract_mismatches(agent, flows)
    if found:
        raise AgentContractError(
            f"agent '{agent.name}' does not fit its flows:\n"
            + "\n".join(f"  {m}" for m in found)
            + "\nfix the agent's declarations or the flow files, then rerun "
            "`sagalog flows check --agent <module>`"
        )


def check_agent_in_project(agent: AgentDeclaration, project_dir: Path) -> dict[str, str]:
    """Refuse ``agent`` if it does not fit the flows of the project at ``project_dir``
    (``schemas/`` and ``topology/``), as an agent's start does; a project without
    ``topology/flows`` has nothing to fit.

    Returns:
        What each of the agent's steps does when a budget runs out
        (``exhaustion_policies``); a step no flow names waits.

    Raises:
        AgentContractError: a mismatch, as ``check_agent_contract`` says it.
        FlowDefinitionError: the flow files themselves are refused.
    """
    directory = project_dir / "topology" / "flows"
    if not directory.is_dir():
        return {}
    catalog = SchemaCatalog.load(project_dir / "schemas")
    topology = load_topology(project_dir / "topology", known_schemas=catalog)
    flows = load_flows(directory, catalog=catalog, topology=topology)
    check_agent_contract(agent, flows)
    return exhaustion_policies(agent.name, flows)


def exhaustion_policies(agent: str, flows: Iterable[Flow]) -> dict[str, str]:
    """Step name -> ``on_budget_exhausted`` for the steps ``agent`` runs in ``flows``.

    Raises:
        AgentContractError: two flow versions give one step of the agent different
            policies: the agent serves both with one handler, so they must agree.
    """
    policies: dict[str, tuple[str, str]] = {}
    for flow in flows:
        for step in flow.steps:
            if step.agent != agent:
                continue
            earlier = policies.setdefault(step.name, (step.on_budget_exhausted, flow.label))
            if earlier[0] != step.on_budget_exhausted:
                raise AgentContractError(
                    f"agent '{agent}': step '{step.name}' says on_budget_exhausted: "
                    f"{earlier[0]} in {earlier[1]} and {step.on_budget_exhausted} in "
                    f"{flow.label}; one handler serves both, so make them agree"
                )
    return {name: policy for name, (policy, _) in policies.items()}


def _step_mismatches(agent: AgentDeclaration, flow: Flow, step: Step) -> Iterable[ContractMismatch]:
    label = flow.label
    handlers = [spec for spec in agent.handlers.values() if spec.step == step.name]
    if not handlers:
        yield _mismatch(
            agent,
            label,
            step.name,
            f"no handler is declared for this step; the flow starts it on "
            f"{_listed(step.starts_on)}: add @agent.handles(<that event class>, "
            f"step='{step.name}')",
        )
    for spec in handlers:
        if spec.event_type not in step.starts_on:
            yield _mismatch(
                agent,
                label,
                step.name,
                f"handler {spec.func.__name__} takes {spec.event_type}, but the flow starts "
                f"the step on {_listed(step.starts_on)}, so it would never run",
            )
        yield from _returns_mismatches(
            agent,
            label,
            step.name,
            spec,
            returns_of(spec.func),
            completes=step.completes_on,
            fails=step.fails_on,
            undo=False,
        )
    undo = agent.compensations.get(step.name)
    if step.undo is not None and undo is None:
        kind = "a compensation" if step.compensation is not None else "an irreversible follow-up"
        yield _mismatch(
            agent,
            label,
            step.name,
            f"the flow requires {kind} ('{step.undo_action}', completed by "
            f"{_listed(step.undo_completes_on)}) and the agent declares none: add "
            f"@agent.compensates('{step.name}')",
        )
    if step.undo is not None and undo is not None:
        yield from _returns_mismatches(
            agent,
            label,
            step.name,
            undo,
            returns_of(undo.func),
            completes=step.undo_completes_on,
            fails=(STEP_FAILED,),
            undo=True,
        )


def _returns_mismatches(
    agent: AgentDeclaration,
    label: str,
    step: str,
    spec: HandlerDeclaration,
    returned: Returns,
    *,
    completes: tuple[str, ...],
    fails: tuple[str, ...],
    undo: bool,
) -> Iterable[ContractMismatch]:
    """Mismatches between what ``spec`` may return and what the flow waits for.

    A step handler may return nothing (it fails, or the step completes later); an
    undo that returns nothing is announced with ``CompensationCompleted``, which ends
    the compensation only when the flow names it under ``completes_on``.
    """
    if not returned.known:
        return
    what = f"{spec.func.__name__} returns"
    stray = sorted(returned.event_types - set(completes) - set(fails))
    if stray:
        yield _mismatch(
            agent,
            label,
            step,
            f"{what} {_listed(stray)}, which the flow does not wait for here (it completes "
            f"on {_listed(completes)}); the workflow would wait until the timeout",
        )
    announced = undo and returned.may_return_nothing
    if announced and COMPENSATION_COMPLETED not in completes:
        yield _mismatch(
            agent,
            label,
            step,
            f"{what} nothing on some path; the runtime then announces "
            f"{COMPENSATION_COMPLETED}, which the flow does not name under completes_on "
            f"({_listed(completes)}), so the compensation would never complete",
        )
    elif not (returned.event_types & set(completes) or announced):
        yield _mismatch(
            agent,
            label,
            step,
            f"{what} none of {_listed(completes)}, the events that complete it, so it "
            "could never complete",
        )


def _mismatch(
    agent: AgentDeclaration, flow: str | None, step: str, problem: str
) -> ContractMismatch:
    return ContractMismatch(agent=agent.name, flow=flow, step=step, problem=problem)


def _listed(items: Iterable[str]) -> str:
    names = list(items)
    return ", ".join(names) if names else "none"
