"""The console's story cache: a seal seen before is answered from what was read for it,
a grown seal reuses its records, a partial read is never kept, and records bound it."""

from __future__ import annotations

import dataclasses

from sagalog.audit.collect import Collected
from sagalog.audit.lookup import WorkflowSeal
from sagalog.audit.reading import LoggedEvent
from sagalog.audit.trail import build_trail
from sagalog.services.gateway.console.story_cache import StoryCache, positions_of

from .audit_fixtures import decode, history


def _read(
    seal: WorkflowSeal, events: list[LoggedEvent], transitions: list[LoggedEvent]
) -> Collected:
    """What ``collect`` returns for ``seal`` when the log holds ``events`` and ``transitions``."""
    found = {(e.topic, e.partition, e.offset) for e in events}
    missing = [s for s in seal.sealed if (s.topic, s.partition, s.offset) not in found]
    trail = build_trail(seal, events, transitions, decode=decode, missing=missing)
    return Collected(
        trail=trail, events=tuple(events), transitions=tuple(transitions), read=lambda _: None
    )


def _whole(seal_size: int | None = None) -> tuple[WorkflowSeal, Collected]:
    h = history()
    events = h.events[:seal_size] if seal_size is not None else h.events
    transitions = [t for t in h.transitions if t.offset < 10 + len(events)]
    seal = dataclasses.replace(
        h.seal,
        sealed=h.seal.sealed[: len(events)],
        transitions=tuple((t.partition, t.offset) for t in transitions),
    )
    return seal, _read(seal, events, transitions)


def test_the_same_seal_is_answered_from_the_cache_and_another_is_not() -> None:
    cache = StoryCache()
    seal, collected = _whole()
    assert cache.story(seal) is None
    cache.keep(seal, collected)
    assert cache.story(seal) is collected
    assert cache.records == len(collected.events) + len(collected.transitions)
    moved_on = dataclasses.replace(seal, state="compensated", terminal_reason="cancelled")
    assert cache.story(moved_on) is None


def test_a_grown_seal_gets_the_records_already_read_by_position() -> None:
    cache = StoryCache()
    earlier, collected = _whole(seal_size=3)
    cache.keep(earlier, collected)
    known = cache.known(earlier.workflow_id)
    assert known == positions_of(collected)
    assert len(known) == 3 + len(collected.transitions)
    assert cache.known("another-workflow") == {}


def test_a_story_read_only_in_part_is_not_kept() -> None:
    cache = StoryCache()
    seal, whole = _whole()
    cache.keep(seal, whole)
    lost_event = _read(seal, list(whole.events[1:]), list(whole.transitions))
    assert lost_event.trail.missing
    cache.keep(seal, lost_event)
    assert cache.story(seal) is None and cache.records == 0  # nor the older whole read
    lost_transition = _read(seal, list(whole.events), list(whole.transitions[1:]))
    cache.keep(seal, lost_transition)
    assert cache.story(seal) is None
    unplaced = dataclasses.replace(seal, transitions=None)  # the audit searched for them
    cache.keep(unplaced, _read(unplaced, list(whole.events), list(whole.transitions)))
    assert cache.story(unplaced) is None


def test_the_least_recently_used_stories_go_first_past_the_bound() -> None:
    seal, collected = _whole()
    size = len(collected.events) + len(collected.transitions)
    cache = StoryCache(max_records=2 * size)
    seals = [dataclasses.replace(seal, workflow_id=f"wf-{n}") for n in range(3)]
    cache.keep(seals[0], collected)
    cache.keep(seals[1], collected)
    assert cache.story(seals[0]) is collected  # used: wf-1 is now the oldest
    cache.keep(seals[2], collected)
    assert cache.records == 2 * size
    assert cache.story(seals[1]) is None
    assert cache.story(seals[0]) is collected and cache.story(seals[2]) is collected
    small = StoryCache(max_records=size - 1)
    small.keep(seal, collected)  # larger than the whole cache: not kept
    assert small.story(seal) is None and small.records == 0
