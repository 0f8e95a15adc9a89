"""Do the blobs a workflow's events refer to still hold what was written?

An event holds a large payload as a ``BlobRef`` (``sagalog.blobs``): the event's own
hash, which the tracker seals, covers the reference, and the reference is the sha256
of the blob. So the log proves which bytes were meant, and the audit rehashes each
blob to prove the store still has them. Findings:

- ``blob_missing``: the store has no blob of that hash;
- ``blob_modified``: the blob's bytes no longer hash to the reference.

Each names the event, its position and the field that holds the reference. With no
blob store configured the references are counted, not checked, and a note says so:
an audit that found nothing because it looked at nothing must not read as clean.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sagalog.audit.reading import LoggedEvent
from sagalog.audit.verify import Finding, FindingKind
from sagalog.blobs.fields import Schema, refs_in
from sagalog.blobs.store import BlobMissing, BlobModified, BlobStore
from sagalog.contracts.headers import H_ID, H_TYPE

Read = Callable[[bytes | None], tuple[Schema, dict[str, Any]] | None]
"""A record body's schema (the JSON the walk needs) and payload; None: it does not decode
(the trail already reports that)."""


def blob_findings(
    events: Sequence[LoggedEvent], read: Read, store: BlobStore | None
) -> tuple[list[Finding], list[str]]:
    """The findings of every blob ``events`` refer to, and the notes of what was not checked."""
    findings: list[Finding] = []
    unchecked = 0
    for event in events:
        decoded = read(event.value)
        if decoded is None:
            continue
        schema, payload = decoded
        for path, ref in refs_in(schema, payload):
            if store is None:
                unchecked += 1
                continue
            try:
                store.get(ref)
            except BlobMissing as exc:
                findings.append(_finding(FindingKind.BLOB_MISSING, event, path, exc))
            except BlobModified as exc:
                findings.append(_finding(FindingKind.BLOB_MODIFIED, event, path, exc))
    notes = []
    if unchecked:
        notes.append(
            f"{unchecked} blob reference(s) not checked: no blob store is configured "
            "(set SAGALOG_BLOB_DIR or SAGALOG_BLOB_URL to the writers' store)"
        )
    return findings, notes


def _finding(kind: FindingKind, event: LoggedEvent, path: str, exc: Exception) -> Finding:
    name = event.header_values.get(H_TYPE, "?").rsplit(".", 1)[-1]
    return Finding(kind, event.header_values.get(H_ID), event.position, f"{name}.{path}: {exc}")
