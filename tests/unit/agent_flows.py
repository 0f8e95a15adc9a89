"""Flows written in a test for the agents it declares: an agent runs the steps a flow
gives it (``agents.binding``), so a test's agent needs a flow naming it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sagalog.flows.model import Flow


def step(
    name: str,
    agent: str,
    starts_on: str,
    completes_on: str,
    *,
    undo: str | None = None,
    **more: Any,
) -> dict[str, Any]:
    """A step as a flow file writes it; ``undo`` names its compensation's action."""
    entry: dict[str, Any] = {
        "name": name,
        "agent": agent,
        "starts_on": starts_on,
        "completes_on": completes_on,
        "timeout": "5m",
        **more,
    }
    if undo is not None:
        entry["compensation"] = {"action": undo}
    elif "irreversible" not in more:
        entry["effect"] = "none"
    return entry


def flow(topic: str, steps: Sequence[dict[str, Any]], *, name: str = "test") -> Flow:
    """One flow version on ``topic`` starting on its first step's event."""
    return Flow.model_validate(
        {
            "flow": name,
            "version": 1,
            "topic": topic,
            "starts_on": steps[0]["starts_on"],
            "deadline": "1d",
            "steps": list(steps),
        }
    )
