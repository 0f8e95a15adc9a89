"""The committed ``.avsc`` files against the event classes they are generated from.

Each file under ``schemas/`` is what ``sagalog schemas generate`` writes from its class
(``contracts.avro_from_model``), committed so that a change to a class shows up in
review as a change to its contract. A file is compared as a schema: whitespace and the
order of keys inside an object aside, everything else counts (names, types, defaults,
docs, attributes). A file equal in that sense is left as committed, because the
registry was given its text (``catalog.EventSchema.text``, the parsed file in compact
JSON) and looks schemas up by it: rewriting an equal schema with its keys in another
order would make an already registered schema unknown to the registry.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from sagalog.contracts.avro_from_model import event_schema, schema_path, schema_text
from sagalog.contracts.catalog import same_schema

GENERATE = "run `sagalog schemas generate`"


@dataclass(frozen=True)
class FileProblem:
    """One committed file that is not what its class generates, or has no class."""

    path: Path
    event_type: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def file_problems(
    classes: Mapping[str, type[BaseModel]], root: Path, *, committed: Mapping[str, Path]
) -> list[FileProblem]:
    """Every event type whose file under ``root`` is missing, differs from its class, or
    has no class. ``committed`` maps each event type found under ``root`` to its file
    (relative to ``root``), as the catalog read them."""
    problems = []
    for event_type, cls in sorted(classes.items()):
        path = schema_path(event_type)
        where = f"{cls.__module__}.{cls.__qualname__}"
        file = root / path
        if not file.is_file():
            problems.append(
                FileProblem(
                    Path(root.name) / path,
                    event_type,
                    f"missing: class {where} defines {event_type}; {GENERATE} and commit it",
                )
            )
            continue
        generated = event_schema(cls)
        found = json.loads(file.read_text(encoding="utf-8"))
        if not same_schema(found, generated):
            problems.append(
                FileProblem(
                    Path(root.name) / path,
                    event_type,
                    f"differs from what class {where} generates ({_difference(found, generated)})"
                    f"; {GENERATE} and commit the change, never edit the file by hand",
                )
            )
    for event_type, path in sorted(committed.items()):
        if event_type not in classes:
            problems.append(
                FileProblem(
                    Path(root.name) / path,
                    event_type,
                    f"declares {event_type}, but no event class has that event_type: write "
                    "the class in one of the modules [tool.sagalog] event-modules names (the "
                    f"file is generated from it), then {GENERATE}",
                )
            )
    return problems


def write_files(classes: Mapping[str, type[BaseModel]], root: Path) -> tuple[list[Path], int]:
    """Write each class's file under ``root`` where it is missing or differs; the files
    written, and how many were already equal (and left as committed)."""
    written, unchanged = [], 0
    for event_type, cls in sorted(classes.items()):
        file = root / schema_path(event_type)
        generated = event_schema(cls)
        if file.is_file() and same_schema(json.loads(file.read_text(encoding="utf-8")), generated):
            unchanged += 1
            continue
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(schema_text(generated), encoding="utf-8")
        written.append(file)
    return written, unchanged


def _difference(found: Mapping[str, Any], generated: Mapping[str, Any]) -> str:
    """Where the two first differ, in a person's words: a field, or a record key."""
    fields = {f.get("name"): f for f in found.get("fields", [])}
    wanted = {f["name"]: f for f in generated["fields"]}
    added = [n for n in wanted if n not in fields]
    removed = [n for n in fields if n not in wanted]
    changed = [n for n in wanted if n in fields and not same_schema(fields[n], wanted[n])]
    parts = []
    if added:
        parts.append(f"the class adds field(s) {', '.join(added)}")
    if removed:
        parts.append(f"the file has field(s) {', '.join(map(str, removed))} the class has not")
    if changed:
        parts.append(f"field(s) {', '.join(changed)} differ")
    if not parts and list(fields) != list(wanted):
        parts.append("the fields are in another order")
    keys = [k for k in generated if k != "fields" and found.get(k) != generated.get(k)]
    keys += [k for k in found if k not in generated]
    if keys:
        parts.append(f"the record's {', '.join(dict.fromkeys(keys))} differ")
    return "; ".join(parts) or "they differ"
