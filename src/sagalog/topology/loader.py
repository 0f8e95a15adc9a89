"""Read ``topology/*.yaml`` into a ``Topology``, refusing anything malformed.

Errors name the file, the entry and the field, because the person reading them is
looking at that file: ``topology/topics.yaml, topic 'orders.events', field
'partitions': Input should be greater than 0 (got 0)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from sagalog.errors import TopologyError
from sagalog.topology.model import TopicDefaults, TopicSpec, Topology

_FILE_KEYS = {"defaults", "topics", "ignore"}


def load_topology(directory: Path, *, known_schemas: Mapping[str, Any] | None = None) -> Topology:
    """Load every ``*.yaml``/``*.yml`` directly in ``directory`` (flows live in a subfolder).

    Args:
        directory: the topology folder.
        known_schemas: the schema catalog; when given, every schema a topic names must
            be in it.

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
    for path in files:
        document = _read(path)
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
    return Topology(
        topics=tuple(topics.values()),
        ignore=tuple(ignore),
        sources=tuple(str(p) for p in files),
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


def _describe(path: Path, entry: str, exc: ValidationError) -> str:
    lines = []
    for error in exc.errors():
        field = ".".join(str(p) for p in error["loc"]) or "(entry)"
        got = error.get("input")
        suffix = "" if error["type"] in ("missing", "extra_forbidden") else f" (got {got!r})"
        message = "unknown field" if error["type"] == "extra_forbidden" else error["msg"]
        lines.append(f"{path}, {entry}, field '{field}': {message}{suffix}")
    return "\n".join(lines)
