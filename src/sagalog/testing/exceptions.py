"""What the test environments refuse or report, each under ``sagalog.errors``' root."""

from __future__ import annotations

from sagalog.errors import SagalogError


class FlowNotQuiet(SagalogError):
    """A whole flow in memory did not come to rest: its handlers kept publishing to
    each other past the environment's bound (a loop between two steps), or an effect
    had no stub where the test asked for stubs only. The message names what was
    still moving, or the effects to stub."""
