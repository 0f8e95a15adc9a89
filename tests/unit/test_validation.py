"""JSON payloads are checked field by field, with every problem named by its path."""

from __future__ import annotations

import datetime as dt
import decimal

import pytest

from sagalog.contracts.catalog import SchemaCatalog
from sagalog.contracts.validation import to_avro_datum
from sagalog.errors import EventValidationError

GOOD = {
    "request_id": "r-1",
    "requester": "ana@example.com",
    "department": "it",
    "title": "Laptops",
    "description": "ten",
    "amount": "12500.5",
    "currency": "EUR",
    "vendor": "Acme",
    "submitted_at": "2026-11-29T07:30:00Z",
}


def validate(catalog: SchemaCatalog, payload: object) -> dict[str, object]:
    schema = catalog["procurement.v1.RequestSubmitted"]
    return to_avro_datum(schema.definition, payload, event_type=schema.name)


def test_good_payload_converts_json_to_avro_types(catalog: SchemaCatalog) -> None:
    datum = validate(catalog, GOOD)
    assert datum["amount"] == decimal.Decimal("12500.50")
    assert datum["submitted_at"] == dt.datetime(2026, 11, 29, 7, 30, tzinfo=dt.UTC)
    assert datum["priority"] == "NORMAL"  # the schema default


def test_every_problem_is_named(catalog: SchemaCatalog) -> None:
    bad = {**GOOD, "request_id": 7, "requestor": "x", "amount": "1.234", "priority": "MEGA"}
    del bad["vendor"]
    with pytest.raises(EventValidationError) as caught:
        validate(catalog, bad)
    message = str(caught.value)
    assert "procurement.v1.RequestSubmitted" in message
    assert "request_id: expected a string, got 7" in message
    assert "requestor: unknown field; did you mean 'requester'?" in message
    assert "amount: 1.234 has more than 2 decimal places" in message
    assert "priority: 'MEGA' is not one of LOW, NORMAL, HIGH, URGENT" in message
    assert "vendor: required field is missing" in message


def test_nested_paths_and_unions(catalog: SchemaCatalog) -> None:
    schema = {
        "type": "record",
        "name": "R",
        "fields": [
            {
                "name": "lines",
                "type": {
                    "type": "array",
                    "items": {
                        "type": "record",
                        "name": "Line",
                        "fields": [{"name": "qty", "type": "int"}],
                    },
                },
            },
            {"name": "note", "type": ["null", "string"], "default": None},
        ],
    }
    with pytest.raises(EventValidationError) as caught:
        to_avro_datum(schema, {"lines": [{"qty": 1}, {"qty": "two"}], "note": 5}, event_type="R")
    assert "lines[1].qty: expected an integer (int), got 'two'" in str(caught.value)
    assert "note: 5 matches none of [null, string]" in str(caught.value)
    assert to_avro_datum(schema, {"lines": []}, event_type="R") == {"lines": [], "note": None}


def test_not_an_object(catalog: SchemaCatalog) -> None:
    with pytest.raises(EventValidationError, match=r"\(payload\): expected an object"):
        validate(catalog, [1, 2])
