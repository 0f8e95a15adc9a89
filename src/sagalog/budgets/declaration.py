"""Declaring a budget an agent's model calls are made under.

    agent = Agent(
        "drafting-agent",
        budgets=[
            Budget.of(
                "openai",
                tokens_per_minute=10_000,
                money_per_day="25.00",
                price=Price.per_million(input="2.50", output="10.00"),
                key=lambda ctx: ctx.workflow.require(FilingOpened).regulator,
            )
        ],
    )

A budget is declared with the agent that spends it, because the limits are the
agent's contract with its model provider, like its rate limits. What a step does
when its budget runs out is the flow's business and is declared there
(``on_budget_exhausted`` on the step).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from sagalog.budgets.estimate import Price
from sagalog.budgets.ledger import BudgetLimits, money_micros
from sagalog.errors import ConfigurationError

_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
FREE = Price(0, 0)


@dataclass(frozen=True)
class Budget:
    """A budget: its name, its limits for all instances together, the model's price,
    and how a call picks its key within it.

    Attributes:
        name: names the budget in ``ctx.model_call(name, ...)``, in the log and in
            ``sagalog budgets``.
        limits: for the whole platform; each instance holds its partitions' share.
        price: what the model charges; needed for a money limit.
        key: ``key(ctx)`` -> the part of the budget a call is counted in (a tenant,
            a customer), so each key is held to the limits on its own; None counts
            every call in one.
    """

    name: str
    limits: BudgetLimits
    price: Price = FREE
    key: Callable[[Any], str] | None = None

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ConfigurationError(
                f"budget name {self.name!r}: use lowercase letters, digits, '_', '-' and '.'"
            )
        if self.limits.tokens_per_minute is None and self.limits.micros_per_day is None:
            raise ConfigurationError(
                f"budget '{self.name}' limits nothing: give tokens_per_minute, "
                "money_per_day or both"
            )
        if self.limits.micros_per_day is not None and self.price == FREE:
            raise ConfigurationError(
                f"budget '{self.name}' limits money per day but gives no price: pass "
                'price=Price.per_million(input="...", output="...")'
            )

    @classmethod
    def of(
        cls,
        name: str,
        *,
        tokens_per_minute: int | None = None,
        money_per_day: str | int | Decimal | None = None,
        price: Price = FREE,
        key: Callable[[Any], str] | None = None,
    ) -> Budget:
        """A budget as its limits are written: money as an amount ("25.00")."""
        micros = (
            None
            if money_per_day is None
            else money_micros(money_per_day, what=f"budget '{name}' money_per_day")
        )
        return cls(name, BudgetLimits(tokens_per_minute, micros), price, key)

    def ledger_key(self, ctx: Any) -> str:
        """The ledger a call made with ``ctx`` is counted in: ``name`` or ``name/key``.

        Raises:
            ConfigurationError: the key function gave no text, or text with a '/'.
        """
        if self.key is None:
            return self.name
        part = self.key(ctx)
        if not isinstance(part, str) or not part or "/" in part:
            raise ConfigurationError(
                f"budget '{self.name}': its key function gave {part!r}; it must give a "
                "non-empty text without '/' (a tenant id, say)"
            )
        return f"{self.name}/{part}"


def budget_of(ledger_key: str) -> str:
    """The budget a ledger key (``Budget.ledger_key``: ``name`` or ``name/key``) counts for."""
    return ledger_key.split("/", 1)[0]
