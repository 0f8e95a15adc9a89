"""Find where a pydantic event class and its Avro schema disagree.

Both are written by hand: the schema is the contract other services read, the class
is what handler code touches. Generating one from the other would hide intent (and
docstrings); comparing them catches the drift instead. ``model_drift`` returns every
difference, each naming the field, so the test that calls it says what to fix.
"""

from __future__ import annotations

import datetime as dt
import decimal
import enum
import types
import typing
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from sagalog.contracts.catalog import EventSchema

_PRIMITIVES: dict[str, type] = {
    "string": str,
    "int": int,
    "long": int,
    "float": float,
    "double": float,
    "boolean": bool,
    "bytes": bytes,
}
_LOGICAL: dict[str, type] = {
    "timestamp-millis": dt.datetime,
    "timestamp-micros": dt.datetime,
    "date": dt.date,
    "uuid": str,
    "decimal": decimal.Decimal,
}


def model_drift(model: type[BaseModel], schema: EventSchema) -> list[str]:
    """Every difference between ``model`` and ``schema``; empty when they agree."""
    return _record_drift(model, schema.definition, path=schema.name)


def _record_drift(model: type[BaseModel], record: Mapping[str, Any], *, path: str) -> list[str]:
    problems: list[str] = []
    fields = {f["name"]: f for f in record["fields"]}
    model_fields = model.model_fields
    for name in sorted(set(fields) - set(model_fields)):
        problems.append(f"{path}.{name}: in the schema, missing from {model.__name__}")
    for name in sorted(set(model_fields) - set(fields)):
        problems.append(f"{path}.{name}: in {model.__name__}, missing from the schema")
    for name in fields.keys() & model_fields.keys():
        avro_field, info = fields[name], model_fields[name]
        where = f"{path}.{name}"
        problems += _type_drift(avro_field["type"], info.annotation, where=where)
        has_default = info.default is not PydanticUndefined or info.default_factory is not None
        if "default" in avro_field and not has_default:
            problems.append(f"{where}: the schema has a default, {model.__name__} has none")
        elif has_default and "default" not in avro_field:
            problems.append(f"{where}: {model.__name__} has a default, the schema has none")
        elif "default" in avro_field and info.default is not PydanticUndefined:
            model_default = (
                info.default.value if isinstance(info.default, enum.Enum) else info.default
            )
            if model_default != avro_field["default"]:
                problems.append(
                    f"{where}: default {model_default!r} in {model.__name__}, "
                    f"{avro_field['default']!r} in the schema"
                )
    return problems


def _strip_optional(annotation: Any) -> tuple[Any, bool]:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        optional = len(args) < len(typing.get_args(annotation))
        if len(args) == 1:
            return args[0], optional
        return typing.Union[tuple(args)], optional  # noqa: UP007 - rebuilding a runtime union
    return annotation, False


def _type_drift(avro_type: Any, annotation: Any, *, where: str) -> list[str]:
    if isinstance(avro_type, list):
        branches = [b for b in avro_type if b != "null"]
        inner, optional = _strip_optional(annotation)
        if ("null" in avro_type) != optional:
            want = "optional (X | None)" if "null" in avro_type else "required"
            return [f"{where}: the schema makes it {want}, the class does not"]
        if len(branches) == 1:
            return _type_drift(branches[0], inner, where=where)
        # Several branches (a payload inline or as a blob: ``str | BlobRef``): the
        # class names each, in the schema's order.
        union = typing.get_origin(inner) in (typing.Union, types.UnionType)
        args = typing.get_args(inner) if union else (inner,)
        if len(args) != len(branches):
            return [
                f"{where}: the schema's union has {len(branches)} types besides null, the "
                f"class {len(args)} ({_name(inner)})"
            ]
        return [
            problem
            for index, (branch, arg) in enumerate(zip(branches, args, strict=True))
            for problem in _type_drift(branch, arg, where=f"{where}<{index}>")
        ]
    if _strip_optional(annotation)[1]:
        return [f"{where}: the schema makes it required, the class makes it optional"]
    if isinstance(avro_type, str):
        avro_type = {"type": avro_type}
    kind = avro_type["type"]
    if isinstance(kind, (dict, list)):
        return _type_drift(kind, annotation, where=where)
    logical = avro_type.get("logicalType")
    expected = _LOGICAL.get(logical or "") or _PRIMITIVES.get(kind)
    if expected is not None:
        if annotation is not expected:
            return [
                f"{where}: the schema says {logical or kind} ({expected.__name__}), "
                f"the class says {_name(annotation)}"
            ]
        return []
    if kind == "enum":
        if not (isinstance(annotation, type) and issubclass(annotation, enum.Enum)):
            return [
                f"{where}: the schema says enum {avro_type['name']}, "
                f"the class says {_name(annotation)}"
            ]
        symbols = [m.value for m in annotation]
        if symbols != list(avro_type["symbols"]):
            return [
                f"{where}: enum symbols {symbols} in the class, "
                f"{avro_type['symbols']} in the schema"
            ]
        return []
    if kind == "record":
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return [
                f"{where}: the schema says record {avro_type['name']}, "
                f"the class says {_name(annotation)}"
            ]
        return _record_drift(annotation, avro_type, path=where)
    if kind in ("array", "map"):
        origin = typing.get_origin(annotation)
        wanted = list if kind == "array" else dict
        if origin is not wanted:
            return [f"{where}: the schema says {kind}, the class says {_name(annotation)}"]
        args = typing.get_args(annotation)
        inner = args[0] if kind == "array" else args[1]
        return _type_drift(
            avro_type["items" if kind == "array" else "values"], inner, where=f"{where}[]"
        )
    return [f"{where}: Avro type {kind!r} has no class mapping"]


def _name(annotation: Any) -> str:
    return getattr(annotation, "__name__", None) or str(annotation)
