"""Who hears that the read model changed: an in-process broadcast for the console's live pages.

The follower's thread writes a batch to RocksDB, then publishes the ids of the workflows
that batch touched, once. Each live page holds one ``Subscription`` for as long as its
server-sent-events connection lasts; a subscription gathers what it is offered until the
connection reads it, so a burst of batches becomes one message, and a connection that
falls behind gets "everything changed" rather than an ever longer list.

A page is rendered, then opens its connection: what lands in between would be missed, so
the page names the broadcast's ``sequence`` it was rendered at (read before the read
model), and a subscription from an older one starts with a change to fetch.

What a batch costs: one ``call_soon_threadsafe`` per event loop that has subscribers
(uvicorn runs one), then a set lookup per touched workflow and a set union per
interested subscriber, on that loop. No connection reads RocksDB until it is told
something it shows has changed; none polls.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from types import TracebackType

MAX_IDS = 200
"""Beyond this many pending workflow ids a subscriber is told "everything changed"."""


@dataclass(frozen=True)
class Change:
    """What changed since a subscriber last read.

    Attributes:
        workflow_ids: the workflows whose record or history changed.
        everything: more changed than ``MAX_IDS`` workflows: refresh all you show.
    """

    workflow_ids: frozenset[str]
    everything: bool = False

    def touches(self, workflow_id: str) -> bool:
        return self.everything or workflow_id in self.workflow_ids


class Subscription:
    """One listener, on one event loop: what it was offered, until it reads it.

    ``workflow_id`` narrows it to one workflow (a workflow's page); None hears every
    workflow (the overview, the gates inbox). Use as a context manager, or ``close``.
    """

    def __init__(self, broadcast: ChangeBroadcast, *, workflow_id: str | None) -> None:
        self.workflow_id = workflow_id
        self._broadcast = broadcast
        self._loop = asyncio.get_running_loop()
        self._pending: set[str] = set()
        self._everything = False
        self._ready = asyncio.Event()

    def _offer(self, workflow_ids: frozenset[str]) -> None:
        """On the subscriber's loop; ``workflow_ids`` already concern it."""
        if not workflow_ids:  # "something, maybe everything, changed"
            self._pending.clear()
            self._everything = True
        if not self._everything:
            self._pending |= workflow_ids
            if len(self._pending) > MAX_IDS:
                self._pending.clear()
                self._everything = True
        self._ready.set()

    async def next(self, *, timeout_s: float) -> Change | None:
        """The changes gathered since the last call, waiting up to ``timeout_s`` for one;
        None when nothing changed in that time."""
        try:
            await asyncio.wait_for(self._ready.wait(), timeout_s)
        except TimeoutError:
            return None
        change = Change(frozenset(self._pending), everything=self._everything)
        self._pending = set()
        self._everything = False
        self._ready.clear()
        return change

    def close(self) -> None:
        self._broadcast._remove(self)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class _LoopListeners:
    """The subscribers of one event loop; touched on that loop's thread only."""

    def __init__(self) -> None:
        self.everyone: set[Subscription] = set()
        self.by_workflow: dict[str, set[Subscription]] = {}

    def add(self, subscription: Subscription) -> None:
        if subscription.workflow_id is None:
            self.everyone.add(subscription)
        else:
            self.by_workflow.setdefault(subscription.workflow_id, set()).add(subscription)

    def remove(self, subscription: Subscription) -> bool:
        """Forget ``subscription``; True when no subscriber is left."""
        if subscription.workflow_id is None:
            self.everyone.discard(subscription)
        else:
            watching = self.by_workflow.get(subscription.workflow_id, set())
            watching.discard(subscription)
            if not watching:
                self.by_workflow.pop(subscription.workflow_id, None)
        return not self.everyone and not self.by_workflow

    def deliver(self, workflow_ids: frozenset[str]) -> None:
        for subscription in list(self.everyone):
            subscription._offer(workflow_ids)
        if len(workflow_ids) < len(self.by_workflow):
            pairs = [(w, self.by_workflow.get(w, ())) for w in workflow_ids]
        else:
            pairs = [(w, s) for w, s in self.by_workflow.items() if w in workflow_ids]
        for workflow_id, watching in pairs:
            for subscription in list(watching):
                subscription._offer(frozenset({workflow_id}))


class ChangeBroadcast:
    """Read-model changes, from the thread that writes them to every subscriber."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # guards the loop table, not the listeners
        self._loops: dict[asyncio.AbstractEventLoop, _LoopListeners] = {}
        self._sequence = 0

    @property
    def sequence(self) -> int:
        """How many changes were published so far: a page rendered now names it."""
        return self._sequence

    def subscribe(
        self, *, workflow_id: str | None = None, since: int | None = None
    ) -> Subscription:
        """A subscription on the running event loop (call it from a coroutine).

        ``since``: the ``sequence`` the subscriber last saw (its page was rendered at); when
        changes were published after it, the subscription starts with one pending: the
        workflow, or everything for a subscriber to all.
        """
        subscription = Subscription(self, workflow_id=workflow_id)
        with self._lock:
            listeners = self._loops.setdefault(subscription._loop, _LoopListeners())
            missed = since is not None and since < self._sequence
        listeners.add(subscription)
        if missed:
            subscription._offer(frozenset({workflow_id} if workflow_id is not None else ()))
        return subscription

    def _remove(self, subscription: Subscription) -> None:
        loop = subscription._loop
        with self._lock:
            listeners = self._loops.get(loop)
            if listeners is not None and listeners.remove(subscription):
                del self._loops[loop]

    @property
    def subscribers(self) -> int:
        """How many subscriptions are open, on every loop (for tests and metrics)."""
        with self._lock:
            tables = list(self._loops.values())
        return sum(len(t.everyone) + sum(len(s) for s in t.by_workflow.values()) for t in tables)

    def publish(self, workflow_ids: Iterable[str]) -> None:
        """Tell every subscriber that ``workflow_ids`` changed; from any thread, after
        the change is written (a subscriber that reads at once sees it)."""
        changed = frozenset(workflow_ids)
        if not changed:
            return
        with self._lock:
            self._sequence += 1
            loops = list(self._loops.items())
        for loop, listeners in loops:
            try:
                loop.call_soon_threadsafe(listeners.deliver, changed)
            except RuntimeError:  # the loop closed under a subscriber that never left
                with self._lock:
                    self._loops.pop(loop, None)
