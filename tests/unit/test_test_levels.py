"""Every test under tests/integration carries the ``integration`` marker, and every one
under tests/chaos the ``chaos`` marker, so that ``-m "not integration"`` really runs
without a broker and ``-m "not chaos"`` really skips the fault injection.

The markers come from the folder (``tests/conftest.py``); this asks pytest itself,
collecting both folders with both markers deselected: nothing may be left.
"""

from __future__ import annotations

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
