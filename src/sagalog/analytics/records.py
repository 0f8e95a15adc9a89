"""One ``StateTransition`` as the statistics read it: plain values, times in epoch ms."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sagalog.errors import SchemaError


@dataclass(frozen=True, slots=True)
class Transition:
    """Workflow ``workflow_id`` left ``from_state`` for ``to_state`` at ``at_ms``.

    Attributes:
        workflow_id: the record key.
        flow: the flow's name.
        flow_version: the version the workflow runs under.
        from_state: the state left.
        to_state: the state entered.
        step: the step (or gate, or step being undone) of the state entered.
        from_step: the step of the state left.
        duration_ms: how long the workflow was in ``from_state`` (the event's
            ``time_in_previous_state_ms``).
        at_ms: when the transition happened (the event's ``at``).
    """

    workflow_id: str
    flow: str
    flow_version: int
    from_state: str
    to_state: str
    step: str | None
    from_step: str | None
    duration_ms: int
    at_ms: int

    @property
    def flow_key(self) -> tuple[str, int]:
        return (self.flow, self.flow_version)


def transitions_from(
    payloads: Sequence[Mapping[str, Any]], keys: Sequence[bytes | None]
) -> list[Transition]:
    """Decoded ``StateTransition`` payloads (and their record keys) as ``Transition`` objects.

    ``at`` may be epoch ms or a datetime (as ``EventCodec.decode`` returns it).

    Raises:
        SchemaError: a payload lacks a field the statistics need.
    """
    out = []
    for payload, key in zip(payloads, keys, strict=True):
        try:
            at = payload["at"]
            out.append(
                Transition(
                    workflow_id=key.decode("utf-8", "replace") if key is not None else "",
                    flow=payload["flow"],
                    flow_version=int(payload["flow_version"]),
                    from_state=payload["from_state"],
                    to_state=payload["to_state"],
                    step=payload.get("step"),
                    from_step=payload.get("from_step"),
                    duration_ms=int(payload["time_in_previous_state_ms"]),
                    at_ms=at if isinstance(at, int) else _epoch_ms(at),
                )
            )
        except KeyError as exc:
            raise SchemaError(
                f"a StateTransition payload has no field {exc.args[0]!r}: {dict(payload)}"
            ) from exc
    return out


def flow_label(flow: str, version: int) -> str:
    return f"{flow} v{version}"


def flow_versions(transitions: Iterable[Transition]) -> list[tuple[str, int]]:
    """The (flow, version) pairs present, sorted by name then version."""
    return sorted({t.flow_key for t in transitions})


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _epoch_ms(value: dt.datetime) -> int:
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return (value - _EPOCH) // dt.timedelta(milliseconds=1)
