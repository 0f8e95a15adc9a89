"""DevStackSettings: defaults, environment overrides and the checks that fail early."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from sagalog.devstack.settings import DevStackSettings


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Tests see only the variables they set, and a fake home for the XDG defaults."""
    for name in ("XDG_CACHE_HOME", "XDG_STATE_HOME", "JAVA_HOME"):
        monkeypatch.delenv(name, raising=False)
    for name in list(os.environ):
        if name.startswith("SAGALOG_DEV_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def test_defaults_match_the_ports_clients_expect(tmp_path: Path) -> None:
    settings = DevStackSettings()
    assert (settings.kafka_port, settings.controller_port, settings.registry_port) == (
        9092,
        9093,
        8081,
    )
    assert settings.cache_dir == tmp_path / "home" / ".cache" / "sagalog"
    assert settings.state_dir == tmp_path / "home" / ".local" / "state" / "sagalog" / "dev"
    assert (settings.kafka_heap, settings.registry_heap) == ("512m", "512m")
    assert (settings.ready_timeout_s, settings.stop_timeout_s) == (120.0, 30.0)
    assert settings.bootstrap_servers == "127.0.0.1:9092"
    assert settings.schema_registry_url == "http://127.0.0.1:8081/apis/ccompat/v7"


def test_xdg_directories_move_cache_and_state(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "c"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "s"))
    settings = DevStackSettings()
    assert settings.cache_dir == tmp_path / "c" / "sagalog"
    assert settings.state_dir == tmp_path / "s" / "sagalog" / "dev"


def test_prefixed_variables_override_and_java_home_is_inherited(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SAGALOG_DEV_KAFKA_PORT", "19092")
    monkeypatch.setenv("SAGALOG_DEV_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("JAVA_HOME", "/opt/jdk")
    settings = DevStackSettings()
    assert settings.kafka_port == 19092
    assert settings.bootstrap_servers == "127.0.0.1:19092"
    assert settings.state_dir == tmp_path / "state"
    assert settings.inherited_java_home == Path("/opt/jdk")
    assert settings.java_home is None


def test_an_empty_java_home_means_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", "")
    assert DevStackSettings().inherited_java_home is None


def test_relative_directories_become_absolute() -> None:
    assert DevStackSettings(state_dir=Path("rel/state")).state_dir.is_absolute()


@pytest.mark.parametrize(
    "overrides",
    [
        {"kafka_port": 0},
        {"registry_port": 70000},
        {"kafka_heap": "lots"},
        {"registry_heap": "512mb"},
        {"kafka_port": 8081},
        {"controller_port": 9092},
        {"ready_timeout_s": 0},
    ],
)
def test_invalid_values_fail_before_anything_starts(overrides: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        DevStackSettings(**overrides)  # type: ignore[arg-type]


def test_management_port_zero_means_any_free_port() -> None:
    assert DevStackSettings().registry_management_port == 0
