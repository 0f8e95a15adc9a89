"""The demo's mix of procurement requests, and how each is meant to end.

Each request gets a plan, which the people in the demo (the driver) follow at the
gate and which fault injection makes happen in the ERP:

- ``approve``: the manager approves; ordered and the vendor notified: completed.
- ``escalate``: nobody answers for a day; the gate escalates to the director, who
  approves: completed.
- ``reject``: the manager rejects; the budget is released: compensated.
- ``expire``: nobody answers in 72 h; the gate's default (reject) applies:
  compensated.
- ``fail``: approved, but the ERP refuses the vendor's order; the step fails and the
  budget is released: compensated (a mid-flow failure with compensation).
"""

from __future__ import annotations

import datetime as dt
import enum
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).resolve().parents[1] / "procurement" / "corpus" / "requests.jsonl"
FAILING_VENDOR = "Faultline Ltd"
VENDORS = ("Acme Supplies", "Northwind Traders", "Contoso Ltd", "Globex", "Initech")
DEPARTMENTS = ("it", "marketing", "facilities", "finance", "operations", "research")


class Plan(enum.StrEnum):
    APPROVE = "approve"
    ESCALATE = "escalate"
    REJECT = "reject"
    EXPIRE = "expire"
    FAIL = "fail"


EXPECTED_END = {
    Plan.APPROVE: "completed",
    Plan.ESCALATE: "completed",
    Plan.REJECT: "compensated",
    Plan.EXPIRE: "compensated",
    Plan.FAIL: "compensated",
}
WEIGHTS = {Plan.APPROVE: 50, Plan.ESCALATE: 15, Plan.REJECT: 15, Plan.EXPIRE: 10, Plan.FAIL: 10}


@dataclass(frozen=True)
class Request:
    workflow_id: str
    plan: Plan
    payload: dict[str, Any]
    priority: str

    @property
    def expected_end(self) -> str:
        return EXPECTED_END[self.plan]


def build_mix(run_id: str, count: int, *, seed: int = 7) -> list[Request]:
    """``count`` requests with plans in the proportions of ``WEIGHTS`` (exact, shuffled)."""
    rng = random.Random(seed)
    texts = [json.loads(line) for line in CORPUS.read_text().splitlines() if line.strip()]
    total = sum(WEIGHTS.values())
    plans = [plan for plan, weight in WEIGHTS.items() for _ in range(count * weight // total)]
    plans += [Plan.APPROVE] * (count - len(plans))
    rng.shuffle(plans)
    requests = []
    for n, plan in enumerate(plans, start=1):
        text = texts[(n - 1) % len(texts)]
        vendor = FAILING_VENDOR if plan is Plan.FAIL else rng.choice(VENDORS)
        amount = rng.choice((180, 450, 900, 2400, 7800, 15000)) + rng.randrange(0, 99)
        payload = {
            "request_id": f"{run_id}-PR-{n:04d}",
            "requester": f"user{rng.randrange(1, 40)}@example.com",
            "department": rng.choice(DEPARTMENTS),
            "title": text["title"],
            "description": text["description"],
            "amount": f"{amount}.00",
            "currency": "EUR",
            "vendor": vendor,
            "priority": rng.choice(("LOW", "NORMAL", "NORMAL", "HIGH")),
            "submitted_at": dt.datetime.now(dt.UTC).isoformat(),
        }
        requests.append(
            Request(f"{run_id}-{n:04d}", plan, payload, priority=str(payload["priority"]))
        )
    return requests
