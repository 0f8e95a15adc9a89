"""Classify a submitted request and extract its fields; publish RequestClassified."""

from __future__ import annotations

from pathlib import Path

from pydantic_settings import SettingsConfigDict

from procurement.classifier import train_from_corpus
from procurement.corpus import CORPUS_DIR
from procurement.events import RequestClassified, RequestSubmitted
from procurement.extraction import extract_fields
from sagalog import Agent, AgentSettings, HandlerContext


class IntakeAgentSettings(AgentSettings):
    """Settings of the intake agent (env prefix ``INTAKE_AGENT_``)."""

    model_config = SettingsConfigDict(env_prefix="INTAKE_AGENT_", env_file=".env", extra="ignore")

    name: str = "intake-agent"
    corpus_dir: Path = CORPUS_DIR


settings = IntakeAgentSettings()
agent = Agent(settings.name)
# Trained once per process start: milliseconds on the repository's corpus, and the
# model is a pure function of the corpus files, so every instance decides alike.
classifier = train_from_corpus(settings.corpus_dir)


@agent.handles(step="classify_request")
async def classify_request(event: RequestSubmitted, ctx: HandlerContext) -> RequestClassified:
    text = f"{event.title}\n{event.description}"
    prediction = classifier.predict(text)
    return RequestClassified(
        request_id=event.request_id,
        category=prediction.category,
        confidence=round(prediction.confidence, 6),
        extracted=extract_fields(text),
        classifier=classifier.model_id,
    )
