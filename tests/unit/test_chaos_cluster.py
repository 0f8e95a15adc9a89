"""The cluster rounds' arithmetic: which ``__transaction_state`` partition coordinates an id."""

from __future__ import annotations

import pytest

from chaos.cluster import java_string_hashcode, transaction_state_partition


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
