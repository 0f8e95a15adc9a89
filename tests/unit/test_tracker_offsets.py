"""The tracker's own offset book: one number per partition, committed by a timer."""

from __future__ import annotations

from dataclasses import dataclass

from sagalog.services.tracker.offsets import OffsetBook


@dataclass(frozen=True)
class Message:
    tp: tuple[str, int]
    offset: int


A, B = ("orders", 0), ("orders", 1)


def test_a_finished_batch_moves_each_partition_past_its_last_record() -> None:
    book = OffsetBook()
    book.finish([Message(A, 10), Message(B, 3), Message(A, 12)])  # 11 was a commit marker
    assert book.due({A, B}) == {A: 13, B: 4}


def test_only_what_moved_since_the_last_commit_is_due() -> None:
    book = OffsetBook()
    book.finish([Message(A, 10), Message(B, 3)])
    book.mark_committed(book.due({A, B}))
    assert book.due({A, B}) == {}
    book.finish([Message(B, 4)])
    assert book.due({A, B}) == {B: 5}


def test_an_older_batch_never_moves_a_partition_back() -> None:
    book = OffsetBook()
    book.finish([Message(A, 10)])
    book.finish([Message(A, 7)])  # a redelivery after a restart
    assert book.due({A}) == {A: 11}


def test_a_partition_no_longer_assigned_is_not_committed() -> None:
    book = OffsetBook()
    book.finish([Message(A, 10), Message(B, 3)])
    assert book.due({B}) == {B: 4}


def test_after_a_revocation_nothing_finished_before_it_is_ever_due_again() -> None:
    book = OffsetBook()
    book.finish([Message(A, 10), Message(B, 3)])  # finished, the commit refused (frozen)
    book.clear()
    assert book.due({A, B}) == {}  # given A back: the other worker's commit stands
    book.finish([Message(A, 420)])
    assert book.due({A, B}) == {A: 421}
