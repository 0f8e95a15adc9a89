"""Intent before effect: what an agent writes down before it calls a dependency, and
how it settles a call whose outcome it never learned.

``ctx.effect`` writes an ``EffectIntent`` (synced to the agent's RocksDB WAL) before
the call and replaces it with the result once the dependency answers. A process killed
in between leaves the intent behind; the event is redelivered, and the next attempt
finds the intent and reconciles before doing anything else:

- the dependency offers a lookup by idempotency key: ask it. Found, the found result is
  the effect's result and nothing is called again; not found, the call is made again.
- it offers none: call again with the same idempotency key, which the dependency honours
  by answering with the first result.

Either way the ``EffectRecorded`` that finally enters the log carries the intent (when,
which dependency, a hash of the arguments) and how it was reconciled, so the audit
shows the intent, the reconciliation and the result.

The intent is kept locally, not written to Kafka before the call: a durable log write
before every call would add an ``acks=all`` round trip and a second, non-transactional
producer to each effect, for a record that only matters when this very instance
crashed, and this instance is the one that redelivers the event (static membership).
An instance that lost its disk with the crash finds no intent and calls again with the
same key: the dependency still sees one effect, and the audit then shows the result
without the reconciliation.
"""

from __future__ import annotations

import datetime as dt
import enum
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from sagalog.contracts.json_values import jsonable


@dataclass(frozen=True)
class EffectIntent:
    """A call about to be made: enough to reconcile it and to audit it.

    Attributes:
        effect: the effect's name (``ledger.reserve``).
        dependency: the dependency called, for its breaker and the audit.
        arguments_sha256: a hash of the call's arguments (see ``arguments_digest``).
        intended_at_ms: when the intent was written, in epoch milliseconds.
        attempt: the attempt of the event whose handler made the call.
    """

    effect: str
    dependency: str
    arguments_sha256: str
    intended_at_ms: int
    attempt: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> EffectIntent:
        return cls(**{name: value[name] for name in cls.__dataclass_fields__})

    @property
    def intended_at(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(self.intended_at_ms / 1000, tz=dt.UTC)


def arguments_digest(
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    *,
    keyed: Callable[[bytes], str] | None = None,
) -> str:
    """A stable hash of a call's arguments (JSON with sorted keys; other values as text).

    Two attempts of a deterministic handler hash the same; a difference on
    reconciliation means the handler computed another request the second time, which
    the dependency will answer with the first request's result (same key).

    ``keyed``: the agent's keyed digest (``PersonalData.digest``) where it holds a
    personal-data key. The digest goes to the log in ``EffectRecorded``, forever, and
    a call's arguments may hold a revealed address: a plain sha256 of them would let
    anyone test a guessed address, even after the subject was erased.
    """
    material = json.dumps(
        {"args": jsonable(list(args)), "kwargs": jsonable(dict(kwargs))},
        sort_keys=True,
        default=str,
        separators=(",", ":"),
    ).encode()
    return hashlib.sha256(material).hexdigest() if keyed is None else keyed(material)


class Settlement(enum.StrEnum):
    """How an earlier, unanswered call was settled (the audit's ``reconciliation``)."""

    FOUND = "found"
    """The dependency's lookup had the result: not called again."""
    NOT_FOUND_CALLED_AGAIN = "not_found_called_again"
    """The lookup had nothing: the call was made again, with the same key."""
    CALLED_AGAIN = "called_again"
    """No lookup is offered: the call was made again, with the same key."""


def settlement_of_lookup(found: Any) -> Settlement:
    """The lookup answered ``found`` (None: the dependency has no such effect)."""
    return Settlement.NOT_FOUND_CALLED_AGAIN if found is None else Settlement.FOUND


def describe(settlement: Settlement, intent: EffectIntent, *, arguments_sha256: str) -> str:
    """The audit's sentence about a reconciliation."""
    text = {
        Settlement.FOUND: "the dependency's lookup by idempotency key found the result; "
        "not called again",
        Settlement.NOT_FOUND_CALLED_AGAIN: "the dependency's lookup by idempotency key "
        "found nothing; called again with the same key",
        Settlement.CALLED_AGAIN: "the dependency offers no lookup; called again with the same key",
    }[settlement]
    text = (
        f"{settlement.value}: an intent of attempt {intent.attempt} at "
        f"{intent.intended_at.isoformat(timespec='milliseconds')} had no recorded result; "
        f"{text}"
    )
    if arguments_sha256 != intent.arguments_sha256:
        text += (
            "; the arguments differ from the intent's (the handler is not deterministic: "
            "the dependency answers for the first request)"
        )
    return text
