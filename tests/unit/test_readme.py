"""The README's and the docs' code runs, so that neither can rot (the eventsourcing
project's habit): the README and every page of ``docs/``.

- every ```python block is executed; a block that declares an agent is checked
  against the repository's flows and its handlers are run on a stand-in context;
- every ``sagalog ...`` command it shows, in a block or inline, names a subcommand
  that exists, with options that command takes;
- every ``make <target>`` names a target of the Makefile, and every
  ``python -m <module>`` a module that imports from ``services/``;
- every ```yaml block parses.

What needs a broker (publishing and tailing the first events) is run end to end by
``tests/integration/test_cli_first_touch.py``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from sagalog.agents.binding import bind
from sagalog.agents.declaration import Agent
from sagalog.agents.workflow_context import WorkflowContext
from sagalog.cli.main import cli
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.flows.loader import load_flows
from sagalog.topology.loader import load_topology

README = Path(__file__).resolve().parents[2] / "README.md"
PAGES = [README, *sorted((README.parent / "docs").rglob("*.md"))]


def text() -> str:
    """The README and the docs' pages, one after the other."""
    return "\n".join(page.read_text() for page in PAGES)


FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
INLINE = re.compile(r"`([^`\n]+)`")


def blocks(language: str) -> list[str]:
    return [body for lang, body in FENCE.findall(text()) if lang == language]


def shell_lines() -> Iterator[str]:
    """Each command line of the shell blocks, comments dropped, plus inline commands."""
    for body in [*blocks("sh"), *blocks("bash"), *blocks("console")]:
        for line in body.splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line and not line.startswith("#"):
                yield line
    prose = FENCE.sub("", text())
    yield from (span for span in INLINE.findall(prose) if re.match(r"(sagalog|make|python) ", span))


def sagalog_commands() -> list[str]:
    found = []
    for line in shell_lines():
        # `eval "$(sagalog dev up)"`, `X=1 sagalog ...`: the sagalog part only
        for match in re.finditer(r"(?:^|[\s(\"])(sagalog\s[^\")]*)", line):
            command = match.group(1).strip()
            # `sagalog replay rebuild|whatif` names two commands
            words = command.split()
            alternatives = next((i for i, w in enumerate(words) if "|" in w), None)
            if alternatives is None:
                found.append(command)
                continue
            for choice in words[alternatives].split("|"):
                found.append(" ".join([*words[:alternatives], choice, *words[alternatives + 1 :]]))
    return sorted(set(found))


def test_the_readme_has_code_to_check() -> None:
    assert blocks("python") and len(sagalog_commands()) > 20


@pytest.mark.parametrize("command", sagalog_commands())
def test_every_sagalog_command_shown_exists_with_its_options(command: str) -> None:
    words = shlex.split(command)[1:]
    current: click.Command = cli
    path = ["sagalog"]
    while isinstance(current, click.Group) and words and words[0] in current.commands:
        current = current.commands[words[0]]
        path.append(words.pop(0))
    if isinstance(current, click.Group):
        # naming a group alone is fine (`sagalog replay`); a word after it must be a command
        assert not words, (
            f"`{command}`: `{' '.join(path)}` has no command {words[0]!r}; it has "
            f"{', '.join(sorted(current.commands))}"
        )
        return
    options = {opt for p in current.params for opt in (*p.opts, *p.secondary_opts)}
    options |= {"--help", "-h"}
    # a command that hands the rest of its words to another program (`dev kafka`,
    # `dev run --`) checks only the options before them
    passes_on = bool(current.context_settings.get("ignore_unknown_options"))
    for word in words:
        if word == "--" or (passes_on and not word.startswith("-")):
            break
        if word.startswith("-") and word != "-":
            flag = word.split("=", 1)[0]
            assert flag in options, (
                f"`{command}`: `{' '.join(path)}` has no option {flag}; it has "
                f"{', '.join(sorted(options))}"
            )


def make_targets() -> list[str]:
    return sorted(
        {m.group(1) for line in shell_lines() for m in re.finditer(r"\bmake\s+([\w-]+)", line)}
    )


@pytest.mark.parametrize("target", make_targets())
def test_every_make_target_shown_exists(target: str) -> None:
    makefile = (README.parent / "Makefile").read_text()
    assert re.search(rf"^{re.escape(target)}:", makefile, re.MULTILINE), f"no `make {target}`"


def python_modules() -> list[str]:
    return sorted(
        {m.group(1) for line in shell_lines() for m in re.finditer(r"-m\s+([\w.]+)", line)}
    )


@pytest.mark.parametrize("module", python_modules())
def test_every_python_module_shown_exists(
    module: str, repo_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(repo_root))  # run from the repository root, as shown
    assert importlib.util.find_spec(module) is not None, f"`python -m {module}`: no such module"


def test_every_yaml_block_parses() -> None:
    for body in blocks("yaml"):
        assert isinstance(yaml.safe_load(body), dict), body


class _Context:
    """Enough of a HandlerContext for the README's handlers: the folded workflow, and
    effects recorded instead of performed."""

    def __init__(self, events: dict[str, dict[str, Any]]) -> None:
        self.workflow = WorkflowContext(  # the real one, each payload as its own record
            "wf-readme",
            records={event_type: event_type.encode() for event_type in events},
            decoder=lambda raw: events[raw.decode()],
        )
        self.effects: list[tuple[str, tuple[Any, ...]]] = []

    async def effect(self, name: str, func: Any, *args: Any) -> dict[str, Any]:
        self.effects.append((name, args))
        return {"id": "res-1"}


@pytest.fixture(scope="module")
def flows(repo_root: Path) -> list[Any]:
    catalog = SchemaCatalog.load(repo_root / "schemas")
    topology = load_topology(repo_root / "topology", known_schemas=catalog)
    return list(load_flows(repo_root / "topology" / "flows", catalog=catalog, topology=topology))


@pytest.mark.parametrize("index", range(len(blocks("python"))))
def test_every_python_block_runs(index: int, flows: list[Any]) -> None:
    namespace: dict[str, Any] = {"__name__": f"readme_block_{index}"}
    # dont_inherit: a block runs as a user's file would, without this module's
    # `from __future__ import annotations` (postponed annotations a class defined in an
    # exec'd namespace could not resolve).
    code = compile(
        blocks("python")[index], f"docs python block {index + 1}", "exec", dont_inherit=True
    )
    exec(code, namespace)
    agent = namespace.get("agent")
    if isinstance(agent, Agent):
        bind(agent, flows)  # fits the flows, as at its start
        run_the_agent_example(namespace)


def run_the_agent_example(namespace: dict[str, Any]) -> None:
    """The budget agent example's handlers, on a request and then on its compensation."""
    from procurement.events import BudgetReserved, RequestSubmitted, RiskScored
    from sagalog.events import CompensationRequested

    request = RequestSubmitted(
        request_id="pr-1",
        requester="ann@example.com",
        department="it",
        title="Laptops",
        description="Two laptops",
        amount="2400.00",
        currency="EUR",
        vendor="Acme",
        submitted_at="2026-05-01T09:00:00Z",
    )
    ctx = _Context({RequestSubmitted.event_type: request.to_avro()})
    scored = RiskScored.model_construct()
    reserved = asyncio.run(namespace["reserve_budget"](scored, ctx))
    assert isinstance(reserved, BudgetReserved) and reserved.reservation_id == "res-1"
    assert reserved.amount == request.amount and ctx.effects[0][0] == "ledger.reserve"

    ctx = _Context({BudgetReserved.event_type: reserved.to_avro()})
    undo = CompensationRequested.model_construct(step="reserve_budget", reason="rejected")
    released = asyncio.run(namespace["release_budget"](undo, ctx))
    assert released.reservation_id == "res-1" and released.reason == "rejected"
    assert ctx.effects == [
        ("ledger.release", (namespace["ledger_url"], "release", {"reservation_id": "res-1"}))
    ]
