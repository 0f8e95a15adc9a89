"""An agent instance's local state in RocksDB (rocksdict).

Three kinds of records, each with its own consistency rule:

- The **projection** of each workflow (its accumulated context) and the offset at
  which each event id was first seen. It is a pure function of the input partitions'
  prefix, so it is rebuilt by replaying the log, and updates are idempotent (keyed by
  event id). Knowing the *offset* of the first sighting is what separates a true
  duplicate (a later offset: discard) from the replay of the same record after an
  aborted transaction (the same offset: handle again).
- The **effect ledger**: results of side effects outside Kafka, written the moment the
  dependency confirms them, before the transaction commits, because the effect has
  happened whatever becomes of the transaction. An ``EffectRecorded`` event in the log
  carries the same fact to any other instance.
- **Parked workflows**: events waiting in the retry topic, keyed by workflow, so later
  events of the same workflow queue behind them and a workflow's order holds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocksdict import Rdict, WriteOptions

from sagalog.rocksdb_options import bounded_options

_PROJECTION = "p:"
_SEEN = "s:"
_LEDGER = "l:"
_PARKED = "r:"
_CHECKPOINT = "o:"


@dataclass
class WorkflowContext:
    """What a handler knows about its workflow without asking another service.

    Payloads are kept as the record bytes (wire format) and decoded when a handler
    asks for them: most events are folded in and never read, and bytes store and load
    several times faster than decoded values.

    Attributes:
        workflow_id: the workflow.
        latest: the latest record value of each event type seen, by event type.
        history: (event id, event type, producing source) in log order.
        decoder: turns a record value into its payload (set by the runtime).
    """

    workflow_id: str
    latest: dict[str, bytes] = field(default_factory=dict)
    history: list[tuple[str, str, str]] = field(default_factory=list)
    decoder: Callable[[bytes], dict[str, Any]] | None = field(default=None, repr=False)

    def get(self, event_type: str) -> dict[str, Any] | None:
        """The latest payload of ``event_type`` in this workflow, if any."""
        raw = self.latest.get(event_type)
        if raw is None:
            return None
        if self.decoder is None:
            raise RuntimeError("WorkflowContext has no decoder; the runtime sets one")
        return self.decoder(raw)

    def seen(self, event_id: str) -> bool:
        return any(entry[0] == event_id for entry in self.history)

    def snapshot(self) -> WorkflowContext:
        """A copy frozen at this point of the log.

        The store keeps one live context per workflow and folds a whole polled batch
        into it before handlers run; a handler must see the workflow as it was when
        its own event arrived, not events that come after it, or its decision would
        depend on where batch boundaries fell.
        """
        return WorkflowContext(
            self.workflow_id,
            latest=dict(self.latest),
            history=list(self.history),
            decoder=self.decoder,
        )

    def to_stored(self) -> tuple[dict[str, bytes], list[tuple[str, str, str]]]:
        # Plain containers pickle several times faster than a dataclass.
        return (self.latest, self.history)


class StateStore:
    """The RocksDB store of one agent instance."""

    def __init__(self, path: Path, *, cache_size: int = 10_000) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.db = Rdict(str(path), bounded_options(raw_mode=False))
        # The projection can be rebuilt from the log, so its writes are not synced: the
        # WAL reaches the OS page cache, which survives a killed process (the common
        # crash); a machine crash may lose the newest writes together with the
        # checkpoint written after them, and hydration folds them in again. Skipping
        # the WAL entirely was measured: every SIGKILL then meant re-folding the whole
        # partition. The effect ledger is synced (``record_effect``).
        self._rebuildable = WriteOptions()
        self._rebuildable.sync = False
        self._contexts: dict[str, WorkflowContext] = {}
        self._cache_size = cache_size
        self._parked_workflows = {key[len(_PARKED) :] for key in self.keys(_PARKED)}

    def close(self) -> None:
        self.db.close()

    # -- projection ---------------------------------------------------------------

    def context(self, workflow_id: str) -> WorkflowContext:
        cached = self._contexts.get(workflow_id)
        if cached is not None:
            return cached
        stored = self.db.get(_PROJECTION + workflow_id)
        if stored is None:
            return WorkflowContext(workflow_id)
        latest, history = stored
        return WorkflowContext(workflow_id, latest=latest, history=history)

    def _remember(self, context: WorkflowContext) -> None:
        if len(self._contexts) >= self._cache_size:
            self._contexts.pop(next(iter(self._contexts)))  # oldest first (insertion order)
        self._contexts[context.workflow_id] = context

    def first_seen(self, event_id: str) -> tuple[str, int, int] | None:
        """(topic, partition, offset) where ``event_id`` was first seen, if it was."""
        value = self.db.get(_SEEN + event_id)
        return (str(value[0]), int(value[1]), int(value[2])) if value is not None else None

    def project(
        self,
        *,
        workflow_id: str,
        event_id: str,
        event_type: str,
        source: str,
        payload: bytes | None,
        position: tuple[str, int, int],
        first_seen: tuple[str, int, int] | None = None,
    ) -> WorkflowContext:
        """Fold one event into its workflow's context (idempotent by event id) and
        return the context.

        Writes go straight to RocksDB, not into a batch: each is idempotent, and the
        checkpoint is written after them, so a crash in between only replays events
        the projection already holds.
        """
        if first_seen is None and self.first_seen(event_id) is None:
            self.db.put(_SEEN + event_id, list(position), self._rebuildable)
        context = self.context(workflow_id)
        if not context.seen(event_id):
            context.history.append((event_id, event_type, source))
            if payload is not None:
                context.latest[event_type] = payload
            self.db.put(_PROJECTION + workflow_id, context.to_stored(), self._rebuildable)
        self._remember(context)
        return context

    def checkpoint(self, topic: str, partition: int) -> int:
        """The next offset of ``topic``/``partition`` the projection has not folded in."""
        value = self.db.get(f"{_CHECKPOINT}{topic}:{partition}")
        return int(value) if value is not None else 0

    def set_checkpoint(self, topic: str, partition: int, next_offset: int) -> None:
        self.db.put(f"{_CHECKPOINT}{topic}:{partition}", next_offset, self._rebuildable)

    # -- effect ledger ---------------------------------------------------------------

    def effect_result(self, key: str) -> Any | None:
        entry = self.db.get(_LEDGER + key)
        return entry

    def record_effect(self, key: str, result: Any, *, delivery: str = "") -> None:
        """Record a confirmed effect at once (not batched: the effect has happened),
        with the record whose handling made it (see ``HandlerContext.effect``)."""
        self.db.put(
            _LEDGER + key, {"result": result, **({"delivery": delivery} if delivery else {})}
        )
        self.db.flush_wal(True)

    # -- parked workflows ----------------------------------------------------------------

    def parked(self, workflow_id: str) -> dict[str, int]:
        """Event ids of ``workflow_id`` waiting in the retry topic -> their input offset."""
        if workflow_id not in self._parked_workflows:
            return {}
        value = self.db.get(_PARKED + workflow_id)
        return dict(value) if value else {}

    def park(self, workflow_id: str, event_id: str, offset: int) -> None:
        parked = self.parked(workflow_id)
        parked[event_id] = offset
        self._parked_workflows.add(workflow_id)
        self.db.put(_PARKED + workflow_id, parked)

    def unpark(self, workflow_id: str, event_id: str) -> None:
        parked = self.parked(workflow_id)
        if parked.pop(event_id, None) is not None:
            if parked:
                self.db.put(_PARKED + workflow_id, parked)
            else:
                self._parked_workflows.discard(workflow_id)
                self.db.delete(_PARKED + workflow_id)

    # -- plumbing ------------------------------------------------------------------------

    def keys(self, prefix: str) -> Iterator[str]:
        for key in self.db.keys(from_key=prefix):
            if not str(key).startswith(prefix):
                return
            yield str(key)
