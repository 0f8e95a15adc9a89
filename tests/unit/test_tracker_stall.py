"""The tracker's stall judgement, per partition, as a plain function."""

from __future__ import annotations

from sagalog.services.tracker.stall import Sorted, Suspect, judge, sort_stalled, waiting_its_turn

A, B = ("orders", 0), ("orders", 1)


def test_records_past_an_offset_that_stands_still_stall_after_the_timeout() -> None:
    suspects, stalled = judge({}, {A: (10, 15)}, now=0.0, after_s=20)
    assert stalled == [] and suspects == {A: Suspect(since=0.0, committed=10)}
    suspects, stalled = judge(suspects, {A: (10, 16)}, now=19.0, after_s=20)
    assert stalled == []
    suspects, stalled = judge(suspects, {A: (10, 17)}, now=20.0, after_s=20)
    assert stalled == [A]


def test_a_busy_partition_whose_offset_moves_is_never_stalled() -> None:
    suspects: dict[tuple[str, int], Suspect] = {}
    for second in range(0, 120, 5):
        suspects, stalled = judge(
            suspects, {A: (second * 100, second * 100 + 500)}, now=float(second), after_s=20
        )
        assert stalled == []


def test_one_stalled_partition_is_found_while_another_flows() -> None:
    suspects: dict[tuple[str, int], Suspect] = {}
    stalled: list[tuple[str, int]] = []
    for second in range(0, 30, 5):
        suspects, stalled = judge(
            suspects, {A: (second, second + 10), B: (7, 9)}, now=float(second), after_s=20
        )
    assert stalled == [B]


def test_a_partition_that_caught_up_is_no_longer_suspect() -> None:
    suspects, _ = judge({}, {A: (10, 15)}, now=0.0, after_s=20)
    suspects, stalled = judge(suspects, {}, now=5.0, after_s=20)
    assert suspects == {} and stalled == []
    suspects, stalled = judge(suspects, {A: (10, 15)}, now=30.0, after_s=20)
    assert stalled == []  # suspect again from now on, not from the first look


def _sort(
    stalled: list[tuple[str, int]],
    behind: dict[tuple[str, int], tuple[int, int]],
    finished: dict[tuple[str, int], int],
    handed: dict[tuple[str, int], int] | None = None,
    batch_age_s: float | None = None,
) -> Sorted:
    return sort_stalled(
        stalled, behind, finished, handed or {}, batch_age_s=batch_age_s, batch_bound_s=60.0
    )


def test_a_partition_decided_past_the_groups_offset_is_committed_again_not_restarted() -> None:
    behind = {A: (916, 928), B: (1174, 1186)}
    verdict = _sort([A, B], behind, {A: 928, B: 1174})
    assert verdict.not_read == [B]  # decided only up to the group's offset: not read
    assert verdict.recommit == {A: 928}  # decided to 928, the commit did not land: again
    assert _sort([A], behind, {}) == Sorted(not_read=[A], recommit={}, in_hand=[])


def test_records_behind_a_batch_waiting_for_the_broker_wait_with_it() -> None:
    """The partition round's case: a leader cut off from its peers holds the batch's
    acks; the input had handed records past the group's offset (27 and 61 against 18
    and 25), the batch in hand waited 32 s, and the worker exited instead of waiting."""
    behind = {A: (18, 38), B: (25, 61)}
    handed = {A: 27, B: 61}
    verdict = _sort([A, B], behind, {A: 18, B: 25}, handed, batch_age_s=32.0)
    assert verdict == Sorted(not_read=[], recommit={}, in_hand=[A, B])


def test_a_batch_in_hand_past_its_bound_or_none_at_all_is_a_stall() -> None:
    behind = {A: (18, 38)}
    handed = {A: 27}
    hung = _sort([A], behind, {A: 18}, handed, batch_age_s=60.0)
    assert hung.not_read == [A] and hung.in_hand == []
    lost = _sort([A], behind, {A: 18}, handed, batch_age_s=None)  # handed, yet no batch runs
    assert lost.not_read == [A]
    unhanded = _sort([A], behind, {A: 18}, {A: 18}, batch_age_s=5.0)  # nothing handed past
    assert unhanded.not_read == [A]


def test_a_partition_behind_a_backlog_the_worker_is_deciding_waits_its_turn() -> None:
    assert waiting_its_turn(queued=4095, capacity=4096, progressed=True)
    assert waiting_its_turn(queued=2048, capacity=4096, progressed=True)


def test_a_short_queue_or_no_progress_is_judged_as_usual() -> None:
    assert not waiting_its_turn(queued=100, capacity=4096, progressed=True)  # not behind
    assert not waiting_its_turn(queued=4096, capacity=4096, progressed=False)  # nobody takes
    assert not waiting_its_turn(queued=0, capacity=4096, progressed=False)
