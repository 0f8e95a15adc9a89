"""A rebuild's own RocksDB: the rebuilt tables, the journal, and the offsets they reflect.

A rebuild never writes where the tracker keeps its state: it takes a directory of its
own (``--store``) and refuses one that holds anything else. In it, one RocksDB
(rocksdict) holds, under key prefixes,

- ``t|<table>|<partition>|<key>``: the tracker's four tables as the processor wrote
  them (``Tables``; ``sagalog.tracker.tables``);
- ``j|...``: the journal folded from the transitions topic (``journal``);
- ``o|<topic>|<partition>``: the offset to read next, per partition read;
- ``c|<partition>``: the replay clock of each workflow partition;
- ``l|<workflow>``: the live records last read from the tracker's changelog (the
  other side of the diff).

**State and offsets move together.** Writes are staged and written by ``commit`` in
one RocksDB write batch with the offsets they reach: killed at any instant, the
store holds the state of a whole number of chunks and the offsets after exactly
those, so a rerun continues where the data says, never re-applying or skipping one.
Reads see committed data only; the processor's ``Overlay`` answers for the chunk in
progress.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import rocksdict

from sagalog.replay.exceptions import StoreError
from sagalog.replay.journal import JournalFold, Recorded, RecordedFiring
from sagalog.tracker.tables import Table

MARKER = "SAGALOG_REBUILD.json"
"""The file that makes a directory a rebuild store (its settings, for a resumed run)."""

_END = b"\xff"


def _table_prefix(table: Table, partition: int) -> bytes:
    return b"t|%s|%05d|" % (table.value.encode(), partition)


def _offset_key(topic: str, partition: int) -> bytes:
    return b"o|%s|%d" % (topic.encode(), partition)


class RebuildStore:
    """The store of one rebuild; see the module docstring. Open with ``RebuildStore.open``."""

    def __init__(self, directory: Path, db: Any, meta: dict[str, Any]) -> None:
        self.directory = directory
        self.db = db
        self.meta = meta
        self._batch = rocksdict.WriteBatch(raw_mode=True)

    # -- opening -----------------------------------------------------------------

    @classmethod
    def open(cls, directory: Path, *, meta: Mapping[str, Any]) -> RebuildStore:
        """Open the store in ``directory``: a new one, or the one a previous run left.

        ``meta`` says what this rebuild reads (topics, flows, tracker settings); a
        store made for something else is refused rather than mixed into.

        Raises:
            StoreError: ``directory`` holds something that is not a rebuild store, a
                rebuild of something else, or a store another process has open.
        """
        marker = directory / MARKER
        if marker.exists():
            stored = json.loads(marker.read_text())
            differs = sorted(k for k in meta if stored.get(k) != meta[k])
            if differs:
                raise StoreError(
                    f"{directory} holds a rebuild of other inputs (differs in "
                    f"{', '.join(differs)}); give a new --store directory, or delete this "
                    "one to start over"
                )
        elif directory.exists() and any(directory.iterdir()):
            raise StoreError(
                f"{directory} is not empty and is not a rebuild store; a rebuild writes "
                "only into a fresh directory (never the tracker's data dir): give a new "
                "--store directory"
            )
        else:
            directory.mkdir(parents=True, exist_ok=True)
            marker.write_text(json.dumps(dict(meta), indent=2, sort_keys=True))
            stored = dict(meta)
        options = rocksdict.Options(raw_mode=True)
        options.create_if_missing(True)
        try:
            db = rocksdict.Rdict(str(directory / "db"), options=options)
        except Exception as exc:
            raise StoreError(
                f"cannot open the rebuild store in {directory}: {exc}; is another "
                "`sagalog replay rebuild` using it?"
            ) from None
        return cls(directory, db, stored)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> RebuildStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- Tables (sagalog.tracker.tables) -------------------------------------------

    def get(self, table: Table, partition: int, key: bytes) -> bytes | None:
        value = self.db.get(_table_prefix(table, partition) + key)
        return None if value is None else bytes(value)

    def put(self, table: Table, partition: int, key: bytes, value: bytes) -> None:
        self._batch.put(_table_prefix(table, partition) + key, value)

    def delete(self, table: Table, partition: int, key: bytes) -> None:
        self._batch.delete(_table_prefix(table, partition) + key)

    def scan(
        self, table: Table, partition: int, lower: bytes, upper: bytes, limit: int
    ) -> list[tuple[bytes, bytes]]:
        prefix = _table_prefix(table, partition)
        return [
            (key[len(prefix) :], value)
            for key, value in self._range(prefix + lower, prefix + upper, limit)
        ]

    async def sync(self) -> None:
        """Nothing to wait for: ``commit`` makes writes durable, with their offsets."""

    def records(self, partition: int) -> Iterator[tuple[str, bytes]]:
        """The rebuilt records of ``partition``, by workflow id."""
        prefix = _table_prefix(Table.RECORDS, partition)
        for key, value in self._range(prefix, prefix + _END, None):
            yield key[len(prefix) :].decode(), value

    # -- offsets, clock and meta ----------------------------------------------------

    def offsets(self) -> dict[tuple[str, int], int]:
        """The offsets to read next, per ``(topic, partition)`` read so far."""
        found = {}
        for key, value in self._range(b"o|", b"o|" + _END, None):
            topic, _, partition = key[2:].decode().rpartition("|")
            found[(topic, int(partition))] = int(value)
        return found

    def clock(self, partition: int) -> int:
        value = self.db.get(b"c|%05d" % partition)
        return int(value) if value is not None else 0

    def stage_clock(self, partition: int, now_ms: int) -> None:
        self._batch.put(b"c|%05d" % partition, b"%d" % now_ms)

    def state(self, name: str) -> str | None:
        """A named progress mark of the run (e.g. which phase finished)."""
        value = self.db.get(b"m|" + name.encode())
        return None if value is None else bytes(value).decode()

    def stage_state(self, name: str, value: str) -> None:
        self._batch.put(b"m|" + name.encode(), value.encode())

    def commit(self, offsets: Mapping[tuple[str, int], int]) -> None:
        """Write every staged change and ``offsets`` in one atomic write batch."""
        for (topic, partition), offset in offsets.items():
            self._batch.put(_offset_key(topic, partition), b"%d" % offset)
        self.db.write(self._batch)
        self._batch = rocksdict.WriteBatch(raw_mode=True)

    def discard(self) -> None:
        """Drop the staged changes (an interrupted chunk): the store keeps the last commit."""
        self._batch = rocksdict.WriteBatch(raw_mode=True)

    # -- the journal (sagalog.replay.journal) ------------------------------------------

    def stage_journal(self, folded: JournalFold) -> None:
        """Stage what a chunk of transitions adds; committed with the chunk's offsets."""
        batch = self._batch
        for cause, recorded in folded.causes.items():
            key = b"j|c|" + cause.encode()
            if self.db.get(key) is None:
                batch.put(key, b"%d|%d" % (recorded.seq, recorded.at_ms))
        for workflow, firings in folded.firings.items():
            key = b"j|f|" + workflow.encode()
            stored = self.db.get(key)
            lines = [bytes(stored)] if stored else []
            lines += [f"{f.seq}|{f.at_ms}|{f.timer_key}".encode() for f in firings]
            batch.put(key, b"\n".join(lines))
        for workflow, (seq, cause) in folded.last.items():
            batch.put(b"j|l|" + workflow.encode(), b"%d|%s" % (seq, cause.encode()))

    def last_of(self, workflow_id: str) -> tuple[int, str] | None:
        value = self.db.get(b"j|l|" + workflow_id.encode())
        if value is None:
            return None
        seq, _, cause = bytes(value).decode().partition("|")
        return int(seq), cause

    def recorded(self, cause_id: str) -> Recorded | None:
        value = self.db.get(b"j|c|" + cause_id.encode())
        if value is None:
            return None
        seq, _, at = bytes(value).partition(b"|")
        return Recorded(int(seq), int(at))

    def firings_of(self, workflow_id: str) -> list[RecordedFiring]:
        value = self.db.get(b"j|f|" + workflow_id.encode())
        return _firings(value) if value else []

    def all_firings(self) -> Iterator[RecordedFiring]:
        for _, value in self._range(b"j|f|", b"j|f|" + _END, None):
            yield from _firings(value)

    def is_fired(self, timer_key: str) -> bool:
        return self.db.get(b"j|x|" + timer_key.encode()) is not None

    def mark_fired(self, timer_key: str) -> None:
        self._batch.put(b"j|x|" + timer_key.encode(), b"")

    # -- the live side of the diff ------------------------------------------------------

    def clear_live(self) -> None:
        self.db.delete_range(b"l|", b"l|" + _END)

    def stage_live(self, workflow_id: str, value: bytes | None) -> None:
        key = b"l|" + workflow_id.encode()
        if value is None:
            self._batch.delete(key)
        else:
            self._batch.put(key, value)

    def live(self) -> Iterator[tuple[str, bytes]]:
        """The live records, by workflow id in byte order."""
        for key, value in self._range(b"l|", b"l|" + _END, None):
            yield key[2:].decode(), value

    # -- internals ------------------------------------------------------------------------

    def _range(
        self, lower: bytes, upper: bytes, limit: int | None
    ) -> Iterator[tuple[bytes, bytes]]:
        options = rocksdict.ReadOptions()
        options.set_iterate_upper_bound(upper)
        for count, (key, value) in enumerate(
            self.db.items(from_key=lower, read_opt=options), start=1
        ):
            yield bytes(key), bytes(value)
            if limit is not None and count >= limit:
                return


def _firings(value: bytes) -> list[RecordedFiring]:
    found = []
    for line in bytes(value).split(b"\n"):
        seq, at, key = line.decode().split("|", 2)
        found.append(RecordedFiring(key, int(at), int(seq)))
    return found
