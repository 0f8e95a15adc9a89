"""Earlier committed versions of schema files, read from git.

"Every committed version" is exactly what git holds, so the history needs no file
of its own to keep in sync. A shallow clone holds only part of it: the check then
says so instead of passing on incomplete evidence.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from sagalog.contracts.catalog import parse_schema_text
from sagalog.contracts.compatibility import EarlierVersion
from sagalog.errors import SchemaError


@dataclass(frozen=True)
class SchemaHistory:
    """The git history visible from a schema directory."""

    repo: Path | None
    shallow: bool

    @classmethod
    def open(cls, schema_root: Path) -> SchemaHistory:
        top = _git(schema_root, "rev-parse", "--show-toplevel", check=False)
        if top is None:
            return cls(repo=None, shallow=False)
        shallow = _git(schema_root, "rev-parse", "--is-shallow-repository", check=False)
        return cls(repo=Path(top.strip()), shallow=(shallow or "").strip() == "true")

    def versions(self, path: Path) -> list[EarlierVersion]:
        """Every committed version of ``path`` (renames followed), newest first."""
        if self.repo is None:
            return []
        log = (
            _git(
                self.repo,
                "log",
                "--follow",
                "--format=@%h %cs",
                "--name-only",
                "--",
                str(path.resolve().relative_to(self.repo)),
                check=False,
            )
            or ""
        )  # no output: no commits yet, or the file is new
        versions: list[EarlierVersion] = []
        commit = ""
        for line in log.splitlines():
            if line.startswith("@"):
                commit = line[1:]
            elif line.strip() and commit:
                sha, date = commit.split(" ", 1)
                text = _git(self.repo, "show", f"{sha}:{line.strip()}", check=False)
                if text is None:  # the commit deleted it; nothing to read
                    continue
                definition, _ = parse_schema_text(text, origin=f"{line.strip()} at {sha}")
                versions.append(
                    EarlierVersion(label=f"commit {sha} ({date})", definition=definition)
                )
                commit = ""
        return versions

    def deleted(self, schema_root: Path) -> dict[str, str]:
        """Schema files that a commit deleted and no file replaces: path -> commit."""
        if self.repo is None:
            return {}
        relative = schema_root.resolve().relative_to(self.repo)
        log = (
            _git(
                self.repo,
                "log",
                "--diff-filter=D",
                "--format=@%h",
                "--name-only",
                "--",
                f"{relative}/*.avsc",
                f"{relative}/**/*.avsc",
                check=False,
            )
            or ""
        )
        deleted: dict[str, str] = {}
        commit = ""
        for line in log.splitlines():
            if line.startswith("@"):
                commit = line[1:]
            elif line.strip() and not (self.repo / line.strip()).exists():
                deleted.setdefault(line.strip(), commit)
        return deleted


def _git(cwd: Path, *args: str, check: bool = True) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=60
        )
    except FileNotFoundError:
        if check:
            raise SchemaError("git is not installed; it is needed to read schema history") from None
        return None
    if done.returncode != 0:
        if check:
            raise SchemaError(f"git {' '.join(args[:2])} failed in {cwd}: {done.stderr.strip()}")
        return None
    return done.stdout
