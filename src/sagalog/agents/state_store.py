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

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocksdict import Options, Rdict

_PROJECTION = "p:"
_SEEN = "s:"
_LEDGER = "l:"
_PARKED = "r:"
_CHECKPOINT = "o:"


@dataclass
class WorkflowContext:
    """What a handler knows about its workflow without asking another service.

    Attributes:
        workflow_id: the workflow.
        latest: the latest payload of each event type seen, by event type.
        history: (event id, event type, producing source) in log order.
    """

    workflow_id: str
    latest: dict[str, dict[str, Any]] = field(default_factory=dict)
    history: list[tuple[str, str, str]] = field(default_factory=list)

    def get(self, event_type: str) -> dict[str, Any] | None:
        """The latest payload of ``event_type`` in this workflow, if any."""
        return self.latest.get(event_type)

    def seen(self, event_id: str) -> bool:
        return any(entry[0] == event_id for entry in self.history)


class StateStore:
    """The RocksDB store of one agent instance."""

    def __init__(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        options = Options(raw_mode=False)
        options.create_if_missing(True)
        self.path = path
        self.db = Rdict(str(path), options)

    def close(self) -> None:
        self.db.close()

    # -- projection ---------------------------------------------------------------

    def context(self, workflow_id: str) -> WorkflowContext:
        stored = self.db.get(_PROJECTION + workflow_id)
        return stored if isinstance(stored, WorkflowContext) else WorkflowContext(workflow_id)

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
        payload: dict[str, Any] | None,
        position: tuple[str, int, int],
    ) -> None:
        """Fold one event into its workflow's context (idempotent by event id).

        Writes go straight to RocksDB, not into a batch: each is idempotent, and the
        checkpoint is written after them, so a crash in between only replays events
        the projection already holds.
        """
        if self.first_seen(event_id) is None:
            self.db.put(_SEEN + event_id, list(position))
        context = self.context(workflow_id)
        if not context.seen(event_id):
            context.history.append((event_id, event_type, source))
            if payload is not None:
                context.latest[event_type] = payload
            self.db.put(_PROJECTION + workflow_id, context)

    def checkpoint(self, topic: str, partition: int) -> int:
        """The next offset of ``topic``/``partition`` the projection has not folded in."""
        value = self.db.get(f"{_CHECKPOINT}{topic}:{partition}")
        return int(value) if value is not None else 0

    def set_checkpoint(self, topic: str, partition: int, next_offset: int) -> None:
        self.db.put(f"{_CHECKPOINT}{topic}:{partition}", next_offset)

    # -- effect ledger ---------------------------------------------------------------

    def effect_result(self, key: str) -> Any | None:
        entry = self.db.get(_LEDGER + key)
        return entry

    def record_effect(self, key: str, result: Any) -> None:
        """Record a confirmed effect at once (not batched: the effect has happened)."""
        self.db.put(_LEDGER + key, {"result": result})
        self.db.flush_wal(True)

    # -- parked workflows ----------------------------------------------------------------

    def parked(self, workflow_id: str) -> dict[str, int]:
        """Event ids of ``workflow_id`` waiting in the retry topic -> their input offset."""
        value = self.db.get(_PARKED + workflow_id)
        return dict(value) if value else {}

    def park(self, workflow_id: str, event_id: str, offset: int) -> None:
        parked = self.parked(workflow_id)
        parked[event_id] = offset
        self.db.put(_PARKED + workflow_id, parked)

    def unpark(self, workflow_id: str, event_id: str) -> None:
        parked = self.parked(workflow_id)
        if parked.pop(event_id, None) is not None:
            if parked:
                self.db.put(_PARKED + workflow_id, parked)
            else:
                self.db.delete(_PARKED + workflow_id)

    # -- plumbing ------------------------------------------------------------------------

    def keys(self, prefix: str) -> Iterator[str]:
        for key in self.db.keys(from_key=prefix):
            if not str(key).startswith(prefix):
                return
            yield str(key)
