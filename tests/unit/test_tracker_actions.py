"""The tracker's actions render what the general models would: a shortcut must not drift."""

from __future__ import annotations

import pytest

from sagalog.events import StateTransition
from sagalog.flows.states import WorkflowState
from sagalog.priority import Priority
from sagalog.tracker import Publish


def _publish(**overrides: object) -> Publish:
    event = StateTransition(
        flow="orders",
        flow_version=3,
        from_state=WorkflowState.RUNNING.value,
        to_state=WorkflowState.PENDING_APPROVAL.value,
        step="approve",
        cause_event_id="cause-1",
        time_in_previous_state_ms=12,
        at="2026-12-07T19:00:00.123Z",
        from_step="score",
    )
    fields: dict[str, object] = {
        "event": event,
        "event_id": "id-1",
        "causation_id": "cause-1",
        "topic": "sagalog.transitions",
        "workflow_id": "wf-1",
        "flow_version": 3,
        "priority": Priority.HIGH,
        "time_ms": 1_800_000_000_123,
    }
    return Publish(**{**fields, **overrides})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "stamp",
    [
        {},
        {"chain": "ab" * 32},
        {"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"},
        {"chain": "cd" * 32, "traceparent": "00-" + "3" * 32 + "-" + "4" * 16 + "-01"},
    ],
)
def test_kafka_headers_are_the_event_headers_rendered(stamp: dict[str, str]) -> None:
    action = _publish().stamped(chain=stamp.get("chain"), traceparent=stamp.get("traceparent"))
    assert action.kafka_headers() == action.headers().to_kafka()
    assert action.kafka_headers(source="x/y") == action.headers(source="x/y").to_kafka()


def test_stamped_keeps_every_other_field() -> None:
    action = _publish(chain="old", traceparent="old")
    stamped = action.stamped(chain="new", traceparent=None)
    assert stamped == _publish(chain="new")
