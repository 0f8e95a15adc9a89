"""The rebuild's diff: the fields the rules decide, robust to fields added later."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sagalog.replay.diff import (
    DIFFED_FIELDS,
    RECORD,
    Mismatch,
    compare,
    decided_fields,
    diff_sorted,
    merged_by_id,
)

FIXTURE = Path(__file__).parent / "fixtures" / "tracker_record_v1.json"


def stored(**changes: Any) -> dict[str, Any]:
    record: dict[str, Any] = json.loads(FIXTURE.read_text())
    record.update(changes)
    return record


def raw(record: dict[str, Any]) -> bytes:
    return json.dumps(record).encode()


def test_the_fields_of_a_stored_record_that_are_diffed() -> None:
    fields = decided_fields(stored())
    assert tuple(fields) == DIFFED_FIELDS
    assert all(isinstance(t, str) for t in fields["timers"])
    assert fields["completed"] == [c["name"] for c in stored()["completed"]]


def test_fields_the_rules_do_not_decide_and_fields_added_later_are_not_compared() -> None:
    live = stored()
    rebuilt = stored(
        recent_event_ids=["other"],
        last_event_at_ms=1,
        chain="sha256:abc",  # the audit trail's additions
        sealed=[{"topic": "t", "partition": 0, "offset": 1, "event_id": "e", "hash": "h"}],
        some_future_field={"x": 1},
    )
    assert compare("wf-1", raw(live), raw(rebuilt)) == []


def test_a_difference_names_the_workflow_the_field_and_both_values() -> None:
    live = stored(state="completed", current=None)
    rebuilt = stored(state="running")
    found = compare("wf-1", raw(live), raw(rebuilt))
    assert Mismatch("wf-1", "state", "completed", "running") in found
    assert found[0].to_json() == {
        "workflow_id": "wf-1",
        "field": "state",
        "live": "completed",
        "rebuilt": "running",
    }


def test_a_timer_that_differs_only_in_its_due_time_is_a_mismatch() -> None:
    live = stored(timers=[{"workflow_id": "w", "kind": "step_timeout", "ref": "a", "due_ms": 5}])
    rebuilt = stored(timers=[{"workflow_id": "w", "kind": "step_timeout", "ref": "a", "due_ms": 6}])
    [mismatch] = compare("w", raw(live), raw(rebuilt))
    assert (mismatch.field, mismatch.live, mismatch.rebuilt) == (
        "timers",
        ["step_timeout:a@5"],
        ["step_timeout:a@6"],
    )


def test_a_workflow_on_one_side_only_is_reported_missing_on_the_other() -> None:
    record = raw(stored(state="compensated"))
    assert compare("w", None, record) == [Mismatch("w", RECORD, None, "compensated")]
    assert compare("w", record, None) == [Mismatch("w", RECORD, "compensated", None)]


def test_two_sorted_streams_are_merged_without_holding_either() -> None:
    a, b = raw(stored(state="completed")), raw(stored(state="failed"))
    live = iter([("wf-1", a), ("wf-2", a), ("wf-4", a)])
    rebuilt = merged_by_id([iter([("wf-2", b)]), iter([("wf-1", a), ("wf-3", a)])])
    found = list(diff_sorted(live, rebuilt))
    assert [(m.workflow_id, m.field) for m in found] == [
        ("wf-2", "state"),
        ("wf-3", RECORD),
        ("wf-4", RECORD),
    ]
