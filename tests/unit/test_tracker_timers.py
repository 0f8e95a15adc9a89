"""Durable timers: keys ordered by due time, so a tick reads only what is due."""

from __future__ import annotations

import random

import pytest

from sagalog.tracker.timers import (
    Timer,
    TimerKind,
    arm,
    decode_timer,
    due_range,
    encode_timer,
    timer_key,
    wake_timer,
)


def timer(due_ms: int, workflow_id: str = "wf-1", ref: str = "score_risk") -> Timer:
    return Timer(workflow_id=workflow_id, kind=TimerKind.STEP_TIMEOUT, ref=ref, due_ms=due_ms)


def test_the_key_starts_with_the_zero_padded_due_time() -> None:
    key = timer_key(
        due_ms=86_400_000,
        workflow_id="wf-42",
        kind=TimerKind.GATE_ESCALATION,
        ref="manager_approval#1#1",
    )
    assert key == "000000086400000|wf-42|gate_escalation|manager_approval#1#1"


@pytest.mark.parametrize("workflow_id", ["wf-1", "a|b|c", "ünïcode|wf", "x" * 300])
def test_a_key_decodes_to_its_timer_whatever_the_workflow_id(workflow_id: str) -> None:
    original = timer(1_700_000_000_000, workflow_id)
    assert decode_timer(encode_timer(original)) == original
    assert decode_timer(original.key.encode("utf-8")) == original


def test_key_order_is_due_order_as_text_and_as_utf8_bytes() -> None:
    rng = random.Random(7)
    timers = [timer(rng.randrange(0, 10**13), f"wf-{rng.randrange(1000)}|x") for _ in range(2000)]
    by_due = sorted(timers, key=lambda t: t.due_ms)
    assert [t.due_ms for t in sorted(timers, key=lambda t: t.key)] == [t.due_ms for t in by_due]
    by_bytes = sorted(timers, key=lambda t: t.key.encode("utf-8"))
    assert [t.due_ms for t in by_bytes] == [t.due_ms for t in by_due]


def test_the_due_range_holds_exactly_the_timers_due_now() -> None:
    lower, upper = due_range(1000)
    assert lower <= timer(0).key < upper
    assert lower <= timer(1000).key < upper  # due exactly now: fires now
    assert not timer(1001).key < upper


@pytest.mark.parametrize(
    "bad",
    ["", "123|wf|step_timeout|x", "00000000000000a|wf|step_timeout|x", "000000000000001|wf|nap|x"],
)
def test_a_malformed_key_is_refused_naming_it(bad: str) -> None:
    with pytest.raises(ValueError, match="is not a timer key"):
        decode_timer(bad)


def test_keys_refuse_what_would_make_them_ambiguous() -> None:
    with pytest.raises(ValueError, match="outside"):
        timer_key(due_ms=-1, workflow_id="wf", kind=TimerKind.STEP_TIMEOUT, ref="x")
    with pytest.raises(ValueError, match="must not contain"):
        timer_key(due_ms=1, workflow_id="wf", kind=TimerKind.STEP_TIMEOUT, ref="a|b")


# -- the wake-up key -------------------------------------------------------------------


def _timers(*dues: int) -> tuple[Timer, ...]:
    return tuple(
        Timer(workflow_id="wf-1", kind=TimerKind.STEP_TIMEOUT, ref=f"s{i}", due_ms=due)
        for i, due in enumerate(dues)
    )


def test_a_workflow_without_timers_has_no_wake_up() -> None:
    assert arm(None, ()) is None
    assert arm(500, ()) is None  # its last timer went: the key goes


def test_the_first_timer_arms_the_wake_up_at_the_earliest() -> None:
    assert arm(None, _timers(900, 300, 600)) == 300


def test_a_wake_up_at_or_before_the_earliest_timer_stays() -> None:
    """The next step's timeout is later than the one cancelled: no write."""
    assert arm(300, _timers(900, 310)) == 300
    assert arm(300, _timers(300)) == 300


def test_a_wake_up_later_than_a_new_earlier_timer_moves_to_it() -> None:
    assert arm(600, _timers(900, 450)) == 450


def test_a_wake_up_key_reads_back_as_its_timer() -> None:
    wake = wake_timer("wf|1", 1234)
    assert decode_timer(wake.key) == wake and wake.kind is TimerKind.WAKE
