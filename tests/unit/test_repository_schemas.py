"""`sagalog schemas check` on the repository's own schemas, against every committed
version of each, so that `make test` (and `pytest` alone) refuses a change to
``schemas/`` that old events or old readers could not live with.

``test_schema_history.py`` checks the command on a synthetic repository; this one
runs it on this repository's history. It needs the git history: in a copy without
it (an unpacked archive) it skips and says so; a shallow clone checks what it has.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from click.testing import CliRunner

from sagalog.cli.main import cli
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.contracts.compatibility import check
from sagalog.contracts.history import SchemaHistory


@pytest.fixture(scope="module")
def history(repo_root: Path) -> SchemaHistory:
    found = SchemaHistory.open(repo_root / "schemas")
    if found.repo is None:
        pytest.skip("schemas/ is not in a git repository: no committed versions to check")
    return found


def test_every_schema_satisfies_the_rule_against_every_committed_version(
    repo_root: Path, history: SchemaHistory
) -> None:
    result = CliRunner().invoke(cli, ["--project-dir", str(repo_root), "schemas", "check"])
    assert result.exit_code == 0, result.output
    catalog = SchemaCatalog.load(repo_root / "schemas")
    checked = [line for line in result.stdout.splitlines() if line.startswith("checked ")]
    assert len(checked) == len(catalog) > 0
    assert result.stdout.splitlines()[-1] == f"ok: {len(catalog)} schema(s) satisfy FULL_TRANSITIVE"


def test_a_committed_schema_has_its_versions_found(repo_root: Path, history: SchemaHistory) -> None:
    """The check compares with something: the reference schemas are committed."""
    path = repo_root / "schemas" / "procurement" / "v1" / "budget_reserved.avsc"
    assert len(history.versions(path)) >= 1


def test_an_incompatible_change_to_a_repository_schema_is_refused(
    repo_root: Path, history: SchemaHistory
) -> None:
    """Dropping a field without a default from BudgetReserved: new code could still
    read old events, but services on the committed schema could not read new ones."""
    catalog = SchemaCatalog.load(repo_root / "schemas")
    schema = catalog.get("procurement.v1.BudgetReserved")
    changed = copy.deepcopy(dict(schema.definition))
    changed["fields"] = [f for f in changed["fields"] if f["name"] != "cost_center"]
    found = check(
        "procurement.v1.BudgetReserved",
        changed,
        history.versions(repo_root / "schemas" / schema.path),
    )
    assert found, "removing a field without a default must break FULL_TRANSITIVE"
    assert {i.direction for i in found} == {"forward"}
    assert all(i.event_type == "procurement.v1.BudgetReserved" for i in found)
