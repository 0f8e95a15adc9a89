"""``sagalog new NAME``: a project of the user's own, ready to run and to test.

The template (``template/``, files ending in ``.tmpl``) holds a complete small
project: its event classes, its topology with one flow, one agent with a
compensation, tests of the whole flow in memory and on a real cluster, a Dockerfile.
Its ``.avsc`` files are not in the template: they are generated from the event
classes, as ``sagalog schemas generate`` does in the project later, the platform's
own (``sagalog.v1``, which the tracker and the runtime publish on the project's
topics) beside the project's.

Placeholders are ``{{project}}`` (the name as given), ``{{package}}`` (the Python
package and Avro namespace derived from it) and ``{{sagalog_version}}``.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

from sagalog.contracts.generated_files import write_files
from sagalog.contracts.models import PLATFORM_EVENTS, Event
from sagalog.errors import ConfigurationError

TEMPLATE = Path(__file__).parent / "template"
SUFFIX = ".tmpl"
RENAMED = {"gitignore": ".gitignore"}
NAME = re.compile(r"^[a-z][a-z0-9]*([-_][a-z0-9]+)*$")
RESERVED = frozenset({"sagalog", "test", "tests", "src"})


@dataclass(frozen=True)
class ProjectNames:
    """The names a project is made of, derived once from what the user typed."""

    project: str
    package: str
    sagalog_version: str

    @classmethod
    def of(cls, name: str, *, sagalog_version: str) -> ProjectNames:
        """Check ``name`` and derive the package from it.

        Raises:
            ConfigurationError: the name cannot be a Python package and an Avro
                namespace; the message says what would be accepted.
        """
        if not NAME.match(name) or name in RESERVED:
            raise ConfigurationError(
                f"project name {name!r} is refused: use lower-case letters and digits, "
                "words joined by '-' or '_', starting with a letter (e.g. 'acme-orders'), "
                f"and none of {sorted(RESERVED)}; it becomes the Python package and the "
                "Avro namespace of the project's events"
            )
        return cls(project=name, package=name.replace("-", "_"), sagalog_version=sagalog_version)

    def render(self, text: str) -> str:
        for field, value in (
            ("project", self.project),
            ("package", self.package),
            ("sagalog_version", self.sagalog_version),
        ):
            text = text.replace("{{" + field + "}}", value)
        return text


def create_project(names: ProjectNames, target: Path) -> list[Path]:
    """Write the project into ``target`` (which must not exist or be empty); the files.

    Raises:
        ConfigurationError: ``target`` holds files already; nothing is overwritten.
    """
    if target.exists() and any(target.iterdir()):
        raise ConfigurationError(
            f"{target} is not empty: choose a new folder (`sagalog new {names.project} "
            "--dir PATH`) so that nothing of yours is overwritten"
        )
    written = []
    for source in sorted(TEMPLATE.rglob(f"*{SUFFIX}")):
        relative = source.relative_to(TEMPLATE).with_suffix("")
        relative = relative.with_name(RENAMED.get(relative.name, relative.name))
        path = target / names.render(str(relative))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(names.render(source.read_text()))
        written.append(path)
    written += generate_schemas(names, target)
    return written


def generate_schemas(names: ProjectNames, target: Path) -> list[Path]:
    """Write the new project's ``.avsc`` files from its event classes and the platform's.

    The project's events module is loaded from its file under a private module name,
    so that it is not mistaken for an installed package of the same name.
    """
    path = target / "src" / names.package / "events.py"
    module_name = f"_sagalog_new_{names.package}_events"
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    importlib.import_module(PLATFORM_EVENTS)
    written, _ = write_files(Event.defined_in([module_name, PLATFORM_EVENTS]), target / "schemas")
    return sorted(written)
