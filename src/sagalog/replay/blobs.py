"""Replay reads the blobs its events refer to: a history is whole only with its payloads.

An event holds a large payload (a prompt, a retrieved document, a model's answer) as
a reference to the blob store (``sagalog.blobs``). The tracker's rules read no such
field, so a replay would run, and agree, on a history whose payloads are gone; but a
replay is the source an auditor, a what-if or an analyst reads the workflows from,
and a history missing its prompts is not the one that ran. So ``replay rebuild`` and
``replay whatif`` read every blob their events refer to, through the store's own
check (the bytes must hash to the reference), and report what they read and what
they could not. A missing or modified blob fails the command (exit 1) and is named
with its event and field; with no store configured the references are counted, and
a note says none was read.

Only event types whose schema admits a reference are decoded for it (decided once per
type), so a history without blobs costs one header lookup per record.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sagalog.blobs.fields import Schema, admits_blobs, refs_in
from sagalog.blobs.store import BlobMissing, BlobModified, BlobStore
from sagalog.contracts.codec import EventCodec
from sagalog.contracts.headers import H_ID, H_TYPE, header_dict
from sagalog.errors import SagalogError

MAX_NAMED = 20
"""Missing or modified blobs named in a report; all of them are counted."""


@dataclass(frozen=True, slots=True)
class BlobProblem:
    """A blob an event refers to that the store does not hold as written."""

    problem: str  # "missing" or "modified"
    event_id: str | None
    position: str  # topic/partition@offset
    field: str  # <EventName>.<path>
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {
            "problem": self.problem,
            "event_id": self.event_id,
            "position": self.position,
            "field": self.field,
            "reason": self.reason,
        }


@dataclass
class BlobReads:
    """What a replay read of the blob store, record by record (``see``)."""

    codec: EventCodec
    store: BlobStore | None
    read: int = 0
    bytes_read: int = 0
    unchecked: int = 0
    missing: int = 0
    modified: int = 0
    problems: list[BlobProblem] = field(default_factory=list)
    _admits: dict[str, bool] = field(default_factory=dict, repr=False)

    def see_all(self, messages: Iterable[Any]) -> None:
        for message in messages:
            self.see(message)

    def see(self, message: Any) -> None:
        """Read the blobs one consumed record refers to, if its type may hold any."""
        raw_headers = message.headers()
        if not raw_headers:
            return
        headers = header_dict(raw_headers)
        event_type = headers.get(H_TYPE)
        if not event_type or not self._may_hold_blobs(event_type):
            return
        value = message.value()
        try:
            decoded = self.codec.decode(value)
            reader = self.codec.reader(decoded.schema_id)
        except SagalogError:
            return  # the replay reports the record as unreadable itself
        schema: Schema = reader.reader_definition or reader.writer_definition
        name = event_type.rsplit(".", 1)[-1]
        for path, ref in refs_in(schema, decoded.payload):
            if self.store is None:
                self.unchecked += 1
                continue
            try:
                data = self.store.get(ref)
            except BlobMissing as exc:
                self.missing += 1
                self._note("missing", message, headers.get(H_ID), f"{name}.{path}", exc)
            except BlobModified as exc:
                self.modified += 1
                self._note("modified", message, headers.get(H_ID), f"{name}.{path}", exc)
            else:
                self.read += 1
                self.bytes_read += len(data)

    @property
    def whole(self) -> bool:
        """Whether every blob read was there as written (unchecked ones aside)."""
        return not (self.missing or self.modified)

    def to_json(self) -> dict[str, Any]:
        return {
            "read": self.read,
            "bytes": self.bytes_read,
            "missing": self.missing,
            "modified": self.modified,
            "unchecked": self.unchecked,
            "problems": [p.to_json() for p in self.problems],
        }

    def lines(self) -> list[tuple[str, bool]]:
        """The report's lines, each with whether it is a problem (for the colour)."""
        out = []
        if self.read or not (self.unchecked or self.missing or self.modified):
            out.append(
                (
                    f"  blobs: {self.read:,} read, each as its reference says "
                    f"({self.bytes_read:,} bytes)",
                    False,
                )
            )
        if self.unchecked:
            out.append(
                (
                    f"  {self.unchecked:,} blob reference(s) not read: no blob store is "
                    "configured (set SAGALOG_BLOB_DIR or SAGALOG_BLOB_URL to the writers' store)",
                    True,
                )
            )
        if not self.whole:
            out.append(
                (
                    f"  {self.missing:,} blob(s) missing and {self.modified:,} modified: the "
                    "history cannot be replayed whole",
                    True,
                )
            )
            out.extend(
                (f"    {p.problem}: {p.field} of {p.event_id} at {p.position}: {p.reason}", True)
                for p in self.problems
            )
        return out

    def _may_hold_blobs(self, event_type: str) -> bool:
        admits = self._admits.get(event_type)
        if admits is None:
            catalog = self.codec.catalog
            admits = event_type in catalog and admits_blobs(catalog[event_type].definition)
            self._admits[event_type] = admits
        return admits

    def _note(
        self, problem: str, message: Any, event_id: str | None, where: str, exc: Exception
    ) -> None:
        if len(self.problems) < MAX_NAMED:
            position = f"{message.topic()}/{message.partition()}@{message.offset()}"
            self.problems.append(BlobProblem(problem, event_id, position, where, str(exc)))
