"""A throwaway sagalog project on the shared cluster: the repository's schemas, a
topology written by the test, and topic names with a unique suffix.

A helper module rather than the conftest, so the chaos harness and the benchmarks
import it as an ordinary module (a conftest imported by name is loaded a second
time, under another module name, beside the one pytest loaded).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner, Result

from sagalog.cli.main import cli
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.settings import ClientSettings
from sagalog.topology.apply import TopologyClient
from sagalog.topology.loader import load_topology

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Project:
    """A throwaway sagalog project whose topics have unique names."""

    root: Path
    settings: ClientSettings
    suffix: str

    def topic(self, name: str) -> str:
        return f"{name}.{self.suffix}"

    @property
    def catalog(self) -> SchemaCatalog:
        return SchemaCatalog.load(self.root / "schemas")

    def write_topology(self, text: str) -> None:
        (self.root / "topology" / "topics.yaml").write_text(text.replace("{s}", self.suffix))

    def write_flow(self, text: str, name: str) -> None:
        """A flow file, ``{s}`` standing for the suffix: an agent runs the steps a flow
        names it on, on that flow's topic."""
        flows = self.root / "topology" / "flows"
        flows.mkdir(exist_ok=True)
        (flows / f"{name}.yaml").write_text(text.replace("{s}", self.suffix))

    def write_reference_flow(self, name: str, *, agent_suffix: str = "", **agents: str) -> None:
        """A copy of the repository's flow ``name`` (``procurement.v1``) on this project's
        topic ``<topic>.{s}``, with its agents renamed as the test runs them: each with
        ``agent_suffix`` appended, or as ``agents`` says (``budget_agent=`` renames
        ``budget-agent``). An agent runs the steps a flow names it on."""
        text = (REPO / "topology" / "flows" / f"{name}.yaml").read_text()
        text = re.sub(r"^topic: (\S+)$", r"topic: \1.{s}", text, flags=re.MULTILINE)
        renamed = {old.replace("_", "-"): new for old, new in agents.items()}

        def rename(match: re.Match[str]) -> str:
            agent = match[2]
            return match[1] + renamed.get(agent, agent + agent_suffix)

        self.write_flow(re.sub(r"^(\s+agent: )(\S+)$", rename, text, flags=re.MULTILINE), name)

    def client(self) -> TopologyClient:
        return TopologyClient(self.settings, self.catalog)

    def topology(self):  # type: ignore[no-untyped-def]
        return load_topology(self.root / "topology", known_schemas=self.catalog)

    def sagalog(self, *args: str) -> Result:
        """``sagalog ARGS`` in this process, pointed at this project and its cluster."""
        return CliRunner().invoke(
            cli,
            [
                "--bootstrap-servers",
                self.settings.bootstrap_servers,
                "--schema-registry-url",
                self.settings.schema_registry_url,
                "--project-dir",
                str(self.root),
                *args,
            ],
            catch_exceptions=False,
        )

    def apply(self, *, force: bool = False) -> list[object]:
        client = self.client()
        return list(client.apply(client.plan(self.topology()), force=force, report=lambda _: None))
