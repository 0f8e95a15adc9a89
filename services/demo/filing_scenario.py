"""The demo's regulatory filings, and how each is meant to end.

Each filing gets a plan, which the people in the demo (``filing_driver``) follow:

- ``file``: legal approves the draft, the officer signs, the filing is submitted to
  the regulator: completed.
- ``reject``: legal rejects the draft; the documents' hold is released: compensated.
- ``unsigned``: legal approves, nobody signs in 3 days; the wait's default (fail)
  applies and the hold is released: compensated.
- ``over_budget``: the filer is on the trial plan, whose model budget cannot pay for
  one drafting call; the draft step fails naming the budget, the hold is released:
  compensated.
"""

from __future__ import annotations

import datetime as dt
import enum
import random
from dataclasses import dataclass
from typing import Any

from filings.rulebook import COMPANIES, RULES

TENANTS = ("northwind-legal", "contoso-compliance", "globex-finance")
TRIAL_TENANT = "trial-startup"


class FilingPlan(enum.StrEnum):
    FILE = "file"
    REJECT = "reject"
    UNSIGNED = "unsigned"
    OVER_BUDGET = "over_budget"


EXPECTED_END = {
    FilingPlan.FILE: "completed",
    FilingPlan.REJECT: "compensated",
    FilingPlan.UNSIGNED: "compensated",
    FilingPlan.OVER_BUDGET: "compensated",
}
WEIGHTS = {
    FilingPlan.FILE: 50,
    FilingPlan.REJECT: 20,
    FilingPlan.UNSIGNED: 15,
    FilingPlan.OVER_BUDGET: 15,
}


@dataclass(frozen=True)
class Filing:
    workflow_id: str
    plan: FilingPlan
    payload: dict[str, Any]
    """``filings.v1.FilingOpened``'s fields."""
    signer: str

    @property
    def expected_end(self) -> str:
        return EXPECTED_END[self.plan]

    @property
    def drafted(self) -> bool:
        """Whether the model drafts it: every filing but the over-budget ones."""
        return self.plan is not FilingPlan.OVER_BUDGET


def build_filings(run_id: str, count: int, *, seed: int = 11) -> list[Filing]:
    """``count`` filings with plans in the proportions of ``WEIGHTS`` (exact, shuffled)."""
    rng = random.Random(seed)
    total = sum(WEIGHTS.values())
    plans = [plan for plan, weight in WEIGHTS.items() for _ in range(count * weight // total)]
    plans += [FilingPlan.FILE] * (count - len(plans))
    rng.shuffle(plans)
    companies = sorted(COMPANIES)
    regulators = sorted(RULES)
    due = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(days=30)
    filings = []
    for n, plan in enumerate(plans, start=1):
        company = rng.choice(companies)
        tenant = TRIAL_TENANT if plan is FilingPlan.OVER_BUDGET else rng.choice(TENANTS)
        payload = {
            "filing_number": f"{run_id}-F-{n:04d}",
            "regulator": rng.choice(regulators),
            "due": due,
            "company": company,
            "tenant": tenant,
        }
        filings.append(
            Filing(f"{run_id}-F-{n:04d}", plan, payload, signer=COMPANIES[company]["officer"])
        )
    return filings
