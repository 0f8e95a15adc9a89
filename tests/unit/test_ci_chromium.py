"""`.ci/ensure-chromium`, which `make test-all` and `.ci/run` both call: it finds Chromium
on PATH and says where and whether Playwright (the tests' driver) launches it, and it
never fails the build (without Chromium the browser tests skip outside CI, saying why,
and fail under CI: ``tests/external_tools.py``)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def test_a_chromium_on_path_is_found_and_named(repo_root: Path, tmp_path: Path) -> None:
    fake = tmp_path / "chromium"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    done = subprocess.run(
        ["bash", str(repo_root / ".ci" / "ensure-chromium")],
        env={"PATH": f"{tmp_path}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # Not a browser: Playwright's launch fails, which is said, not fatal.
    line = done.stdout.strip()
    assert line.startswith(f"chromium: {fake}; ") and "\n" not in line, line
    assert "Playwright cannot launch it" in line or "Playwright not installed" in line, line


def test_make_test_all_and_ci_use_the_same_scripts(repo_root: Path) -> None:
    makefile = (repo_root / "Makefile").read_text()
    assert "test-all: up lint tools" in makefile and "tools: chromium" in makefile
    assert "make test-all" in (repo_root / ".ci" / "run").read_text()
    ci = (repo_root / ".ci" / "run").read_text()
    for script in ("bash .ci/ensure-chromium", "bash .ci/ensure-tools"):
        assert script in makefile and script in ci, script
