"""Shared test fixtures, and the versions of the real services named in the test log."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from sagalog.contracts.catalog import SchemaCatalog
from sagalog.settings import ClientSettings

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def catalog() -> SchemaCatalog:
    return SchemaCatalog.load(REPO / "schemas")


def _registry_version(url: str) -> str:
    base = url.split("/apis/")[0]
    try:
        with urllib.request.urlopen(f"{base}/apis/registry/v3/system/info", timeout=5) as reply:
            info = json.load(reply)
        return f"{info.get('name')} {info.get('version')}"
    except OSError as exc:
        return f"unreachable ({exc})"


def _kafka_version() -> str:
    try:
        from sagalog.devstack import DevStackSettings, LocalStack

        kafka = LocalStack(DevStackSettings()).status().kafka
        if kafka.state.value != "running":
            return "version unknown: not the local stack"
        return f"{kafka.version}, local stack pid {kafka.pid}"
    except Exception as exc:  # the stack module reports; the header must never break a run
        return f"unknown ({exc.__class__.__name__})"


# A test's level is the folder it lives in, so the marker is given here, once, rather
# than by a `pytestmark` line each module must remember (14 of 16 integration modules
# had forgotten): `-m "not integration"` and `-m "not chaos"` then deselect all of them.
LEVEL_MARKERS = {"integration": "integration", "chaos": "chaos"}


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    tests = REPO / "tests"
    for item in items:
        path = Path(str(item.path))
        if not path.is_relative_to(tests):
            continue
        marker = LEVEL_MARKERS.get(path.relative_to(tests).parts[0])
        if marker is not None:
            item.add_marker(marker)


def pytest_report_header(config: pytest.Config) -> list[str]:
    settings = ClientSettings()
    return [
        f"kafka: {settings.bootstrap_servers} (Apache Kafka {_kafka_version()})",
        f"schema registry: {settings.schema_registry_url} "
        f"({_registry_version(settings.schema_registry_url)})",
    ]
