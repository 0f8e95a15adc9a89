"""What a chaos round recorded, and the invariants it must hold: pure functions, no I/O.

The harness records everything a round did (every event the driver sent and whether
the broker acknowledged it, every event and transition in the log, every effect the
stand-ins applied, the tracker's live records and a rebuild from the log), and this
module judges it, the way Jepsen's checkers judge a history:

- **lost**: an acknowledged send missing from the log, or a started workflow the
  tracker never heard of;
- **duplicated effects**: one business effect (an operation on one request) applied
  more than once, by the stand-ins' own books;
- **stuck**: a workflow not terminal after its deadline;
- **illegal transitions**: a move the flow's rules do not allow, a move out of a
  terminal state, or a move whose ``from`` is not where the workflow was;
- **rebuild mismatches**: live state that a replay of the log does not reproduce;
- **service exits**: every exit of a service during the round, by service and exit
  code (the supervisor restarts them, as an orchestrator would, but a restart is the
  last resort, not the recovery path: a round may set how many it tolerates, and
  the broker rounds tolerate none).

A round with too few workflows ended as planned fails too, so that a system that
errors on everything cannot pass by doing nothing.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sagalog.flows.states import TERMINAL_STATES

TERMINAL = TERMINAL_STATES
"""States a workflow never leaves (``StrEnum`` members, so the transitions' plain strings match)."""
MIN_ENDED_AS_PLANNED = 0.8
"""The share of a round's workflows that must end as planned for the round to pass."""

Node = tuple[str, str | None]
"""A place in a workflow's life: (state, step or gate), as a ``StateTransition`` names it."""


@dataclass(frozen=True)
class Entry:
    """One step or gate of a flow, in flow order, as far as the legal moves care."""

    name: str
    gate: bool = False
    undoable: bool = False  # a compensation or an irreversible follow-up


@dataclass(frozen=True)
class FlowRules:
    """The moves a flow allows between (state, step) nodes."""

    entries: tuple[Entry, ...]

    @classmethod
    def of(cls, flow: Any) -> FlowRules:
        """From a loaded ``sagalog.flows.model.Flow``."""
        from sagalog.flows.model import Gate

        return cls(
            tuple(
                Entry(e.name, gate=True)
                if isinstance(e, Gate)
                else Entry(e.name, undoable=e.undo_action is not None)
                for e in flow.entries
            )
        )

    def _enter(self, i: int) -> Node:
        """The node a workflow is in when it reaches entry ``i`` (or ends, past the last)."""
        if i >= len(self.entries):
            return ("completed", None)
        entry = self.entries[i]
        return ("pending_approval", entry.name) if entry.gate else ("running", entry.name)

    def _undo_before(self, i: int) -> Node:
        """Where a failure at entry ``i`` goes: undo the latest undoable entry before it."""
        earlier = [e for e in self.entries[:i] if e.undoable]
        return ("compensating", earlier[-1].name) if earlier else ("failed", None)

    def moves(self) -> frozenset[tuple[Node, Node]]:
        allowed: set[tuple[Node, Node]] = set()
        first = self._enter(0)
        allowed |= {(("initiated", None), first), (("initiated", None), ("queued", None))}
        allowed.add((("queued", None), first))
        undoable = [i for i, e in enumerate(self.entries) if e.undoable]
        for i, entry in enumerate(self.entries):
            here = self._enter(i)
            after = self._enter(i + 1)
            failure = self._undo_before(i)
            if entry.gate:
                approved: Node = ("approved", entry.name)
                allowed |= {(here, approved), (approved, after), (here, failure)}
                allowed.add((approved, failure))
            else:
                allowed |= {(here, after), (here, failure)}
        for k, i in enumerate(undoable):
            node: Node = ("compensating", self.entries[i].name)
            earlier: Node = (
                ("compensating", self.entries[undoable[k - 1]].name) if k else ("compensated", None)
            )
            allowed.add((node, earlier))
        return frozenset(allowed)

    def nodes(self) -> frozenset[Node]:
        return frozenset(n for move in self.moves() for n in move)


@dataclass(frozen=True)
class Transition:
    """One ``StateTransition`` as read from the transitions topic."""

    workflow_id: str
    event_id: str
    from_state: str
    to_state: str
    step: str | None
    from_step: str | None = None
    cause_event_id: str | None = None
    at_ms: int | None = None
    """The tracker's clock when it decided the move (``StateTransition.at``)."""


@dataclass(frozen=True)
class Send:
    """One event the driver produced, and whether the broker acknowledged it."""

    event_id: str
    workflow_id: str
    event_type: str
    acked: bool


@dataclass(frozen=True)
class Effect:
    """One effect a stand-in applied (once per idempotency key, by construction)."""

    operation: str
    request_id: str
    key: str


@dataclass(frozen=True)
class Planned:
    """How one workflow of the round is meant to end, and the effects it should cause."""

    workflow_id: str
    request_id: str
    end: str
    effects: Mapping[str, int] = field(default_factory=dict)


@dataclass
class RoundHistory:
    """Everything a round recorded, as plain data."""

    fault: str
    seed: int
    planned: list[Planned]
    sends: list[Send]
    logged_event_ids: set[str]
    transitions: dict[str, list[Transition]]
    states: dict[str, str | None]
    """Each workflow's state when the round's settle time ran out (before the deadline)."""
    states_after_deadline: dict[str, str | None]
    """Each workflow's state after the clock was moved past the flow's deadline."""
    effects: list[Effect]
    live: dict[str, Any]
    """Each workflow's live record, as the fields a rebuild must reproduce
    (``sagalog.replay.diff.decided_fields``, the projection ``replay rebuild`` diffs)."""
    rebuilt: dict[str, Any]
    """The same fields of its record rebuilt from the log by ``sagalog replay rebuild``."""
    injections: list[tuple[float, float]] = field(default_factory=list)
    progress_at: list[float] = field(default_factory=list)
    extra_failures: list[str] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)
    figures: dict[str, Any] = field(default_factory=dict)
    """A fault's own measurements (a rate, a latency), shown in its row."""
    exits: list[tuple[str, int | None]] = field(default_factory=list)
    """``(service, exit code)`` of every exit during the round (None: no code known)."""
    max_exits: int | None = None
    """How many exits the round tolerates; None: they are counted, not judged."""
    expected_exits: dict[str, int] = field(default_factory=dict)
    """Exits the fault itself causes, at most this many per service (the fencing
    round's cut-off tracker worker may exit once): counted and shown, and only those
    beyond it are held against ``max_exits``."""


@dataclass
class RoundResult:
    fault: str
    seed: int
    workflows: int
    ended_as_planned: int
    lost: int
    duplicated_effects: int
    stuck: int
    illegal_transitions: int
    rebuild_mismatches: int
    recovery_s: float | None
    late: int = 0
    wrong_end: int = 0
    missing_effects: int = 0
    unexpected_effects: int = 0
    exits: int = 0
    exits_by_service: dict[str, dict[str, int]] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failures

    def row(self) -> dict[str, Any]:
        return {
            "fault": self.fault,
            "seed": self.seed,
            "workflows": self.workflows,
            "ended_as_planned": self.ended_as_planned,
            "lost": self.lost,
            "duplicated_effects": self.duplicated_effects,
            "stuck": self.stuck,
            "illegal_transitions": self.illegal_transitions,
            "rebuild_mismatches": self.rebuild_mismatches,
            "recovery_s": self.recovery_s,
            "late": self.late,
            "wrong_end": self.wrong_end,
            "missing_effects": self.missing_effects,
            "unexpected_effects": self.unexpected_effects,
            "exits": self.exits,
            "exits_by_service": self.exits_by_service,
            "ok": self.ok,
            "failures": self.failures,
            "figures": self.figures,
            "details": self.details,
        }


# -- the invariants -------------------------------------------------------------------


def lost_events(sends: Iterable[Send], logged_event_ids: set[str]) -> list[str]:
    """Acknowledged sends whose event is not in the log: the broker promised, then forgot."""
    return sorted({s.event_id for s in sends if s.acked and s.event_id not in logged_event_ids})


def lost_workflows(
    planned: Iterable[Planned],
    sends: Iterable[Send],
    transitions: Mapping[str, Sequence[Transition]],
    live: Mapping[str, Any],
) -> list[str]:
    """Workflows whose start was acknowledged but which the tracker never tracked."""
    started = {s.workflow_id for s in sends if s.acked}
    return sorted(
        p.workflow_id
        for p in planned
        if p.workflow_id in started
        and not transitions.get(p.workflow_id)
        and p.workflow_id not in live
    )


def duplicated_effects(effects: Iterable[Effect]) -> dict[tuple[str, str], int]:
    """``(operation, request) -> times applied`` for every effect applied more than once."""
    counts = Counter((e.operation, e.request_id) for e in effects)
    return {k: n for k, n in sorted(counts.items()) if n > 1}


def effect_differences(
    planned: Iterable[Planned], effects: Iterable[Effect]
) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str], int]]:
    """(missing, unexpected): planned effects never applied, applied effects never planned.

    Only the difference in kind counts here; an effect applied twice is a duplicate.
    """
    counts = Counter((e.operation, e.request_id) for e in effects)
    wanted = {(op, p.request_id): n for p in planned for op, n in p.effects.items() if n}
    mine = {p.request_id for p in planned}
    missing = {k: n for k, n in wanted.items() if counts.get(k, 0) == 0}
    unexpected = {k: n for k, n in counts.items() if k[1] in mine and k not in wanted}
    return missing, unexpected


def not_terminal(states: Mapping[str, str | None], workflow_ids: Iterable[str]) -> list[str]:
    return sorted(w for w in workflow_ids if states.get(w) not in TERMINAL)


def dedupe(transitions: Sequence[Transition]) -> list[Transition]:
    """The first copy of each transition id: the tracker republishes after a crash."""
    seen: set[str] = set()
    unique = []
    for t in transitions:
        if t.event_id not in seen:
            seen.add(t.event_id)
            unique.append(t)
    return unique


def illegal_transitions(
    rules: FlowRules, transitions: Mapping[str, Sequence[Transition]]
) -> dict[str, list[str]]:
    """Per workflow, every move its flow does not allow, with the reason."""
    allowed = rules.moves()
    found: dict[str, list[str]] = defaultdict(list)
    for workflow_id, moves in transitions.items():
        where: Node = ("initiated", None)
        for t in dedupe(moves):
            source: Node = (t.from_state, t.from_step if t.from_step is not None else where[1])
            target: Node = (t.to_state, t.step)
            if where[0] in TERMINAL:
                found[workflow_id].append(f"{t.event_id}: left terminal {where[0]} for {target}")
            elif source != where:
                found[workflow_id].append(
                    f"{t.event_id}: from {source} but the workflow was at {where}"
                )
            elif (where, target) not in allowed and not _always_allowed(where, target, rules):
                found[workflow_id].append(f"{t.event_id}: {where} -> {target} is not in the flow")
            where = target
    return dict(found)


def _always_allowed(source: Node, target: Node, rules: FlowRules) -> bool:
    """Moves allowed from anywhere not terminal: a deadline, or an undo that ran out of tries.

    A deadline compensates what was completed before the current entry; a failed
    compensation ends the workflow ``failed``.
    """
    if target in (("timed_out", None), ("failed", None)):
        return True
    if target[0] == "compensated" and source[0] == "compensating":
        return True
    if target[0] != "compensating" or target[1] is None:
        return False
    names = [e.name for e in rules.entries]
    undoable = {e.name for e in rules.entries if e.undoable}
    if source[1] not in names or target[1] not in undoable:
        return False
    # A step that timed out may have had its effect: its own undo runs first.
    return names.index(target[1]) <= names.index(source[1])


def rebuild_mismatches(
    live: Mapping[str, Any], rebuilt: Mapping[str, Any], workflow_ids: Iterable[str]
) -> list[str]:
    """Workflows whose live record differs from the one rebuilt from the log (or is missing)."""
    return sorted(
        w for w in workflow_ids if w not in live or w not in rebuilt or live[w] != rebuilt[w]
    )


def unexpected_exits(exits: Iterable[tuple[str, int | None]], expected: Mapping[str, int]) -> int:
    """The exits beyond each service's expected number (``RoundHistory.expected_exits``)."""
    counted = Counter(service for service, _ in exits)
    return sum(max(0, n - expected.get(service, 0)) for service, n in counted.items())


def service_exits(exits: Iterable[tuple[str, int | None]]) -> dict[str, dict[str, int]]:
    """``{service: {exit code: times}}``, each sorted: what the supervisor had to restart."""
    by: dict[str, Counter[str]] = defaultdict(Counter)
    for service, code in exits:
        by[service][str(code)] += 1
    return {name: dict(sorted(codes.items())) for name, codes in sorted(by.items())}


def recovery_s(
    injections: Sequence[tuple[float, float]], progress_at: Sequence[float]
) -> float | None:
    """The longest wait, after a fault ended, for the next transition anywhere.

    None when no fault was injected or nothing moved after one (the round was over).
    """
    waits = []
    ordered = sorted(progress_at)
    for _, ended in injections:
        after = next((t for t in ordered if t >= ended), None)
        if after is not None:
            waits.append(after - ended)
    return round(max(waits), 2) if waits else None


def check(
    history: RoundHistory, rules: FlowRules, *, min_ended_as_planned: float = MIN_ENDED_AS_PLANNED
) -> RoundResult:
    """Judge one round; ``failures`` says in words what broke."""
    ids = [p.workflow_id for p in history.planned]
    lost_ev = lost_events(history.sends, history.logged_event_ids)
    lost_wf = lost_workflows(history.planned, history.sends, history.transitions, history.live)
    dups = duplicated_effects(history.effects)
    missing, unexpected = effect_differences(history.planned, history.effects)
    late = not_terminal(history.states, ids)
    stuck = not_terminal(history.states_after_deadline, ids)
    mine = {w: history.transitions.get(w, []) for w in ids}
    illegal = illegal_transitions(rules, mine)
    mismatched = rebuild_mismatches(history.live, history.rebuilt, ids)
    wrong = {
        p.workflow_id: history.states_after_deadline.get(p.workflow_id)
        for p in history.planned
        if history.states_after_deadline.get(p.workflow_id) != p.end
    }
    as_planned = len(ids) - len(wrong)
    result = RoundResult(
        fault=history.fault,
        seed=history.seed,
        workflows=len(ids),
        ended_as_planned=as_planned,
        lost=len(lost_ev) + len(lost_wf),
        duplicated_effects=sum(n - 1 for n in dups.values()),
        stuck=len(stuck),
        illegal_transitions=sum(len(v) for v in illegal.values()),
        rebuild_mismatches=len(mismatched),
        recovery_s=recovery_s(history.injections, history.progress_at),
        late=len(late),
        wrong_end=len(wrong),
        missing_effects=len(missing),
        unexpected_effects=len(unexpected),
        exits=len(history.exits),
        exits_by_service=service_exits(history.exits),
        figures=dict(history.figures),
    )
    result.details = {
        "lost_events": lost_ev[:20],
        "lost_workflows": lost_wf[:20],
        "duplicated_effects": [f"{op} {rid} x{n}" for (op, rid), n in list(dups.items())[:20]],
        "missing_effects": [f"{op} {rid}" for op, rid in list(missing)[:20]],
        "unexpected_effects": [f"{op} {rid}" for op, rid in list(unexpected)[:20]],
        "stuck": stuck[:20],
        "late": late[:20],
        "wrong_end": dict(list(wrong.items())[:20]),
        "illegal": dict(list(illegal.items())[:10]),
        "rebuild_mismatches": mismatched[:20],
        "injections": len(history.injections),
        **history.notes,
    }
    checks = [
        (result.lost, "lost events or workflows"),
        (result.duplicated_effects, "duplicated effects"),
        (result.stuck, "workflows not terminal after their deadline"),
        (result.illegal_transitions, "illegal transitions"),
        (result.rebuild_mismatches, "live state differs from the rebuild from the log"),
    ]
    result.failures = [f"{n} {what}" for n, what in checks if n]
    unexpected = unexpected_exits(history.exits, history.expected_exits)
    if history.max_exits is not None and unexpected > history.max_exits:
        listing = ", ".join(
            f"{name} {code} x{n}"
            for name, codes in result.exits_by_service.items()
            for code, n in codes.items()
        )
        result.failures.append(
            f"{result.exits} service exits ({listing}), {unexpected} beyond those the fault "
            f"causes ({history.expected_exits or 'none'}), at most {history.max_exits} allowed: "
            "the supervisor restarted them, but this fault must be ridden out in-process"
        )
    if not ids or as_planned < min_ended_as_planned * len(ids):
        result.failures.append(
            f"only {as_planned} of {len(ids)} workflows ended as planned "
            f"(at least {min_ended_as_planned:.0%} must)"
        )
    result.failures += history.extra_failures
    return result
