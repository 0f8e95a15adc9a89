"""The compatibility rule for event schemas, as a pure function.

sagalog's rule is FULL_TRANSITIVE, stricter than the BACKWARD_TRANSITIVE minimum the
design names, for a reason specific to choreography: the full log is replayed by
new code forever, so a new schema must read every earlier version (backward), and
agents deploy independently, so a consumer still on an earlier schema must read
what an upgraded producer writes (forward). In practice: add fields only with a
default, remove only fields that have one, never rename or retype.

The check itself is the Avro reference implementation's
``ReaderWriterCompatibilityChecker``; this module turns its findings into sentences.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import avro.schema
from avro.compatibility import (
    ReaderWriterCompatibilityChecker,
    SchemaCompatibilityType,
    SchemaIncompatibilityType,
)

RULE = "FULL_TRANSITIVE"


@dataclass(frozen=True)
class EarlierVersion:
    """A committed version of a schema: where it came from and its JSON."""

    label: str  # e.g. "commit 1a2b3c4 (2026-11-02)"
    definition: Mapping[str, Any]


@dataclass(frozen=True)
class Incompatibility:
    """One way the candidate breaks the rule against one earlier version."""

    event_type: str
    against: str
    direction: str  # "backward" (new reads old) or "forward" (old reads new)
    location: str
    explanation: str

    def __str__(self) -> str:
        return (
            f"{self.event_type}: {RULE} violated against {self.against}: {self.direction}: "
            f"{self.explanation} (at {self.location})"
        )


_BACKWARD_WORDS = {
    SchemaIncompatibilityType.reader_field_missing_default_value: (
        "field {field} was added without a default, so new code cannot read events "
        "written before it; give it a default"
    ),
    SchemaIncompatibilityType.missing_enum_symbols: (
        "enum symbols were removed ({detail}), so events written with them cannot be read"
    ),
}
_FORWARD_WORDS = {
    SchemaIncompatibilityType.reader_field_missing_default_value: (
        "field {field} was removed but has no default in the earlier version, so services "
        "still on that version cannot read new events; keep the field"
    ),
    SchemaIncompatibilityType.missing_enum_symbols: (
        "enum symbols were added ({detail}) that services on the earlier version cannot read; "
        "give the enum a default symbol in every version first"
    ),
}


def _parse(definition: Mapping[str, Any]) -> avro.schema.Schema:
    return avro.schema.parse(json.dumps(definition))


def check(
    event_type: str,
    candidate: Mapping[str, Any],
    earlier: Sequence[EarlierVersion],
) -> list[Incompatibility]:
    """Every way ``candidate`` breaks FULL_TRANSITIVE against the ``earlier`` versions."""
    checker = ReaderWriterCompatibilityChecker()  # type: ignore[no-untyped-call]
    new = _parse(candidate)
    problems: list[Incompatibility] = []
    for version in earlier:
        if version.definition == candidate:
            continue
        old = _parse(version.definition)
        for direction, reader, writer, words in (
            ("backward", new, old, _BACKWARD_WORDS),
            ("forward", old, new, _FORWARD_WORDS),
        ):
            result = checker.get_compatibility(reader, writer)
            if result.compatibility is SchemaCompatibilityType.compatible:
                continue
            locations = sorted(result.locations) or ["/"]
            details = sorted(str(m) for m in result.messages)
            for kind in result.incompatibilities:
                field = ", ".join(f"'{m}'" for m in details) or "?"
                template = words.get(kind, "{kind}: {detail}")
                problems.append(
                    Incompatibility(
                        event_type=event_type,
                        against=version.label,
                        direction=direction,
                        location=", ".join(locations),
                        explanation=template.format(
                            field=field, detail="; ".join(details), kind=kind.value
                        ),
                    )
                )
    return problems
