"""The registry enforces the same rule as `sagalog schemas check`, and evolution works."""

from __future__ import annotations

import copy
import json

import pytest

from sagalog.contracts.catalog import SchemaCatalog
from sagalog.contracts.codec import EventCodec
from sagalog.contracts.registry import SchemaRegistry
from sagalog.contracts.subjects import subject_for
from sagalog.errors import SchemaCompatibilityError
from sagalog.publisher import EventPublisher
from sagalog.tail import tail

from .project import Project

EVENT = "procurement.v1.BudgetReserved"


def rewrite(project: Project, change) -> None:  # type: ignore[no-untyped-def]
    path = project.root / "schemas/procurement/v1/budget_reserved.avsc"
    definition = json.loads(path.read_text())
    change(definition["fields"])
    path.write_text(json.dumps(definition))


def test_registry_refuses_removing_a_field_without_default(project: Project) -> None:
    project.apply()
    rewrite(
        project, lambda fields: fields.remove(next(f for f in fields if f["name"] == "cost_center"))
    )
    with pytest.raises(SchemaCompatibilityError) as caught:
        project.apply()
    message = str(caught.value)
    assert f"{project.topic('procurement.events')}-{EVENT}" in message
    assert "FULL_TRANSITIVE violated" in message
    assert "cost_center" in message


def test_registry_refuses_adding_a_field_without_default(project: Project) -> None:
    project.apply()
    rewrite(project, lambda fields: fields.append({"name": "approver", "type": "string"}))
    with pytest.raises(SchemaCompatibilityError, match="approver"):
        project.apply()


def test_old_events_read_by_new_code_get_defaults(project: Project) -> None:
    project.apply()
    topic = project.topic("procurement.events")
    old_catalog = project.catalog
    publisher = EventPublisher(project.settings, catalog=old_catalog, source="tests/evolution")
    payload = {
        "reservation_id": "res-1",
        "cost_center": "cc-1",
        "amount": "10.00",
        "currency": "EUR",
    }
    publisher.publish(topic, EVENT, payload, workflow_id="wf-old")

    rewrite(
        project,
        lambda fields: fields.append({"name": "expires_in_days", "type": "int", "default": 30}),
    )
    project.apply()  # a compatible new version registers
    new_catalog = SchemaCatalog.load(project.root / "schemas")
    registry = SchemaRegistry(project.settings)
    subject = subject_for(topic, EVENT)
    assert registry.latest(subject).version == 2  # type: ignore[union-attr]

    EventPublisher(project.settings, catalog=new_catalog, source="tests/evolution").publish(
        topic, EVENT, {**payload, "expires_in_days": 7}, workflow_id="wf-old"
    )
    codec = EventCodec(catalog=new_catalog, registry=registry)
    records = list(tail(project.settings, codec, topic, max_records=2, idle_timeout_s=20))
    assert [r.payload["expires_in_days"] for r in records] == [30, 7]  # type: ignore[index]
    assert records[0].schema_id != records[1].schema_id

    # And an old reader still reads the new event (forward compatibility).
    old_codec = EventCodec(catalog=old_catalog, registry=registry)
    old_view = list(tail(project.settings, old_codec, topic, max_records=2, idle_timeout_s=20))
    assert "expires_in_days" not in (old_view[1].payload or {})
    assert copy.deepcopy(old_view[1].payload)["cost_center"] == "cc-1"  # type: ignore[index]
