"""Retrieve the policies and prior contracts for a classified request; publish
PoliciesRetrieved."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from procurement.corpus import CORPUS_DIR, documents_fingerprint, load_documents
from procurement.events import (
    PoliciesRetrieved,
    RequestClassified,
    RequestSubmitted,
    RetrievedDocument,
)
from procurement.retrieval import RETRIEVER_NAME, BM25Index
from sagalog import Agent, AgentSettings, HandlerContext


class RetrievalAgentSettings(AgentSettings):
    """Settings of the retrieval agent (env prefix ``RETRIEVAL_AGENT_``)."""

    model_config = SettingsConfigDict(
        env_prefix="RETRIEVAL_AGENT_", env_file=".env", extra="ignore"
    )

    name: str = "retrieval-agent"
    corpus_dir: Path = CORPUS_DIR
    top_k: int = Field(default=5, ge=1, le=50, description="Documents returned per request.")


settings = RetrievalAgentSettings()
agent = Agent(settings.name)
_documents = load_documents(settings.corpus_dir)
index = BM25Index(_documents)
retriever_id = (
    f"{RETRIEVER_NAME} k1={index.k1:g} b={index.b:g} data={documents_fingerprint(_documents)}"
)


@agent.handles(step="retrieve_policies")
async def retrieve_policies(event: RequestClassified, ctx: HandlerContext) -> PoliciesRetrieved:
    submitted = ctx.workflow.require(RequestSubmitted)
    query = f"{submitted.title}\n{submitted.description}\n{event.category}"
    hits = index.search(query, top_k=settings.top_k)
    return PoliciesRetrieved(
        request_id=event.request_id,
        documents=[
            RetrievedDocument(
                document_id=hit.document.document_id,
                kind=hit.document.kind,
                title=hit.document.title,
                score=round(hit.score, 4),
            )
            for hit in hits
        ],
        retriever=retriever_id,
    )
