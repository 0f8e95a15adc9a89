"""``last_tick_ms`` waits for a clock topic that a broker of the cluster does not know yet."""

from __future__ import annotations

import pytest

from sagalog.errors import TopologyError
from sagalog.settings import ClientSettings
from sagalog.tracker import ticks


def test_a_topic_unknown_for_a_moment_is_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    answers: list[int | Exception] = [TopologyError("unknown"), TopologyError("unknown"), 42]

    def read(settings: ClientSettings, topic: str) -> int:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(ticks, "_last_tick_ms", read)
    monkeypatch.setattr(ticks.time, "sleep", lambda _: None)
    assert ticks.last_tick_ms(ClientSettings(connect_timeout_s=5), "app-clock") == 42


def test_a_topic_that_stays_unknown_is_the_error_after_the_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def read(settings: ClientSettings, topic: str) -> int:
        raise TopologyError("clock topic app-clock does not exist")

    clock = iter(range(0, 1000))
    monkeypatch.setattr(ticks, "_last_tick_ms", read)
    monkeypatch.setattr(ticks.time, "sleep", lambda _: None)
    monkeypatch.setattr(ticks.time, "monotonic", lambda: float(next(clock)))
    with pytest.raises(TopologyError, match="does not exist"):
        ticks.last_tick_ms(ClientSettings(connect_timeout_s=5), "app-clock")
