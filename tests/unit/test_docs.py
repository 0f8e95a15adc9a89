"""The documentation builds with ``mkdocs build --strict``: a page missing from the nav,
a broken link or a generated reference that fails to render fails this test."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(root / "mkdocs.yml"),
         "-d", str(site)],
        capture_output=True, text=True, check=False, cwd=root,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )  # fmt: skip


def test_the_docs_build_strict_with_the_generated_references(tmp_path: Path) -> None:
    done = build(REPO, tmp_path / "site")
    assert done.returncode == 0, done.stdout + done.stderr
    settings = (tmp_path / "site" / "reference" / "settings" / "index.html").read_text()
    for variable in (
        "SAGALOG_BOOTSTRAP_SERVERS",
        "SAGALOG_TRACKER_GATE_SECRET",
        "GATEWAY_API_KEYS",
    ):
        assert variable in settings, variable
    cli = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text()
    for command in ("asyncapi", "export", "tracker", "new"):
        assert command in cli, command
    home = (tmp_path / "site" / "index.html").read_text()
    assert "Two commands" in home and "a project of your own" in home  # the README


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    copy = tmp_path / "repo"
    copy.mkdir()
    shutil.copytree(REPO / "docs", copy / "docs")
    shutil.copy(REPO / "mkdocs.yml", copy / "mkdocs.yml")
    shutil.copy(REPO / "README.md", copy / "README.md")
    page = copy / "docs" / "audit.md"
    page.write_text(page.read_text() + "\nSee [the missing page](no-such-page.md).\n")
    done = build(copy, tmp_path / "site")
    assert done.returncode != 0
    assert "no-such-page.md" in done.stdout + done.stderr
