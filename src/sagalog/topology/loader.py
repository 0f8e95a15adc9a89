"""Read ``topology/*.yaml`` into a ``Topology``, refusing anything malformed.

Errors name the file, the entry and the field, because the person reading them is
looking at that file: ``topology/topics.yaml, topic 'orders.events', field
'partitions': Input should be greater than 0 (got 0)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import TypeAdapter, ValidationError

from sagalog.errors import TopologyError
from sagalog.flows.loader import parse_flows
from sagalog.flows.model import Flow
from sagalog.topology.model import TopicDefaults, TopicSpec, Topology
from sagalog.topology.services import AgentService, ServiceSpec, TrackerService
from sagalog.topology.topic_schemas import effective_schemas, flow_event_types

_FILE_KEYS = {"defaults", "topics", "ignore", "services"}
_SERVICE: TypeAdapter[ServiceSpec] = TypeAdapter(ServiceSpec)


def load_topology(directory: Path, *, known_schemas: Mapping[str, Any] | None = None) -> Topology:
    """Load every ``*.yaml``/``*.yml`` directly in ``directory`` (flows live in a subfolder).

    A topic's ``schemas`` are what the flows in ``directory/flows`` imply for it and the
    platform writes on it (``topology.topic_schemas``), and what its entry lists.

    Args:
        directory: the topology folder.
        known_schemas: the schema catalog; when given, every schema a topic's entry lists
            must be in it (a flow's event types are checked with the flow).

    Raises:
        TopologyError: naming the file, the entry and the field of the first problem.
    """
    if not directory.is_dir():
        raise TopologyError(f"topology directory '{directory}' does not exist")
    files = sorted([*directory.glob("*.yaml"), *directory.glob("*.yml")])
    if not files:
        raise TopologyError(f"no topology files (*.yaml) in '{directory}'")
    topics: dict[str, TopicSpec] = {}
    origin: dict[str, Path] = {}
    ignore: list[str] = []
    services: dict[str, tuple[ServiceSpec, Path]] = {}
    for path in files:
        document = _read(path)
        for service in _services(path, document.get("services") or {}):
            if service.name in services:
                raise TopologyError(
                    f"{path}, service '{service.name}': already declared in "
                    f"{services[service.name][1]}"
                )
            services[service.name] = (service, path)
        defaults = _defaults(path, document.get("defaults") or {})
        ignore += _ignore(path, document.get("ignore") or [])
        entries = document.get("topics") or {}
        if not isinstance(entries, dict):
            raise TopologyError(f"{path}: 'topics' must be a mapping of topic name to settings")
        for name, entry in entries.items():
            if name in topics:
                raise TopologyError(f"{path}, topic '{name}': already declared in {origin[name]}")
            topic = _topic(path, str(name), entry, defaults)
            if known_schemas is not None:
                for schema in topic.schemas:
                    if schema not in known_schemas:
                        raise TopologyError(
                            f"{path}, topic '{name}', field 'schemas': no schema declares "
                            f"event type '{schema}'; add it under schemas/ or fix the name"
                        )
            topics[topic.name], origin[topic.name] = topic, path
    _check_services(services, set(topics))
    flows = parse_flows(directory / "flows")
    derived = flow_event_types(flows)
    return Topology(
        topics=tuple(
            topic.model_copy(
                update={"schemas": effective_schemas(topic.name, topic.schemas, derived)}
            )
            for topic in topics.values()
        ),
        ignore=tuple(ignore),
        services=(
            *(service for service, _ in services.values()),
            *flow_agents(flows, declared=set(services)),
        ),
        sources=tuple(str(p) for p in files),
    )


def flow_agents(flows: Iterable[Flow], *, declared: set[str]) -> list[AgentService]:
    """The agents the flows name on their steps that ``services:`` does not declare, in
    the order the flows name them: each an agent service with the defaults (an entry in
    ``services.yaml`` only sets what is not the default)."""
    names = dict.fromkeys(step.agent for flow in flows for step in flow.steps)
    return [AgentService.model_validate({"name": n}) for n in names if n not in declared]


def _services(path: Path, raw: Any) -> list[ServiceSpec]:
    if not isinstance(raw, dict):
        raise TopologyError(f"{path}: 'services' must be a mapping of service name to settings")
    services = []
    for name, entry in raw.items():
        if entry is None:
            entry = {}
        if not isinstance(entry, dict):
            raise TopologyError(f"{path}, service '{name}': expected a mapping of settings")
        if entry.get("kind") not in ("agent", "tracker", "gateway"):
            got = f" (got {entry['kind']!r})" if "kind" in entry else ""
            raise TopologyError(
                f"{path}, service '{name}', field 'kind': say agent, tracker or gateway{got}"
            )
        try:
            services.append(_SERVICE.validate_python({**entry, "name": str(name)}))
        except ValidationError as exc:
            raise TopologyError(_describe(path, f"service '{name}'", exc, strip=1)) from exc
    return services


def _check_services(services: Mapping[str, tuple[ServiceSpec, Path]], topics: set[str]) -> None:
    """What one entry cannot check alone: named topics exist, a gateway's tracker exists."""
    app_ids = {s.app_id for s, _ in services.values() if isinstance(s, TrackerService)}
    for service, path in services.values():
        for field in ("reads", "writes"):
            for topic in getattr(service, field):
                if topic not in topics:
                    raise TopologyError(
                        f"{path}, service '{service.name}', field '{field}': topic '{topic}' is "
                        "not declared under topics:; declare it or fix the name"
                    )
        tracker = getattr(service, "tracker_app_id", None)
        if tracker is not None and tracker not in app_ids:
            known = ", ".join(sorted(app_ids)) or "none declared"
            raise TopologyError(
                f"{path}, service '{service.name}', field 'tracker_app_id': no tracker with app "
                f"id '{tracker}' (trackers: {known}); declare it with kind: tracker"
            )


def _read(path: Path) -> dict[str, Any]:
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise TopologyError(f"{path}: not valid YAML{where}: {problem}") from exc
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise TopologyError(f"{path}: expected a mapping with keys {sorted(_FILE_KEYS)}")
    unknown = set(document) - _FILE_KEYS
    if unknown:
        raise TopologyError(
            f"{path}: unknown top-level key(s) {sorted(unknown)}; expected {sorted(_FILE_KEYS)}"
        )
    return document


def _defaults(path: Path, raw: Any) -> TopicDefaults:
    try:
        return TopicDefaults.model_validate(raw)
    except ValidationError as exc:
        raise TopologyError(_describe(path, "defaults", exc)) from exc


def _ignore(path: Path, raw: Any) -> list[str]:
    if not isinstance(raw, list) or not all(isinstance(p, str) for p in raw):
        raise TopologyError(f"{path}, field 'ignore': expected a list of topic name patterns")
    return list(raw)


def _topic(path: Path, name: str, entry: Any, defaults: TopicDefaults) -> TopicSpec:
    if entry is None:
        entry = {}
    if not isinstance(entry, dict):
        raise TopologyError(f"{path}, topic '{name}': expected a mapping of settings")
    merged: dict[str, Any] = {
        "partitions": defaults.partitions,
        "replication_factor": defaults.replication_factor,
        **entry,
        "name": name,
        "config": {**defaults.config, **(entry.get("config") or {})},
    }
    try:
        return TopicSpec.model_validate(merged)
    except ValidationError as exc:
        raise TopologyError(_describe(path, f"topic '{name}'", exc)) from exc


def _describe(path: Path, entry: str, exc: ValidationError, *, strip: int = 0) -> str:
    """``strip``: leading location parts to drop (a tagged union puts its tag first)."""
    lines = []
    for error in exc.errors():
        field = ".".join(str(p) for p in error["loc"][strip:]) or "(entry)"
        got = error.get("input")
        suffix = "" if error["type"] in ("missing", "extra_forbidden") else f" (got {got!r})"
        message = "unknown field" if error["type"] == "extra_forbidden" else error["msg"]
        lines.append(f"{path}, {entry}, field '{field}': {message}{suffix}")
    return "\n".join(lines)
