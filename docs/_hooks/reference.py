"""MkDocs hook: pages generated from the code, so that the docs cannot drift from it.

- ``index.md``: the README's front door (the README stays the one copy of it);
- ``reference/settings.md``: a table per settings class, each field with its
  environment variable, type, default and description.

The CLI reference comes from ``mkdocs-click`` in ``reference/cli.md``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic_settings import BaseSettings

ROOT = Path(__file__).resolve().parents[2]
SETTINGS_MARKER = "<!-- settings tables -->"


def _settings_classes() -> list[tuple[str, type[BaseSettings]]]:
    from sagalog.agents.settings import AgentSettings
    from sagalog.devstack import DevStackSettings
    from sagalog.replay.settings import ReplaySettings
    from sagalog.services.gateway.settings import GatewaySettings
    from sagalog.services.tracker.settings import TrackerSettings
    from sagalog.settings import ClientSettings, ServiceSettings

    return [
        ("Every client (connection)", ClientSettings),
        ("Every long-running service (health)", ServiceSettings),
        ("The saga tracker", TrackerSettings),
        ("The gateway", GatewaySettings),
        ("An agent (the runtime's defaults; each agent has its own prefix too)", AgentSettings),
        ("Replay", ReplaySettings),
        ("The local stack (`sagalog dev`)", DevStackSettings),
    ]


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def settings_tables() -> str:
    out = []
    for title, cls in _settings_classes():
        prefix = cls.model_config.get("env_prefix", "")
        own = set(cls.model_fields) - {
            name for base in cls.__mro__[1:] for name in getattr(base, "model_fields", {})
        }
        out.append(f"## {title}: `{cls.__name__}`\n")
        out.append((cls.__doc__ or "").strip().split("\n\n")[0] + "\n")
        out.append("| variable | type | default | what it does |")
        out.append("|---|---|---|---|")
        for name in sorted(own):
            field = cls.model_fields[name]
            default: Any = "(computed)" if field.default_factory else field.default
            shown = "" if default is None else f"`{default}`"
            kind = getattr(field.annotation, "__name__", str(field.annotation))
            out.append(
                f"| `{prefix}{name.upper()}` | {_cell(kind)} | {_cell(shown)} "
                f"| {_cell(field.description or '')} |"
            )
        out.append("")
    return "\n".join(out)


def front_door() -> str:
    readme = (ROOT / "README.md").read_text()
    body = readme.split("## Documentation", 1)[0]
    return re.sub(r"^# sagalog\n", "", body)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    path = page.file.src_uri
    if path == "index.md":
        return "# sagalog\n" + front_door()
    if path == "reference/settings.md":
        return markdown.replace(SETTINGS_MARKER, settings_tables())
    return markdown
