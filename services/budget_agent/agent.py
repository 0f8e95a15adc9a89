"""Reserve a request's amount in the budget ledger once its risk is scored; release it
when compensating.

The flow reserves after ``score_risk``, so the handler starts on ``RiskScored`` and
reads what it reserves (amount, currency, department) from the workflow's
``RequestSubmitted``, which the runtime has folded into the workflow context. The
cost center is the one the intake agent read from the request's text, if it found
one, else the department's.
"""

from __future__ import annotations

from functools import partial

from pydantic_settings import SettingsConfigDict

from procurement.events import (
    BudgetReleased,
    BudgetReserved,
    RequestClassified,
    RequestSubmitted,
    RiskScored,
)
from sagalog import Agent, AgentSettings, CompensationRequested, HandlerContext, NonRetryableError
from standins.client import look_up, perform


class BudgetAgentSettings(AgentSettings):
    """Settings of the budget agent (env prefix ``BUDGET_AGENT_``)."""

    model_config = SettingsConfigDict(env_prefix="BUDGET_AGENT_", env_file=".env", extra="ignore")

    name: str = "budget-agent"
    ledger_url: str = "http://127.0.0.1:8701"
    ledger_lookup: bool = True
    """Reconcile a reservation whose answer was lost by asking the ledger by key; off,
    the reservation is repeated with the same key (the ledger answers the first one)."""


settings = BudgetAgentSettings()
agent = Agent(settings.name)


def cost_center_of(department: str) -> str:
    return f"CC-{department.upper()[:8]}"


@agent.handles(step="reserve_budget", dependencies=["ledger"])
async def reserve_budget(event: RiskScored, ctx: HandlerContext) -> BudgetReserved:
    request = ctx.workflow.require(RequestSubmitted)
    if request.amount <= 0:
        raise NonRetryableError(
            f"request {request.request_id}: amount must be positive, got {request.amount}"
        )
    classified = ctx.workflow.latest(RequestClassified)
    extracted = {} if classified is None else classified.extracted
    cost_center = extracted.get("cost_center") or cost_center_of(request.department)
    reservation = await ctx.effect(
        "ledger.reserve",
        perform,
        settings.ledger_url,
        "reserve",
        {
            "request_id": request.request_id,
            "amount": str(request.amount),
            "currency": request.currency,
            "cost_center": cost_center,
        },
        lookup=partial(look_up, settings.ledger_url) if settings.ledger_lookup else None,
    )
    return BudgetReserved(
        reservation_id=reservation["id"],
        cost_center=cost_center,
        amount=request.amount,
        currency=request.currency,
    )


@agent.compensates("reserve_budget", dependencies=["ledger"])
async def release_budget(request: CompensationRequested, ctx: HandlerContext) -> BudgetReleased:
    reserved = ctx.workflow.latest(BudgetReserved)
    if reserved is None:  # nothing was reserved: releasing is a no-op, still completed
        return BudgetReleased(reservation_id="none", reason=request.reason or "compensation")
    await ctx.effect(
        "ledger.release",
        perform,
        settings.ledger_url,
        "release",
        {"reservation_id": reserved.reservation_id},
    )
    return BudgetReleased(
        reservation_id=reserved.reservation_id, reason=request.reason or "compensation"
    )
