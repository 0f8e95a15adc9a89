"""The schema catalog: every event type the platform knows, read from ``schemas/``.

``schemas/`` is the contract between independently deployed services. One file holds
one event type; its namespace mirrors its path (``schemas/procurement/v1/budget_reserved.avsc``
declares ``procurement.v1.BudgetReserved``), so a reader can find a schema from an
event's type header alone. The catalog refuses any file that breaks those rules at
load time, because a contract that loads "mostly" is a contract nobody can trust.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fastavro

from sagalog.errors import SchemaError
from sagalog.personal.fields import schema_problems

_SNAKE_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def file_name_for(record_name: str) -> str:
    """The file name a record must live in: ``BudgetReserved`` -> ``budget_reserved.avsc``."""
    return _SNAKE_BOUNDARY.sub("_", record_name).lower() + ".avsc"


def same_schema(left: Any, right: Any) -> bool:
    """Whether two schema JSON forms are equal, ignoring whitespace and key order."""
    return bool(json.dumps(left, sort_keys=True) == json.dumps(right, sort_keys=True))


@dataclass(frozen=True)
class EventSchema:
    """One event type's schema as committed in ``schemas/``.

    Attributes:
        name: the Avro full name, also the CloudEvents ``ce_type`` of the event.
        path: the file it was read from, relative to the catalog root.
        definition: the schema as parsed JSON.
        text: the schema as compact JSON, the form registered in the schema registry.
        parsed: fastavro's parsed form, ready for encoding and decoding.
    """

    name: str
    path: Path
    definition: Mapping[str, Any]
    text: str
    parsed: Any = field(repr=False, compare=False)

    @property
    def namespace(self) -> str:
        return self.name.rsplit(".", 1)[0]

    @property
    def record_name(self) -> str:
        return self.name.rsplit(".", 1)[1]

    @property
    def field_names(self) -> tuple[str, ...]:
        return tuple(f["name"] for f in self.definition["fields"])


def parse_schema_text(text: str, *, origin: str) -> tuple[dict[str, Any], Any]:
    """Parse one ``.avsc`` text into its JSON and fastavro forms.

    Raises:
        SchemaError: naming ``origin`` when the text is not JSON or not valid Avro.
    """
    try:
        definition = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SchemaError(
            f"{origin}: not valid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from exc
    if not isinstance(definition, dict) or definition.get("type") != "record":
        raise SchemaError(
            f"{origin}: an event schema must be an Avro record "
            '(a JSON object with "type": "record")'
        )
    try:
        parsed = fastavro.parse_schema(definition, _write_hint=False)
    except Exception as exc:  # fastavro raises several unrelated types for bad schemas
        raise SchemaError(f"{origin}: not a valid Avro schema: {exc}") from exc
    return definition, parsed


def load_schema_file(path: Path, *, root: Path) -> EventSchema:
    """Load and check one schema file against the layout rules.

    Raises:
        SchemaError: when the file is unreadable, not Avro, its name or namespace
            does not mirror its path, or a personal-data mark is wrong.
    """
    relative = path.relative_to(root)
    definition, parsed = parse_schema_text(path.read_text(encoding="utf-8"), origin=str(relative))
    name = definition.get("name", "")
    namespace = definition.get("namespace") or (name.rsplit(".", 1)[0] if "." in name else "")
    record_name = name.rsplit(".", 1)[-1]
    expected_namespace = ".".join(relative.parent.parts)
    if namespace != expected_namespace:
        raise SchemaError(
            f"{relative}: namespace is '{namespace}' but the path says '{expected_namespace}'; "
            f'set "namespace": "{expected_namespace}" or move the file'
        )
    if path.name != file_name_for(record_name):
        raise SchemaError(
            f"{relative}: record '{record_name}' must live in '{file_name_for(record_name)}'; "
            "rename the file or the record"
        )
    problems = schema_problems(definition)
    if problems:
        raise SchemaError(f"{relative}: " + "; ".join(problems))
    full_name = f"{namespace}.{record_name}"
    text = json.dumps(definition, separators=(",", ":"), sort_keys=False)
    return EventSchema(
        name=full_name, path=relative, definition=definition, text=text, parsed=parsed
    )


class SchemaCatalog(Mapping[str, EventSchema]):
    """All event schemas under one root, looked up by Avro full name (the event type)."""

    def __init__(self, schemas: Mapping[str, EventSchema], *, root: Path) -> None:
        self._schemas = dict(schemas)
        self.root = root

    @classmethod
    def load(cls, root: Path) -> SchemaCatalog:
        """Read every ``*.avsc`` under ``root``.

        Raises:
            SchemaError: for the first file that breaks a rule, or two files that
                declare the same event type.
        """
        if not root.is_dir():
            raise SchemaError(
                f"schema directory '{root}' does not exist; run from the project root "
                "or pass --project-dir"
            )
        schemas: dict[str, EventSchema] = {}
        for path in sorted(root.rglob("*.avsc")):
            schema = load_schema_file(path, root=root)
            if schema.name in schemas:
                raise SchemaError(
                    f"{schema.path}: event type '{schema.name}' is already declared in "
                    f"{schemas[schema.name].path}"
                )
            schemas[schema.name] = schema
        return cls(schemas, root=root)

    def __getitem__(self, name: str) -> EventSchema:
        try:
            return self._schemas[name]
        except KeyError:
            raise SchemaError(
                f"unknown event type '{name}': no schema declares it under {self.root}; "
                f"known types: {', '.join(sorted(self._schemas)) or 'none'}"
            ) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._schemas)

    def __len__(self) -> int:
        return len(self._schemas)

    def __contains__(self, name: object) -> bool:
        return name in self._schemas
