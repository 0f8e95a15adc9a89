"""Finding an agent declaration by module name, for ``sagalog run agent`` and
``sagalog flows check --agent``: both take ``module[:attribute]`` and ``--path``."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

from sagalog.agents.declaration import Agent
from sagalog.errors import ConfigurationError


def add_import_paths(paths: Iterable[str]) -> None:
    """Put each folder first on the import path, as ``--path services`` promises."""
    for path in paths:
        resolved = str(Path(path).resolve())
        if resolved not in sys.path:
            sys.path.insert(0, resolved)


def load_agent(module: str) -> tuple[Agent, ModuleType]:
    """The ``Agent`` named by ``module[:attribute]`` (attribute defaults to ``agent``).

    Raises:
        ConfigurationError: the module cannot be imported, or has no such Agent.
    """
    name, _, attribute = module.partition(":")
    try:
        loaded = importlib.import_module(name)
    except ImportError as exc:
        raise ConfigurationError(
            f"cannot import agent module '{name}': {exc}; pass --path with the folder that holds it"
        ) from exc
    agent = getattr(loaded, attribute or "agent", None)
    if not isinstance(agent, Agent):
        raise ConfigurationError(f"'{module}' has no Agent named '{attribute or 'agent'}'")
    return agent, loaded
