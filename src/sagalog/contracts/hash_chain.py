"""Tamper evidence: the content hash on every event and the hash chain of each workflow.

The event log is the audit trail, so a change to it after the fact must show. The
publishers of a workflow are independent (agents, the gateway, the tracker) and none
can know the event published just before its own in the log, so no publisher can
chain to "the previous event". What each one knows is put in headers instead:

- ``sagalog_hash``: sha256 over the record's key, value bytes and its covered
  headers (every ``ce_*`` header plus the two link headers below). Every sagalog
  publisher sets it through ``signed`` (one function, so every publisher hashes the
  same bytes the same way).
- ``sagalog_prev_hash``: the content hash of the event this one reacts to, set by an
  agent from the record it consumed: a link along the causation chain.
- ``sagalog_chain``: the workflow's chain head as the publisher knew it. The saga
  tracker is the one sequencer of each workflow: it folds every event it reads for a
  workflow into ``chain = sha256(chain || event hash)`` (``chain_next``), keeps the
  head and the sealed positions and hashes in the workflow's record, and stamps the
  head on every event it publishes (the gateway stamps the head its read model holds).

The link headers are separate headers, not one "previous hash", because they point at
different things: the verifier must know whether a value is an event's hash or a
chain head, without guessing (a timer-caused tracker event has no causing event).

Kept cheap for the tracker's hot path: one ``hashlib.sha256`` call over one joined
byte string per event (a few microseconds).
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Mapping, Sequence

from sagalog.contracts.headers import H_CHAIN, H_HASH, H_PREV_HASH, RawHeaders

_COVERED_PREFIX = "ce_"
_COVERED_LINKS = frozenset({H_PREV_HASH, H_CHAIN})
_EVENT_DOMAIN = b"sagalog-event-v1"
_CHAIN_DOMAIN = b"sagalog-chain-v1"
_ABSENT = b"\xff\xff\xff\xff"
_length = struct.Struct(">I").pack


def _framed(part: bytes | None) -> bytes:
    """Length-prefixed, so no two different inputs join into the same bytes."""
    if part is None:
        return _ABSENT
    return _length(len(part)) + part


_EVENT_PREFIX = _framed(_EVENT_DOMAIN)

#: Each header name seen, framed, or b"" for a name the hash does not cover. The
#: names a process meets are the few sagalog sets, so deciding and framing each
#: once takes a third off the hash (every event is hashed by its publisher and
#: checked by its readers); a record with strange names cannot grow it past the cap.
_NAME_FRAMES: dict[str, bytes] = {}
_NAME_FRAMES_CAP = 256


def _name_frame(name: str) -> bytes:
    frame = _NAME_FRAMES.get(name)
    if frame is None:
        covered = name.startswith(_COVERED_PREFIX) or name in _COVERED_LINKS
        frame = _framed(name.encode("utf-8")) if covered else b""
        if len(_NAME_FRAMES) < _NAME_FRAMES_CAP:
            _NAME_FRAMES[name] = frame
    return frame


def content_hash(key: bytes | None, value: bytes | None, headers: RawHeaders) -> str:
    """The hex sha256 of a record as ``sagalog_hash`` states it.

    Covers the key, the value bytes (the Avro wire format, schema id included) and
    every ``ce_*``, ``sagalog_prev_hash`` and ``sagalog_chain`` header, sorted by name
    then value; not ``sagalog_hash`` itself, and not the headers a record gains on
    its way (retry and dead-letter marks, ``traceparent``), so a retried copy of an
    event hashes like the original.
    """
    items: Iterable[tuple[str, bytes | str | None]]
    if not headers:
        items = ()
    elif isinstance(headers, Mapping):
        items = headers.items()
    else:
        items = headers
    frames = _NAME_FRAMES
    covered = []
    for name, v in items:
        if v is None:
            continue
        frame = frames.get(name)
        if frame is None:
            frame = _name_frame(name)
        if frame:
            covered.append((name, frame, v if isinstance(v, bytes) else v.encode("utf-8")))
    covered.sort()  # by name, then value: the frame follows from the name
    parts = [_EVENT_PREFIX, _framed(key), _framed(value)]
    for _, frame, v in covered:
        parts += (frame, _length(len(v)), v)
    return hashlib.sha256(b"".join(parts)).hexdigest()


def signed(
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, str | bytes | None]],
) -> list[tuple[str, str | bytes | None]]:
    """``headers`` plus the ``sagalog_hash`` of the record (any earlier one replaced).

    Every sagalog publisher passes its records through here just before producing.
    """
    kept = [(name, v) for name, v in headers if name != H_HASH]
    return [*kept, (H_HASH, content_hash(key, value, kept))]


def stated_hash(headers: RawHeaders) -> str | None:
    """The ``sagalog_hash`` a record carries (None: published before hashing, or stripped)."""
    return _header(headers, H_HASH)


def _header(headers: RawHeaders, name: str) -> str | None:
    if not headers:
        return None
    items = headers.items() if isinstance(headers, Mapping) else headers
    found: str | None = None
    for key, v in items:
        if key == name and v is not None:
            found = v.decode("utf-8", "replace") if isinstance(v, bytes) else v
    return found


def chain_start(workflow_id: str) -> str:
    """The chain value before a workflow's first event: bound to the workflow id, so a
    sealed sequence cannot be passed off as another workflow's."""
    return hashlib.sha256(_CHAIN_DOMAIN + b"\x00" + workflow_id.encode("utf-8")).hexdigest()


def chain_next(chain: str, event_hash: str) -> str:
    """The chain head after sealing an event with hash ``event_hash``."""
    return hashlib.sha256(bytes.fromhex(chain) + bytes.fromhex(event_hash)).hexdigest()


def chain_values(start: str, hashes: Iterable[str]) -> list[str]:
    """The chain head after each of ``hashes`` in turn, from ``start``."""
    values = []
    chain = start
    for event_hash in hashes:
        chain = chain_next(chain, event_hash)
        values.append(chain)
    return values
