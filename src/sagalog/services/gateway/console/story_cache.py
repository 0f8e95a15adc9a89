"""Stories already read from the log, so a workflow's page does not read them again.

A record in the log never changes, and a story is a pure function of the records at
the positions its seal names (``audit.collect``): a seal seen before has the same
story, and a seal that grew (a running workflow moved on) needs only the records it
did not have. So the cache holds, per workflow, the seal it last read and what was
read for it:

- the same seal: the story, read nothing;
- another seal of the same workflow: its records by position, for ``collect`` to
  fetch only the rest;
- a story read only in part (a sealed event or a transition not found) is not kept:
  what was missing may be readable next time, and must then be shown.

It is bounded by records held, not by workflows, the oldest used going first: a
500-record story weighs as much as a hundred short ones. Verification never reads
from it (``sagalog audit --verify`` reads the log), but what it read is kept.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping

from sagalog.audit.collect import Collected
from sagalog.audit.lookup import WorkflowSeal
from sagalog.audit.reading import LoggedEvent, Position

CACHED_RECORDS = 20_000
"""Records the gateway keeps for stories (about 40 of the largest, 500-record ones)."""


def complete(seal: WorkflowSeal, collected: Collected) -> bool:
    """Whether every record the seal names was found: only a whole story is kept."""
    if collected.trail.missing:
        return False
    return seal.transitions is not None and len(collected.transitions) == len(seal.transitions)


def positions_of(collected: Collected) -> dict[Position, LoggedEvent]:
    """The records read for a story, by where they lie."""
    return {
        (record.topic, record.partition, record.offset): record
        for record in (*collected.events, *collected.transitions)
    }


class StoryCache:
    """The stories of the workflows looked at most recently; shared by the threads that
    serve pages, so every change holds the lock."""

    def __init__(self, *, max_records: int = CACHED_RECORDS) -> None:
        self.max_records = max_records
        self._stories: OrderedDict[str, tuple[WorkflowSeal, Collected]] = OrderedDict()
        self._records = 0
        self._lock = threading.Lock()

    @property
    def records(self) -> int:
        """How many records the cache holds."""
        return self._records

    def story(self, seal: WorkflowSeal) -> Collected | None:
        """The story read for exactly this seal, if it is held."""
        with self._lock:
            held = self._stories.get(seal.workflow_id)
            if held is None or held[0] != seal:
                return None
            self._stories.move_to_end(seal.workflow_id)
            return held[1]

    def known(self, workflow_id: str) -> Mapping[Position, LoggedEvent]:
        """The records held for the workflow (from an earlier seal), by position."""
        with self._lock:
            held = self._stories.get(workflow_id)
        return {} if held is None else positions_of(held[1])

    def keep(self, seal: WorkflowSeal, collected: Collected) -> None:
        """Hold the story read for ``seal``, if it is whole and fits."""
        size = len(collected.events) + len(collected.transitions)
        with self._lock:
            previous = self._stories.pop(seal.workflow_id, None)
            if previous is not None:
                self._records -= _size(previous[1])
            if not complete(seal, collected) or size > self.max_records:
                return
            self._stories[seal.workflow_id] = (seal, collected)
            self._records += size
            while self._records > self.max_records:
                _, (_, dropped) = self._stories.popitem(last=False)
                self._records -= _size(dropped)


def _size(collected: Collected) -> int:
    return len(collected.events) + len(collected.transitions)
