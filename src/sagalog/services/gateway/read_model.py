"""The gateway's read model: the tracker's records, open gates and histories in RocksDB.

Everything here is rebuilt from two logs (the tracker's records changelog and the
transitions topic), so the store is a cache with a bookmark: the offset to resume
each partition from is written in the same RocksDB write batch as the data it
covers. A restart (or a crash) resumes exactly where the last batch ended, and
deleting the directory just means reading the logs again from the beginning.

Memory stays bounded whatever the number of workflows: state lives in RocksDB, a
batch's in-flight records are the only thing held in a dict, and every listing is
an ordered range scan with a limit.

Key layout (one RocksDB, raw bytes, ``/``-separated prefixes)::

    rec/<workflow>                     stored WorkflowRecord JSON, as the tracker wrote it
    state/<state>/<workflow>           empty: the index behind ?state=
    gate/<workflow>                    empty: the index of gates awaiting a person
    hist/<len:06d><workflow><p:05d><offset:020d>   a TransitionEntry (JSON), log order
    pos/<topic>\\x00<partition>         the next offset to read (ASCII)
    accepted/<event id>                what the gateway published for a request (JSON)
    token/<token>                      the decision accepted for a gate token (JSON)
    key/<name>\x00<value>\x00<workflow>  empty: the index of correlation keys
    start/<started_ms><workflow>       Facets: every workflow, in start order
    idle/<entered_ms><workflow>        Facets: workflows in flight, by idle time
    meta/layout                        the layout version the store holds (ASCII)

The ``start/`` and ``idle/`` listing indexes are described in ``workflow_index``. A
store written before them (no ``meta/layout``) gets them when it is opened, from its
records, once.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict
from rocksdict import Rdict, ReadOptions, WriteBatch, WriteOptions

from sagalog.flows.states import WorkflowState
from sagalog.rocksdb_options import bounded_options
from sagalog.services.gateway import workflow_index
from sagalog.services.gateway.changes import ChangeBroadcast
from sagalog.services.gateway.workflow_index import Facets, Index
from sagalog.tracker.record import WorkflowRecord

_RECORD = b"rec/"
_STATE = b"state/"
_GATE = b"gate/"
_HISTORY = b"hist/"
_POSITION = b"pos/"
_ACCEPTED = b"accepted/"
_TOKEN = b"token/"
_KEY = b"key/"
_LAYOUT = b"meta/layout"

LAYOUT = 2
"""The key layout this release writes; 2 added the ``start/`` and ``idle/`` indexes."""

VersionState = tuple[str, int, str]
"""(flow, flow version, state): what the console's overview counts workflows by."""

MAX_HISTORY = 1_000
"""Most transitions returned for one workflow (a reference workflow has about 15)."""


class TransitionEntry(BaseModel):
    """One ``StateTransition`` of a workflow, as the read model keeps it."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    event_id: str
    flow: str
    flow_version: int
    from_state: str
    to_state: str
    step: str | None = None
    from_step: str | None = None
    cause_event_id: str
    time_in_previous_state_ms: int
    at_ms: int
    partition: int | None = None
    """Where it lies in the transitions topic (from its key; not stored in the value)."""
    offset: int | None = None


def _prefix_end(prefix: bytes) -> bytes:
    """The smallest key above every key that starts with ``prefix``."""
    stem = prefix.rstrip(b"\xff")
    return stem[:-1] + bytes([stem[-1] + 1])


def _history_prefix(workflow_id: str) -> bytes:
    """Length-prefixed, so workflow ``a`` never sees the history of ``a1``."""
    raw = workflow_id.encode()
    return _HISTORY + b"%06d" % len(raw) + raw


def _state_key(state: str, workflow_id: str) -> bytes:
    return _STATE + state.encode() + b"/" + workflow_id.encode()


def _key_prefix(name: str, value: str) -> bytes:
    return _KEY + name.encode() + b"\x00" + value.encode() + b"\x00"


def _position_key(topic: str, partition: int) -> bytes:
    return _POSITION + topic.encode() + b"\x00" + str(partition).encode()


def _awaits_person(record: WorkflowRecord) -> bool:
    return record.state is WorkflowState.PENDING_APPROVAL and record.gate is not None


@dataclass(frozen=True)
class IndexPage:
    """One page of a listing index.

    Attributes:
        records: the matching workflows, in index order.
        resume_after: the key suffix to resume after for the next page; None when the
            range is exhausted.
        scanned: index entries looked at (matching or not).
    """

    records: list[WorkflowRecord]
    resume_after: bytes | None
    scanned: int


class ReadModel:
    """The store; one process opens it (RocksDB locks the directory)."""

    def __init__(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.db = Rdict(str(path), bounded_options(raw_mode=True))
        # Rebuildable from the logs, and the bookmark rides in the same batch: a lost
        # tail after a machine crash is read again, so writes need no fsync.
        self._write_options = WriteOptions()
        self._write_options.sync = False
        self._counts: Counter[str] | None = None  # by state, once counted (``state_counts``)
        self._versions: Counter[VersionState] | None = None  # once counted (``version_counts``)
        self._counts_lock = threading.Lock()
        self.changes = ChangeBroadcast()
        """Told the workflows each batch touched, once it is written (the console's live
        pages listen)."""
        self._upgrade_layout()

    def _upgrade_layout(self) -> None:
        """Give a store written by an earlier release the indexes this one reads.

        Every record is read once (in batches, so memory stays bounded), then the
        layout is written: a crash in between only means doing it again."""
        if self.db.get(_LAYOUT) == str(LAYOUT).encode():
            return
        batch = WriteBatch(raw_mode=True)
        pending = 0
        for _, value in self._scan(_RECORD):
            for key, facets in workflow_index.entries(WorkflowRecord.from_json(value)).items():
                batch.put(key, facets)
            pending += 1
            if pending >= 10_000:
                self.db.write(batch, self._write_options)
                batch, pending = WriteBatch(raw_mode=True), 0
        batch.put(_LAYOUT, str(LAYOUT).encode())
        self.db.write(batch, self._write_options)

    def close(self) -> None:
        self.db.close()

    # -- writing (the follower) ----------------------------------------------------

    def batch(self) -> ReadModelBatch:
        return ReadModelBatch(self)

    def _write(
        self,
        batch: WriteBatch,
        moved: Counter[str] | None = None,
        moved_versions: Counter[VersionState] | None = None,
    ) -> None:
        """Write ``batch``; ``moved``: how many workflows it adds to (or takes from) each
        state (and ``moved_versions`` each flow version's state), kept in
        ``state_counts`` and ``version_counts`` once they were counted."""
        with self._counts_lock:
            self.db.write(batch, self._write_options)
            if self._counts is not None and moved:
                self._counts.update(moved)
            if self._versions is not None and moved_versions:
                self._versions.update(moved_versions)

    # -- positions -----------------------------------------------------------------

    def positions(self) -> dict[tuple[str, int], int]:
        """The next offset to read per (topic, partition), as last committed."""
        found: dict[tuple[str, int], int] = {}
        for key, value in self._scan(_POSITION):
            topic, _, partition = key[len(_POSITION) :].partition(b"\x00")
            found[(topic.decode(), int(partition))] = int(value)
        return found

    # -- reading -------------------------------------------------------------------

    def record(self, workflow_id: str) -> WorkflowRecord | None:
        raw = self.db.get(_RECORD + workflow_id.encode())
        return None if raw is None else WorkflowRecord.from_json(raw)

    def workflows(
        self,
        *,
        state: WorkflowState | None = None,
        flow: str | None = None,
        after: str | None = None,
        limit: int = 100,
    ) -> list[WorkflowRecord]:
        """Workflows in id order, from just after ``after``, at most ``limit``."""
        found: list[WorkflowRecord] = []
        if state is not None:
            prefix = _STATE + state.value.encode() + b"/"
            ids = (key[len(prefix) :].decode() for key, _ in self._scan(prefix, after))
            records = (self.record(workflow_id) for workflow_id in ids)
        else:
            records = (WorkflowRecord.from_json(value) for _, value in self._scan(_RECORD, after))
        for record in records:
            if record is None or (flow is not None and record.flow != flow):
                continue
            found.append(record)
            if len(found) >= limit:
                break
        return found

    def open_gates(
        self,
        *,
        assignee: str | None = None,
        flow: str | None = None,
        after: str | None = None,
        limit: int = 100,
        keep: Callable[[WorkflowRecord], bool] = lambda _: True,
    ) -> list[WorkflowRecord]:
        """Workflows waiting at a gate for a person, in id order, from just after ``after``;
        ``keep``: any further condition a gate must meet."""
        found: list[WorkflowRecord] = []
        for key, _ in self._scan(_GATE, after):
            record = self.record(key[len(_GATE) :].decode())
            if record is None or record.gate is None:
                continue
            if assignee is not None and record.gate.assignee != assignee:
                continue
            if flow is not None and record.flow != flow:
                continue
            if not keep(record):
                continue
            found.append(record)
            if len(found) >= limit:
                break
        return found

    def open_gate_count(self, *, cap: int) -> int:
        """How many workflows wait at a gate for a person, counted up to ``cap`` from the
        ``gate/`` index (its values are empty): no record read (the overview shows the
        number, the inbox the gates)."""
        return sum(1 for _ in itertools.islice(self._scan(_GATE), cap))

    def history(self, workflow_id: str, *, limit: int = MAX_HISTORY) -> list[TransitionEntry]:
        """The workflow's transitions in log order, each with its position (for the audit,
        which fetches them by offset)."""
        found = []
        prefix = _history_prefix(workflow_id)
        for key, value in self._scan(prefix):
            position = key[len(prefix) :]
            fields = json.loads(value)
            if len(position) == 25 and position.isdigit():
                fields["partition"], fields["offset"] = int(position[:5]), int(position[5:])
            found.append(TransitionEntry.model_validate(fields))  # one validation, no copy
            if len(found) >= limit:
                break
        return found

    def by_key(self, name: str, value: str, *, limit: int = 10) -> list[WorkflowRecord]:
        """The workflows whose correlation key ``name`` is ``value``, in id order."""
        prefix = _key_prefix(name, value)
        found = []
        for key, _ in self._scan(prefix):
            record = self.record(key[len(prefix) :].decode())
            if record is not None and record.keys.get(name) == value:
                found.append(record)
                if len(found) >= limit:
                    break
        return found

    def state_counts(self) -> dict[str, int]:
        """Workflows by state, as of the last committed batch: counted once (``counts``),
        then moved by each batch, so a scrape costs no scan however many there are."""
        with self._counts_lock:
            if self._counts is None:
                self._counts = Counter(self.counts())
            return {state: n for state, n in self._counts.items() if n}

    def version_counts(self) -> dict[VersionState, int]:
        """Workflows by flow, version and state: counted once from the ``start/`` index
        (keys and small values, no record parsed), then moved by each batch."""
        with self._counts_lock:
            if self._versions is None:
                counted: Counter[VersionState] = Counter()
                for _, value in self._scan(Index.START.prefix):
                    facets = Facets.decode(value)
                    counted[(facets.flow, facets.flow_version, facets.state.value)] += 1
                self._versions = counted
            return {key: n for key, n in self._versions.items() if n}

    def index_page(
        self,
        index: Index,
        *,
        low: bytes,
        high: bytes,
        after: bytes | None,
        backwards: bool,
        keep: Callable[[Facets], bool],
        limit: int,
        budget: int,
    ) -> IndexPage:
        """Up to ``limit`` workflows whose index entry lies in ``[low, high)`` (key
        suffixes), after ``after`` in the scan's direction, and whose facets ``keep``.

        A keyset page: it seeks to where the last one ended, never skips rows, and
        looks at no more than ``budget`` entries, so a filter that matches rarely
        answers a short page (with where to resume) rather than scanning a million."""
        prefix = index.prefix
        options = ReadOptions()
        if backwards:  # bounds checked below: an upper bound does not hold for seek_for_prev
            start = high if after is None else min(high, after)
            iterator = self.db.iter(options)
            iterator.seek_for_prev(prefix + start)
        else:
            options.set_iterate_upper_bound(prefix + high)
            iterator = self.db.iter(options)
            iterator.seek(prefix + (low if after is None else max(low, after)))
        found: list[WorkflowRecord] = []
        scanned = 0
        last: bytes | None = None
        while iterator.valid():
            key = bytes(iterator.key())
            suffix = key[len(prefix) :]
            if not key.startswith(prefix) or suffix < low or (suffix >= high and not backwards):
                break
            if suffix != after and suffix < high:
                if scanned >= budget or len(found) >= limit:
                    return IndexPage(found, last, scanned)
                scanned += 1
                last = suffix
                if keep(Facets.decode(bytes(iterator.value()))):
                    record = self.record(workflow_index.suffix_workflow(suffix))
                    if record is not None:
                        found.append(record)
            if backwards:
                iterator.prev()
            else:
                iterator.next()
        return IndexPage(found, None, scanned)

    def index_facets(
        self, index: Index, *, low: bytes = b"", high: bytes = b"\xff"
    ) -> Iterator[Facets]:
        """The facets of the index entries in ``[low, high)``, in index order, read as used."""
        options = ReadOptions()
        options.set_iterate_upper_bound(index.prefix + high)
        for _, value in self.db.items(from_key=index.prefix + low, read_opt=options):
            yield Facets.decode(value)

    def newest_facets(self, index: Index, *, low: bytes = b"") -> Iterator[Facets]:
        """The facets of the index entries from its last down to ``low``, newest first,
        read as used (the analytics page reads the last day, the newest first)."""
        prefix = index.prefix
        for raw_key, value in self.db.items(backwards=True, from_key=_prefix_end(prefix)):
            key = raw_key if isinstance(raw_key, bytes) else b""  # raw mode: keys are bytes
            if not key.startswith(prefix) or key[len(prefix) :] < low:
                return
            yield Facets.decode(bytes(value))

    def counts(self) -> dict[str, int]:
        """Workflows by state: one index scan per state, keys only."""
        return {
            state.value: sum(1 for _ in self._scan(_STATE + state.value.encode() + b"/"))
            for state in WorkflowState
        }

    # -- the request ledger (the API) ------------------------------------------------

    def accepted(self, event_id: str) -> dict[str, Any] | None:
        """What was published for the request whose event id is ``event_id``, if it was."""
        raw = self.db.get(_ACCEPTED + event_id.encode())
        return None if raw is None else dict(json.loads(raw))

    def token_decision(self, token: str) -> dict[str, Any] | None:
        """The decision already accepted for ``token``, if any."""
        raw = self.db.get(_TOKEN + token.encode())
        return None if raw is None else dict(json.loads(raw))

    def remember(self, event_id: str, outcome: dict[str, Any], *, token: str | None) -> None:
        """Record a published request, so a repeat is answered without publishing again."""
        batch = WriteBatch(raw_mode=True)
        value = json.dumps(outcome).encode()
        batch.put(_ACCEPTED + event_id.encode(), value)
        if token is not None:
            batch.put(_TOKEN + token.encode(), value)
        # Synced: losing it would let a repeated click publish a second event.
        options = WriteOptions()
        options.sync = True
        self.db.write(batch, options)

    # -- scanning ------------------------------------------------------------------

    def _scan(self, prefix: bytes, after: str | None = None) -> Iterator[tuple[bytes, bytes]]:
        options = ReadOptions()
        options.set_iterate_upper_bound(_prefix_end(prefix))
        start = prefix if after is None else prefix + after.encode() + b"\x00"
        yield from self.db.items(from_key=start, read_opt=options)


class ReadModelBatch:
    """One atomic write: records, transitions and the positions they bring the model to."""

    def __init__(self, model: ReadModel) -> None:
        self.model = model
        self.batch = WriteBatch(raw_mode=True)
        self._records: dict[str, WorkflowRecord | None] = {}
        self.size = 0
        self.moved: Counter[str] = Counter()
        """Workflows this batch adds to (or takes from) each state."""
        self.moved_versions: Counter[VersionState] = Counter()
        """The same, by flow, version and state."""
        self.touched: set[str] = set()
        """The workflows whose record or history this batch changes."""

    def _current(self, workflow_id: str) -> WorkflowRecord | None:
        if workflow_id in self._records:
            return self._records[workflow_id]
        return self.model.record(workflow_id)

    def put_record(self, workflow_id: str, value: bytes | None) -> None:
        """Apply one changelog record: the stored record, or None when it was deleted.

        Raises:
            StoredRecordError: the value is not a workflow record this release reads
                (or not JSON); nothing is written for it.
        """
        new = None if value is None else WorkflowRecord.from_json(value)
        old = self._current(workflow_id)
        if old is not None:
            self.moved[old.state.value] -= 1
            self.moved_versions[(old.flow, old.flow_version, old.state.value)] -= 1
        if new is not None:
            self.moved[new.state.value] += 1
            self.moved_versions[(new.flow, new.flow_version, new.state.value)] += 1
        listed = workflow_index.entries(new) if new is not None else {}
        for stale in workflow_index.entries(old) if old is not None else {}:
            if stale not in listed:
                self.batch.delete(stale)
        for index_key, facets in listed.items():
            self.batch.put(index_key, facets)
        key = workflow_id.encode()
        if old is not None and (new is None or new.state is not old.state):
            self.batch.delete(_state_key(old.state.value, workflow_id))
        if old is not None:
            for name, old_value in old.keys.items():
                if new is None or new.keys.get(name) != old_value:
                    self.batch.delete(_key_prefix(name, old_value) + key)
        if new is None:
            self.batch.delete(_RECORD + key)
            self.batch.delete(_GATE + key)
            prefix = _history_prefix(workflow_id)
            self.batch.delete_range(prefix, _prefix_end(prefix))
        else:
            self.batch.put(_RECORD + key, value)
            self.batch.put(_state_key(new.state.value, workflow_id), b"")
            for name, key_value in new.keys.items():
                self.batch.put(_key_prefix(name, key_value) + key, b"")
            if _awaits_person(new):
                self.batch.put(_GATE + key, b"")
            else:
                self.batch.delete(_GATE + key)
        self._records[workflow_id] = new
        self.touched.add(workflow_id)
        self.size += 1

    def add_transition(
        self, workflow_id: str, entry: TransitionEntry, *, partition: int, offset: int
    ) -> None:
        """Append a transition; keyed by its log position, so reading it twice is harmless."""
        key = _history_prefix(workflow_id) + b"%05d%020d" % (partition, offset)
        self.batch.put(key, entry.model_dump_json().encode())
        self.touched.add(workflow_id)
        self.size += 1

    def advance(self, topic: str, partition: int, next_offset: int) -> None:
        self.batch.put(_position_key(topic, partition), str(next_offset).encode())

    def commit(self) -> None:
        self.model._write(self.batch, self.moved, self.moved_versions)
        self.model.changes.publish(self.touched)
        self.touched = set()
        self.batch = WriteBatch(raw_mode=True)
        self._records.clear()
        self.moved = Counter()
        self.moved_versions = Counter()
        self.size = 0
