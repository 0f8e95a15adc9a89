"""Loading a module of ``tests/bench`` by its path, for the unit tests of its pure parts.

``tests`` is no package under the pytest ``make test`` runs, and the bench runs as
``python -m tests.bench`` from the repository, so its modules are not importable
by name here.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_bench_module(name: str) -> ModuleType:
    """``tests/bench/<name>.py``, loaded as ``bench_<name>``."""
    path = Path(__file__).resolve().parents[1] / "bench" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"bench_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module
