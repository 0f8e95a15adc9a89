"""A package's public names, listed once in its ``if TYPE_CHECKING:`` block and loaded
on first use (PEP 562).

Type checkers read the block as the real imports; at run time the package's
``__getattr__`` reads the same block (the idea of Scientific Python's SPEC 1,
without its stub file), so the list cannot drift from what is importable. ``sagalog``,
``sagalog.agents`` and ``sagalog.testing`` use it: ``import sagalog.flows`` in the
tracker must not pay for the agent runtime, nor the replay, which drives the rules
through ``sagalog.testing.TrackerHarness``, for the whole-flow test environment, nor
an agent's declaration (``sagalog.agents.declaration``) for the worker and its Kafka
clients.
"""

from __future__ import annotations

from typing import Any


class LazyNames:
    """A package's ``__getattr__`` and ``__dir__`` over its ``TYPE_CHECKING`` block,
    read once, on the first public name asked for (``read``)."""

    def __init__(self, package: str, namespace: dict[str, Any], *, also: tuple[str, ...] = ()):
        self.package = package
        self.namespace = namespace
        self.also = also
        self._exports: dict[str, tuple[str, str]] | None = None

    @property
    def read(self) -> bool:
        return self._exports is not None

    def exports(self) -> dict[str, tuple[str, str]]:
        if self._exports is None:
            self._exports = exports_of(self.namespace["__file__"])
        return self._exports

    def getattr(self, name: str) -> Any:
        """Load a public name on first use; an unknown one raises as a plain module would."""
        import importlib

        if name == "__all__":
            value: Any = sorted([*self.exports(), *self.also])
        else:
            try:
                module, attribute = self.exports()[name]
            except KeyError:
                raise AttributeError(f"module {self.package!r} has no attribute {name!r}") from None
            value = getattr(importlib.import_module(module), attribute)
        self.namespace[name] = value
        return value

    def dir(self) -> list[str]:
        return sorted(set(self.namespace) | set(self.exports()))


def exports_of(source_file: str) -> dict[str, tuple[str, str]]:
    """Each public name of the package in ``source_file`` (its ``__init__.py``), and
    the module (and the name there) it comes from."""
    import ast

    with open(source_file, encoding="utf-8") as source:  # noqa: PTH123 (pathlib costs an import)
        tree = ast.parse(source.read())
    block = next(
        node
        for node in tree.body
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING"
    )
    return {
        alias.asname or alias.name: (str(statement.module), alias.name)
        for statement in block.body
        if isinstance(statement, ast.ImportFrom)
        for alias in statement.names
    }
