"""Which event types a topic carries: what its flows name, and what the platform writes
on every workflow topic, so that nobody lists them by hand.

A topic's ``schemas:`` list decides the registry subjects ``topology apply`` registers,
the messages of the AsyncAPI document and what a flow check accepts on the topic. The
flows already say which events run on their topic, and the platform's own events on a
workflow topic are one list (``flows.model.WORKFLOW_TOPIC_EVENTS``); a hand-written list
repeated both. What a topic's entry in ``topics.yaml`` still lists is added: the types
of topics no flow runs on (``sagalog.transitions``), or written by something no flow
describes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sagalog.flows.model import WORKFLOW_TOPIC_EVENTS, Flow


def flow_event_types(flows: Iterable[Flow]) -> dict[str, tuple[str, ...]]:
    """The event types each topic carries because flows run on it: every type its flows
    name, in the order they name them, then the platform's ``WORKFLOW_TOPIC_EVENTS``."""
    named: dict[str, list[str]] = {}
    for flow in flows:
        named.setdefault(flow.topic, []).extend(flow.named_event_types())
    platform = set(WORKFLOW_TOPIC_EVENTS)
    return {
        topic: tuple(
            dict.fromkeys([*(t for t in types if t not in platform), *WORKFLOW_TOPIC_EVENTS])
        )
        for topic, types in named.items()
    }


def effective_schemas(
    topic: str, listed: Iterable[str], derived: Mapping[str, tuple[str, ...]]
) -> tuple[str, ...]:
    """What ``topic`` carries: the types its flows imply, then those its entry lists."""
    return tuple(dict.fromkeys([*derived.get(topic, ()), *listed]))
