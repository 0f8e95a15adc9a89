"""One agent instance's budgets: a ledger per budget key, held to the instance's share.

Every instance of an agent spends the same budgets, and they share them the way
they share a dependency's rate limit (``agents.rate_limit.partition_share``): an
instance holding ``a`` of the input's ``n`` partitions may spend ``a/n`` of each
limit, counted over the calls made for the workflows of those partitions. The
shares add up to the limit, so the instances together never overshoot, and no
instance asks another.

A call's claim (a ``Spend``) belongs to its input partition: it is kept in the
agent's store with that partition, and goes to the log in the call's
``EffectRecorded``. When a partition moves, its claims move with it: the instance
that takes it over folds them in while it rebuilds the partition's projection, and
the book is rebuilt from the claims of the partitions now held.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sagalog.budgets.declaration import Budget
from sagalog.budgets.ledger import (
    BudgetLimits,
    Exhausted,
    Granted,
    Ledger,
    Reservation,
    Usage,
)
from sagalog.events import BudgetSpend

Partition = tuple[str, int]


@dataclass(frozen=True)
class Spend:
    """One call's claim on a budget.

    Attributes:
        ledger: the ledger key, ``budget`` or ``budget/key`` (``Budget.ledger_key``).
        reservation: the effect's idempotency key; a call repeated because its first
            answer was lost (a crash) is a second spend, ``<key>#<n>``.
        at_ms: when it was reserved: where the windows count it.
        estimate: what was reserved.
        actual: what the model reported, once it answered.
    """

    ledger: str
    reservation: str
    at_ms: int
    estimate: Usage
    actual: Usage | None = None

    @property
    def budget(self) -> str:
        return self.ledger.split("/", 1)[0]

    @property
    def counted(self) -> Usage:
        return self.estimate if self.actual is None else self.actual

    def as_reservation(self) -> Reservation:
        return Reservation(self.reservation, self.at_ms, self.estimate, self.actual)

    def as_dict(self) -> dict[str, Any]:
        return {
            "ledger": self.ledger,
            "reservation": self.reservation,
            "at_ms": self.at_ms,
            "estimate": [self.estimate.tokens, self.estimate.micros],
            "actual": None if self.actual is None else [self.actual.tokens, self.actual.micros],
        }

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> Spend:
        actual = value.get("actual")
        return cls(
            ledger=str(value["ledger"]),
            reservation=str(value["reservation"]),
            at_ms=int(value["at_ms"]),
            estimate=Usage(*value["estimate"]),
            actual=None if actual is None else Usage(*actual),
        )


def claim_of(logged: BudgetSpend) -> Spend:
    """The claim an ``EffectRecorded`` carries to the log, as the ledgers keep it."""
    actual = (
        None
        if logged.tokens is None
        else Usage(tokens=logged.tokens, micros=logged.cost_micros or 0)
    )
    return Spend(
        ledger=logged.ledger,
        reservation=logged.reservation,
        at_ms=int(logged.reserved_at.timestamp() * 1000),
        estimate=Usage(tokens=logged.estimate_tokens, micros=logged.estimate_micros),
        actual=actual,
    )


def logged_claim(spend: Spend) -> BudgetSpend:
    """A claim as an ``EffectRecorded`` carries it to the log."""
    return BudgetSpend(
        ledger=spend.ledger,
        reservation=spend.reservation,
        reserved_at=dt.datetime.fromtimestamp(spend.at_ms / 1000, dt.UTC),
        estimate_tokens=spend.estimate.tokens,
        estimate_micros=spend.estimate.micros,
        tokens=None if spend.actual is None else spend.actual.tokens,
        cost_micros=None if spend.actual is None else spend.actual.micros,
    )


@dataclass(frozen=True)
class LedgerReport:
    """What ``sagalog budgets`` shows of one ledger on one instance."""

    ledger: str
    limits: BudgetLimits
    settled: Usage
    reserved: Usage
    calls: int


def report(ledgers: Iterable[Ledger], *, now_ms: int) -> list[LedgerReport]:
    """What each ledger's windows hold at ``now_ms``, by ledger key."""
    reports = []
    for ledger in sorted(ledgers, key=lambda held: held.name):
        ledger.forget_before(now_ms)
        settled, reserved = ledger.spent(now_ms=now_ms)
        calls = len(ledger.reservations())
        reports.append(LedgerReport(ledger.name, ledger.limits, settled, reserved, calls))
    return reports


def spent(claims: Iterable[Spend], *, now_ms: int) -> list[LedgerReport]:
    """What ``claims`` (read from the log) hold in each ledger's windows at ``now_ms``:
    every instance's calls together, so no limit applies (``sagalog budgets``)."""
    ledgers: dict[str, Ledger] = {}
    for claim in claims:
        ledger = ledgers.get(claim.ledger)
        if ledger is None:
            ledger = ledgers[claim.ledger] = Ledger(claim.ledger, BudgetLimits())
        ledger.restore(claim.as_reservation())
    return report(ledgers.values(), now_ms=now_ms)


class BudgetBook:
    """The ledgers of one agent instance's declared budgets.

    Args:
        budgets: the agent's budgets by name.
        load: ``load(held)`` -> the stored claims of the partitions in ``held``
            (None: of every partition in the store).
    """

    def __init__(
        self,
        budgets: Mapping[str, Budget],
        load: Callable[[frozenset[Partition] | None], Iterable[Spend]],
    ) -> None:
        self.budgets = dict(budgets)
        self._load = load
        self._held: frozenset[Partition] | None = None
        self._share = (1, 1)  # alone until the group says otherwise, as the rate limits
        self._ledgers: dict[str, Ledger] = {}
        self._stale = True
        # The agent's loop changes the ledgers; a metrics scrape reads them from the
        # health server's thread.
        self._lock = threading.Lock()

    def rebalance(self, held: Iterable[Partition], *, assigned: int, total: int) -> None:
        """The instance holds ``held`` now, ``assigned`` of ``total`` partitions of its
        first input: the next call rebuilds the ledgers from their claims."""
        with self._lock:
            self._held = frozenset(held)
            self._share = (assigned, total)
            self._stale = True

    def invalidate(self) -> None:
        """Claims were folded in from the log (a partition rebuilt): read them again."""
        with self._lock:
            self._stale = True

    def limits(self, budget: str) -> BudgetLimits:
        """This instance's share of ``budget``'s limits."""
        assigned, total = self._share
        return self.budgets[budget].limits.share(max(assigned, 0), max(total, 1))

    def reserve(self, spend: Spend, *, now_ms: int) -> Granted | Exhausted:
        """Count ``spend``'s estimate in its ledger now, unless it is there already.

        Raises:
            BudgetExceeded: the estimate alone is over this instance's share.
        """
        with self._lock:
            return self._ledger(spend.ledger, now_ms).reserve(
                spend.reservation, spend.estimate, now_ms=now_ms
            )

    def settle(self, spend: Spend, *, now_ms: int) -> None:
        assert spend.actual is not None
        with self._lock:
            ledger = self._ledger(spend.ledger, now_ms)
            ledger.settle(spend.reservation, spend.actual, now_ms=now_ms)

    def release(self, spend: Spend, *, now_ms: int) -> None:
        with self._lock:
            self._ledger(spend.ledger, now_ms).release(spend.reservation)

    def report(self, *, now_ms: int) -> list[LedgerReport]:
        """Each ledger's limits (this instance's share) and what its windows hold."""
        with self._lock:
            self._rebuild_if_stale(now_ms)
            return report(self._ledgers.values(), now_ms=now_ms)

    def _ledger(self, key: str, now_ms: int) -> Ledger:
        self._rebuild_if_stale(now_ms)
        ledger = self._ledgers.get(key)
        if ledger is None:
            ledger = self._ledgers[key] = Ledger(key, self.limits(key.split("/", 1)[0]))
        return ledger

    def _rebuild_if_stale(self, now_ms: int) -> None:
        if not self._stale:
            return
        self._ledgers = {}
        self._stale = False
        for spend in self._load(self._held):
            if spend.budget not in self.budgets:
                continue  # a budget no longer declared: nothing to hold calls to
            ledger = self._ledgers.get(spend.ledger)
            if ledger is None:
                ledger = self._ledgers[spend.ledger] = Ledger(
                    spend.ledger, self.limits(spend.budget)
                )
            ledger.restore(spend.as_reservation())
        for ledger in self._ledgers.values():
            ledger.forget_before(now_ms)
