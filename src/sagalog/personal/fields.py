"""Which fields of an event hold personal data, and of whom: read from the schema.

``{"name": "requester", "type": "string", "sagalog.personal": "requester"}`` marks
``requester`` as personal data of the subject the ``requester`` field names (here the
field itself); ``{"name": "note", "type": ["null", "string"], "sagalog.personal":
"requester"}`` marks a field about the same subject. Pure functions of the schema JSON,
so the catalog refuses a bad mark at load and ``sagalog schemas check`` reports one,
before any event is written in clear.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

ATTRIBUTE = "sagalog.personal"
"""The field attribute that marks personal data; its value names the subject's field."""

_TEXT_TYPES: tuple[Any, ...] = ("string", ["null", "string"], ["string", "null"])


@dataclass(frozen=True, slots=True)
class PersonalField:
    """A field of personal data (``name``) and the field naming its subject."""

    name: str
    subject_field: str


def personal_fields(schema: Mapping[str, Any]) -> tuple[PersonalField, ...]:
    """The event's own fields marked as personal data, in schema order."""
    return tuple(
        PersonalField(field["name"], field[ATTRIBUTE])
        for field in schema.get("fields", ())
        if isinstance(field, Mapping) and isinstance(field.get(ATTRIBUTE), str)
    )


def schema_problems(schema: Mapping[str, Any]) -> list[str]:
    """Every way the schema's personal-data marks are wrong, each saying what to do.

    A mark must sit on one of the event's own text fields (a string, or a string or
    null), and name another text field of the event as the subject, one that is always
    set: the subject's keyed hash is what the envelope and the erasure go by.
    """
    problems: list[str] = []
    fields = {f["name"]: f for f in schema.get("fields", ()) if isinstance(f, Mapping)}
    for name, field in fields.items():
        if ATTRIBUTE not in field:
            problems += _nested_marks(field.get("type"), f"{name}")
            continue
        subject = field[ATTRIBUTE]
        if field.get("type") not in _TEXT_TYPES:
            problems.append(
                f"field '{name}' is marked {ATTRIBUTE} but its type is "
                f'{field.get("type")!r}: only a string or ["null", "string"] field can '
                "hold personal data (an encrypted envelope is text)"
            )
        if not isinstance(subject, str) or subject not in fields:
            problems.append(
                f"field '{name}': {ATTRIBUTE} must name the field that identifies the data "
                f"subject, one of {sorted(fields)}; it is {subject!r}"
            )
        elif fields[subject].get("type") != "string":
            problems.append(
                f"field '{name}': its subject field '{subject}' has type "
                f"{fields[subject].get('type')!r}; a subject must be a string that is always set"
            )
    return problems


def unmarked(earlier: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """The fields ``earlier`` marked as personal data that ``current`` still has but no
    longer marks: new events would carry them in clear beside sealed old ones."""
    now = {f.name for f in personal_fields(current)}
    names = {f["name"] for f in current.get("fields", ()) if isinstance(f, Mapping)}
    return [f.name for f in personal_fields(earlier) if f.name in names and f.name not in now]


def _nested_marks(schema: Any, path: str) -> list[str]:
    """Marks inside nested records, which the envelope does not cover yet: refused."""
    if isinstance(schema, list):
        return [p for branch in schema for p in _nested_marks(branch, path)]
    if not isinstance(schema, Mapping):
        return []
    kind = schema.get("type")
    if kind == "record":
        found = []
        for field in schema.get("fields", ()):
            inner = f"{path}.{field.get('name')}"
            if ATTRIBUTE in field:
                found.append(
                    f"field '{inner}' is marked {ATTRIBUTE} inside a nested record: mark only "
                    "the event's own fields (move the value up, or split the record)"
                )
            found += _nested_marks(field.get("type"), inner)
        return found
    if kind == "array":
        return _nested_marks(schema.get("items"), f"{path}[]")
    if kind == "map":
        return _nested_marks(schema.get("values"), f"{path}{{}}")
    return []
