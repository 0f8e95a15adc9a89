"""The budget tests' drafting agent, for a flow whose drafting step a review gate's
decision starts (issue 49, item 4): it opens the filing for review
(``filings.v1.FilingOpened`` -> ``filings.v1.DocumentsRetrieved``, no model call), and
drafts it with the model under the budget ``model`` when the review is approved
(``sagalog.v1.GateDecided`` -> ``filings.v1.FilingDrafted``).

``python -m tests.integration.reviewed_model_agent``, with ``model_agent``'s settings.
"""

from __future__ import annotations

from filings.events import DocumentsRetrieved, FilingDrafted, FilingOpened
from sagalog.agents import Agent, Budget, HandlerContext, run_agent
from sagalog.events import GateDecided, GateDecision, GateOpened

from .model_agent import INSTRUCTIONS, model, settings

REVIEW = "review"

agent = Agent(
    settings.name,
    budgets=[Budget.of("model", tokens_per_minute=settings.tokens_per_minute)],
)


@agent.handles(step="open_review")
async def open_review(event: FilingOpened, ctx: HandlerContext) -> DocumentsRetrieved:
    return DocumentsRetrieved(filing_number=event.filing_number, hold_id="none", documents=[])


@agent.handles(step="draft_filing", dependencies=["model"])
async def draft_filing(event: GateDecided, ctx: HandlerContext) -> FilingDrafted | None:
    if event.gate != REVIEW or event.decision is not GateDecision.APPROVED:
        return None  # the budget gate's own decision, or a rejection: the tracker acts
    opened = ctx.workflow.latest(GateOpened)
    if opened is None or opened.gate != REVIEW:  # as a real approval check reads it
        raise ValueError(f"gate '{event.gate}' decided, and the latest opened is {opened}")
    filing = ctx.workflow.require(FilingOpened)
    ask = f"Draft filing {filing.filing_number} for {filing.regulator}, as reviewed."
    messages = [{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": ask}]
    answer = await ctx.model_call(
        "model",
        model.chat,
        model=settings.model,
        messages=messages,
        max_tokens=settings.max_tokens,
    )
    return FilingDrafted(
        filing_number=filing.filing_number,
        draft=answer["choices"][0]["message"]["content"],
        lineage=ctx.decision(model_id=settings.model, prompt=ask, template=INSTRUCTIONS),
    )


if __name__ == "__main__":
    run_agent(agent, settings)
