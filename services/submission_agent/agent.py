"""Submit a signed filing to the regulator; withdraw it as the follow-up."""

from __future__ import annotations

import hashlib

from pydantic_settings import SettingsConfigDict

from filings.events import (
    FilingDrafted,
    FilingOpened,
    FilingSubmitted,
    FilingWithdrawn,
    SignatureCaptured,
)
from sagalog import Agent, AgentSettings, CompensationRequested, HandlerContext, WaitEnded
from standins.client import perform_once


class SubmissionAgentSettings(AgentSettings):
    """Settings of the submission agent (env prefix ``SUBMISSION_AGENT_``)."""

    model_config = SettingsConfigDict(
        env_prefix="SUBMISSION_AGENT_", env_file=".env", extra="ignore"
    )

    name: str = "submission-agent"
    regulator_url: str = "http://127.0.0.1:8713"
    wait: str = "signature"
    """The flow's wait whose end starts the submission."""


settings = SubmissionAgentSettings()
agent = Agent(settings.name)


@agent.handles(step="submit_filing", dependencies=["regulator"])
async def submit_filing(event: WaitEnded, ctx: HandlerContext) -> FilingSubmitted | None:
    if event.wait != settings.wait or event.timed_out or event.missing:
        return None  # another wait, or no signature came: the tracker compensates
    if ctx.workflow.latest(FilingSubmitted) is not None:
        return None  # submitted already
    opened = ctx.workflow.require(FilingOpened)
    drafted = ctx.workflow.require(FilingDrafted)
    signed = ctx.workflow.require(SignatureCaptured)
    receipt = await ctx.effect(
        "regulator.submit",
        perform_once,
        settings.regulator_url,
        "submit",
        {
            "filing_number": opened.filing_number,
            "regulator": opened.regulator,
            "company": opened.company,
            "signed_by": signed.signed_by,
            "draft_sha256": hashlib.sha256(drafted.draft.encode()).hexdigest(),
        },
        key=f"submission:{ctx.workflow_id}",
    )
    return FilingSubmitted(
        filing_number=opened.filing_number,
        regulator=opened.regulator,
        submission_id=receipt["id"],
        signed_by=signed.signed_by,
    )


@agent.compensates("submit_filing", dependencies=["regulator"])
async def withdraw_filing(request: CompensationRequested, ctx: HandlerContext) -> FilingWithdrawn:
    reason = request.reason or "the filing was withdrawn"
    submitted = ctx.workflow.latest(FilingSubmitted)
    if submitted is None:  # never submitted: nothing to withdraw, still completed
        opened = ctx.workflow.latest(FilingOpened)
        return FilingWithdrawn(
            filing_number="none" if opened is None else opened.filing_number,
            submission_id="none",
            reason=reason,
        )
    await ctx.effect(
        "regulator.withdraw",
        perform_once,
        settings.regulator_url,
        "withdraw",
        {"submission_id": submitted.submission_id, "reason": reason},
        key=f"withdrawal:{ctx.workflow_id}",
    )
    return FilingWithdrawn(
        filing_number=submitted.filing_number,
        submission_id=submitted.submission_id,
        reason=reason,
    )
