"""Gather a filing's source documents and hold them; lift the hold when compensating.

A filing must be drawn from documents that do not change under it, so retrieving
them is an effect: the records system puts them on legal hold, and a filing that is
rejected or fails releases the hold again.
"""

from __future__ import annotations

from pydantic_settings import SettingsConfigDict

from filings.events import DocumentsReleased, DocumentsRetrieved, FilingOpened, SourceDocument
from filings.sources import documents_for
from sagalog import Agent, AgentSettings, CompensationRequested, HandlerContext
from standins.client import perform_once


class RecordsAgentSettings(AgentSettings):
    """Settings of the records agent (env prefix ``RECORDS_AGENT_``)."""

    model_config = SettingsConfigDict(env_prefix="RECORDS_AGENT_", env_file=".env", extra="ignore")

    name: str = "records-agent"
    records_url: str = "http://127.0.0.1:8711"


settings = RecordsAgentSettings()
agent = Agent(settings.name)


@agent.handles(step="retrieve_documents", dependencies=["records"])
async def retrieve_documents(event: FilingOpened, ctx: HandlerContext) -> DocumentsRetrieved:
    sources = documents_for(event.company, event.regulator, event.due.year - 1)
    hold = await ctx.effect(
        "records.hold",
        perform_once,
        settings.records_url,
        "hold",
        {
            "filing_number": event.filing_number,
            "documents": ",".join(s.document_id for s in sources),
        },
        key=f"hold:{ctx.workflow_id}",
    )
    return DocumentsRetrieved(
        filing_number=event.filing_number,
        hold_id=hold["id"],
        documents=[
            SourceDocument(document_id=s.document_id, title=s.title, text=s.text) for s in sources
        ],
    )


@agent.compensates("retrieve_documents", dependencies=["records"])
async def release_documents(
    request: CompensationRequested, ctx: HandlerContext
) -> DocumentsReleased:
    reason = request.reason or "compensation"
    retrieved = ctx.workflow.latest(DocumentsRetrieved)
    if retrieved is None:  # nothing was held: releasing is a no-op, still completed
        return DocumentsReleased(hold_id="none", reason=reason)
    await ctx.effect(
        "records.release",
        perform_once,
        settings.records_url,
        "release",
        {"hold_id": retrieved.hold_id},
        key=f"release:{ctx.workflow_id}",
    )
    return DocumentsReleased(hold_id=retrieved.hold_id, reason=reason)
