"""The cluster rounds' arithmetic: which ``__transaction_state`` partition coordinates an id."""

from __future__ import annotations

import pytest

from chaos.cluster import java_string_hashcode, longest_stall, transaction_state_partition


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", 0), ("hello", 99162322), ("sagalog", 1858855580), ("polygenelubricants", -(1 << 31))],
)
def test_the_hash_is_javas_string_hashcode(text: str, expected: int) -> None:
    assert java_string_hashcode(text) == expected


def test_the_partition_is_kafkas_utils_abs_of_the_hash_modulo_the_partition_count() -> None:
    # Integer.MIN_VALUE: Utils.abs gives 0, where Math.abs would stay negative
    assert transaction_state_partition("polygenelubricants") == 0
    assert transaction_state_partition("hello") == 99162322 % 50
    assert transaction_state_partition("sagalog") == 1858855580 % 50


def test_the_longest_stall_counts_from_the_kill_to_the_first_transition_and_between_them() -> None:
    assert longest_stall([1.0, 12.0, 13.0, 20.5], since=10.0) == 7.5
    assert longest_stall([1.0, 25.0], since=10.0) == 15.0
    assert longest_stall([1.0], since=10.0) is None
