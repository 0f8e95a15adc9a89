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
  carries the same fact to any other instance. Before each call, its **intent**
  (synced too), so a crash during the call leaves a trace to reconcile
  (``sagalog.agents.intents``); the result replaces it in one atomic write.
- **Budget claims** (``sagalog.budgets.book``): each model call's reservation, kept
  with its input partition, synced with the call's intent and settled with its
  result; an instance's ledgers are rebuilt from the claims of the partitions it
  holds. The log carries them too (``EffectRecorded.spends``), folded in here when a
  partition's projection is rebuilt, and so does the agent's claims topic, written
  before each call and read when a partition is assigned (``agents.claims``); the
  claims topic's read position is kept as a checkpoint like an input's.
- **Parked workflows**: events waiting in the retry topic, keyed by workflow, so later
  events of the same workflow queue behind them and a workflow's order holds.

Projection writes and checkpoints are buffered in memory and written by ``flush`` in
one atomic batch (the worker flushes once per polled batch): one WAL append instead
of two per event, and a workflow that gets several events in a batch is stored once.
The checkpoint rides in the same batch as the events it covers, so a crash can never
leave a checkpoint ahead of the projection.

Every write waits out a full disk (``sagalog.disk_space``): the thread that writes
blocks, ``health`` names the directory, the database is reopened once there is room,
and the write is made again (each is a put or delete of the same keys, idempotent).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rocksdict import Rdict, WriteBatch, WriteOptions

from sagalog.agents.intents import EffectIntent
from sagalog.agents.workflow_context import WorkflowContext
from sagalog.budgets.book import Spend
from sagalog.budgets.claims import merged
from sagalog.disk_space import full_path, wait_for_space
from sagalog.health import HealthBook
from sagalog.position import RecordPosition
from sagalog.rocksdb_options import bounded_options

_PROJECTION = "p:"
_SEEN = "s:"
_LEDGER = "l:"
_INTENT = "i:"
_PARKED = "r:"
_CHECKPOINT = "o:"
_SPEND = "b:"
_FOLDED = "m:folded"  # the event types the projection keeps, sorted; absent or "*": all
_REBUILT_PREFIXES = (_PROJECTION, _SEEN, _CHECKPOINT)


class StateStore:
    """The RocksDB store of one agent instance."""

    def __init__(
        self,
        path: Path,
        *,
        cache_size: int = 10_000,
        folded_types: frozenset[str] | None = None,
    ) -> None:
        """Args:
        folded_types: the event types to fold into the projection (see
            ``BoundAgent.folded_types``); None: all. A store whose projection lacks one
            of them (it kept fewer types before) drops its projection and
            checkpoints, so hydration rebuilds them from the log.
        """
        path.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.health: HealthBook | None = None
        """Where a full disk is reported (the worker's book); None: not reported."""
        self.db = Rdict(str(path), bounded_options(raw_mode=False))
        # The projection can be rebuilt from the log, so its writes are not synced: the
        # WAL reaches the OS page cache, which survives a killed process (the common
        # crash); a machine crash may lose the newest writes together with the
        # checkpoint written after them, and hydration folds them in again. The WAL is
        # not skipped: without it a SIGKILL loses what the memtables held, checkpoints
        # included, and hydration re-folds the whole partition. The effect ledger is
        # synced (``record_effect``).
        self._rebuildable = WriteOptions()
        self._rebuildable.sync = False
        # Least recently used first. An OrderedDict, not a dict: popping a dict's first
        # key over and over makes ``next(iter(d))`` skip every deleted slot before it.
        self._contexts: OrderedDict[str, WorkflowContext] = OrderedDict()
        self._cache_size = cache_size
        # Written by ``flush``: contexts changed, first sightings and checkpoints since.
        self._dirty: dict[str, WorkflowContext] = {}
        self._pending_seen: dict[str, RecordPosition] = {}
        self._pending_checkpoints: dict[tuple[str, int], int] = {}
        self.folded_types = folded_types
        self._keep_folded_types(folded_types)
        self._parked_workflows = {key[len(_PARKED) :] for key in self.keys(_PARKED)}

    def close(self) -> None:
        self.flush()
        self.db.close()

    def flush(self) -> None:
        """Write the buffered projection changes and checkpoints in one atomic batch."""
        if not (self._dirty or self._pending_seen or self._pending_checkpoints):
            return

        def write() -> None:  # a batch is consumed by a write, even a refused one
            batch = WriteBatch(raw_mode=False)
            for event_id, position in self._pending_seen.items():
                batch.put(_SEEN + event_id, list(position))
            for workflow_id, context in self._dirty.items():
                batch.put(_PROJECTION + workflow_id, context.to_stored())
            for (topic, partition), next_offset in self._pending_checkpoints.items():
                batch.put(f"{_CHECKPOINT}{topic}:{partition}", next_offset)
            self.db.write(batch, self._rebuildable)

        self._durably(write)
        self._dirty.clear()
        self._pending_seen.clear()
        self._pending_checkpoints.clear()

    def _keep_folded_types(self, wanted: frozenset[str] | None) -> None:
        stored = self.db.get(_FOLDED)
        kept = None if stored is None or stored == "*" else frozenset(stored)
        if kept is not None and (wanted is None or not wanted <= kept):
            # Events of the newly wanted types were skipped: only the log has them.
            for prefix in _REBUILT_PREFIXES:
                self.db.delete_range(prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1))
        if kept != wanted:
            self.db.put(_FOLDED, "*" if wanted is None else sorted(wanted))

    def keeps(self, event_type: str) -> bool:
        """Whether events of ``event_type`` are folded into the projection."""
        return self.folded_types is None or event_type in self.folded_types

    # -- projection ---------------------------------------------------------------

    def context(self, workflow_id: str) -> WorkflowContext:
        cached = self._contexts.get(workflow_id) or self._dirty.get(workflow_id)
        if cached is not None:
            return cached
        stored = self.db.get(_PROJECTION + workflow_id)
        if stored is None:
            return WorkflowContext(workflow_id, kept=self.folded_types)
        latest, history = stored
        return WorkflowContext(workflow_id, records=latest, history=history, kept=self.folded_types)

    def _remember(self, context: WorkflowContext) -> None:
        contexts = self._contexts
        if context.workflow_id in contexts:
            contexts.move_to_end(context.workflow_id)
            return
        if len(contexts) >= self._cache_size:
            contexts.popitem(last=False)
        contexts[context.workflow_id] = context

    def first_seen(self, event_id: str) -> RecordPosition | None:
        """Where ``event_id`` was first seen, if it was."""
        pending = self._pending_seen.get(event_id)
        if pending is not None:
            return pending
        value = self.db.get(_SEEN + event_id)
        return RecordPosition(str(value[0]), int(value[1]), int(value[2])) if value else None

    def fold(
        self,
        *,
        workflow_id: str,
        event_id: str,
        event_type: str,
        source: str,
        payload: bytes | None,
        position: RecordPosition,
    ) -> tuple[WorkflowContext, RecordPosition]:
        """Fold one event into its workflow's context (idempotent by event id).

        Returns:
            The context, and where the event was first seen: ``position`` itself for
            an event new to its workflow; an earlier position marks a duplicate, the
            same one a record replayed after an aborted transaction.

        An event id belongs to one workflow (the tracker deduplicates per workflow
        too), so an id absent from its workflow's history is new without asking
        RocksDB: the context is usually cached, and the first sighting is written in
        the same batch as the history that names it. Only an id the history knows
        costs a lookup of its first position. An event of a type the store does not
        keep is left out (and reported new).
        """
        context = self.context(workflow_id)
        if not self.keeps(event_type):
            return context, position
        if context.seen(event_id):
            self._remember(context)
            return context, self.first_seen(event_id) or position
        self._pending_seen[event_id] = position
        context.history.append((event_id, event_type, source))
        if payload is not None:
            context.keep(event_id, event_type, payload)
        self._dirty[workflow_id] = context
        self._remember(context)
        return context, position

    def project(
        self,
        *,
        workflow_id: str,
        event_id: str,
        event_type: str,
        source: str,
        payload: bytes | None,
        position: RecordPosition,
    ) -> WorkflowContext:
        """Fold one event into its workflow's context (see ``fold``) and return the context."""
        context, _ = self.fold(
            workflow_id=workflow_id,
            event_id=event_id,
            event_type=event_type,
            source=source,
            payload=payload,
            position=position,
        )
        return context

    def checkpoint(self, topic: str, partition: int) -> int:
        """The next offset of ``topic``/``partition`` the projection has not folded in."""
        pending = self._pending_checkpoints.get((topic, partition))
        if pending is not None:
            return pending
        value = self.db.get(f"{_CHECKPOINT}{topic}:{partition}")
        return int(value) if value is not None else 0

    def set_checkpoint(self, topic: str, partition: int, next_offset: int) -> None:
        """Record the checkpoint; it is written by the next ``flush``, with the events
        folded before it."""
        self._pending_checkpoints[(topic, partition)] = next_offset

    # -- effect ledger ---------------------------------------------------------------

    def effect_result(self, key: str) -> dict[str, Any] | None:
        """The ledger entry of ``key``: ``result``, and ``delivery``, ``intent`` and
        ``reconciliation`` when known (see ``record_effect``)."""
        entry: dict[str, Any] | None = self.db.get(_LEDGER + key)
        return entry

    def effect_intent(self, key: str) -> EffectIntent | None:
        """The intent of a call of ``key`` whose result was never recorded."""
        value = self.db.get(_INTENT + key)
        return None if value is None else EffectIntent.from_dict(value)

    def record_intent(self, key: str, intent: EffectIntent) -> None:
        """Write down a call before it is made, synced: a crash during the call must
        leave it behind (see ``sagalog.agents.intents``)."""
        self._durably(lambda: self.db.put(_INTENT + key, intent.as_dict()), sync=True)

    def record_effect(
        self,
        key: str,
        result: Any,
        *,
        delivery: str = "",
        intent: EffectIntent | None = None,
        reconciliation: str | None = None,
        spends: list[dict[str, Any]] | None = None,
    ) -> None:
        """Record a confirmed effect at once (not batched: the effect has happened),
        with the record whose handling made it (see ``HandlerContext.effect``), and
        retire its intent in the same atomic write."""
        entry: dict[str, Any] = {"result": result}
        if delivery:
            entry["delivery"] = delivery
        if intent is not None:
            entry["intent"] = intent.as_dict()
        if reconciliation is not None:
            entry["reconciliation"] = reconciliation
        if spends:
            entry["spends"] = spends

        def write() -> None:  # a batch is consumed by a write, even a refused one
            batch = WriteBatch(raw_mode=False)
            batch.put(_LEDGER + key, entry)
            batch.delete(_INTENT + key)
            self.db.write(batch)

        self._durably(write, sync=True)

    # -- budget claims ---------------------------------------------------------------

    def record_spend(self, topic: str, partition: int, spend: Spend, *, sync: bool = False) -> None:
        """Keep a model call's claim with its input partition; ``sync`` for one that
        must outlive a crash during the call and is not synced with the call's intent."""
        key = f"{_SPEND}{topic}:{partition}:{spend.reservation}"
        self._durably(lambda: self.db.put(key, spend.as_dict()), sync=sync)

    def keep_spend(self, topic: str, partition: int, spend: Spend) -> None:
        """Keep a claim read from elsewhere (the claims topic, the log), merged with
        the copy held, if any: the settled one of the two stays (``claims.merged``)."""
        key = f"{_SPEND}{topic}:{partition}:{spend.reservation}"
        value = self.db.get(key)
        held = None if value is None else Spend.from_dict(value)
        kept = merged(held, spend)
        if kept is not held:
            self._durably(lambda: self.db.put(key, kept.as_dict()))

    def drop_spend(self, topic: str, partition: int, spend: Spend) -> None:
        key = f"{_SPEND}{topic}:{partition}:{spend.reservation}"
        self._durably(lambda: self.db.delete(key))

    def spends(self, held: frozenset[int] | None = None) -> Iterator[tuple[int, Spend]]:
        """The claims kept for the input partitions numbered in ``held`` (None: every
        partition), each with its partition."""
        for key in self.keys(_SPEND):
            _, partition, _ = key[len(_SPEND) :].split(":", 2)
            if held is None or int(partition) in held:
                yield int(partition), Spend.from_dict(self._entry(key))

    def spends_of(self, topic: str, partition: int, idempotency_key: str) -> list[Spend]:
        """The claims of one effect: its first call's, and its repeats' (``<key>#<n>``)."""
        prefix = f"{_SPEND}{topic}:{partition}:{idempotency_key}"
        return [Spend.from_dict(self._entry(key)) for key in self.keys(prefix)]

    def forget_spends_before(self, at_ms: int) -> int:
        """Drop the claims no budget window holds any more; how many were dropped."""
        old = [k for k in self.keys(_SPEND) if int(self._entry(k)["at_ms"]) < at_ms]
        for key in old:
            self._durably(lambda key=key: self.db.delete(key))  # type: ignore[misc]
        return len(old)

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
        self._durably(lambda: self.db.put(_PARKED + workflow_id, parked))

    def unpark(self, workflow_id: str, event_id: str) -> None:
        parked = self.parked(workflow_id)
        if parked.pop(event_id, None) is not None:
            if parked:
                self._durably(lambda: self.db.put(_PARKED + workflow_id, parked))
            else:
                self._parked_workflows.discard(workflow_id)
                self._durably(lambda: self.db.delete(_PARKED + workflow_id))

    # -- plumbing ------------------------------------------------------------------------

    def _durably(self, write: Callable[[], object], *, sync: bool = False) -> None:
        """``write`` (and sync the WAL if ``sync``), waiting out a full disk."""

        def written() -> None:
            write()
            if sync:
                self.db.flush_wal(True)

        wait_for_space(written, directory=self.path, reopen=self._reopen, health=self.health)

    def _reopen(self) -> None:
        """Close and open the database: RocksDB refuses every write after one failed
        for want of space, until it is opened again."""
        try:
            self.db.close()
        except Exception as exc:  # a close that flushes can fail the same way
            if full_path(exc) is None:
                raise
        self.db = Rdict(str(self.path), bounded_options(raw_mode=False))

    def _entry(self, key: str) -> dict[str, Any]:
        value = self.db[key]
        assert isinstance(value, dict), f"{key} holds {type(value).__name__}, not a record"
        return value

    def keys(self, prefix: str) -> Iterator[str]:
        for key in self.db.keys(from_key=prefix):
            if not str(key).startswith(prefix):
                return
            yield str(key)
