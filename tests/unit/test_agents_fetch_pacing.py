"""``queued_fetch_pause_ms``: the agent consumer's fetch pacing, as librdkafka settings."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from sagalog.agents import AgentSettings
from sagalog.agents.connection import fetch_pacing


def settings(tmp_path: Path, **values: object) -> AgentSettings:
    return AgentSettings(instance_id="unit", data_dir=tmp_path, **values)  # type: ignore[arg-type]


def test_by_default_the_consumer_fetches_whenever_records_become_readable(
    tmp_path: Path,
) -> None:
    assert fetch_pacing(settings(tmp_path)) == {}


def test_a_pause_stops_fetching_while_one_record_waits_untaken(tmp_path: Path) -> None:
    assert fetch_pacing(settings(tmp_path, queued_fetch_pause_ms=20)) == {
        "queued.min.messages": 1,
        "fetch.queue.backoff.ms": 20,
    }


def test_a_pause_past_a_second_is_refused_at_start(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="queued_fetch_pause_ms"):
        settings(tmp_path, queued_fetch_pause_ms=5000)
