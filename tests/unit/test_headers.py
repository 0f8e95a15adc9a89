"""Event metadata follows the CloudEvents Kafka binding and survives a round trip."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from sagalog.contracts.headers import EventHeaders, header_dict, header_value
from sagalog.errors import EventValidationError


def test_round_trip_through_kafka_headers() -> None:
    headers = EventHeaders(
        id="e-1",
        type="procurement.v1.BudgetReserved",
        source="sagalog/budget-agent",
        workflow_id="wf-9",
        time=dt.datetime(2026, 11, 29, 8, 0, tzinfo=dt.UTC),
        causation_id="e-0",
        flow_version=3,
        traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    )
    raw = headers.to_kafka()
    names = [name for name, _ in raw]
    assert names[:6] == [
        "ce_specversion",
        "ce_id",
        "ce_source",
        "ce_type",
        "ce_time",
        "content-type",
    ]
    assert dict(raw)["ce_time"] == "2026-11-29T08:00:00Z"
    assert dict(raw)["ce_correlationid"] == "wf-9"  # defaults to the workflow id
    back = EventHeaders.from_kafka(raw)
    assert back == dataclasses.replace(headers, correlation_id="wf-9")


def test_missing_headers_are_named() -> None:
    with pytest.raises(EventValidationError, match="ce_id, ce_source, ce_time, ce_workflowid"):
        EventHeaders.from_kafka([("ce_type", b"x.v1.Y")])


def test_malformed_flow_version_is_named() -> None:
    raw = EventHeaders(id="e", type="t", source="s", workflow_id="w").to_kafka()
    raw.append(("ce_flowversion", b"three"))
    with pytest.raises(EventValidationError, match="ce_flowversion is not an integer"):
        EventHeaders.from_kafka(raw)


def test_header_dict_routes_without_decoding() -> None:
    assert header_dict([("ce_type", b"a.v1.B"), ("x", None)]) == {"ce_type": "a.v1.B"}
    assert header_dict(None) == {}


@pytest.mark.parametrize(
    "raw",
    [
        [("ce_type", b"a.v1.B"), ("ce_id", b"e-1")],
        [("ce_type", b"old.v1.X"), ("ce_type", b"a.v1.B")],  # the last one wins
        [("ce_type", b"a.v1.B"), ("ce_type", None)],  # a None value is no value
        {"ce_type": "a.v1.B"},
        [("ce_type", "a.v1.B")],
    ],
)
def test_header_value_agrees_with_header_dict(raw: object) -> None:
    assert header_value(raw, "ce_type") == header_dict(raw)["ce_type"] == "a.v1.B"  # type: ignore[arg-type]


def test_header_value_of_a_missing_header_is_none() -> None:
    assert header_value([("ce_id", b"e-1")], "ce_type") is None
    assert header_value(None, "ce_type") is None
    assert header_value([], "ce_type") is None
