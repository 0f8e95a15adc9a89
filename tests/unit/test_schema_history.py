"""`sagalog schemas check` reads every committed version from git (a real repository)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sagalog.cli.main import cli
from sagalog.contracts.schema_check import check_schemas

V1 = {
    "type": "record",
    "name": "OrderPlaced",
    "namespace": "shop.v1",
    "fields": [
        {"name": "order_id", "type": "string"},
        {"name": "customer", "type": "string"},
    ],
}


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=t@t", "-c", "user.name=t", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


def write(repo: Path, definition: dict[str, Any]) -> None:
    path = repo / "schemas/shop/v1/order_placed.avsc"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(definition, indent=2))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q")
    write(tmp_path, V1)
    # No event classes: these tests are about the history, so `schemas check` also says
    # the file has no class (test_schema_generate.py tests that comparison).
    (tmp_path / "pyproject.toml").write_text("[tool.sagalog]\nevent-modules = []\n")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "v1")
    return tmp_path


def test_compatible_change_passes(repo: Path) -> None:
    write(
        repo, {**V1, "fields": [*V1["fields"], {"name": "note", "type": "string", "default": ""}]}
    )
    report = check_schemas(repo / "schemas")
    assert report.ok and report.checked == {"shop.v1.OrderPlaced": 1}


def test_removing_a_field_without_default_is_refused(repo: Path) -> None:
    write(repo, {**V1, "fields": V1["fields"][:1]})
    report = check_schemas(repo / "schemas")
    assert not report.ok
    [problem] = report.incompatibilities
    assert problem.event_type == "shop.v1.OrderPlaced"
    assert "field 'customer' was removed" in problem.explanation
    result = CliRunner().invoke(cli, ["--project-dir", str(repo), "schemas", "check"])
    assert result.exit_code == 4
    assert "shop.v1.OrderPlaced: FULL_TRANSITIVE violated" in result.output
    assert "field 'customer' was removed but has no default" in result.output


def test_every_committed_version_is_checked(repo: Path) -> None:
    write(
        repo, {**V1, "fields": [*V1["fields"], {"name": "note", "type": "string", "default": ""}]}
    )
    git(repo, "commit", "-qam", "v2")
    # Dropping the default is fine against v2 (its events have a note) but not v1.
    write(repo, {**V1, "fields": [*V1["fields"], {"name": "note", "type": "string"}]})
    report = check_schemas(repo / "schemas")
    assert report.checked == {"shop.v1.OrderPlaced": 2}
    assert [p.direction for p in report.incompatibilities] == ["backward"]


def test_deleted_schema_is_refused(repo: Path) -> None:
    other = repo / "schemas/shop/v1/order_shipped.avsc"
    other.write_text(json.dumps({**V1, "name": "OrderShipped"}))
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "shipped")
    git(repo, "rm", "-q", str(other))
    git(repo, "commit", "-qm", "drop shipped")
    report = check_schemas(repo / "schemas")
    assert report.deleted == {
        "schemas/shop/v1/order_shipped.avsc": report.deleted["schemas/shop/v1/order_shipped.avsc"]
    }
    assert not report.ok


def test_outside_git_only_layout_is_checked(tmp_path: Path) -> None:
    write(tmp_path, V1)
    report = check_schemas(tmp_path / "schemas")
    assert report.ok
    assert "not in a git repository" in report.warnings[0]


def test_marking_a_field_personal_passes_and_unmarking_it_is_refused(repo: Path) -> None:
    customer = {"name": "customer", "type": "string", "sagalog.personal": "customer"}
    marked = {**V1, "fields": [V1["fields"][0], customer]}
    write(repo, marked)
    assert check_schemas(repo / "schemas").ok  # adding the mark is compatible
    git(repo, "commit", "-qam", "v2: customer is personal data")
    write(repo, V1)
    report = check_schemas(repo / "schemas")
    assert not report.ok and report.incompatibilities == []
    [problem] = report.personal_data
    assert "shop.v1.OrderPlaced: field 'customer' is marked sagalog.personal" in problem
    result = CliRunner().invoke(cli, ["--project-dir", str(repo), "schemas", "check"])
    assert result.exit_code == 4
    assert "personal data: shop.v1.OrderPlaced: field 'customer'" in result.output


def test_a_wrong_personal_mark_is_refused_at_load_naming_the_file(repo: Path) -> None:
    order = {"name": "order_id", "type": "string", "sagalog.personal": "nobody"}
    write(repo, {**V1, "fields": [order, V1["fields"][1]]})
    result = CliRunner().invoke(cli, ["--project-dir", str(repo), "schemas", "check"])
    assert result.exit_code != 0
    assert "shop/v1/order_placed.avsc" in result.output
    assert "'order_id'" in result.output and "'nobody'" in result.output
