"""What a story row says of its causes: the nearest ones and the first, never the whole
chain on every row."""

from __future__ import annotations

from sagalog.services.gateway.console.stories import CAUSES_SHOWN, shown_causes


def test_a_short_causation_path_is_shown_whole() -> None:
    assert shown_causes(()) == ()
    whole = tuple(f"e{n}" for n in range(CAUSES_SHOWN + 1))
    assert shown_causes(whole) == whole


def test_a_long_causation_path_names_the_nearest_causes_and_the_first() -> None:
    path = tuple(f"e{n}" for n in range(249, -1, -1))  # e249 <- e248 <- ... <- e0
    assert shown_causes(path) == ("e249", "e248", "e247", "… 246 more", "e0")
