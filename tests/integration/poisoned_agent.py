"""A budget agent whose compensation has a bug until it is fixed, for the dead-letter test.

``python -m tests.integration.poisoned_agent`` (``PYTHONPATH`` holding the repository
and ``services/``). It reserves on ``RequestSubmitted`` (step ``reserve_budget`` of the
test flow ``flows/orders.v1.yaml``) and releases on ``CompensationRequested``. While
``POISONED_AGENT_RELEASE_BROKEN`` is true, releasing fails for good
(``NonRetryableError``), so the runtime dead-letters the request: the poison. The fix
is a restart with the setting off.
"""

from __future__ import annotations

from pydantic_settings import SettingsConfigDict

from procurement.events import BudgetReleased, BudgetReserved, RequestSubmitted
from sagalog.agents import Agent, AgentSettings, HandlerContext, NonRetryableError, run_agent
from sagalog.events import CompensationRequested


class PoisonedAgentSettings(AgentSettings):
    model_config = SettingsConfigDict(env_prefix="POISONED_AGENT_", extra="ignore")

    name: str = "budget-agent"
    release_broken: bool = False


settings = PoisonedAgentSettings()
agent = Agent(settings.name)  # on the steps of the test's flow


@agent.handles(step="reserve_budget")
async def reserve_budget(event: RequestSubmitted, ctx: HandlerContext) -> BudgetReserved:
    return BudgetReserved(
        reservation_id=f"R-{ctx.headers.workflow_id}",
        cost_center="CC-IT",
        amount=event.amount,
        currency=event.currency,
    )


@agent.compensates("reserve_budget")
async def release_budget(request: CompensationRequested, ctx: HandlerContext) -> BudgetReleased:
    if settings.release_broken:
        raise NonRetryableError(
            f"release of R-{ctx.headers.workflow_id}: the ledger call is built wrong "
            "(the bug this test fixes by restarting the agent)"
        )
    return BudgetReleased(
        reservation_id=f"R-{ctx.headers.workflow_id}", reason=request.reason or "compensation"
    )


if __name__ == "__main__":
    run_agent(agent, settings)
