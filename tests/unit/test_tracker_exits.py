"""The tracker's exit decision: a restart for what a restart fixes, 6 for a denied right."""

from __future__ import annotations

from sagalog.errors import AuthorizationError, ServiceUnavailableError
from sagalog.services.tracker.exits import RESTART, exit_for

DENIED = AuthorizationError("User:saga-tracker may not WRITE topic 'sagalog.alerts'")


def test_a_denied_write_exits_6_with_principal_operation_and_resource() -> None:
    decision = exit_for("a batch failed", DENIED)
    assert (decision.code, decision.restart_helps) == (6, False)
    assert decision.message.startswith(
        "a batch failed: User:saga-tracker may not WRITE topic 'sagalog.alerts'"
    )


def test_a_denied_write_wrapped_in_another_error_still_exits_6() -> None:
    try:
        try:
            raise DENIED
        except AuthorizationError as exc:
            raise RuntimeError("flushing the batch failed") from exc
    except RuntimeError as wrapped:
        assert exit_for("a batch failed", wrapped).code == 6
    try:
        try:
            raise DENIED
        except AuthorizationError:
            raise KeyError("while cleaning up") from None  # context kept, cause suppressed
    except KeyError as later:
        assert later.__context__ is DENIED
        assert exit_for("a batch failed", later).code == 6


def test_anything_else_exits_70_for_a_restart() -> None:
    unreachable = ServiceUnavailableError("3 tracker records unacknowledged by Kafka")
    for error, said in (
        (unreachable, " (ServiceUnavailableError: 3 tracker records unacknowledged by Kafka)"),
        (ValueError("bug"), " (ValueError: bug)"),
        (None, ""),
    ):
        decision = exit_for("a batch failed", error)
        assert (decision.code, decision.restart_helps) == (RESTART, True)
        assert decision.message == f"a batch failed{said}; exiting so that it is processed again"
    assert RESTART == 70
