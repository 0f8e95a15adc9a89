"""The external tools some tests drive, where each is found, and what to do without one.

A test names the tool it needs with ``@pytest.mark.tool("helm")``; ``tests/conftest.py``
checks the mark before the test runs and puts the test in ``make test-all``'s tier (a
newcomer's ``make test`` needs none of them). A missing tool skips the test with the
command that installs it, and fails it under CI (``CI`` set), where a skip would hide
the check: ``.ci/ensure-chromium`` and ``.ci/ensure-tools`` install every one of them.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BUILT = Path.home() / ".cache" / "sagalog" / "tools" / "bin"
"""Where ``.ci/ensure-tools`` builds the Go tools (no release download reaches here)."""


@dataclass(frozen=True)
class Tool:
    """A program a test runs, and the command that installs it."""

    name: str
    commands: tuple[str, ...]
    install: str

    def path(self) -> str | None:
        for command in self.commands:
            found = shutil.which(command) or _built(command)
            if found:
                return found
        return None


def _built(command: str) -> str | None:
    candidate = BUILT / command
    return str(candidate) if candidate.is_file() else None


def _asyncapi_parser() -> str | None:
    node = shutil.which("node")
    installed = (REPO / "tests" / "asyncapi" / "node_modules" / "@asyncapi" / "parser").is_dir()
    return node if node and installed else None


TOOLS = {
    tool.name: tool
    for tool in (
        Tool("chromium", ("chromium", "chromium-browser"), "apt-get install -y chromium"),
        Tool("prometheus", ("prometheus",), "apt-get install -y prometheus"),
        Tool("promtool", ("promtool",), "apt-get install -y prometheus (it ships promtool)"),
        Tool("docker-compose", ("docker-compose",), "apt-get install -y docker-compose"),
        Tool("helm", ("helm",), "bash .ci/ensure-tools (builds Helm with Go)"),
        Tool("gofakes3", ("gofakes3",), "bash .ci/ensure-tools (builds gofakes3 with Go)"),
        Tool(
            "toxiproxy-server",
            ("toxiproxy-server",),
            "bash .ci/ensure-tools (builds Toxiproxy with Go)",
        ),
        Tool("node", ("node",), "install Node.js 18+"),
        Tool("ip", ("ip",), "apt-get install -y iproute2"),
        Tool("iptables", ("iptables",), "apt-get install -y iptables"),
        Tool("faketime", ("faketime",), "apt-get install -y faketime"),
    )
}
ASYNCAPI = "asyncapi-parser"
"""The official AsyncAPI parser, an npm package pinned by tests/asyncapi/package-lock.json."""
PLAYWRIGHT = "playwright"
"""Playwright for Python (pinned in pyproject's dev extras), which drives Debian's Chromium
in the browser tests; it brings its own driver, never a browser of its own."""


def under_ci() -> bool:
    """CI sets ``CI``; there a missing tool is a failure, never a skip."""
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


def locate(name: str) -> str | None:
    """The tool's path, or None when it is not installed here."""
    if name == ASYNCAPI:
        return _asyncapi_parser()
    if name == PLAYWRIGHT:
        found = importlib.util.find_spec("playwright")
        return found.origin if found is not None else None
    if name not in TOOLS:
        known = sorted([*TOOLS, ASYNCAPI, PLAYWRIGHT])
        raise ValueError(f"unknown tool {name!r}: tests/external_tools.py knows {known}")
    return TOOLS[name].path()


def how_to_install(name: str) -> str:
    if name == ASYNCAPI:
        return "bash .ci/ensure-tools (npm ci in tests/asyncapi; needs Node.js 18+)"
    if name == PLAYWRIGHT:
        return "make install (pip install -e '.[dev]': playwright, pinned)"
    return TOOLS[name].install


def require_root(why: str) -> None:
    """A skip when not root (namespaces, iptables), a failure under CI."""
    if os.geteuid() != 0:
        message = f"needs root: {why}"
        if under_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


def require(name: str) -> str:
    """The tool's path; a skip naming the install when it is missing, a failure under CI."""
    found = locate(name)
    if found is None:
        why = f"needs {name}, not installed here: {how_to_install(name)}"
        if under_ci():
            pytest.fail(why, pytrace=False)
        pytest.skip(why)
    return found
