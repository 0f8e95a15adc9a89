"""Records as consumed -> decoded payloads, many records per fastavro call.

fastavro's per-call overhead, not the decoding, dominates for one small record, so
consecutive records written with the same schema id are decoded together, as one
Avro array: their bodies joined behind a block count. A record that breaks the run
(or a run that does not consume its bytes exactly) sends that run back to
record-by-record decoding, which counts the undecodable records and keeps the rest:
a bad record is reported, never fatal.

Schemas come from ``EventCodec.reader`` (the registry, once per schema id), resolved
against this process's ``schemas/`` as ``EventCodec.decode`` does, so the payloads are
the same. Top-level timestamp fields are read as integers and turned into datetimes
afterwards, in one loop: fastavro's per-value logical-type dispatch was the dearest
part of decoding a transition. ``logical_types=False`` leaves them as epoch
milliseconds (what analytics computes with).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gc
import io
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any, Protocol, TypeGuard, cast

import fastavro

from sagalog.contracts.codec import MAGIC_BYTE, EventCodec
from sagalog.errors import SagalogError

PREFIX_SIZE = 5
"""The wire-format prefix: the magic byte and the 4-byte schema id."""

MAX_EXAMPLES = 20
"""Undecodable records kept (with why) for the report; all of them are counted."""

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_FLOAT_EXACT_MS = 2**32 * 1000
"""Up to here (the year 2106) ``fromtimestamp(ms / 1000)`` rounds to the exact millisecond."""
_TIMESTAMP_UNITS = {"timestamp-millis": "milliseconds", "timestamp-micros": "microseconds"}


class ConsumedRecord(Protocol):
    """What the decoder reads of a ``confluent_kafka.Message``."""

    def value(self) -> Any: ...
    def key(self) -> Any: ...
    def partition(self) -> Any: ...
    def offset(self) -> Any: ...
    def timestamp(self) -> Any: ...


@dataclass(frozen=True, slots=True)
class ReplayBatch:
    """Decoded records of one event type, in log order within each partition.

    ``keys`` and ``timestamps`` (ms) run parallel to ``payloads`` when the replay was
    asked for them, and are empty otherwise.
    """

    event_type: str
    schema_id: int
    payloads: list[dict[str, Any]]
    keys: list[bytes | None]
    timestamps: list[int]


@dataclass(frozen=True, slots=True)
class UndecodableRecord:
    """A record that could not be decoded, and why."""

    partition: int
    offset: int
    reason: str


@dataclass(slots=True)
class ReplayStats:
    """What a replay read so far."""

    read: int = 0
    decoded: int = 0
    skipped: int = 0
    """Records of event types the replay was not asked for (not decoded)."""
    undecodable: int = 0
    examples: list[UndecodableRecord] = field(default_factory=list)
    """The first ``MAX_EXAMPLES`` undecodable records."""


@dataclass(frozen=True, slots=True)
class _RunReader:
    """Schemas to read one schema id's records with, alone and as a run.

    ``timestamps``: top-level fields read as integers, to turn into datetimes
    (field name, ``timedelta`` unit).
    """

    event_type: str
    writer: Any
    reader: Any | None
    run_writer: Any
    run_reader: Any | None
    timestamps: tuple[tuple[str, str], ...] = ()

    def finish(self, payloads: list[dict[str, Any]]) -> None:
        """Turn the integer timestamps into the datetimes fastavro would have made."""
        epoch, delta, utc, from_seconds = _EPOCH, dt.timedelta, dt.UTC, dt.datetime.fromtimestamp
        for name, unit in self.timestamps:
            if unit == "milliseconds":
                for payload in payloads:
                    if (value := payload[name]) is None:
                        continue
                    if 0 <= value < _FLOAT_EXACT_MS:  # twice as fast as the exact arithmetic
                        payload[name] = from_seconds(value / 1000, utc)
                    else:
                        payload[name] = epoch + delta(0, 0, 0, value)
            else:
                for payload in payloads:
                    if (value := payload[name]) is not None:
                        payload[name] = epoch + delta(0, 0, value)


class BatchDecoder:
    """Decodes batches of consumed records; counts in ``stats`` what it could not."""

    def __init__(
        self,
        codec: EventCodec,
        *,
        event_types: Collection[str] | None = None,
        logical_types: bool = True,
        keys: bool = True,
        timestamps: bool = False,
        stats: ReplayStats | None = None,
    ) -> None:
        """What to decode, and how.

        Args:
            codec: where the schemas come from.
            event_types: decode only these (others are counted as skipped).
            logical_types: timestamps as datetimes (as ``EventCodec.decode``) or,
                when False, as epoch milliseconds.
            keys: return the record keys.
            timestamps: return the record timestamps (ms).
            stats: counters to add to (a new set by default).
        """
        self.codec = codec
        self.event_types = frozenset(event_types) if event_types is not None else None
        self.logical_types = logical_types
        self.with_keys = keys
        self.with_timestamps = timestamps
        self.stats = stats if stats is not None else ReplayStats()
        self._runs: dict[int, _RunReader | None] = {}
        self._failed_ids: dict[int, str] = {}

    def decode(self, messages: Sequence[ConsumedRecord]) -> Iterator[ReplayBatch]:
        """``messages`` decoded, one batch per run of one schema id, in their order.

        Records that do not decode are counted in ``stats`` (with the first few
        examples) and left out; records of event types not asked for are skipped.
        """
        values = [m.value() for m in messages]
        if _one_run(values):  # the common case: one schema id, every record in the wire format
            batch = self._decode_run(values[0][:PREFIX_SIZE], values, messages)
            if batch is not None:
                yield batch
            return
        count, start = len(values), 0
        while start < count:
            value = values[start]
            if value is None or len(value) < PREFIX_SIZE or value[0] != MAGIC_BYTE:
                self._undecodable(messages[start], _not_wire_format(value))
                start += 1
                continue
            prefix = value[:PREFIX_SIZE]
            end = start + 1
            while end < count and (following := values[end]) is not None:
                if not following.startswith(prefix):
                    break
                end += 1
            run = cast(list[bytes], values[start:end])
            batch = self._decode_run(
                prefix, run, messages[start:end] if end - start < count else messages
            )
            if batch is not None:
                yield batch
            start = end

    def _decode_run(
        self, prefix: bytes, values: list[bytes], messages: Sequence[ConsumedRecord]
    ) -> ReplayBatch | None:
        schema_id = int.from_bytes(prefix[1:], "big")
        run = self._run_reader(schema_id)
        if run is None:
            reason = self._failed_ids.get(schema_id)
            if reason is None:  # an event type this replay skips
                self.stats.skipped += len(values)
                return None
            for message in messages:
                self._undecodable(message, reason)
            return None
        body = b"".join([_block_count(len(values)), *[v[PREFIX_SIZE:] for v in values], b"\0"])
        stream = io.BytesIO(body)
        payloads: list[dict[str, Any]]
        with cyclic_gc_paused():
            try:
                payloads = fastavro.schemaless_reader(stream, run.run_writer, run.run_reader)  # type: ignore[assignment]
                whole = stream.tell() == len(body)
            except Exception:  # fastavro raises EOFError, ValueError, StopIteration, ...
                whole = False
            if not whole:
                payloads, messages = self._one_by_one(run, schema_id, values, messages)
            run.finish(payloads)
        self.stats.decoded += len(payloads)
        return ReplayBatch(
            event_type=run.event_type,
            schema_id=schema_id,
            payloads=payloads,
            keys=[m.key() for m in messages] if self.with_keys else [],
            timestamps=[m.timestamp()[1] for m in messages] if self.with_timestamps else [],
        )

    def _one_by_one(
        self,
        run: _RunReader,
        schema_id: int,
        values: list[bytes],
        messages: Sequence[ConsumedRecord],
    ) -> tuple[list[dict[str, Any]], Sequence[ConsumedRecord]]:
        payloads: list[dict[str, Any]] = []
        decoded: list[ConsumedRecord] = []
        for value, message in zip(values, messages, strict=True):
            try:
                stream = io.BytesIO(value)
                stream.seek(PREFIX_SIZE)
                payload: Any = fastavro.schemaless_reader(stream, run.writer, run.reader)
            except Exception as exc:
                self._undecodable(
                    message,
                    f"does not decode with schema id {schema_id} ({run.event_type}): "
                    f"{exc.__class__.__name__}: {exc}",
                )
                continue
            payloads.append(payload)
            decoded.append(message)
        return payloads, decoded

    def _run_reader(self, schema_id: int) -> _RunReader | None:
        if schema_id in self._runs:
            return self._runs[schema_id]
        run: _RunReader | None = None
        try:
            schemas = self.codec.reader(schema_id)
        except SagalogError as exc:
            self._failed_ids[schema_id] = str(exc)
        else:
            if self.event_types is None or schemas.event_type in self.event_types:
                run = _run_reader(
                    schemas.event_type,
                    schemas.writer_definition,
                    schemas.reader_definition,
                    logical_types=self.logical_types,
                )
        self._runs[schema_id] = run
        return run

    def _undecodable(self, message: ConsumedRecord, reason: str) -> None:
        self.stats.undecodable += 1
        if len(self.stats.examples) < MAX_EXAMPLES:
            self.stats.examples.append(
                UndecodableRecord(message.partition() or 0, message.offset() or 0, reason)
            )


def _run_reader(
    event_type: str, writer: Any, reader: Any | None, *, logical_types: bool
) -> _RunReader:
    timestamps: tuple[tuple[str, str], ...] = ()
    if not logical_types:
        writer = _without_logical_types(writer)
        reader = _without_logical_types(reader) if reader is not None else None
    elif reader is None and (found := _top_level_timestamps(writer)) is not None:
        writer, timestamps = _without_logical_types(writer), found
    return _RunReader(
        event_type=event_type,
        writer=fastavro.parse_schema(writer),
        reader=fastavro.parse_schema(reader) if reader is not None else None,
        run_writer=fastavro.parse_schema({"type": "array", "items": writer}),
        run_reader=(
            fastavro.parse_schema({"type": "array", "items": reader})
            if reader is not None
            else None
        ),
        timestamps=timestamps,
    )


def _top_level_timestamps(schema: Any) -> tuple[tuple[str, str], ...] | None:
    """The record's timestamp fields, when they are its only logical types; else None.

    A field qualifies as ``{"type": "long", "logicalType": "timestamp-millis"}`` (or
    micros), alone or in a union with null. Any other logical type, or one deeper
    down, leaves the conversion to fastavro.
    """
    if not isinstance(schema, dict) or schema.get("type") != "record":
        return None
    found = []
    for field_ in schema.get("fields", ()):
        kind = field_["type"]
        branches = kind if isinstance(kind, list) else [kind]
        logical = [b for b in branches if _has_logical_type(b)]
        if not logical:
            continue
        if len(logical) > 1 or not isinstance(logical[0], dict):
            return None
        branch = logical[0]
        unit = _TIMESTAMP_UNITS.get(branch.get("logicalType", ""))
        if unit is None or branch.get("type") != "long" or len(branch) != 2:
            return None
        if isinstance(kind, list) and sorted(map(str, kind)) != sorted(map(str, [branch, "null"])):
            return None
        found.append((field_["name"], unit))
    return tuple(found)


def _has_logical_type(schema: Any) -> bool:
    if isinstance(schema, dict):
        return "logicalType" in schema or any(_has_logical_type(v) for v in schema.values())
    if isinstance(schema, list):
        return any(_has_logical_type(v) for v in schema)
    return False


@contextlib.contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while a run's payloads are built.

    Consuming and decoding allocate some ten objects per record, none of them in a
    reference cycle, so the collections those allocations trigger traverse young
    objects for nothing, a share of the replay's time worth having back
    (docs/design/tuning-measurements.md). Reference
    counting still frees everything; the collector runs again afterwards. Nested
    pauses leave the collector to the outermost.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _one_run(values: list[bytes | None]) -> TypeGuard[list[bytes]]:
    """Whether every value starts with the first one's wire-format prefix (C-speed check)."""
    if not values or (first := values[0]) is None:
        return False
    if len(first) < PREFIX_SIZE or first[0] != MAGIC_BYTE:
        return False
    try:
        return all(map(bytes.startswith, values, repeat(first[:PREFIX_SIZE])))  # type: ignore[arg-type]
    except TypeError:  # a record without a value
        return False


def _not_wire_format(value: bytes | None) -> str:
    if value is None or len(value) < PREFIX_SIZE:
        return "record body is empty or shorter than the 5-byte wire-format prefix"
    return (
        f"record body starts with byte {value[0]}, not the wire-format magic byte 0: "
        "it was not written by a schema-registry serializer"
    )


def _block_count(count: int) -> bytes:
    """An Avro array block's item count: a zig-zag varint."""
    n = count << 1
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _without_logical_types(schema: Any) -> Any:
    """``schema`` with every ``logicalType`` removed: values read as they are encoded."""
    if isinstance(schema, dict):
        return {k: _without_logical_types(v) for k, v in schema.items() if k != "logicalType"}
    if isinstance(schema, list):
        return [_without_logical_types(s) for s in schema]
    return schema
