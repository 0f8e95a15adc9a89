"""`sagalog schemas generate` writes each event class's .avsc; `sagalog schemas check`
fails, naming the file and the class, when a committed file is missing, differs from its
class, or has no class."""

from __future__ import annotations

import itertools
import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from sagalog.cli.main import cli

_names = itertools.count()

EVENTS = '''
from sagalog import Event


class ThingMade(Event):
    """A thing was made."""

    event_type = "{namespace}.v1.ThingMade"

    thing_id: str
    """The thing's id."""
{extra}
'''


def project(tmp_path: Path, *, extra: str = "") -> tuple[Path, str]:
    """A project whose one event module is new to this process (imports are cached)."""
    name = f"things{next(_names)}"
    (tmp_path / "src" / name).mkdir(parents=True)
    (tmp_path / "src" / name / "__init__.py").write_text("")
    (tmp_path / "src" / name / "events.py").write_text(
        EVENTS.format(namespace=name, extra=textwrap.indent(extra, "    "))
    )
    (tmp_path / "pyproject.toml").write_text(
        f'[tool.sagalog]\nevent-modules = ["{name}.events"]\nimport-paths = ["src"]\n'
    )
    return tmp_path, name


def run(root: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--project-dir", str(root), "schemas", *args])
    return result.exit_code, result.output


def test_generate_writes_the_project_s_and_the_platform_s_schemas(tmp_path: Path) -> None:
    root, name = project(tmp_path)
    code, output = run(root, "generate")
    assert code == 0, output
    path = root / "schemas" / name / "v1" / "thing_made.avsc"
    assert f"wrote schemas/{name}/v1/thing_made.avsc" in output
    assert json.loads(path.read_text()) == {
        "type": "record",
        "name": "ThingMade",
        "namespace": f"{name}.v1",
        "doc": "A thing was made.",
        "fields": [{"name": "thing_id", "type": "string", "doc": "The thing's id."}],
    }
    assert (root / "schemas/sagalog/v1/step_failed.avsc").is_file(), "the platform's, always"
    code, output = run(root, "check")
    assert code == 0, output
    code, output = run(root, "generate")
    assert code == 0 and "ok: 0 written" in output, "a second run changes nothing"


def test_check_fails_naming_the_file_and_the_class_when_the_class_changed(
    tmp_path: Path,
) -> None:
    root, name = project(tmp_path)
    assert run(root, "generate")[0] == 0
    file = root / "schemas" / name / "v1" / "thing_made.avsc"
    file.write_text(file.read_text().replace("The thing's id.", "Edited by hand."))
    code, output = run(root, "check")
    assert code == 4, output
    assert f"not generated: schemas/{name}/v1/thing_made.avsc: differs from what class " in output
    assert f"{name}.events.ThingMade generates (field(s) thing_id differ)" in output
    assert "run `sagalog schemas generate`" in output
    assert run(root, "generate")[0] == 0
    assert run(root, "check")[0] == 0
    assert "The thing's id." in file.read_text()


def test_check_fails_on_a_missing_file_and_on_a_file_without_a_class(tmp_path: Path) -> None:
    root, name = project(tmp_path)
    assert run(root, "generate")[0] == 0
    (root / "schemas" / name / "v1" / "thing_made.avsc").unlink()
    stray = root / "schemas" / name / "v1" / "thing_lost.avsc"
    stray.write_text(
        json.dumps({"type": "record", "name": "ThingLost", "namespace": f"{name}.v1", "fields": []})
    )
    code, output = run(root, "check")
    assert code == 4, output
    assert f"schemas/{name}/v1/thing_made.avsc: missing: class {name}.events.ThingMade" in output
    assert (
        f"schemas/{name}/v1/thing_lost.avsc: declares {name}.v1.ThingLost, but no event "
        "class has that event_type"
    ) in output


def test_a_file_equal_as_a_schema_is_left_as_committed(tmp_path: Path) -> None:
    """The registry was given the committed text: an equal schema is not rewritten."""
    root, name = project(tmp_path)
    assert run(root, "generate")[0] == 0
    file = root / "schemas" / name / "v1" / "thing_made.avsc"
    relaid = json.dumps(json.loads(file.read_text()), indent=4)
    file.write_text(relaid)
    assert run(root, "check")[0] == 0
    assert run(root, "generate")[0] == 0
    assert file.read_text() == relaid


def test_a_project_that_names_no_event_modules_is_told_how_to(tmp_path: Path) -> None:
    (tmp_path / "schemas").mkdir()
    code, output = run(tmp_path, "check")
    assert code == 2
    assert "pyproject.toml does not exist" in output
    assert 'event-modules = ["<package>.events"]' in output
    (tmp_path / "pyproject.toml").write_text('[tool.sagalog]\nevent-modules = ["nowhere.x"]\n')
    code, output = run(tmp_path, "check")
    assert code == 2 and "cannot import event module 'nowhere.x'" in output


@pytest.mark.parametrize("table", ["[tool.other]\n", '[tool.sagalog]\nevent-modules = "x"\n'])
def test_a_malformed_declaration_is_refused(tmp_path: Path, table: str) -> None:
    (tmp_path / "schemas").mkdir()
    (tmp_path / "pyproject.toml").write_text(table)
    code, output = run(tmp_path, "generate")
    assert code == 2 and "event-modules" in output
