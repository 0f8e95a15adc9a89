"""The Avro schema of an event class: the class is the one definition, the ``.avsc`` is
written from it.

The class is what a handler reads and returns, checked by mypy; the ``.avsc`` is the
contract the registry holds and other services read. Writing both by hand let them
drift, and generating Python from Avro would add a build step and code nobody may
edit. So ``sagalog schemas generate`` writes ``schemas/<namespace>/<snake_name>.avsc``
from the class, the file stays committed and reviewed (a change to a class shows up
as a change to its contract), and ``sagalog schemas check`` fails when a committed
file is not what its class generates.

The mapping, each Python type to one Avro form:

==========================================  =========================================
``str`` / ``bytes`` / ``bool`` / ``float``  ``string`` / ``bytes`` / ``boolean`` / ``double``
``int``                                     ``long`` (``Int32``: ``int``)
``decimal.Decimal`` with ``max_digits``     ``bytes``, logical ``decimal`` (precision,
and ``decimal_places``                      scale)
``datetime`` / ``date``                     logical ``timestamp-millis`` / ``date``
``Literal["a", "b"]``                       ``string``
``list[X]`` / ``dict[str, X]``              ``array`` / ``map``
an ``enum.Enum``                            an ``enum`` named after the class
a pydantic model                            a ``record`` named after the class
``X | None``                                ``["null", X]`` (default null with ``= None``)
``X | Y``                                   ``[X, Y]``, in the annotation's order
==========================================  =========================================

A named type (enum, record) is defined where it is first used and referred to by
name after. A record's ``doc`` is the first paragraph of its class docstring, a
field's ``doc`` its description (an attribute docstring, with
``use_attribute_docstrings``, which ``Event`` sets). Defaults carry over.

The text is laid out as the committed files are: the record's keys one per line,
one field per line as compact JSON, a record defined inside a field opened over
lines of its own the same way. The registry is given the compact JSON of the parsed
file (``catalog.EventSchema.text``), so the layout is for people reading a diff.
"""

from __future__ import annotations

import datetime as dt
import decimal
import enum
import inspect
import json
import types
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import fastavro
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from sagalog.contracts.avro_types import AvroInt, PersonalData, default_of_enum
from sagalog.contracts.catalog import file_name_for
from sagalog.errors import SchemaError
from sagalog.personal.fields import ATTRIBUTE as PERSONAL_ATTRIBUTE

_PRIMITIVES: dict[Any, str] = {
    str: "string",
    bytes: "bytes",
    bool: "boolean",
    float: "double",
}
_TIMESTAMP = {"type": "long", "logicalType": "timestamp-millis"}
_DATE = {"type": "int", "logicalType": "date"}


def event_schema(event_class: type[BaseModel]) -> dict[str, Any]:
    """The Avro record of an event class, named by its ``event_type``.

    Raises:
        SchemaError: the class has no ``event_type``, or a field has no Avro form; the
            message names the class and the field.
    """
    event_type = getattr(event_class, "event_type", None)
    if not isinstance(event_type, str) or "." not in event_type:
        raise SchemaError(
            f"event class {_qualified(event_class)} has no event_type such as "
            '"orders.v1.OrderPlaced": set it, its namespace and name are the schema\'s'
        )
    namespace, name = event_type.rsplit(".", 1)
    if name != event_class.__name__:
        raise SchemaError(
            f"event class {_qualified(event_class)} declares event_type {event_type!r}: "
            f"the record would be named {name}, the class {event_class.__name__}; "
            "name them alike"
        )
    schema = _Writer(event_class).record(event_class, namespace=namespace, enclosing=None)
    try:
        fastavro.parse_schema(schema, _write_hint=False)
    except Exception as exc:  # fastavro raises several unrelated types for bad schemas
        raise SchemaError(
            f"event class {_qualified(event_class)} gives no valid Avro schema: {exc}"
        ) from exc
    return schema


def record_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The Avro record of a model used inside events (a ``BlobRef``), standing alone:
    with its own namespace (``avro_namespace``), ready to put in a field's type."""
    return _Writer(model).record(model, namespace=_own_namespace(model), enclosing=None)


def schema_path(event_type: str) -> Path:
    """Where an event type's schema lives under ``schemas/``:
    ``procurement.v1.BudgetReserved`` -> ``procurement/v1/budget_reserved.avsc``."""
    namespace, name = event_type.rsplit(".", 1)
    return Path(*namespace.split(".")) / file_name_for(name)


def schema_text(schema: dict[str, Any]) -> str:
    """The committed file's text of ``schema``, ending in a newline."""
    return _layout(schema, indent=0) + "\n"


def event_schema_text(event_class: type[BaseModel]) -> str:
    """``schema_text(event_schema(event_class))``: what ``schemas generate`` writes."""
    return schema_text(event_schema(event_class))


def first_paragraph(docstring: str | None) -> str | None:
    """A docstring's first paragraph on one line, or None when there is none."""
    if not docstring or not docstring.strip():
        return None
    paragraph = inspect.cleandoc(docstring).split("\n\n", 1)[0]
    return " ".join(line.strip() for line in paragraph.splitlines())


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _own_namespace(cls: type) -> str | None:
    namespace = getattr(cls, "avro_namespace", None)
    return namespace if isinstance(namespace, str) else None


class _Writer:
    """One schema's named types, so each is defined once and referred to after."""

    def __init__(self, owner: type[BaseModel]) -> None:
        self.owner = owner
        self.defined: set[str] = set()

    def _full(self, name: str, namespace: str | None) -> str:
        return f"{namespace}.{name}" if namespace else name

    def _reference(self, name: str, namespace: str | None, enclosing: str | None) -> str | None:
        full = self._full(name, namespace)
        if full not in self.defined:
            self.defined.add(full)
            return None
        return name if namespace == enclosing else full

    def record(
        self, model: type[BaseModel], *, namespace: str | None, enclosing: str | None
    ) -> dict[str, Any]:
        if not model.__pydantic_complete__:
            try:
                model.model_rebuild()
            except Exception as exc:  # pydantic names what it could not resolve
                raise SchemaError(
                    f"{_qualified(model)} is not fully defined ({exc}); define or import "
                    "every class its fields name before generating its schema"
                ) from exc
        schema: dict[str, Any] = {"type": "record", "name": model.__name__}
        if namespace != enclosing and namespace is not None:
            schema["namespace"] = namespace
        self.defined.add(self._full(model.__name__, namespace))
        doc = first_paragraph(model.__dict__.get("__doc__"))
        if doc:
            schema["doc"] = doc
        schema["fields"] = [
            self.field(model, name, info, namespace=namespace)
            for name, info in model.model_fields.items()
        ]
        return schema

    def field(
        self, model: type[BaseModel], name: str, info: FieldInfo, *, namespace: str | None
    ) -> dict[str, Any]:
        where = f"{_qualified(model)}, field '{name}'"
        annotation = info.annotation
        avro_type = self.type_of(annotation, info.metadata, namespace=namespace, where=where)
        entry: dict[str, Any] = {"name": info.alias or name, "type": avro_type}
        has_default, default = _default(info)
        if has_default:
            if default is None and not (isinstance(avro_type, list) and avro_type[0] == "null"):
                raise SchemaError(f"{where}: default None on a field that cannot be None")
            if default is not None and isinstance(avro_type, list) and "null" in avro_type:
                raise SchemaError(
                    f"{where}: an optional field's default must be None (Avro takes a "
                    "union's default from its first type, null)"
                )
            entry["default"] = _json_default(default, where=where)
        if info.description:
            entry["doc"] = " ".join(info.description.split())
        for mark in info.metadata:
            if isinstance(mark, PersonalData):
                entry[PERSONAL_ATTRIBUTE] = mark.subject
        return entry

    def type_of(
        self, annotation: Any, metadata: Iterable[Any], *, namespace: str | None, where: str
    ) -> Any:
        metadata = list(metadata)
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            inner, *more = typing.get_args(annotation)
            return self.type_of(inner, [*more, *metadata], namespace=namespace, where=where)
        if origin in (typing.Union, types.UnionType):
            args = typing.get_args(annotation)
            branches = [a for a in args if a is not type(None)]
            nullable = len(branches) < len(args)
            union = ["null"] if nullable else []
            for branch in branches:
                converted = self.type_of(branch, metadata, namespace=namespace, where=where)
                if isinstance(converted, list):
                    raise SchemaError(f"{where}: a union inside a union has no Avro form")
                union.append(converted)
            return union
        if annotation in _PRIMITIVES:
            return _PRIMITIVES[annotation]
        if annotation is int:
            return "int" if any(isinstance(m, AvroInt) for m in metadata) else "long"
        if annotation is dt.datetime:
            return dict(_TIMESTAMP)
        if annotation is dt.date:
            return dict(_DATE)
        if annotation is decimal.Decimal:
            return _decimal(metadata, where=where)
        if origin is typing.Literal:
            values = typing.get_args(annotation)
            if all(isinstance(v, str) for v in values):
                return "string"
            raise SchemaError(f"{where}: only a Literal of strings has an Avro form (string)")
        if origin is list:
            (item,) = typing.get_args(annotation) or (None,)
            if item is None:
                raise SchemaError(f"{where}: say what the list holds, e.g. list[str]")
            return {
                "type": "array",
                "items": self.type_of(item, [], namespace=namespace, where=where),
            }
        if origin is dict:
            key, value = typing.get_args(annotation) or (None, None)
            if key is not str:
                raise SchemaError(
                    f"{where}: an Avro map has string keys; use dict[str, ...] "
                    f"(got {_name(annotation)})"
                )
            return {
                "type": "map",
                "values": self.type_of(value, [], namespace=namespace, where=where),
            }
        if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
            return self.enum(annotation, namespace=namespace, where=where)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            own = _own_namespace(annotation) or namespace
            reference = self._reference(annotation.__name__, own, namespace)
            if reference is not None:
                return reference
            return self.record(annotation, namespace=own, enclosing=namespace)
        raise SchemaError(
            f"{where}: {_name(annotation)} has no Avro form; use str, int (Int32 for a 32-bit "
            "int), float, bool, bytes, Decimal (with max_digits and decimal_places), "
            "datetime, date, a Literal of strings, list[X], dict[str, X], an Enum, a "
            "pydantic model, or X | None"
        )

    def enum(self, cls: type[enum.Enum], *, namespace: str | None, where: str) -> Any:
        reference = self._reference(cls.__name__, namespace, namespace)
        if reference is not None:
            return reference
        symbols = [member.value for member in cls]
        if not all(isinstance(s, str) for s in symbols):
            raise SchemaError(
                f"{where}: enum {cls.__qualname__} has values that are not strings; an Avro "
                "enum's symbols are names (use enum.StrEnum)"
            )
        schema: dict[str, Any] = {"type": "enum", "name": cls.__name__}
        doc = first_paragraph(cls.__dict__.get("__doc__"))
        if doc:
            schema["doc"] = doc
        schema["symbols"] = symbols
        default = default_of_enum(cls)
        if default is not None:
            schema["default"] = default
        return schema


def _decimal(metadata: Iterable[Any], *, where: str) -> dict[str, Any]:
    precision = scale = None
    for mark in metadata:
        precision = getattr(mark, "max_digits", None) or precision
        places = getattr(mark, "decimal_places", None)
        scale = places if places is not None else scale
    if precision is None or scale is None:
        raise SchemaError(
            f"{where}: a Decimal needs its precision and scale, as "
            "Annotated[Decimal, Field(max_digits=14, decimal_places=2)]"
        )
    return {"type": "bytes", "logicalType": "decimal", "precision": precision, "scale": scale}


def _default(info: FieldInfo) -> tuple[bool, Any]:
    if info.default_factory is None and info.default is PydanticUndefined:
        return False, None
    return True, info.get_default(call_default_factory=True, validated_data={})


def _json_default(value: Any, *, where: str) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, list):
        return [_json_default(v, where=where) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_default(v, where=where) for k, v in value.items()}
    raise SchemaError(
        f"{where}: default {value!r} has no Avro JSON form; give a default of str, int, "
        "float, bool, None, an enum member, a list or a dict, or none"
    )


def _name(annotation: Any) -> str:
    if typing.get_origin(annotation) is not None:
        return str(annotation).replace("typing.", "")  # set[str], not set
    return getattr(annotation, "__name__", None) or str(annotation)


def _layout(value: Any, *, indent: int) -> str:
    """Compact JSON, except that a record opens over lines of its own: its keys one per
    line and its fields one per line, ``indent`` being the column its ``{`` line starts at."""
    if isinstance(value, dict) and value.get("type") == "record":
        pad = " " * (indent + 2)
        lines = [
            f"{pad}{json.dumps(key)}: {_layout(item, indent=indent + 2)}"
            for key, item in value.items()
            if key != "fields"
        ]
        fields = ",\n".join(
            f"{pad}  {_layout(field, indent=indent + 4)}" for field in value["fields"]
        )
        lines.append(f'{pad}"fields": [\n{fields}\n{pad}]')
        return "{\n" + ",\n".join(lines) + "\n" + " " * indent + "}"
    if isinstance(value, dict):
        inner = ", ".join(
            f"{json.dumps(key)}: {_layout(item, indent=indent)}" for key, item in value.items()
        )
        return "{" + inner + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_layout(item, indent=indent) for item in value) + "]"
    return json.dumps(value)
