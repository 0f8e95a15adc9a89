"""Every test under tests/integration carries the ``integration`` marker, and every one
under tests/chaos the ``chaos`` marker, so that ``-m "not integration"`` really runs
without a broker and ``-m "not chaos"`` really skips the fault injection.

The markers come from the folder (``tests/conftest.py``); this asks pytest itself,
collecting both folders with both markers deselected: nothing may be left.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path


def test_every_integration_and_chaos_test_carries_its_folders_marker(repo_root: Path) -> None:
    done = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"),
            *("-m", "not integration and not chaos", "tests/integration", "tests/chaos"),
        ],
        cwd=repo_root,
        capture_output=True,
        text=True,
        check=False,
    )
    output = done.stdout + done.stderr
    left = [line for line in done.stdout.splitlines() if "::" in line]
    assert left == [], f"tests without their folder's marker:\n{output}"
    deselected = re.search(r"\((\d+) deselected\)", output)
    assert deselected is not None and int(deselected.group(1)) > 100, output  # they exist


def test_no_module_imports_a_conftest(repo_root: Path) -> None:
    """Helpers live in modules named for what they hold; a conftest imported by name is
    loaded twice (by pytest, and again under the importer's name)."""
    importers = [
        f"{path.relative_to(repo_root)}:{node.lineno}"
        for path in sorted((repo_root / "tests").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if (isinstance(node, ast.ImportFrom) and "conftest" in (node.module or "").split("."))
        or (
            isinstance(node, ast.Import)
            and any("conftest" in a.name.split(".") for a in node.names)
        )
    ]
    assert importers == []
