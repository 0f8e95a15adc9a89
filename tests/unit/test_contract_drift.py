"""Pydantic event classes and their Avro schemas cannot drift apart unnoticed."""

from __future__ import annotations

import datetime as dt
import enum
import importlib

import pytest

from sagalog.blobs.store import BlobRef, blob_ref_schema
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.contracts.drift import model_drift
from sagalog.contracts.models import Event

# Every module that declares event classes; a new one is added here.
EVENT_MODULES = ["sagalog.events", "procurement.events", "filings.events"]


@pytest.fixture(scope="module")
def classes() -> dict[str, type[Event]]:
    for module in EVENT_MODULES:
        importlib.import_module(module)
    # Only the modules' own classes: tests declare throwaway events too.
    return {t: c for t, c in Event.registered().items() if c.__module__ in EVENT_MODULES}


def test_every_schema_has_a_class_and_every_class_a_schema(
    catalog: SchemaCatalog, classes: dict[str, type[Event]]
) -> None:
    assert sorted(set(catalog) - set(classes)) == [], "schemas without an event class"
    assert sorted(set(classes) - set(catalog)) == [], "event classes without a schema"


def test_no_class_drifts_from_its_schema(
    catalog: SchemaCatalog, classes: dict[str, type[Event]]
) -> None:
    problems = [p for name, cls in classes.items() for p in model_drift(cls, catalog[name])]
    assert problems == []


def test_drift_is_detected_field_by_field(catalog: SchemaCatalog) -> None:
    class Level(enum.StrEnum):
        LOW = "LOW"

    class Drifted(Event):  # deliberately wrong in five ways
        step: int  # schema: string
        reason: str | None = None  # schema: required string
        error_class: str
        retryable: bool = True  # schema default: false
        extra: dt.datetime  # not in the schema
        level: Level = Level.LOW  # not in the schema

    problems = model_drift(Drifted, catalog["sagalog.v1.StepFailed"])
    text = "\n".join(problems)
    assert "sagalog.v1.StepFailed.attempts: in the schema, missing from Drifted" in text
    assert "sagalog.v1.StepFailed.extra: in Drifted, missing from the schema" in text
    assert "sagalog.v1.StepFailed.step: the schema says string (str), the class says int" in text
    assert "sagalog.v1.StepFailed.reason: the schema makes it required" in text
    assert "default True in Drifted, False in the schema" in text


def test_two_classes_for_one_event_type_are_refused() -> None:
    importlib.import_module("sagalog.events")
    from sagalog.errors import SchemaError

    with pytest.raises(SchemaError, match="has two classes"):

        class StepFailedAgain(Event):
            event_type = "sagalog.v1.StepFailed"


def test_a_union_of_several_types_is_compared_branch_by_branch(catalog: SchemaCatalog) -> None:
    from procurement.events import RiskScored

    schema = catalog["procurement.v1.RiskScored"]
    assert model_drift(RiskScored, schema) == []

    class Swapped(RiskScored):  # the schema's order is string, then BlobRef
        event_type = "test.v1.Swapped"
        prompt: BlobRef | str | None = None  # type: ignore[assignment]

    class Fewer(RiskScored):
        event_type = "test.v1.Fewer"
        prompt: str | None = None

    swapped = "\n".join(model_drift(Swapped, schema))
    assert "RiskScored.prompt<0>: the schema says string (str), the class says BlobRef" in swapped
    assert model_drift(Fewer, schema) == [
        "procurement.v1.RiskScored.prompt: the schema's union has 2 types besides null, "
        "the class 1 (str)"
    ]


def test_every_schema_holding_a_blob_reference_declares_it_as_the_blobs_module_does(
    catalog: SchemaCatalog,
) -> None:
    """Avro files cannot include one another: each copy is checked against the one."""

    def refs(node: object) -> list[object]:
        if isinstance(node, dict):
            own = [node] if node.get("name") == "BlobRef" else []
            return own + [r for value in node.values() for r in refs(value)]
        if isinstance(node, list):
            return [r for value in node for r in refs(value)]
        return []

    found = [r for schema in catalog.values() for r in refs(dict(schema.definition))]
    assert found, "the reference schemas hold a blob reference (RiskScored.prompt)"
    assert all(r == blob_ref_schema() for r in found)
