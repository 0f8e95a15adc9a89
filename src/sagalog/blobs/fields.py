"""Which fields of an event hold blobs, found by walking its Avro schema with the datum.

A field may hold a payload as a blob when its type admits a ``sagalog.v1.BlobRef``:
``["string", "sagalog.v1.BlobRef"]`` holds it inline when small and as a reference
when not (``offload``); ``"sagalog.v1.BlobRef"`` alone always as a reference. The
schema says so, not the data's shape: a payload that happens to look like a
reference is not one unless its field is typed so. The walk covers records,
arrays, maps, unions and named types referred to by name, in any depth.

Pure functions of a parsed schema (the ``.avsc`` JSON) and a decoded datum; the
store is passed in, so the same walk serves the agent (``offload``), the audit
(``refs_in``) and replay (``inline``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sagalog.blobs.store import BLOB_REF, BlobRef, BlobStore

Schema = Any
"""A parsed Avro schema: a name, a list (a union) or a dict."""

_PAYLOADS = {"string", "bytes"}


def refs_in(schema: Schema, datum: Any) -> list[tuple[str, BlobRef]]:
    """Every blob reference in ``datum``, with the field path that holds it
    (``answer``, ``documents[2].text``)."""
    found: list[tuple[str, BlobRef]] = []

    def collect(path: str, ref: BlobRef) -> BlobRef:
        found.append((path, ref))
        return ref

    _Walk(on_ref=collect).walk(schema, datum, "", "")
    return found


TEXT = "text/plain; charset=utf-8"
BINARY = "application/octet-stream"


def admits_blobs(schema: Schema) -> bool:
    """Whether any field of ``schema`` may hold a blob reference (decides once per
    event type whether its outputs are walked at all)."""
    if isinstance(schema, str):
        return schema == BLOB_REF
    if isinstance(schema, list):
        return any(admits_blobs(branch) for branch in schema)
    if not isinstance(schema, dict):
        return False
    if schema.get("type") == "record":
        full = _full_name(str(schema.get("name", "")), str(schema.get("namespace", "")))
        if full == BLOB_REF:
            return True
        return any(admits_blobs(f["type"]) for f in schema.get("fields", ()))
    return any(admits_blobs(schema[part]) for part in ("type", "items", "values") if part in schema)


def offload(schema: Schema, datum: Any, store: BlobStore, *, threshold: int) -> Any:
    """``datum`` with every payload over ``threshold`` bytes in a field that admits a
    reference put into ``store`` and replaced by its reference: text as UTF-8
    (``text/plain``), bytes as they are (``application/octet-stream``)."""

    def put(path: str, value: str | bytes) -> Any:
        text = isinstance(value, str)
        data = value.encode("utf-8") if isinstance(value, str) else value
        if len(data) <= threshold:
            return value
        return store.put(data, TEXT if text else BINARY).as_avro()

    return _Walk(on_payload=put).walk(schema, datum, "", "")


def inline(schema: Schema, datum: Any, store: BlobStore) -> Any:
    """``datum`` with every reference replaced by its blob's content, as the writer
    had it before ``offload``: text for a ``text/*`` media type, bytes otherwise.

    Raises:
        BlobMissing, BlobModified: a blob cannot be given back as written.
    """

    def fetch(path: str, ref: BlobRef) -> Any:
        return ref.content(store.get(ref))

    return _Walk(on_ref=fetch).walk(schema, datum, "", "")


class _Walk:
    """One pass over a schema and a datum, calling back at references and payloads."""

    def __init__(
        self,
        *,
        on_ref: Callable[[str, BlobRef], Any] | None = None,
        on_payload: Callable[[str, str | bytes], Any] | None = None,
    ) -> None:
        self.on_ref = on_ref
        self.on_payload = on_payload
        self.names: dict[str, Schema] = {}

    def walk(self, schema: Schema, datum: Any, namespace: str, path: str) -> Any:
        if isinstance(schema, list):
            return self._union(schema, datum, namespace, path)
        if isinstance(schema, str):
            full = _full_name(schema, namespace)
            if full == BLOB_REF:
                return self._ref(datum, path)
            named = self.names.get(full)
            return datum if named is None else self.walk(named, datum, namespace, path)
        kind = schema.get("type")
        if isinstance(kind, (list, dict)):
            return self.walk(kind, datum, namespace, path)
        if kind == "record":
            full = _full_name(schema["name"], schema.get("namespace", namespace))
            self.names[full] = schema
            if full == BLOB_REF:
                return self._ref(datum, path)
            inner = full.rpartition(".")[0]
            if not isinstance(datum, dict):
                return datum
            out = dict(datum)
            for field in schema.get("fields", ()):
                name = field["name"]
                if name in datum:
                    where = f"{path}.{name}" if path else name
                    out[name] = self.walk(field["type"], datum[name], inner, where)
            return out
        if kind in ("enum", "fixed"):
            self.names[_full_name(schema["name"], schema.get("namespace", namespace))] = schema
            return datum
        if kind == "array" and isinstance(datum, list):
            return [
                self.walk(schema["items"], item, namespace, f"{path}[{index}]")
                for index, item in enumerate(datum)
            ]
        if kind == "map" and isinstance(datum, dict):
            return {
                key: self.walk(schema["values"], value, namespace, f"{path}[{key!r}]")
                for key, value in datum.items()
            }
        return datum

    def _union(self, branches: list[Schema], datum: Any, namespace: str, path: str) -> Any:
        holds_ref = any(self._is_ref(b, namespace) for b in branches)
        if holds_ref and isinstance(datum, dict) and {"sha256", "size", "media_type"} <= set(datum):
            return self._ref(datum, path)
        payload = isinstance(datum, (str, bytes)) and self.on_payload is not None
        if holds_ref and payload and any(_primitive(b) in _PAYLOADS for b in branches):
            assert self.on_payload is not None
            return self.on_payload(path, datum)
        for branch in branches:  # the datum's branch: the first whose kind fits it
            if _fits(branch, datum):
                return self.walk(branch, datum, namespace, path)
        return datum

    def _is_ref(self, branch: Schema, namespace: str) -> bool:
        if isinstance(branch, str):
            return _full_name(branch, namespace) == BLOB_REF
        if isinstance(branch, dict) and branch.get("type") == "record":
            full = _full_name(branch["name"], branch.get("namespace", namespace))
            if full == BLOB_REF:
                self.names[full] = branch
                return True
        return False

    def _ref(self, datum: Any, path: str) -> Any:
        if self.on_ref is None or not isinstance(datum, dict):
            return datum
        return self.on_ref(path, BlobRef.from_avro(datum))


def _full_name(name: str, namespace: str) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


def _primitive(schema: Schema) -> str | None:
    if isinstance(schema, str):
        return schema
    if isinstance(schema, dict) and isinstance(schema.get("type"), str):
        return str(schema["type"])
    return None


def _fits(branch: Schema, datum: Any) -> bool:
    kind = _primitive(branch)
    if datum is None:
        return kind == "null"
    if isinstance(datum, dict):
        return kind is not None and kind not in _NOT_RECORDS
    if isinstance(datum, list):
        return kind == "array"
    return kind not in ("null", "record", "array", "map")


_NOT_RECORDS = {
    "null",
    "boolean",
    "int",
    "long",
    "float",
    "double",
    "bytes",
    "string",
    "array",
    "enum",
    "fixed",
}
"""Kinds a dict datum cannot be: a dict fits a record, a map or a named reference."""
