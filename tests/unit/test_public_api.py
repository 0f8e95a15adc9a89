"""The public surface: what users import from ``sagalog``, typed, loaded lazily, and
enough for the reference agents."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import sagalog
from sagalog.lazy_exports import exports_of

PACKAGE = Path(sagalog.__file__).parent
SERVICES = PACKAGE.parents[1] / "services"

OPERATOR_TOOLS = {"demo"}
"""Service packages that drive the stack rather than run on it: the demo starts the
dev stack, applies the topology and erases subjects, as the CLI does, through
sagalog's internals. Every other package under ``services/`` is what a user writes."""


def _public_imports() -> dict[str, tuple[str, str]]:
    """The ``TYPE_CHECKING`` block of ``sagalog/__init__.py``: name -> (module, name)."""
    return exports_of(str(PACKAGE / "__init__.py"))


def test_every_public_name_resolves_to_the_object_of_its_module() -> None:
    typed = _public_imports()
    for name, (module, attribute) in typed.items():
        assert getattr(sagalog, name) is getattr(importlib.import_module(module), attribute)
    assert sagalog.__all__ == sorted([*typed, "__version__"])


def test_each_public_name_is_a_re_export_type_checkers_accept() -> None:
    """``from m import X as X``: mypy's strict mode re-exports only that form."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    block = next(n for n in tree.body if isinstance(n, ast.If))
    for stmt in block.body:
        assert isinstance(stmt, ast.ImportFrom), ast.unparse(stmt)
        for alias in stmt.names:
            assert alias.asname == alias.name, ast.unparse(stmt)


def test_star_import_gives_the_public_names() -> None:
    names: dict[str, object] = {}
    exec("from sagalog import *", names)
    assert set(names) - {"__builtins__"} == set(sagalog.__all__)


def test_the_agent_api_users_write_against_is_at_the_top() -> None:
    from sagalog import (
        Agent,
        CompensationRequested,
        Event,
        HandlerContext,
        HandlerError,
        NonRetryableError,
        TrackerHarness,
        WorkflowContext,
        run_agent,
    )

    assert Agent.__module__ == "sagalog.agents.declaration"
    assert HandlerContext.__module__ == "sagalog.agents.context"
    assert TrackerHarness.__module__ == "sagalog.testing.tracker_harness"
    assert issubclass(NonRetryableError, HandlerError)
    assert issubclass(CompensationRequested, Event)
    assert callable(WorkflowContext.require) and callable(run_agent)


def test_the_agent_package_offers_nothing_the_top_does_not() -> None:
    """``sagalog.agents`` is the runtime's package; a user finds all of it at the top."""
    import sagalog.agents

    assert set(sagalog.agents.__all__) <= set(sagalog.__all__)


def test_an_unknown_name_raises_attribute_error_naming_it() -> None:
    try:
        sagalog.NoSuchThing  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:
        raise AssertionError("an unknown attribute resolved")


def test_importing_a_rules_module_does_not_load_the_agent_runtime_or_kafka() -> None:
    probe = (
        "import sys, sagalog, sagalog.flows.loader;"
        "print(sorted(m for m in ('confluent_kafka', 'rocksdict', 'sagalog.agents.worker')"
        " if m in sys.modules), sagalog._names.read)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == ["[]", "False"]  # not even the list of public names is read


def test_the_package_ships_its_type_information() -> None:
    assert (PACKAGE / "py.typed").is_file()


def _private_imports(path: Path) -> list[str]:
    """Each ``sagalog.<module>`` import in ``path``: a user's code needs ``sagalog`` only."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0:
            modules = [node.module or ""]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        else:
            continue
        found += [
            f"{path.relative_to(SERVICES.parent)}:{node.lineno}: {ast.unparse(node)}"
            for module in modules
            if module.startswith("sagalog.")
        ]
    return found


def test_the_reference_services_import_nothing_but_the_public_surface() -> None:
    files = [
        path
        for package in sorted(SERVICES.iterdir())
        if package.is_dir() and package.name not in OPERATOR_TOOLS
        for path in sorted(package.rglob("*.py"))
    ]
    assert len(files) > 20, f"found only {len(files)} files under {SERVICES}"
    private = [line for path in files for line in _private_imports(path)]
    assert not private, "import these from `sagalog` instead:\n" + "\n".join(private)
