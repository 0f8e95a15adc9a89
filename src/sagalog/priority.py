"""The priority lane: which workflows a saturated consumer admits first.

When an agent has more pending events than free capacity, it chooses whose work to
start. Urgent workflows go first, but a workflow's own events are never reordered:
they are facts in the order they happened, and a handler that saw them out of order
would decide on a state that never existed.

It sits at the top of the package, below ``flows`` (a flow sets a workflow's
priority), ``tracker`` (admission) and ``agents`` (the lane), which all read it.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


class Priority(enum.IntEnum):
    """How soon a workflow's work should be admitted; higher goes first."""

    LOW = 0
    NORMAL = 1
    HIGH = 2
    URGENT = 3

    @classmethod
    def parse(cls, text: str | None) -> Priority:
        """Read a priority from an event header or a setting.

        Accepts a name in any case (``"urgent"``) or its number (``"3"``). A missing
        or unreadable value means NORMAL rather than an error: the header is written
        by other services, possibly by a newer version with more levels, and an event
        must never become unprocessable because of its priority hint.
        """
        if text is None:
            return cls.NORMAL
        cleaned = text.strip()
        if cleaned.isdecimal():
            try:
                return cls(int(cleaned))
            except ValueError:
                return cls.NORMAL
        return cls.__members__.get(cleaned.upper(), cls.NORMAL)


def schedule(
    items: Sequence[T],
    *,
    key: Callable[[T], str],
    priority: Callable[[T], int],
) -> list[list[T]]:
    """Order pending work into per-workflow groups, most urgent group first.

    This is the priority lane: when an agent is saturated, urgent workflows are
    admitted first, but never reordered within a workflow. Items are grouped by
    ``key`` (the workflow id, which is also the Kafka key), keeping their order
    inside each group. Groups are ordered by their highest priority, so an urgent
    event queued behind its workflow's earlier events pulls the whole workflow
    forward: those events must be handled before it anyway. Equal groups keep the
    order of their first items, so equal work is served first come, first served
    and a batch scheduled twice comes out the same.

    Args:
        items: pending work, in arrival order.
        key: the workflow an item belongs to.
        priority: an item's priority, e.g. a ``Priority``; called once per item.

    Returns:
        The groups, each a list of items in arrival order.
    """
    groups: dict[str, list[T]] = {}
    highest: dict[str, int] = {}
    for item in items:
        group = key(item)
        rank = priority(item)
        groups.setdefault(group, []).append(item)
        highest[group] = max(rank, highest.get(group, rank))
    # dicts keep first-appearance order and sorted() is stable: ties stay first come.
    order = sorted(groups, key=lambda group: -highest[group])
    return [groups[group] for group in order]
