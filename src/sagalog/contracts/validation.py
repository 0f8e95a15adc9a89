"""Check a JSON-shaped payload against an Avro schema and convert it to an Avro datum.

fastavro's own validator stops at the first problem and names fields in its own
terms; a person publishing an event from a terminal wants every problem, each with
the dotted path of the field, and unknown fields caught (a typo in an optional
field's name would otherwise be dropped in silence). JSON also has no timestamps or
bytes, so ISO-8601 strings become datetimes and strings become bytes on the way.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import decimal
import difflib
from collections.abc import Mapping
from typing import Any

from sagalog.errors import EventValidationError

_INT_RANGE = {"int": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1)}
_TIMESTAMP_TYPES = {"timestamp-millis", "timestamp-micros"}


def to_avro_datum(schema: Mapping[str, Any], payload: Any, *, event_type: str) -> dict[str, Any]:
    """Return ``payload`` converted to a datum of the record ``schema``.

    Raises:
        EventValidationError: listing every field that does not match, by path.
    """
    problems: list[str] = []
    named: dict[str, Mapping[str, Any]] = {}
    datum = _convert(schema, payload, path="", named=named, problems=problems)
    if problems:
        listed = "\n  ".join(problems)
        raise EventValidationError(f"payload does not match schema {event_type}:\n  {listed}")
    assert isinstance(datum, dict)
    return datum


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _convert(
    schema: Any,
    value: Any,
    *,
    path: str,
    named: dict[str, Mapping[str, Any]],
    problems: list[str],
) -> Any:
    where = path or "(payload)"
    if isinstance(schema, str) and schema in named:
        schema = named[schema]
    if isinstance(schema, list):
        return _convert_union(schema, value, path=path, named=named, problems=problems)
    if isinstance(schema, str):
        schema = {"type": schema}
    kind = schema["type"]
    if isinstance(kind, (dict, list)):
        return _convert(kind, value, path=path, named=named, problems=problems)
    logical = schema.get("logicalType")
    if kind == "record":
        named[schema["name"]] = schema
        if "namespace" in schema:
            named[f"{schema['namespace']}.{schema['name']}"] = schema
        if not isinstance(value, Mapping):
            problems.append(f"{where}: expected an object, got {_describe(value)}")
            return None
        result: dict[str, Any] = {}
        known = {f["name"] for f in schema["fields"]}
        for unknown in sorted(set(value) - known):
            close = difflib.get_close_matches(unknown, known, n=1)
            hint = (
                f"did you mean '{close[0]}'?"
                if close
                else f"the schema has {', '.join(sorted(known))}"
            )
            problems.append(f"{_join(path, unknown)}: unknown field; {hint}")
        for fld in schema["fields"]:
            name = fld["name"]
            if name in value:
                result[name] = _convert(
                    fld["type"], value[name], path=_join(path, name), named=named, problems=problems
                )
            elif "default" in fld:
                result[name] = fld["default"]
            else:
                problems.append(f"{_join(path, name)}: required field is missing")
        return result
    if kind == "null":
        if value is not None:
            problems.append(f"{where}: expected null, got {_describe(value)}")
        return None
    if kind == "boolean":
        if not isinstance(value, bool):
            problems.append(f"{where}: expected true or false, got {_describe(value)}")
        return value
    if kind in ("int", "long"):
        if logical in _TIMESTAMP_TYPES and isinstance(value, dt.datetime):
            return value
        if logical in _TIMESTAMP_TYPES and isinstance(value, str):
            return _parse_timestamp(value, where=where, problems=problems)
        if isinstance(value, bool) or not isinstance(value, int):
            problems.append(f"{where}: expected an integer ({kind}), got {_describe(value)}")
            return value
        low, high = _INT_RANGE[kind]
        if not low <= value <= high:
            problems.append(f"{where}: {value} is out of range for {kind}")
        return value
    if kind in ("float", "double"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            problems.append(f"{where}: expected a number ({kind}), got {_describe(value)}")
            return value
        return float(value)
    if kind == "string":
        if not isinstance(value, str):
            problems.append(f"{where}: expected a string, got {_describe(value)}")
        return value
    if logical == "decimal":
        return _convert_decimal(schema, value, where=where, problems=problems)
    if kind in ("bytes", "fixed"):
        return _convert_bytes(schema, value, where=where, problems=problems)
    if kind == "enum":
        named[schema["name"]] = schema
        if value not in schema["symbols"]:
            problems.append(
                f"{where}: {_describe(value)} is not one of {', '.join(schema['symbols'])}"
            )
        return value
    if kind == "array":
        if not isinstance(value, list):
            problems.append(f"{where}: expected a list, got {_describe(value)}")
            return value
        return [
            _convert(schema["items"], item, path=f"{where}[{i}]", named=named, problems=problems)
            for i, item in enumerate(value)
        ]
    if kind == "map":
        if not isinstance(value, Mapping):
            problems.append(f"{where}: expected an object (map), got {_describe(value)}")
            return value
        return {
            str(k): _convert(
                schema["values"], v, path=_join(path, str(k)), named=named, problems=problems
            )
            for k, v in value.items()
        }
    problems.append(f"{where}: unsupported Avro type {kind!r}")
    return value


def _convert_union(
    branches: list[Any],
    value: Any,
    *,
    path: str,
    named: dict[str, Mapping[str, Any]],
    problems: list[str],
) -> Any:
    if value is None and any(b == "null" or b == {"type": "null"} for b in branches):
        return None
    for branch in branches:
        if branch == "null":
            continue
        attempt: list[str] = []
        converted = _convert(branch, value, path=path, named=named, problems=attempt)
        if not attempt:
            return converted
    allowed = ", ".join(b if isinstance(b, str) else str(b.get("type")) for b in branches)
    problems.append(f"{path or '(payload)'}: {_describe(value)} matches none of [{allowed}]")
    return value


def _convert_bytes(
    schema: Mapping[str, Any], value: Any, *, where: str, problems: list[str]
) -> Any:
    if isinstance(value, bytes):
        data = value
    elif isinstance(value, str):
        try:
            data = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            data = value.encode()
    else:
        problems.append(f"{where}: expected bytes (a base64 string), got {_describe(value)}")
        return value
    if schema["type"] == "fixed" and len(data) != schema["size"]:
        problems.append(f"{where}: expected exactly {schema['size']} bytes, got {len(data)}")
    return data


def _convert_decimal(
    schema: Mapping[str, Any], value: Any, *, where: str, problems: list[str]
) -> Any:
    # Money arrives as a JSON string ("1250.00") or number; floats are taken through
    # their shortest repr so 0.1 stays 0.1 and not 0.1000000000000000055511151231257827.
    if isinstance(value, bool) or not isinstance(value, (str, int, float, decimal.Decimal)):
        problems.append(f"{where}: expected a decimal number, got {_describe(value)}")
        return value
    try:
        number = decimal.Decimal(repr(value) if isinstance(value, float) else str(value))
    except decimal.InvalidOperation:
        problems.append(f"{where}: {_describe(value)} is not a decimal number")
        return value
    scale = int(schema.get("scale", 0))
    exponent = number.as_tuple().exponent
    if not isinstance(exponent, int) or -exponent > scale:
        problems.append(f"{where}: {number} has more than {scale} decimal places")
        return value
    quantized = number.quantize(decimal.Decimal(1).scaleb(-scale))
    if len(quantized.as_tuple().digits) > int(schema["precision"]):
        problems.append(f"{where}: {number} has more than {schema['precision']} digits")
    return quantized


def _parse_timestamp(value: str, *, where: str, problems: list[str]) -> Any:
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        problems.append(f"{where}: {_describe(value)} is not an ISO-8601 timestamp")
        return value
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name
