"""An agent that drafts filings with a model, under a token budget: the budget tests'
agent.

``python -m tests.integration.model_agent`` (``PYTHONPATH`` holding the repository
and ``services/``). On ``filings.v1.FilingOpened`` (step ``draft_filing``) it asks the
model for a draft through ``ctx.model_call`` under the budget ``model``
(``MODEL_AGENT_TOKENS_PER_MINUTE`` for all instances together) and returns
``filings.v1.FilingDrafted``. What it does when the budget has no room is the flow's
(``on_budget_exhausted``), read from the project it runs in.
"""

from __future__ import annotations

from pydantic_settings import SettingsConfigDict

from filings.events import FilingDrafted, FilingOpened
from sagalog.agents import Agent, AgentSettings, Budget, ChatModel, HandlerContext, run_agent

INSTRUCTIONS = "You draft regulatory filings. Answer with the filing's first paragraph."


class ModelAgentSettings(AgentSettings):
    model_config = SettingsConfigDict(env_prefix="MODEL_AGENT_", extra="ignore")

    name: str = "drafting-agent"
    model_url: str = "http://127.0.0.1:8089/v1"
    model: str = "gpt-4o-mini"
    tokens_per_minute: int = 10_000
    max_tokens: int = 40
    stream: bool = False
    """Ask with ``ctx.model_stream``: the draft goes to the workflow's stream as written."""


settings = ModelAgentSettings()
model = ChatModel(settings.model_url, timeout_s=10)
agent = Agent(
    settings.name,
    budgets=[Budget.of("model", tokens_per_minute=settings.tokens_per_minute)],
)


@agent.handles(step="draft_filing", dependencies=["model"])
async def draft_filing(event: FilingOpened, ctx: HandlerContext) -> FilingDrafted:
    ask = (
        f"Draft filing {event.filing_number} for {event.regulator}, due "
        f"{event.due:%Y-%m-%d}: state who files, what and under which rule."
    )
    messages = [{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": ask}]
    request = {"model": settings.model, "messages": messages, "max_tokens": settings.max_tokens}
    if settings.stream:
        answer = await ctx.model_stream("model", model.chat, **request, temperature=0).result()
    else:
        answer = await ctx.model_call("model", model.chat, **request, temperature=0)
    return FilingDrafted(
        filing_number=event.filing_number,
        draft=answer["choices"][0]["message"]["content"],
        lineage=ctx.decision(
            model_id=str(answer.get("model") or settings.model),
            prompt=ask,
            parameters={"temperature": 0, "max_tokens": settings.max_tokens},
            template=INSTRUCTIONS,
        ),
    )


if __name__ == "__main__":
    run_agent(agent, settings)
