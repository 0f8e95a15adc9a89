"""A model call's claim as the claims topic carries it, and the rules its readers follow.

An instance that dies during a model call, and is not back within its session
timeout, hands its partitions over without that call's ``EffectRecorded``: the model
served the call, and only the dead instance's disk knew. So each claim is also
written, acknowledged, to the agent's claims topic (``topic_names.claims_topic_for``)
before its call is made, outside the batch's transaction (an aborted batch does not
unsend a call), and the next holder of the input partition reads the partition's
claims when it is assigned it (``agents.claims``). These are the pure parts: the
record, which claims a reader counts, how a repeat is numbered, and which of two
copies of a claim is kept.

A record goes to the claims partition numbered as its call's input partition, so the
holder of input partition ``n`` (of every input topic: they are co-partitioned) reads
exactly claims partition ``n``, none other. Its key is the reservation, its value
JSON, versioned (``v``), like the claims the agent's store keeps.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

from sagalog.budgets.book import Spend
from sagalog.budgets.ledger import DAY_MS

CLAIMS_TOPIC_CONFIG = {"cleanup.policy": "delete", "retention.ms": str(2 * DAY_MS)}
"""Kept two days: a claim counts in the money window to the end of its UTC day (the
longest of the windows, ``ledger.held_from_ms``), and a reader starts at the first
claim that may still count. A claim that reached the log with its call's
``EffectRecorded`` is read from there too; this topic only has to outlive the windows."""

_VERSION = 1
_REPEAT = re.compile(r"^(?P<key>.+)#(?P<n>\d+)$")


@dataclass(frozen=True)
class ClaimNote:
    """One record of the claims topic: a claim made before its call, or its release.

    Attributes:
        topic: the input topic of the event whose handler made the call.
        partition: its input partition (the claims partition too).
        claim: the claim as reserved (its estimate, unsettled).
        released: the call was never served (the model refused it with a 4xx): the
            claim counts no more.
    """

    topic: str
    partition: int
    claim: Spend
    released: bool = False

    @property
    def key(self) -> bytes:
        return self.claim.reservation.encode()

    def encode(self) -> bytes:
        return json.dumps(
            {
                "v": _VERSION,
                "topic": self.topic,
                "partition": self.partition,
                "claim": self.claim.as_dict(),
                "released": self.released,
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def decode(cls, value: bytes) -> ClaimNote | None:
        """The note a record holds; None for one this version does not read (a newer
        version's, or not a note), which its reader skips."""
        try:
            data = json.loads(value)
            if data.get("v") != _VERSION:
                return None
            return cls(
                topic=str(data["topic"]),
                partition=int(data["partition"]),
                claim=Spend.from_dict(data["claim"]),
                released=bool(data.get("released", False)),
            )
        except (ValueError, TypeError, KeyError, AttributeError):
            return None


def counts_at(claim: Spend, *, from_ms: int) -> bool:
    """Whether a claim read at assignment still counts: reserved at or after
    ``from_ms`` (``ledger.held_from_ms`` of now), so some window may still hold it."""
    return claim.at_ms >= from_ms


def next_reservation(key: str, earlier: Iterable[str]) -> str:
    """The reservation of a call of effect ``key`` after the calls ``earlier`` claimed
    (``key``, ``key#1``, ...): ``key`` for the first, then one past the highest, so a
    repeat never takes the name of a claim it must be counted beside, whichever
    instance made that one."""
    highest = -1
    for reservation in earlier:
        if reservation == key:
            highest = max(highest, 0)
            continue
        match = _REPEAT.match(reservation)
        if match is not None and match["key"] == key:
            highest = max(highest, int(match["n"]))
    return key if highest < 0 else f"{key}#{highest + 1}"


def merged(held: Spend | None, read: Spend) -> Spend:
    """The copy of a claim to keep when it is known twice (the store's, and one read
    from the claims topic or the log): the settled one, which holds what the model
    reported; else the one held."""
    if held is None:
        return read
    if held.actual is None and read.actual is not None:
        return read
    return held
