"""Avro payloads in the Confluent wire format: a zero byte, the 4-byte schema id, the body.

Schema ids come from the registry through ``confluent_kafka.schema_registry`` and
are cached per (topic, event type) and per id, so the hot path is one dict lookup
and one fastavro call. Decoding resolves the writer's schema (from the registry, by
the id in the record) against the reader's (this process's ``schemas/``), which is
what makes old events readable by new code.

The cached schemas carry fastavro's "already parsed" marker: without it
``schemaless_reader``/``schemaless_writer`` parse the schema again on every call,
which costs more than the decoding itself.
"""

from __future__ import annotations

import io
import logging
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import fastavro

from sagalog.contracts.catalog import EventSchema, SchemaCatalog, same_schema
from sagalog.contracts.subjects import subject_for
from sagalog.errors import SchemaError
from sagalog.personal.envelope import parse as parse_envelope
from sagalog.personal.fields import PersonalField, personal_fields

if TYPE_CHECKING:
    from sagalog.personal.cipher import PersonalData

log = logging.getLogger(__name__)

MAGIC_BYTE = 0
_PREFIX = struct.Struct(">bI")


class SchemaIds(Protocol):
    """What the codec asks of a schema registry: ``contracts.registry.SchemaRegistry``
    on a cluster, ``testing.memory_log.CatalogRegistry`` in memory (which is why the
    codec does not import the registry's client)."""

    def schema_id(self, subject: str, schema: EventSchema) -> int: ...

    def writer_schema(self, schema_id: int) -> Any: ...


@dataclass(frozen=True, slots=True)
class DecodedPayload:
    """A decoded record body."""

    event_type: str
    schema_id: int
    payload: dict[str, Any]


@dataclass(frozen=True, slots=True)
class SchemaReader:
    """How to read the records written with one registry schema id.

    Attributes:
        event_type: the Avro full name of the writer's schema.
        schema_id: the registry id the records carry.
        writer: the writer's schema, parsed (fastavro form).
        reader: this process's schema of ``event_type``, parsed; None when it is the
            writer's (no resolution needed) or when this process has none.
        writer_definition: the writer's schema JSON, as the registry holds it.
        reader_definition: the JSON of ``reader``, or None.
    """

    event_type: str
    schema_id: int
    writer: Any
    reader: Any | None
    writer_definition: Any
    reader_definition: Any | None


class EventCodec:
    """Encode and decode event payloads against the catalog and the registry.

    Fields a schema marks as personal data (``sagalog.personal``) are sealed on encode
    when ``personal`` is given, and opened on decode when it also reveals; with no
    ``personal`` they are written as they come, with one warning per event type.
    Types without such fields pay one dict lookup.
    """

    def __init__(
        self,
        *,
        catalog: SchemaCatalog,
        registry: SchemaIds,
        personal: PersonalData | None = None,
    ) -> None:
        self.catalog = catalog
        self.registry = registry
        self.personal = personal
        self._personal_out: dict[str, tuple[PersonalField, ...]] = {}
        self._personal_in: dict[int, tuple[PersonalField, ...]] = {}
        self._warned: set[str] = set()
        self._prefixes: dict[tuple[str, str], bytes] = {}
        self._writers: dict[str, Any] = {}
        self._readers: dict[int, SchemaReader] = {}

    def schema_id(self, topic: str, event_type: str) -> int:
        """The registry id of ``event_type``'s current schema on ``topic``."""
        return int(_PREFIX.unpack(self._prefix(topic, event_type))[1])

    def _prefix(self, topic: str, event_type: str) -> bytes:
        key = (topic, event_type)
        prefix = self._prefixes.get(key)
        if prefix is None:
            schema = self.catalog[event_type]
            schema_id = self.registry.schema_id(subject_for(topic, event_type), schema)
            prefix = self._prefixes[key] = _PREFIX.pack(MAGIC_BYTE, schema_id)
        return prefix

    def encode(self, topic: str, event_type: str, datum: Mapping[str, Any]) -> bytes:
        """Encode a datum already valid for ``event_type`` (see ``to_avro_datum``)."""
        fields = self._personal_out.get(event_type)
        if fields is None:
            definition = self.catalog[event_type].definition
            fields = self._personal_out[event_type] = personal_fields(definition)
        if fields:
            datum = self._sealed(event_type, fields, datum)
        buffer = io.BytesIO()
        buffer.write(self._prefix(topic, event_type))
        writer = self._writers.get(event_type)
        if writer is None:
            writer = self._writers[event_type] = fastavro.parse_schema(
                dict(self.catalog[event_type].definition)
            )
        fastavro.schemaless_writer(buffer, writer, datum)
        return buffer.getvalue()

    def reader(self, schema_id: int) -> SchemaReader:
        """The cached reader of records written with ``schema_id``.

        Raises:
            SchemaError: the registry knows no such id.
        """
        reader = self._readers.get(schema_id)
        if reader is None:
            reader = self._readers[schema_id] = self._reader_for(schema_id)
        return reader

    def decode(self, data: bytes | None) -> DecodedPayload:
        """Decode one record body.

        Raises:
            SchemaError: the body is not in the wire format, names an unknown schema
                id, or cannot be read with that schema. Callers dead-letter the record
                with this message rather than stall the partition.
        """
        if data is None or len(data) < _PREFIX.size:
            raise SchemaError("record body is empty or shorter than the 5-byte wire-format prefix")
        magic, schema_id = _PREFIX.unpack_from(data)
        if magic != MAGIC_BYTE:
            raise SchemaError(
                f"record body starts with byte {magic}, not the wire-format magic byte 0: "
                "it was not written by a schema-registry serializer"
            )
        reader = self._readers.get(schema_id)
        if reader is None:
            reader = self.reader(schema_id)
        try:
            payload = fastavro.schemaless_reader(
                io.BytesIO(data[_PREFIX.size :]), reader.writer, reader.reader
            )
        except Exception as exc:  # fastavro raises EOFError, ValueError, SchemaResolutionError...
            raise SchemaError(
                f"record body does not decode with schema id {schema_id} "
                f"({reader.event_type}): {exc.__class__.__name__}: {exc}"
            ) from exc
        assert isinstance(payload, dict)
        if self.personal is not None and self.personal.reveal:
            fields = self._personal_in.get(schema_id)
            if fields is None:
                definition = reader.reader_definition or reader.writer_definition
                fields = self._personal_in[schema_id] = personal_fields(definition)
            if fields:
                payload = self.personal.open_fields(fields, payload)
        return DecodedPayload(event_type=reader.event_type, schema_id=schema_id, payload=payload)

    def _sealed(
        self, event_type: str, fields: tuple[PersonalField, ...], datum: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        if self.personal is not None:
            return self.personal.seal_fields(fields, datum)
        if event_type in self._warned:  # warned once: no need to look at each value again
            return datum
        clear = [f.name for f in fields if _in_clear(datum.get(f.name))]
        if clear:
            self._warned.add(event_type)
            log.warning(
                "%s: personal-data field(s) %s written in clear: no personal-data key is "
                "configured (set SAGALOG_PERSONAL_DATA_KEY_FILE; `sagalog dev env` does)",
                event_type,
                ", ".join(clear),
            )
        return datum

    def _reader_for(self, schema_id: int) -> SchemaReader:
        definition = self.registry.writer_schema(schema_id)
        name = definition.get("name", "")
        namespace = definition.get("namespace")
        event_type = name if "." in name or not namespace else f"{namespace}.{name}"
        writer = fastavro.parse_schema(definition)
        # Not catalog.get(): a missing type raises SchemaError there, not KeyError.
        current = self.catalog[event_type] if event_type in self.catalog else None  # noqa: SIM401
        if current is None or same_schema(current.definition, definition):
            # The writer's schema is this process's, or one it has no schema for: read as written.
            return SchemaReader(event_type, schema_id, writer, None, definition, None)
        reader = fastavro.parse_schema(dict(current.definition))
        return SchemaReader(event_type, schema_id, writer, reader, definition, current.definition)


def _in_clear(value: Any) -> bool:
    return isinstance(value, str) and parse_envelope(value) is None
