"""Reserve a request's amount in the budget ledger; release it when compensating."""

from __future__ import annotations

from pydantic_settings import SettingsConfigDict

from procurement.events import BudgetReleased, BudgetReserved, RequestSubmitted
from sagalog.agents.context import HandlerContext
from sagalog.agents.declaration import Agent
from sagalog.agents.failures import NonRetryableError
from sagalog.agents.settings import AgentSettings
from sagalog.events import CompensationRequested
from standins.client import perform


class BudgetAgentSettings(AgentSettings):
    """Settings of the budget agent (env prefix ``BUDGET_AGENT_``)."""

    model_config = SettingsConfigDict(env_prefix="BUDGET_AGENT_", env_file=".env", extra="ignore")

    name: str = "budget-agent"
    ledger_url: str = "http://127.0.0.1:8701"
    topic: str = "procurement.events"


settings = BudgetAgentSettings()
agent = Agent(settings.name, topics=[settings.topic])


def cost_center_of(department: str) -> str:
    return f"CC-{department.upper()[:8]}"


@agent.handles(RequestSubmitted, step="reserve_budget", dependencies=["ledger"])
async def reserve_budget(event: RequestSubmitted, ctx: HandlerContext) -> BudgetReserved:
    if event.amount <= 0:
        raise NonRetryableError(
            f"request {event.request_id}: amount must be positive, got {event.amount}"
        )
    reservation = await ctx.effect(
        "ledger.reserve",
        perform,
        settings.ledger_url,
        "reserve",
        {
            "request_id": event.request_id,
            "amount": str(event.amount),
            "currency": event.currency,
            "cost_center": cost_center_of(event.department),
        },
    )
    return BudgetReserved(
        reservation_id=reservation["id"],
        cost_center=cost_center_of(event.department),
        amount=event.amount,
        currency=event.currency,
    )


@agent.compensates("reserve_budget", dependencies=["ledger"])
async def release_budget(request: CompensationRequested, ctx: HandlerContext) -> BudgetReleased:
    reserved = ctx.workflow.get("procurement.v1.BudgetReserved")
    if reserved is None:  # nothing was reserved: releasing is a no-op, still completed
        return BudgetReleased(reservation_id="none", reason=request.reason or "compensation")
    await ctx.effect(
        "ledger.release",
        perform,
        settings.ledger_url,
        "release",
        {"reservation_id": reserved["reservation_id"]},
    )
    return BudgetReleased(
        reservation_id=reserved["reservation_id"], reason=request.reason or "compensation"
    )
