"""Score a request's risk, offline or with a language model; publish RiskScored with
its decision lineage."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Self

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import SettingsConfigDict

from procurement.corpus import CORPUS_DIR, load_documents
from procurement.events import PoliciesRetrieved, RequestClassified, RequestSubmitted, RiskScored
from procurement.exceptions import ModelAnswerError
from procurement.risk import (
    OFFLINE_MODEL_ID,
    SYSTEM_PROMPT,
    RiskAssessment,
    RiskInput,
    build_messages,
    parse_answer,
    prompt_text,
    score_offline,
)
from risk_agent.llm import chat_completion, request_parameters
from sagalog import Agent, AgentSettings, DecisionLineage, HandlerContext, NonRetryableError


class RiskAgentSettings(AgentSettings):
    """Settings of the risk agent (env prefix ``RISK_AGENT_``)."""

    model_config = SettingsConfigDict(env_prefix="RISK_AGENT_", env_file=".env", extra="ignore")

    name: str = "risk-agent"
    corpus_dir: Path = CORPUS_DIR
    llm_base_url: str | None = Field(
        default=None,
        description="An OpenAI-compatible API, e.g. https://api.openai.com/v1 or "
        "http://127.0.0.1:8000/v1; unset, the offline model decides.",
    )
    llm_model: str = ""
    llm_api_key: SecretStr = SecretStr("")
    llm_timeout_s: float = Field(default=30.0, gt=0)
    llm_json_mode: bool = Field(
        default=True, description="Send response_format=json_object (off for servers without it)."
    )

    @model_validator(mode="after")
    def _model_named(self) -> Self:
        if self.llm_base_url and not self.llm_model:
            raise ValueError(
                "RISK_AGENT_LLM_BASE_URL is set but RISK_AGENT_LLM_MODEL is not: name the "
                "model to ask, or unset the URL to use the offline model"
            )
        return self


settings = RiskAgentSettings()
agent = Agent(settings.name)
_documents = load_documents(settings.corpus_dir)
documents_by_id = {d.document_id: d for d in _documents}
contracts = tuple(d for d in _documents if d.kind == "contract")


Scored = tuple[RiskAssessment, DecisionLineage, str]
"""The assessment, its lineage and the prompt it was decided on (``RiskScored.prompt``:
inline when small, a blob when a blob store is set and it is large)."""


Inputs = dict[str, str]
"""What the prompt was built from, by the ids in ``input_refs``: the request's payload
(canonical JSON) and each document's text; the lineage keeps their hashes."""


def _offline(facts: RiskInput, ctx: HandlerContext, inputs: Inputs) -> Scored:
    prompt = json.dumps(facts.facts(), sort_keys=True, separators=(",", ":"))
    lineage = ctx.decision(
        model_id=OFFLINE_MODEL_ID, prompt=prompt, input_refs=list(inputs), inputs=inputs
    )
    return score_offline(facts), lineage, prompt


async def _with_model(facts: RiskInput, ctx: HandlerContext, inputs: Inputs) -> Scored:
    assert settings.llm_base_url is not None
    messages = build_messages(facts)
    try:
        reply = await ctx.effect(
            "llm.score_risk",
            chat_completion,
            settings.llm_base_url,
            settings.llm_model,
            messages,
            api_key=settings.llm_api_key.get_secret_value(),
            timeout_s=settings.llm_timeout_s,
            json_mode=settings.llm_json_mode,
        )
        assessment = parse_answer(reply["content"])
    except (ModelAnswerError, NonRetryableError) as exc:
        fallback, lineage, prompt = _offline(facts, ctx, inputs)
        why = f"The language model {settings.llm_model}'s answer was rejected ({exc})"
        return (
            dataclasses.replace(
                fallback,
                rationale=f"{why}; the offline model scored instead. {fallback.rationale}",
                factors=(
                    *fallback.factors,
                    "scored by the offline model: language model answer rejected",
                ),
            ),
            lineage,
            prompt,
        )
    prompt = prompt_text(messages)
    lineage = ctx.decision(
        model_id=f"openai-compatible:{reply['model']}",
        prompt=prompt,
        input_refs=list(inputs),
        parameters=request_parameters(settings.llm_model, json_mode=settings.llm_json_mode),
        template=SYSTEM_PROMPT,
        inputs=inputs,
    )
    return assessment, lineage, prompt


@agent.handles(
    step="score_risk",
    dependencies=["llm"],
    timeout_s=settings.llm_timeout_s + 5 if settings.llm_base_url else None,
)
async def score_risk(event: PoliciesRetrieved, ctx: HandlerContext) -> RiskScored:
    request = ctx.workflow.require(RequestSubmitted)
    classified = ctx.workflow.require(RequestClassified)
    facts = RiskInput(
        request_id=request.request_id,
        title=request.title,
        description=request.description,
        category=classified.category,
        confidence=classified.confidence,
        amount=request.amount,
        currency=request.currency,
        vendor=request.vendor,
        priority=str(request.priority),
        # A document the corpus no longer has (another agent's newer corpus) is skipped.
        documents=tuple(
            documents_by_id[d.document_id]
            for d in event.documents
            if d.document_id in documents_by_id
        ),
        contracts=contracts,
    )
    inputs: Inputs = {
        ctx.workflow.latest_id(RequestSubmitted) or "": json.dumps(
            request.to_avro(), sort_keys=True, separators=(",", ":"), default=str
        ),
        **{d.document_id: d.body for d in facts.documents},
    }
    if settings.llm_base_url:
        assessment, lineage, prompt = await _with_model(facts, ctx, inputs)
    else:
        assessment, lineage, prompt = _offline(facts, ctx, inputs)
    return RiskScored(
        request_id=request.request_id,
        score=assessment.score,
        level=assessment.level,
        rationale=assessment.rationale,
        factors=list(assessment.factors),
        lineage=lineage,
        prompt=prompt,
    )
