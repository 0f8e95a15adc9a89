"""Draft a filing with a model that calls tools, under the tenant's token budget."""

from __future__ import annotations

from pydantic import SecretStr
from pydantic_settings import SettingsConfigDict

from filings import drafting
from filings.events import DocumentsRetrieved, FilingDrafted, FilingOpened
from filings.tools import filing_tools
from sagalog import Agent, AgentSettings, Budget, ChatModel, HandlerContext, run_tool_loop


class DraftingAgentSettings(AgentSettings):
    """Settings of the drafting agent (env prefix ``DRAFTING_AGENT_``)."""

    model_config = SettingsConfigDict(env_prefix="DRAFTING_AGENT_", env_file=".env", extra="ignore")

    name: str = "drafting-agent"
    llm_base_url: str = "http://127.0.0.1:8089/v1"
    llm_api_key: SecretStr = SecretStr("")
    llm_model: str = "gpt-4o-mini"
    llm_timeout_s: float = 60.0
    max_tokens: int = 300
    registers_url: str = "http://127.0.0.1:8712"
    tokens_per_minute: int = 600_000
    """The standard plan's budget, per tenant, for all instances together."""
    trial_tokens_per_minute: int = 600
    """The trial plan's budget: each of the topic's partitions holds its part, far
    below one drafting call, so a trial filing is refused for its budget."""


settings = DraftingAgentSettings()
model = ChatModel(
    settings.llm_base_url,
    api_key=settings.llm_api_key.get_secret_value(),
    timeout_s=settings.llm_timeout_s,
)
tools = filing_tools(settings.registers_url)
agent = Agent(
    settings.name,
    budgets=[
        Budget.of(
            drafting.STANDARD_BUDGET,
            tokens_per_minute=settings.tokens_per_minute,
            key=lambda ctx: ctx.workflow.require(FilingOpened).tenant,
        ),
        Budget.of(drafting.TRIAL_BUDGET, tokens_per_minute=settings.trial_tokens_per_minute),
    ],
)


@agent.handles(step="draft_filing", dependencies=["model", "registers"])
async def draft_filing(event: DocumentsRetrieved, ctx: HandlerContext) -> FilingDrafted:
    filing = ctx.workflow.require(FilingOpened)
    documents = [(d.title, str(ctx.content(d.text) or "")) for d in event.documents]
    result = await run_tool_loop(
        ctx,
        drafting.budget_for(filing.tenant),
        model.chat,
        model=settings.llm_model,
        messages=drafting.messages(filing, documents),
        tools=tools,
        max_tokens=settings.max_tokens,
        template=drafting.INSTRUCTIONS,
        stream=True,  # the draft reaches GET /v1/workflows/{id}/stream as it is written
        temperature=0,
    )
    return FilingDrafted(
        filing_number=filing.filing_number,
        draft=result.answer,
        lineage=result.lineage,
        tools_used=[call.name for call in result.calls],
        model_turns=result.turns,
    )
