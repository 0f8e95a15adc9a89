"""The priority lane: urgent workflows first, each workflow's events in order."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from sagalog.priority import Priority, schedule


@dataclass(frozen=True)
class Pending:
    workflow: str
    seq: int
    priority: Priority = Priority.NORMAL


def lanes(items: list[Pending]) -> list[list[tuple[str, int]]]:
    groups = schedule(items, key=lambda p: p.workflow, priority=lambda p: p.priority)
    return [[(p.workflow, p.seq) for p in group] for group in groups]


def test_order_within_a_workflow_is_kept() -> None:
    items = [Pending("a", 1), Pending("b", 1), Pending("a", 2), Pending("b", 2), Pending("a", 3)]
    assert lanes(items) == [[("a", 1), ("a", 2), ("a", 3)], [("b", 1), ("b", 2)]]


def test_urgent_workflow_goes_first() -> None:
    items = [
        Pending("a", 1),
        Pending("b", 1, Priority.LOW),
        Pending("c", 1, Priority.URGENT),
        Pending("d", 1, Priority.HIGH),
    ]
    assert [group[0][0] for group in lanes(items)] == ["c", "d", "a", "b"]


def test_a_late_urgent_event_pulls_its_whole_workflow_forward_in_order() -> None:
    items = [
        Pending("a", 1),
        Pending("b", 1),
        Pending("b", 2),
        Pending("b", 3, Priority.URGENT),
    ]
    assert lanes(items) == [[("b", 1), ("b", 2), ("b", 3)], [("a", 1)]]


def test_equal_priorities_keep_first_arrival_order() -> None:
    items = [
        Pending("c", 1, Priority.HIGH),
        Pending("a", 1),
        Pending("b", 1, Priority.HIGH),
        Pending("a", 2, Priority.HIGH),
        Pending("d", 1),
    ]
    # c, a, b all peak at HIGH: ordered by their first items; d stays last
    assert [group[0][0] for group in lanes(items)] == ["c", "a", "b", "d"]
    assert lanes(items) == lanes(list(items))  # scheduling is deterministic


def test_priority_is_read_once_per_item_and_empty_input_is_empty() -> None:
    calls: list[int] = []

    def priority(item: Pending) -> int:
        calls.append(item.seq)
        return item.priority

    items = [Pending("a", 1), Pending("a", 2), Pending("b", 3)]
    schedule(items, key=lambda p: p.workflow, priority=priority)
    assert calls == [1, 2, 3]
    assert schedule([], key=str, priority=len) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("urgent", Priority.URGENT),
        ("URGENT", Priority.URGENT),
        (" High ", Priority.HIGH),
        ("low", Priority.LOW),
        ("0", Priority.LOW),
        ("3", Priority.URGENT),
        ("2", Priority.HIGH),
        (None, Priority.NORMAL),
        ("", Priority.NORMAL),
        ("critical", Priority.NORMAL),
        ("9", Priority.NORMAL),
        ("-1", Priority.NORMAL),
        ("1.5", Priority.NORMAL),
        ("parse", Priority.NORMAL),
    ],
)
def test_parse_names_digits_and_unknowns(text: str | None, expected: Priority) -> None:
    assert Priority.parse(text) is expected


def test_priorities_compare_as_numbers() -> None:
    assert Priority.LOW < Priority.NORMAL < Priority.HIGH < Priority.URGENT
    assert [int(p) for p in Priority] == [0, 1, 2, 3]
