"""The agent runtime's per-record decisions, as plain functions: every gate, every branch."""

from __future__ import annotations

import pytest

from sagalog.agents.routing import RetryMark
from sagalog.agents.triage import (
    PARKED_BEHIND,
    Outcome,
    Verdict,
    admit,
    after_failure,
    hold_not_due,
    origin_of,
    screen,
    sort,
)
from sagalog.backoff import RetryPolicy
from sagalog.open_transactions import OPEN_TRANSACTION_CLOSED
from sagalog.position import RecordPosition

INPUT = "procurement.events"
RETRY = "sagalog.agent.budget-agent.retry"
HERE = RecordPosition(INPUT, 2, 40)


def mark(attempt: int = 1, *, due: int = 0, origin: RecordPosition | None = HERE) -> RetryMark:
    return RetryMark(attempt=attempt, not_before_ms=due, origin=origin)


# -- gate 1: the ce_type header --------------------------------------------------------


def test_an_input_the_projection_does_not_keep_is_skipped_from_its_header() -> None:
    assert screen(from_retry=False, event_type="x.v1.Other", kept=False) == Verdict(Outcome.SKIP)


def test_a_kept_input_goes_on() -> None:
    assert screen(from_retry=False, event_type="x.v1.Kept", kept=True) is None


def test_a_retry_is_never_skipped_from_its_header() -> None:
    # It was handled once, so its type is handled, whatever the projection keeps.
    assert screen(from_retry=True, event_type="x.v1.Other", kept=False) is None


def test_a_record_closing_an_open_transaction_is_skipped_from_any_topic() -> None:
    # It carries no event; the agent writes it to its retry topic as well as its input.
    for from_retry in (False, True):
        skipped = screen(from_retry=from_retry, event_type=OPEN_TRANSACTION_CLOSED, kept=True)
        assert skipped == Verdict(Outcome.SKIP)


def test_a_record_without_a_type_header_goes_on_to_be_dead_lettered_by_validation() -> None:
    assert screen(from_retry=False, event_type=None, kept=False) is None
    assert screen(from_retry=False, event_type="", kept=False) is None


# -- gate 2: retries not yet due -------------------------------------------------------


def test_a_retry_not_due_holds_its_partition_and_the_records_behind_it() -> None:
    records = [
        (RecordPosition(RETRY, 0, 7), mark(due=2_000)),
        (RecordPosition(RETRY, 0, 8), mark(due=0)),  # due, but behind a held one
        (RecordPosition(INPUT, 0, 100), None),
        (RecordPosition(RETRY, 1, 3), mark(due=500)),  # another partition: due
    ]
    kept, held = hold_not_due(records, retry_topics={RETRY}, now_ms=1_000)
    assert kept == [2, 3]
    assert held == {(RETRY, 0): (7, 2_000)}


def test_a_retry_due_exactly_now_goes_on() -> None:
    kept, held = hold_not_due(
        [(RecordPosition(RETRY, 0, 7), mark(due=1_000))], retry_topics={RETRY}, now_ms=1_000
    )
    assert (kept, held) == ([0], {})


def test_inputs_are_never_held_whatever_their_headers_say() -> None:
    # An input record carrying a stray retry mark (copied by hand) is no retry.
    kept, held = hold_not_due(
        [(RecordPosition(INPUT, 0, 1), mark(due=10**15))], retry_topics={RETRY}, now_ms=0
    )
    assert (kept, held) == ([0], {})


def test_a_retry_record_without_a_mark_is_not_held() -> None:
    kept, _ = hold_not_due([(RecordPosition(RETRY, 0, 1), None)], retry_topics={RETRY}, now_ms=0)
    assert kept == [0]


# -- the origin ------------------------------------------------------------------------


def test_an_input_is_its_own_origin() -> None:
    assert origin_of(HERE, from_retry=False, mark=None) == HERE


def test_a_retry_s_origin_is_the_one_its_mark_carries() -> None:
    delivered = RecordPosition(RETRY, 2, 5)
    assert origin_of(delivered, from_retry=True, mark=mark()) == HERE
    assert origin_of(delivered, from_retry=True, mark=mark(origin=None)) is None
    assert origin_of(delivered, from_retry=True, mark=None) is None


# -- gate 3: headers and the fold ------------------------------------------------------


def sorted_(**overrides: object) -> Verdict | None:
    facts: dict[str, object] = {
        "delivered": HERE,
        "origin": HERE,
        "header_error": None,
        "first_seen": HERE,
        "wanted": True,
    }
    facts.update(overrides)
    return sort(**facts)  # type: ignore[arg-type]


def test_invalid_headers_are_dead_lettered_at_the_record_s_own_position() -> None:
    delivered = RecordPosition(RETRY, 0, 9)
    verdict = sorted_(delivered=delivered, origin=HERE, header_error="ce_id is missing")
    assert verdict == Verdict(Outcome.DEAD_LETTER, origin=delivered, reason="ce_id is missing")


def test_a_retry_without_a_readable_origin_is_dead_lettered_not_handled() -> None:
    # Handled, its outputs would go to the retry topic instead of the workflow's.
    delivered = RecordPosition(RETRY, 0, 9)
    verdict = sorted_(delivered=delivered, origin=None, first_seen=None)
    assert verdict is not None and verdict.outcome is Outcome.DEAD_LETTER
    assert verdict.origin == delivered and "sagalog_origin" in verdict.reason


def test_an_event_id_first_seen_at_an_earlier_offset_is_a_duplicate() -> None:
    assert sorted_(first_seen=RecordPosition(INPUT, 2, 12)) == Verdict(Outcome.DUPLICATE)


def test_an_event_id_first_seen_in_another_partition_is_a_duplicate() -> None:
    assert sorted_(first_seen=RecordPosition(INPUT, 0, 40)) == Verdict(Outcome.DUPLICATE)


def test_the_same_record_replayed_after_an_abort_is_handled_again() -> None:
    assert sorted_(first_seen=RecordPosition(INPUT, 2, 40)) is None


def test_a_retry_is_not_folded_so_never_a_duplicate() -> None:
    assert sorted_(delivered=RecordPosition(RETRY, 2, 1), first_seen=None) is None


def test_a_type_no_handler_takes_is_skipped_once_folded() -> None:
    assert sorted_(wanted=False) == Verdict(Outcome.SKIP)


def test_a_duplicate_is_a_duplicate_even_of_an_unwanted_type() -> None:
    # Counted as a duplicate, as before: the fold decided it before the handler lookup.
    verdict = sorted_(first_seen=RecordPosition(INPUT, 2, 1), wanted=False)
    assert verdict == Verdict(Outcome.DUPLICATE)


# -- gate 4: the decoded payload -------------------------------------------------------


def admitted(**overrides: object) -> Verdict:
    facts: dict[str, object] = {
        "origin": HERE,
        "event_id": "e2",
        "from_retry": False,
        "mark": None,
        "decode_error": None,
        "has_handler": True,
        "validation_error": None,
        "parked": {},
    }
    facts.update(overrides)
    return admit(**facts)  # type: ignore[arg-type]


def test_a_first_delivery_is_handled_as_attempt_one() -> None:
    assert admitted() == Verdict(Outcome.HANDLE, origin=HERE, attempt=1)


def test_a_retry_is_handled_as_the_attempt_after_its_mark_s() -> None:
    verdict = admitted(from_retry=True, mark=mark(3))
    assert verdict == Verdict(Outcome.HANDLE, origin=HERE, attempt=4)


def test_a_parked_record_from_the_retry_topic_is_handled_as_its_first_attempt() -> None:
    # Parked behind its workflow, it carries attempt 0: no attempt was spent.
    assert admitted(from_retry=True, mark=mark(0)).attempt == 1


def test_a_payload_that_does_not_decode_is_dead_lettered() -> None:
    verdict = admitted(decode_error="unknown schema id 7", has_handler=False)
    assert verdict == Verdict(Outcome.DEAD_LETTER, origin=HERE, reason="unknown schema id 7")


def test_a_compensation_for_a_step_this_agent_does_not_undo_is_skipped() -> None:
    assert admitted(has_handler=False) == Verdict(Outcome.SKIP)


def test_a_payload_that_breaks_the_class_s_rules_is_dead_lettered() -> None:
    verdict = admitted(validation_error="payload fails X validation: amount < 0")
    assert verdict.outcome is Outcome.DEAD_LETTER and "amount" in verdict.reason


def test_a_first_delivery_parks_behind_an_earlier_parked_event_of_its_workflow() -> None:
    verdict = admitted(parked={"e1": 12})
    assert verdict == Verdict(Outcome.PARK, origin=HERE, attempt=0, reason=PARKED_BEHIND)


def test_it_does_not_park_behind_itself_replayed_after_an_abort() -> None:
    # Parked before the commit, the transaction aborted: the same record comes again.
    assert admitted(parked={"e2": 40}).outcome is Outcome.HANDLE


def test_it_does_not_park_behind_a_later_event() -> None:
    # A later offset parked: this one is a replay of an earlier record, already past it.
    assert admitted(parked={"e9": 41}).outcome is Outcome.HANDLE
    assert admitted(parked={"e9": 40}).outcome is Outcome.HANDLE


def test_a_retry_never_parks_it_is_the_parked_event() -> None:
    verdict = admitted(from_retry=True, mark=mark(1), parked={"e1": 12})
    assert verdict.outcome is Outcome.HANDLE


def test_dead_letters_win_over_parking() -> None:
    # A payload that cannot be handled never waits behind its workflow.
    verdict = admitted(validation_error="bad", parked={"e1": 12})
    assert verdict.outcome is Outcome.DEAD_LETTER


# -- gate 5: after the handler ---------------------------------------------------------


@pytest.mark.parametrize(
    ("retryable", "attempt", "expected"),
    [
        (True, 1, Outcome.RETRY),
        (True, 2, Outcome.RETRY),
        (True, 3, Outcome.DEAD_LETTER),  # the last of max_attempts=3
        (True, 4, Outcome.DEAD_LETTER),
        (False, 1, Outcome.DEAD_LETTER),
    ],
)
def test_a_failed_attempt_is_retried_while_allowed(
    retryable: bool, attempt: int, expected: Outcome
) -> None:
    policy = RetryPolicy(max_attempts=3)
    assert after_failure(retryable=retryable, attempt=attempt, policy=policy) is expected


def test_one_attempt_allowed_means_no_retry() -> None:
    policy = RetryPolicy(max_attempts=1)
    assert after_failure(retryable=True, attempt=1, policy=policy) is Outcome.DEAD_LETTER


def test_what_holds_a_workflow_and_what_ends_its_parking() -> None:
    holds = {o for o in Outcome if o.holds_workflow}
    ends = {o for o in Outcome if o.ends_parking}
    assert holds == {Outcome.RETRY, Outcome.DEFER, Outcome.PARK}
    assert ends == {Outcome.HANDLED, Outcome.DEAD_LETTER, Outcome.GATED}
    assert not holds & ends


def test_outcomes_keep_the_names_the_log_lines_carry() -> None:
    logged = {o.value for o in Outcome} - {"handle", "not_due"}
    assert logged == {"ok", "ignored", "duplicate", "park", "retry", "defer", "dead", "gated"}
