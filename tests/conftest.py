"""Shared test fixtures: the repository's own project files."""

from __future__ import annotations

from pathlib import Path

import pytest

from sagalog.contracts.catalog import SchemaCatalog

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def catalog() -> SchemaCatalog:
    return SchemaCatalog.load(REPO / "schemas")
