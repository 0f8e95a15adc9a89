"""Submit a signed filing to the regulator; withdraw it as the follow-up."""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic_settings import SettingsConfigDict

from filings.events import (
    FilingDrafted,
    FilingOpened,
    FilingSubmitted,
    FilingWithdrawn,
    SignatureCaptured,
)
from sagalog.agents import Agent, AgentSettings, HandlerContext, NonRetryableError
from sagalog.events import CompensationRequested, WaitEnded
from standins.client import perform_once


class SubmissionAgentSettings(AgentSettings):
    """Settings of the submission agent (env prefix ``SUBMISSION_AGENT_``)."""

    model_config = SettingsConfigDict(
        env_prefix="SUBMISSION_AGENT_", env_file=".env", extra="ignore"
    )

    name: str = "submission-agent"
    topic: str = "filings.events"
    regulator_url: str = "http://127.0.0.1:8713"
    wait: str = "signature"
    """The flow's wait whose end starts the submission."""


settings = SubmissionAgentSettings()
agent = Agent(
    settings.name,
    topics=[settings.topic],
    workflow_context=[FilingOpened, FilingDrafted, SignatureCaptured, FilingSubmitted],
)


def _required(ctx: HandlerContext, event_type: str) -> dict[str, Any]:
    found = ctx.workflow.get(event_type)
    if found is None:
        raise NonRetryableError(
            f"workflow {ctx.workflow_id}: the signature wait ended, but the workflow has no "
            f"{event_type}: there is nothing signed to submit"
        )
    return dict(found)


@agent.handles(WaitEnded, step="submit_filing", dependencies=["regulator"])
async def submit_filing(event: WaitEnded, ctx: HandlerContext) -> FilingSubmitted | None:
    if event.wait != settings.wait or event.timed_out or event.missing:
        return None  # another wait, or no signature came: the tracker compensates
    if ctx.workflow.get(FilingSubmitted.event_type) is not None:
        return None  # submitted already
    opened = FilingOpened.from_avro(_required(ctx, FilingOpened.event_type))
    drafted = _required(ctx, FilingDrafted.event_type)
    signed = _required(ctx, SignatureCaptured.event_type)
    receipt = await ctx.effect(
        "regulator.submit",
        perform_once,
        settings.regulator_url,
        "submit",
        {
            "filing_number": opened.filing_number,
            "regulator": opened.regulator,
            "company": opened.company,
            "signed_by": signed["signed_by"],
            "draft_sha256": hashlib.sha256(str(drafted["draft"]).encode()).hexdigest(),
        },
        key=f"submission:{ctx.workflow_id}",
    )
    return FilingSubmitted(
        filing_number=opened.filing_number,
        regulator=opened.regulator,
        submission_id=receipt["id"],
        signed_by=str(signed["signed_by"]),
    )


@agent.compensates("submit_filing", dependencies=["regulator"])
async def withdraw_filing(request: CompensationRequested, ctx: HandlerContext) -> FilingWithdrawn:
    reason = request.reason or "the filing was withdrawn"
    submitted = ctx.workflow.get(FilingSubmitted.event_type)
    if submitted is None:  # never submitted: nothing to withdraw, still completed
        opened = ctx.workflow.get(FilingOpened.event_type) or {}
        return FilingWithdrawn(
            filing_number=str(opened.get("filing_number", "none")),
            submission_id="none",
            reason=reason,
        )
    await ctx.effect(
        "regulator.withdraw",
        perform_once,
        settings.regulator_url,
        "withdraw",
        {"submission_id": submitted["submission_id"], "reason": reason},
        key=f"withdrawal:{ctx.workflow_id}",
    )
    return FilingWithdrawn(
        filing_number=str(submitted["filing_number"]),
        submission_id=str(submitted["submission_id"]),
        reason=reason,
    )
