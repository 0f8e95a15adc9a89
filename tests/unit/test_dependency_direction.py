"""Dependencies point downward: the import-linter contracts in pyproject hold.

The contracts say which package may import which (the rules below the runtimes, the
runtimes below the tools and the CLI). `make lint` runs them too; this test makes a
plain `pytest` fail on an upward import, with import-linter's report of the chain.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_every_import_contract_is_kept() -> None:
    command = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert command, "lint-imports is not installed: pip install -e '.[dev]'"
    done = subprocess.run(
        [command, "--no-cache"], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout
