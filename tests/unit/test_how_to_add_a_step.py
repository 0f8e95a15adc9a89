"""The how-to "add a step with a compensation" is true: its blocks, applied to a fresh
``sagalog new`` project, generate, check and pass the project's in-memory flow test with
the doc's own test added; and what the user wrote by hand is counted.

The page (``docs/how-to/add-a-step.md``) titles each block with a file: a ``diff`` block
changes the lines it shows, any other block is appended. The count is of the files and
the non-blank lines the user writes (appended lines and ``+`` lines), the project's
tests left out; generated files are listed apart. The page states the count, and this
test holds it to what the blocks do.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from sagalog.cli.main import cli

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "how-to" / "add-a-step.md"
BLOCK = re.compile(r'^```(\w+) title="([^"]+)"\n(.*?)^```$', re.MULTILINE | re.DOTALL)
STATED = re.compile(r"Written by hand: (\d+) files, (\d+) lines\.\*\* Generated: (.+?)\.$", re.M)


@dataclass(frozen=True)
class Change:
    """One block of the page: appended to ``path``, or a ``diff`` of it."""

    language: str
    path: str
    body: str

    @property
    def written(self) -> list[str]:
        """The non-blank lines the user types."""
        if self.language == "diff":
            return [line[1:] for line in self.body.splitlines() if line.startswith("+")]
        return self.body.splitlines()

    def apply(self, root: Path) -> None:
        target = root / self.path
        text = target.read_text()
        if self.language != "diff":
            target.write_text(text.rstrip("\n") + "\n\n\n" + self.body)
            return
        lines = self.body.splitlines()
        old = "".join(f"{line[1:]}\n" for line in lines if line[:1] in (" ", "-"))
        new = "".join(f"{line[1:]}\n" for line in lines if line[:1] in (" ", "+"))
        assert text.count(old) == 1, f"{self.path}: the diff's lines are not there once:\n{old}"
        target.write_text(text.replace(old, new))


def changes() -> list[Change]:
    return [Change(lang, path, body) for lang, path, body in BLOCK.findall(PAGE.read_text())]


def by_hand(found: list[Change]) -> dict[str, int]:
    """Non-blank lines written per file, the tests left out."""
    counted: dict[str, int] = {}
    for change in found:
        if not change.path.startswith("tests/"):
            written = [line for line in change.written if line.strip()]
            counted[change.path] = counted.get(change.path, 0) + len(written)
    return counted


def sagalog(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sagalog", *args], cwd=project, capture_output=True, text=True
    )


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("how-to") / "shop"
    result = CliRunner().invoke(cli, ["new", "shop", "--dir", str(root)])
    assert result.exit_code == 0, result.output
    return root


def test_the_page_is_in_the_docs_navigation() -> None:
    assert "how-to/add-a-step.md" in (REPO / "mkdocs.yml").read_text()


def test_the_pages_blocks_applied_to_a_new_project_generate_check_and_pass(
    project: Path,
) -> None:
    before = {p for p in project.rglob("*") if p.is_file()}
    found = changes()
    for change in found:
        change.apply(project)

    generated = sagalog(project, "schemas", "generate")
    assert generated.returncode == 0, generated.stdout + generated.stderr
    new_files = sorted(
        str(p.relative_to(project)) for p in project.rglob("*") if p.is_file() and p not in before
    )
    for command in (
        ("flows", "check", "--path", "src", "--agent", "shop.orders"),
        ("schemas", "check"),
    ):
        checked = sagalog(project, *command)
        assert checked.returncode == 0, (
            f"sagalog {' '.join(command)}:\n{checked.stdout}{checked.stderr}"
        )
    assert (
        "fits steps check_stock, reserve_stock, take_payment"
        in sagalog(project, "flows", "check", "--path", "src", "--agent", "shop.orders").stdout
    )

    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_flow.py"],
        cwd=project,
        capture_output=True,
        text=True,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "5 passed" in ran.stdout  # the project's four and the page's
    linted = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--select", "E,F,W,I,B,UP", "src",
         "tests"],
        cwd=project, capture_output=True, text=True,
    )  # fmt: skip
    assert linted.returncode == 0, linted.stdout + linted.stderr

    counted = by_hand(found)
    files, lines = len(counted), sum(counted.values())
    tested = sum(len(c.written) for c in found if c.path.startswith("tests/"))
    print(
        f"\nby hand: {files} files, {lines} lines "
        + ", ".join(f"{path} {n}" for path, n in counted.items())
        + f"\ngenerated: {', '.join(new_files)}"
        + f"\nthe test (not counted): {tested} lines"
    )
    assert files <= 3 and lines <= 30
    stated = STATED.search(PAGE.read_text())
    assert stated is not None, "the page states what it took"
    assert (int(stated[1]), int(stated[2])) == (files, lines), "the page's count is the blocks'"
    assert stated[3].strip("`").split("`, `") == new_files
