"""The journal: the live tracker's transitions folded into numbered causes and firings."""

from __future__ import annotations

from sagalog.replay.journal import (
    Decided,
    MemoryJournal,
    Recorded,
    RecordedFiring,
    decisions_from,
    fold,
)

DEADLINE = "timer:000000000001000|wf-1|workflow_deadline|workflow"
GATE = "timer:000000000000500|wf-1|gate_deadline|manager_approval#1"


def d(workflow: str, cause: str, at: int) -> Decided:
    return Decided(workflow_id=workflow, cause_id=cause, at_ms=at)


def test_each_workflows_causes_are_numbered_in_decision_order_once_per_decision() -> None:
    folded = fold(
        [
            d("wf-1", "ev-start", 10),
            d("wf-2", "ev-other", 11),
            d("wf-1", "ev-gate", 20),  # one decision, two transitions
            d("wf-1", "ev-gate", 20),
            d("wf-1", GATE, 500),
        ],
        lambda _: None,
    )
    assert folded.causes == {
        "ev-start": Recorded(0, 10),
        "ev-other": Recorded(0, 11),
        "ev-gate": Recorded(1, 20),
        GATE: Recorded(2, 500),
    }
    assert folded.firings == {"wf-1": [RecordedFiring(GATE.removeprefix("timer:"), 500, 2)]}
    assert folded.last == {"wf-1": (2, GATE), "wf-2": (0, "ev-other")}


def test_a_later_chunk_continues_the_numbering_of_an_earlier_one() -> None:
    folded = fold([d("wf-1", DEADLINE, 1000)], {"wf-1": (6, "ev-x")}.get)
    assert folded.causes == {DEADLINE: Recorded(7, 1000)}
    assert folded.firings["wf-1"][0].seq == 7
    # The decision an earlier chunk ended with is not counted again.
    assert fold([d("wf-1", "ev-x", 5)], {"wf-1": (6, "ev-x")}.get).causes == {}


def test_a_memory_journal_answers_what_a_replay_asks() -> None:
    journal = MemoryJournal()
    journal.add([d("wf-1", "ev-start", 10), d("wf-1", GATE, 500)])
    journal.add([d("wf-1", DEADLINE, 1000)])
    assert journal.recorded("ev-start") == Recorded(0, 10)
    assert journal.recorded("nope") is None
    assert [f.seq for f in journal.firings_of("wf-1")] == [1, 2]
    assert journal.horizon_ms == 1000
    assert not journal.is_fired(GATE.removeprefix("timer:"))
    journal.mark_fired(GATE.removeprefix("timer:"))
    assert journal.is_fired(GATE.removeprefix("timer:"))


def test_transitions_without_a_cause_or_a_time_are_left_out() -> None:
    payloads = [
        {"cause_event_id": "ev-1", "at": 5, "flow": "orders", "flow_version": 2, "to_state": "x"},
        {"cause_event_id": None, "at": 6},
        {"cause_event_id": "ev-3"},
    ]
    found = decisions_from(payloads, [b"wf-1", b"wf-2", b"wf-3"])
    assert found == [Decided("wf-1", "ev-1", 5, "orders", 2, "x")]


def test_within_a_tick_timers_fire_in_key_order() -> None:
    early = RecordedFiring("000000000000100|wf|step_timeout|a", 900)
    late = RecordedFiring("000000000000200|wf|segment_timeout|s", 900)
    assert early.order < late.order
