"""The public surface: what users import from ``sagalog``, typed, and loaded lazily."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import sagalog

PACKAGE = Path(sagalog.__file__).parent


def test_every_public_name_resolves_to_the_object_of_its_module() -> None:
    import importlib

    for name, (module, attribute) in sagalog._EXPORTS.items():
        assert getattr(sagalog, name) is getattr(importlib.import_module(module), attribute)
    assert sorted([*sagalog._EXPORTS, "__version__"]) == sorted(sagalog.__all__)


def test_the_type_checkers_imports_name_the_same_objects_as_the_runtime_table() -> None:
    """The TYPE_CHECKING block is what mypy and IDEs read; it may not drift from _EXPORTS."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    block = next(
        node
        for node in tree.body
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING"
    )
    typed = {
        alias.asname: (stmt.module, alias.name)
        for stmt in block.body
        if isinstance(stmt, ast.ImportFrom)
        for alias in stmt.names
    }
    assert typed == sagalog._EXPORTS


def test_the_agent_api_users_write_against_is_at_the_top() -> None:
    from sagalog import Agent, HandlerContext, HandlerError, NonRetryableError, TrackerHarness

    assert Agent.__module__ == "sagalog.agents.declaration"
    assert HandlerContext.__module__ == "sagalog.agents.context"
    assert TrackerHarness.__module__ == "sagalog.testing"
    assert issubclass(NonRetryableError, HandlerError)


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
        " if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_the_package_ships_its_type_information() -> None:
    assert (PACKAGE / "py.typed").is_file()
