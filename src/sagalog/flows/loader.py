"""Read ``topology/flows/*.yaml`` into checked ``Flow`` objects, refusing any wrong one.

One file holds one version of one flow and is named after both
(``procurement.v1.yaml``); several versions of a flow load side by side, because an
in-flight workflow finishes under the version it started with. The format::

    flow: procurement                  # name: lowercase letters, digits, '_', '-'
    version: 1                         # a positive int; the file is <flow>.v<version>.yaml
    description: A purchase request from submission to the vendor.   # optional
    topic: procurement.events          # the workflow topic, declared in topology/*.yaml
    starts_on: procurement.v1.RequestSubmitted   # the event that starts a workflow
    deadline: 5d                       # the whole workflow: ms, s, m, h, d or w
    priority: normal                   # optional: low, normal (default), high, urgent
    correlation_keys: [request_id]     # optional: starting-event fields a webhook may
                                       # name its workflow by (?request_id=PR-1)

    steps:                             # run in this order, one at a time
      - name: classify_request
        agent: intake-agent            # who performs it
        starts_on: procurement.v1.RequestSubmitted   # one type or a list ...
        completes_on: procurement.v1.RequestClassified
        timeout: 5m
        effect: none                   # changes nothing outside: nothing to undo

      - name: reserve_budget
        agent: budget-agent
        after: classify_request        # ... or: starts when that entry completes
        completes_on: procurement.v1.BudgetReserved
        fails_on: sagalog.v1.StepFailed           # the default (StepFailed for this step)
        timeout: 10m
        compensation:                  # how the agent undoes it
          action: release_budget
          completes_on: procurement.v1.BudgetReleased  # default sagalog.v1.CompensationCompleted
          timeout: 30m                 # default: the step's timeout

      - gate: manager_approval         # a human gate, decided by sagalog.v1.GateDecided
        assignee: managers@example.com
        escalation:                    # counted from the gate's opening, increasing
          - {after: 24h, to: director@example.com}
        deadline: 72h
        default: reject                # at the deadline: approve, reject or fail

      - name: notify_vendor
        agent: notification-agent
        after: manager_approval        # starts when the gate approves
        completes_on: procurement.v1.VendorNotified
        timeout: 15m
        irreversible:                  # cannot be undone; the follow-up amends it
          follow_up: send_correction_notice
          completes_on: procurement.v1.CorrectionNoticeSent   # optional, as above
          timeout: 1h                  # optional, as above

    segments:                          # consecutive entries with a common timeout
      - {name: fulfilment, steps: [reserve_budget, manager_approval], timeout: 4d}

    sla:                               # alerts evaluated from the state transitions
      - {name: slow_approvals, metric: time_in_state, state: pending_approval,
         statistic: p50, window: 1h, above: 4h}
      - {name: slow_budget, metric: step_duration, step: reserve_budget,
         statistic: p95, window: 1h, above: 2m}

Errors name the file, the flow, its version, the step or gate and the problem, every
problem of every file at once: ``topology/flows/procurement.v2.yaml: flow
'procurement' v2, step 'reserve_budget': compensation 'release_budget' completes on
'procurement.v1.BudgetRelesed', which has no schema in schemas/``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from sagalog.contracts.catalog import SchemaCatalog
from sagalog.errors import FlowDefinitionError
from sagalog.flows.checks import FlowProblem, check_flow
from sagalog.flows.model import Flow, Gate, Step, Wait, is_event_type
from sagalog.flows.registry import FlowRegistry
from sagalog.topology.model import Topology

_FILE_KEYS = (
    "flow",
    "version",
    "description",
    "topic",
    "starts_on",
    "deadline",
    "priority",
    "correlation_keys",
    "steps",
    "segments",
    "sla",
)
_FILE_NAME = re.compile(r"^(?P<flow>.+)\.v(?P<version>\d+)\.ya?ml$")
# Stands in for the start of an entry whose predecessor could not be read, so the
# entry's own fields are still checked; a flow with it is never built.
_UNRESOLVED = "sagalog.unresolved.Predecessor"


@dataclass(frozen=True)
class FlowCheck:
    """The result of reading a flows folder: the good flows and every problem found.

    Attributes:
        flows: the flow versions without problems, ordered by name and version.
        problems: every problem, in file order.
        files: how many files were read.
    """

    flows: tuple[Flow, ...]
    problems: tuple[FlowProblem, ...]
    files: int

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def registry(self) -> FlowRegistry:
        """The flow versions that passed, for commands that can use those alone."""
        return FlowRegistry(self.flows)

    def error(self) -> FlowDefinitionError:
        """All problems as one error, a line each, ending with what to do."""
        broken = len({p.source for p in self.problems})
        return FlowDefinitionError(
            "\n".join(str(p) for p in self.problems)
            + f"\n{len(self.problems)} problem(s) in {broken} of {self.files} flow file(s); "
            "fix them and rerun `sagalog flows check`"
        )


def load_flows(directory: Path, *, catalog: SchemaCatalog, topology: Topology) -> FlowRegistry:
    """Load and check every flow version in ``directory``.

    Args:
        directory: the flows folder, usually ``topology/flows``.
        catalog: the schema catalog every named event type must be in.
        topology: the declared topics; each flow's topic must be one of them and carry
            every event type the flow names.

    Raises:
        FlowDefinitionError: naming file, flow, version, step and problem, for every
            problem found in any file.
    """
    result = check_flows(directory, catalog=catalog, topology=topology)
    if not result.ok:
        raise result.error()
    return result.registry


def load_flow_file(path: Path, *, catalog: SchemaCatalog, topology: Topology) -> Flow:
    """Load and check one flow file (tests and tools; services load the folder).

    Raises:
        FlowDefinitionError: with every problem of the file.
    """
    flow, problems = read_flow(path, catalog=catalog, topology=topology)
    if problems or flow is None:
        raise FlowCheck(flows=(), problems=tuple(problems), files=1).error()
    return flow


def check_flows(directory: Path, *, catalog: SchemaCatalog, topology: Topology) -> FlowCheck:
    """Read every ``*.yaml``/``*.yml`` in ``directory`` and collect all problems.

    Raises:
        FlowDefinitionError: when the folder is missing or holds no flow file, since
            then there is nothing to check.
    """
    if not directory.is_dir():
        raise FlowDefinitionError(
            f"flow directory '{directory}' does not exist; create it with one "
            "<flow>.v<version>.yaml per flow version"
        )
    files = sorted([*directory.glob("*.yaml"), *directory.glob("*.yml")])
    if not files:
        raise FlowDefinitionError(f"no flow files (<flow>.v<version>.yaml) in '{directory}'")
    flows: dict[tuple[str, int], Flow] = {}
    problems: list[FlowProblem] = []
    for path in files:
        flow, found = read_flow(path, catalog=catalog, topology=topology)
        problems += found
        if flow is None:
            continue
        key = (flow.name, flow.version)
        if key in flows:
            problems.append(
                FlowProblem(
                    str(path),
                    f"this version is already defined in {flows[key].source}; keep one file",
                    flow.name,
                    flow.version,
                )
            )
            continue
        flows[key] = flow
    problems += _ambiguous_starts(flows.values())
    bad = {(p.flow, p.version) for p in problems}
    good = tuple(flows[k] for k in sorted(flows) if k not in bad)
    return FlowCheck(flows=good, problems=tuple(problems), files=len(files))


def read_flow(
    path: Path, *, catalog: SchemaCatalog, topology: Topology
) -> tuple[Flow | None, list[FlowProblem]]:
    """Read one flow file: the flow when it has no problem, and every problem found.

    Field problems (a bad duration, a missing compensation) are all reported; the
    checks that need the whole flow (edges, schemas, topics) run only on a flow whose
    fields are all right, so one typo does not also show up as a broken edge.
    """
    flow, problems = _parse(path)
    if problems or flow is None:
        return None, problems
    problems += check_flow(flow, catalog=catalog, topology=topology)
    return (None if problems else flow), problems


def parse_flows(directory: Path) -> tuple[Flow, ...]:
    """Every flow in ``directory`` whose file reads as a flow, unchecked (no folder: none).

    What the topology derives its topics' schema lists from (``topology.topic_schemas``),
    before the flows can be checked against it; a file that does not read is left out
    here and reported by ``check_flows``.
    """
    if not directory.is_dir():
        return ()
    files = sorted([*directory.glob("*.yaml"), *directory.glob("*.yml")])
    return tuple(flow for flow, _ in map(_parse, files) if flow is not None)


def _parse(path: Path) -> tuple[Flow | None, list[FlowProblem]]:
    """One flow file's fields, without the checks that need the catalog and topology."""
    source = str(path)
    document, problem = _read(path)
    if document is None:
        return None, [FlowProblem(source, problem or "unreadable")]
    name, version = _label(path, document)

    def problem_at(where: str | None, message: str) -> FlowProblem:
        return FlowProblem(source, message, name, version, where)

    problems = [problem_at(None, p) for p in _header_problems(path, document)]
    entries, entry_problems = _entries(document, problem_at)
    problems += entry_problems
    raw = {k: v for k, v in document.items() if k != "steps"}
    try:
        flow = Flow.model_validate({**raw, "steps": entries, "source": source})
    except ValidationError as exc:
        flow = None
        for error in exc.errors():
            if error["loc"][:1] == ("steps",) and (
                entry_problems or not isinstance(document.get("steps"), list)
            ):
                continue  # reported already, in the words of the entries
            problems.append(problem_at(*_describe(document, error)))
    if problems or flow is None:
        return None, problems
    return flow, []


def _read(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
        return None, f"not valid YAML{at}: {getattr(exc, 'problem', None) or exc}"
    if not isinstance(document, dict):
        return None, f"expected a mapping with keys {list(_FILE_KEYS)}"
    return document, None


def _label(path: Path, document: Mapping[str, Any]) -> tuple[str | None, int | None]:
    """The flow's name and version for messages, from the file or else its name."""
    match = _FILE_NAME.match(path.name)
    name = document.get("flow")
    version = document.get("version")
    if not isinstance(name, str):
        name = match.group("flow") if match else None
    if not isinstance(version, int) or isinstance(version, bool):
        version = int(match.group("version")) if match else None
    return name, version


def _header_problems(path: Path, document: Mapping[str, Any]) -> list[str]:
    problems = []
    unknown = [k for k in document if k not in _FILE_KEYS]
    if unknown:
        problems.append(f"unknown top-level key(s) {unknown}; expected {list(_FILE_KEYS)}")
    name, version = document.get("flow"), document.get("version")
    if isinstance(name, str) and isinstance(version, int) and not isinstance(version, bool):
        expected = f"{name}.v{version}"
        if path.stem != expected:
            problems.append(
                f"the file must be named '{expected}{path.suffix}': one file per flow "
                "version, named after both"
            )
    if not isinstance(document.get("steps"), list):
        problems.append("'steps' must be a list of steps and gates, in the order they run")
    return problems


def _entries(
    document: Mapping[str, Any], problem_at: Callable[[str | None, str], FlowProblem]
) -> tuple[list[Any], list[FlowProblem]]:
    """Validate each step and gate alone, filling in what starts it.

    A step says ``starts_on: <event type>`` or ``after: <entry>``; either way the
    loaded step has both: the events that start it, and the entry it follows.
    """
    raw_entries = document.get("steps")
    if not isinstance(raw_entries, list):
        return [], []
    flow_start = document.get("starts_on")
    start = (flow_start,) if is_event_type(flow_start) else (_UNRESOLVED,)
    names = [_entry_name(e) for e in raw_entries]
    parsed: dict[str, Step | Gate | Wait] = {}
    entries: list[Any] = []
    problems: list[FlowProblem] = []
    previous: Step | Gate | Wait | None = None
    previous_name: str | None = None
    for i, raw in enumerate(raw_entries):
        if not isinstance(raw, dict) or names[i] is None:
            problems.append(
                problem_at(
                    f"entry {i + 1}",
                    "expected a step (a mapping with name:), a gate (a mapping with gate:) "
                    "or a wait (a mapping with wait:)",
                )
            )
            previous, previous_name = None, None
            continue
        model = Gate if "gate" in raw else Wait if "wait" in raw else Step
        label = f"{model.kind} '{names[i]}'"
        data = dict(raw)
        after = data.get("after")
        if model is not Step and "starts_on" in data:
            problems.append(
                problem_at(
                    label,
                    f"a {model.kind} opens when the entry before it completes; drop starts_on",
                )
            )
            data.pop("starts_on")
        if model is Step and ("starts_on" in data) == ("after" in data):
            problems.append(
                problem_at(
                    label,
                    "give starts_on: <event type> or after: <the step or gate before it>, "
                    "exactly one",
                )
            )
        if "starts_on" not in data:
            # after names the entry it follows; whether it is the one before is
            # checked with the whole flow, so resolve from it when it can be found.
            source = (parsed.get(after) if isinstance(after, str) else None) or previous
            if i == 0:
                data["starts_on"] = start
            elif source is not None:
                data["starts_on"] = source.completes_on
            else:
                data["starts_on"] = (_UNRESOLVED,)
        if "after" not in data and i > 0:
            data["after"] = previous_name
        try:
            entry: Step | Gate | Wait = model.model_validate(data)
        except ValidationError as exc:
            problems += [problem_at(*_entry_error(label, e)) for e in exc.errors()]
            previous, previous_name = None, names[i]
            continue
        entries.append(entry)
        parsed.setdefault(entry.name, entry)
        previous, previous_name = entry, entry.name
    return entries, problems


def _entry_name(raw: Any) -> str | None:
    if not isinstance(raw, dict):
        return None
    name = raw.get("gate", raw.get("wait", raw.get("name")))
    return name if isinstance(name, str) else None


def _entry_error(label: str, error: Any) -> tuple[str, str]:
    loc = [str(p) for p in error["loc"]]
    message = _message(error)
    if not loc:
        return label, message
    return f"{label}, field '{'.'.join(loc)}'", message


def _describe(document: Mapping[str, Any], error: Any) -> tuple[str, str]:
    """Where a whole-flow validation error is, in the words of the file."""
    loc = list(error["loc"])
    message = _message(error)
    if loc and loc[0] in ("segments", "sla") and len(loc) > 1 and isinstance(loc[1], int):
        items = document.get(loc[0]) or []
        item = items[loc[1]] if loc[1] < len(items) else None
        name = item.get("name") if isinstance(item, dict) else None
        kind = "segment" if loc[0] == "segments" else "sla rule"
        label = f"{kind} '{name}'" if name else f"{kind} {loc[1] + 1}"
        rest = ".".join(str(p) for p in loc[2:])
        return (f"{label}, field '{rest}'" if rest else label), message
    return f"field '{'.'.join(str(p) for p in loc) or '(file)'}'", message


def _message(error: Any) -> str:
    if error["type"] == "extra_forbidden":
        return "unknown field"
    if error["type"] == "missing":
        return "required"
    message = str(error["msg"]).removeprefix("Value error, ")
    got = error.get("input")
    if error["loc"] and not isinstance(got, (dict, list, tuple)) and repr(got) not in message:
        message += f" (got {got!r})"
    return message


def _ambiguous_starts(flows: Iterable[Flow]) -> list[FlowProblem]:
    """Two flows starting on one event in one topic: which would a new workflow follow?"""
    latest: dict[str, Flow] = {}
    for flow in flows:
        if flow.name not in latest or flow.version > latest[flow.name].version:
            latest[flow.name] = flow
    seen: dict[tuple[str, str], Flow] = {}
    problems = []
    for flow in sorted(latest.values(), key=lambda f: f.name):
        key = (flow.topic, flow.starts_on)
        other = seen.get(key)
        if other is not None:
            problems.append(
                FlowProblem(
                    flow.source,
                    f"starts on '{flow.starts_on}' in topic '{flow.topic}', like flow "
                    f"'{other.name}' v{other.version} ({other.source}): a new workflow "
                    "could follow either; start one of them on another event",
                    flow.name,
                    flow.version,
                    "field 'starts_on'",
                )
            )
        seen.setdefault(key, flow)
    return problems
