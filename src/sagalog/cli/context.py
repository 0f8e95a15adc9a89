"""What every subcommand shares: the settings and the project's files."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import click

from sagalog.contracts.catalog import SchemaCatalog
from sagalog.settings import ClientSettings
from sagalog.topology.loader import load_topology
from sagalog.topology.model import Topology


@dataclass
class Project:
    """A sagalog project directory (``schemas/``, ``topology/``) and how to reach its cluster."""

    settings: ClientSettings = field(default_factory=ClientSettings)

    @property
    def root(self) -> Path:
        return Path(self.settings.project_dir)

    @cached_property
    def catalog(self) -> SchemaCatalog:
        return SchemaCatalog.load(self.root / "schemas")

    @cached_property
    def topology(self) -> Topology:
        return load_topology(self.root / "topology", known_schemas=self.catalog)


pass_project = click.make_pass_decorator(Project)
