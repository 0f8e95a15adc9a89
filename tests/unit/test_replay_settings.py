"""A replay decides with the tracker's settings: the defaults must not drift apart."""

from __future__ import annotations

import pytest

from sagalog.errors import ConfigurationError
from sagalog.replay.settings import ReplaySettings
from sagalog.services.tracker.settings import TrackerSettings

SHARED = (
    "app_id",
    "transitions_topic",
    "flows_dir",
    "admission",
    "compensation_attempts",
    "compensation_max_wait_s",
)


def test_the_replay_reads_the_trackers_settings_with_the_trackers_defaults(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in SHARED:
        assert ReplaySettings.model_fields[name].get_default(
            call_default_factory=True
        ) == TrackerSettings.model_fields[name].get_default(call_default_factory=True), name
    monkeypatch.setenv("SAGALOG_TRACKER_APP_ID", "tracker-7")
    monkeypatch.setenv("SAGALOG_TRACKER_COMPENSATION_ATTEMPTS", "3")
    settings = ReplaySettings()
    assert settings.changelog_topic == "tracker-7-records-changelog"
    assert settings.retry().max_attempts == 3


def test_without_the_trackers_gate_secret_a_replay_refuses_to_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SAGALOG_TRACKER_GATE_SECRET", raising=False)
    with pytest.raises(ConfigurationError) as error:
        ReplaySettings(_env_file=None).secret()
    assert "SAGALOG_TRACKER_GATE_SECRET" in str(error.value)
