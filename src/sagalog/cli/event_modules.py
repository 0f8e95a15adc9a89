"""Where a project's event classes are: its ``pyproject.toml`` says, once.

``sagalog schemas generate`` and ``sagalog schemas check`` need every event class of
the project, and importing every module of a project to find them would run code
nobody asked to run. So the project names the modules that hold its events:

.. code-block:: toml

    [tool.sagalog]
    event-modules = ["procurement.events", "filings.events"]
    import-paths = ["services"]     # folders put on the import path, from the project root

The platform's own events (``sagalog.events``, the ``schemas/sagalog`` files a project
carries beside its own) are always included.
"""

from __future__ import annotations

import importlib
import tomllib
from pathlib import Path
from typing import Any

from sagalog.cli.agent_modules import add_import_paths
from sagalog.contracts.models import PLATFORM_EVENTS, Event
from sagalog.errors import ConfigurationError

_EXAMPLE = '[tool.sagalog]\nevent-modules = ["<package>.events"]\nimport-paths = ["src"]'


def declared_event_modules(root: Path) -> tuple[list[str], list[str]]:
    """The event modules and import paths ``root/pyproject.toml`` declares.

    Raises:
        ConfigurationError: the file or its ``[tool.sagalog]`` table is missing or
            malformed; the message shows the table to add.
    """
    path = root / "pyproject.toml"
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigurationError(
            f"{path} does not exist: sagalog reads the project's event classes from the "
            f"modules its [tool.sagalog] table names; add\n{_EXAMPLE}"
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"{path}: not valid TOML: {exc}") from exc
    table: Any = document.get("tool", {}).get("sagalog")
    if not isinstance(table, dict) or "event-modules" not in table:
        raise ConfigurationError(
            f"{path} has no [tool.sagalog] event-modules: the .avsc files under schemas/ are "
            f"generated from event classes, and sagalog finds them there; add\n{_EXAMPLE}"
        )
    modules, paths = table["event-modules"], table.get("import-paths", [])
    for key, value in (("event-modules", modules), ("import-paths", paths)):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigurationError(
                f"{path}, [tool.sagalog] {key}: expected a list of strings, got {value!r}"
            )
    return list(modules), [str(root / p) for p in paths]


def find_event_classes(root: Path) -> dict[str, type[Event]]:
    """Every event class of the project at ``root``, by event type: those of the modules
    its ``pyproject.toml`` declares, and the platform's.

    Raises:
        ConfigurationError: the declaration is missing, or a module cannot be imported.
    """
    modules, paths = declared_event_modules(root)
    add_import_paths(paths)
    modules = [PLATFORM_EVENTS, *(m for m in modules if m != PLATFORM_EVENTS)]
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ConfigurationError(
                f"cannot import event module '{module}' ({root / 'pyproject.toml'}, "
                f"[tool.sagalog] event-modules): {exc}; fix the name, or add the folder that "
                "holds it to import-paths"
            ) from exc
    return Event.defined_in(modules)
