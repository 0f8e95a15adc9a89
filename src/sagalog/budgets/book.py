"""One agent instance's budgets: a ledger per budget key and input partition.

Every instance of an agent spends the same budgets, and no instance asks another:
each of the input's ``n`` partitions may spend ``1/n`` of each limit, on the calls
made for its workflows, whoever holds it. The partitions' parts add up to the limit,
so the instances together never overshoot, also across a rebalance.

Not per instance, pooled over the partitions it holds, as the rate limits are: an
instance that held every partition could spend the whole budget on one of them and then
hand the others over, fresh, to instances that spend them too, and the group together
would overshoot the limit whenever it formed while work waited (the incident:
docs/design/incident-history.md). The price of the partition's part: a budget key whose
calls all fall in one partition spends 1/n of the limit, and one call must fit in 1/n of
it.

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

from sagalog.budgets.declaration import Budget, budget_of
from sagalog.budgets.ledger import (
    BudgetLimits,
    Exhausted,
    Granted,
    Ledger,
    Reservation,
    Usage,
)
from sagalog.events import BudgetSpend


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
        answered_ms: when it answered (its tokens hold the window 60 s more).
    """

    ledger: str
    reservation: str
    at_ms: int
    estimate: Usage
    actual: Usage | None = None
    answered_ms: int | None = None

    @property
    def budget(self) -> str:
        return budget_of(self.ledger)

    @property
    def counted(self) -> Usage:
        return self.estimate if self.actual is None else self.actual

    def as_reservation(self) -> Reservation:
        return Reservation(
            self.reservation, self.at_ms, self.estimate, self.actual, self.answered_ms
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "ledger": self.ledger,
            "reservation": self.reservation,
            "at_ms": self.at_ms,
            "estimate": [self.estimate.tokens, self.estimate.micros],
            "actual": None if self.actual is None else [self.actual.tokens, self.actual.micros],
            "answered_ms": self.answered_ms,
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
            answered_ms=value.get("answered_ms"),
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
        at_ms=_ms(logged.reserved_at),
        estimate=Usage(tokens=logged.estimate_tokens, micros=logged.estimate_micros),
        actual=actual,
        answered_ms=None if logged.answered_at is None else _ms(logged.answered_at),
    )


def logged_claim(spend: Spend) -> BudgetSpend:
    """A claim as an ``EffectRecorded`` carries it to the log."""
    return BudgetSpend(
        ledger=spend.ledger,
        reservation=spend.reservation,
        reserved_at=_time(spend.at_ms),
        estimate_tokens=spend.estimate.tokens,
        estimate_micros=spend.estimate.micros,
        tokens=None if spend.actual is None else spend.actual.tokens,
        cost_micros=None if spend.actual is None else spend.actual.micros,
        answered_at=None if spend.answered_ms is None else _time(spend.answered_ms),
    )


def _ms(at: dt.datetime) -> int:
    return int(at.timestamp() * 1000)


def _time(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC)


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
    """The ledgers of one agent instance's declared budgets: one per budget key and
    input partition held.

    Args:
        budgets: the agent's budgets by name.
        load: ``load(held)`` -> the stored claims of the partitions numbered in
            ``held`` (None: of every partition in the store), each with its partition.
    """

    def __init__(
        self,
        budgets: Mapping[str, Budget],
        load: Callable[[frozenset[int] | None], Iterable[tuple[int, Spend]]],
    ) -> None:
        self.budgets = dict(budgets)
        self._load = load
        self._held: frozenset[int] | None = None
        self._partitions = 1  # alone until the group says otherwise, as the rate limits
        self._ledgers: dict[tuple[str, int], Ledger] = {}
        self._stale = True
        # The agent's loop changes the ledgers; a metrics scrape reads them from the
        # health server's thread.
        self._lock = threading.Lock()

    def rebalance(self, held: Iterable[int], *, total: int) -> None:
        """The instance holds the input partitions numbered ``held`` of ``total`` now:
        the next call rebuilds the ledgers from their claims."""
        with self._lock:
            self._held = frozenset(held)
            self._partitions = max(total, 1)
            self._stale = True

    def invalidate(self) -> None:
        """Claims were folded in from the log (a partition rebuilt): read them again."""
        with self._lock:
            self._stale = True

    def limits(self, budget: str, partitions: int = 1) -> BudgetLimits:
        """What ``partitions`` of the input's partitions may spend of ``budget``."""
        return self.budgets[budget].limits.share(partitions, self._partitions)

    def reserve(
        self, spend: Spend, partition: int, *, now_ms: int, force: bool = False
    ) -> Granted | Exhausted:
        """Count ``spend``'s estimate in its partition's ledger now, unless it is there;
        ``force``: over the limit too (``Ledger.reserve``).

        Raises:
            BudgetExceeded: the estimate alone is over a partition's share.
        """
        with self._lock:
            ledger = self._ledger(spend.ledger, partition, now_ms)
            return ledger.reserve(spend.reservation, spend.estimate, now_ms=now_ms, force=force)

    def settle(self, spend: Spend, partition: int, *, now_ms: int) -> None:
        assert spend.actual is not None
        with self._lock:
            ledger = self._ledger(spend.ledger, partition, now_ms)
            ledger.settle(spend.reservation, spend.actual, now_ms=now_ms)

    def release(self, spend: Spend, partition: int, *, now_ms: int) -> None:
        with self._lock:
            self._ledger(spend.ledger, partition, now_ms).release(spend.reservation)

    def report(self, *, now_ms: int) -> list[LedgerReport]:
        """Each budget key over the partitions held: what their windows hold, and the
        limits they are held to together."""
        with self._lock:
            self._rebuild_if_stale(now_ms)
            by_key: dict[str, list[LedgerReport]] = {}
            for part in report(self._ledgers.values(), now_ms=now_ms):
                by_key.setdefault(part.ledger, []).append(part)
            held = len(self._held) if self._held is not None else self._partitions
            return [
                LedgerReport(
                    key,
                    self.limits(budget_of(key), min(held, self._partitions)),
                    sum((p.settled for p in parts), Usage()),
                    sum((p.reserved for p in parts), Usage()),
                    sum(p.calls for p in parts),
                )
                for key, parts in sorted(by_key.items())
            ]

    def _ledger(self, key: str, partition: int, now_ms: int) -> Ledger:
        self._rebuild_if_stale(now_ms)
        ledger = self._ledgers.get((key, partition))
        if ledger is None:
            ledger = self._ledgers[(key, partition)] = Ledger(key, self.limits(budget_of(key)))
        return ledger

    def _rebuild_if_stale(self, now_ms: int) -> None:
        if not self._stale:
            return
        self._ledgers = {}
        self._stale = False
        for partition, spend in self._load(self._held):
            if spend.budget not in self.budgets:
                continue  # a budget no longer declared: nothing to hold calls to
            self._ledger(spend.ledger, partition, now_ms).restore(spend.as_reservation())
        for ledger in self._ledgers.values():
            ledger.forget_before(now_ms)
