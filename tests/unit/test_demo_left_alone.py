"""What `make demo` says of the changes it leaves alone on a shared stack."""

from __future__ import annotations

from demo.__main__ import left_alone
from sagalog.topology.plan import Change, ChangeKind


def test_the_tests_topics_are_named_as_such_not_as_refused_changes() -> None:
    """After `make test`, the dev stack holds the tests' topics; the demo once said
    "refused 101 change(s) that need --force", which reads as an error to a newcomer."""
    said = left_alone([Change(ChangeKind.DELETE_TOPIC, f"t{i}", "", True) for i in range(101)])
    assert said.startswith("left alone on this cluster: 101 topic(s) the topology does not")
    assert "refused" not in said and "--force" not in said


def test_other_kinds_are_counted_by_kind() -> None:
    said = left_alone(
        [
            Change(ChangeKind.DELETE_TOPIC, "t", "", True),
            Change(ChangeKind.RECREATE_TOPIC, "a", "", True),
            Change(ChangeKind.RECREATE_TOPIC, "b", "", True),
        ]
    )
    assert "1 topic(s)" in said and "2 'recreate topic' change(s)" in said
