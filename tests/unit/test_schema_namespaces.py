"""No schema names its enclosing namespace again on a nested type.

The registry stores a schema with such a namespace dropped (it is implied), so the
schema read back differs from the file, and every ``sagalog topology plan`` would
register it again (the secure ACL test's "a second plan changes nothing" caught it on
``EffectRecorded.spends``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"


def _repeated(node: Any, enclosing: str | None, where: str) -> Iterator[str]:
    if isinstance(node, list):
        for item in node:
            yield from _repeated(item, enclosing, where)
    elif isinstance(node, dict):
        namespace = node.get("namespace")
        if node.get("type") in ("record", "enum", "fixed") and namespace is not None:
            if enclosing is not None and namespace == enclosing:
                yield f"{where}: {node.get('name')} repeats namespace {namespace}"
            enclosing = namespace
        for key in ("fields", "type", "items", "values"):
            if key in node:
                yield from _repeated(node[key], enclosing, where)


def test_no_nested_type_repeats_its_enclosing_namespace() -> None:
    found = [
        problem
        for path in sorted(SCHEMAS.rglob("*.avsc"))
        for problem in _repeated(json.loads(path.read_text()), None, path.name)
    ]
    assert not found, found
