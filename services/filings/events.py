"""Regulatory-filing business events (``schemas/filings/v1``)."""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, ConfigDict

from sagalog import BlobRef, DecisionLineage, Event


class FilingOpened(Event):
    """A filing was opened; this starts a filing workflow."""

    event_type = "filings.v1.FilingOpened"

    filing_number: str
    regulator: str
    due: dt.datetime
    company: str = ""
    tenant: str = "standard"


class SourceDocument(BaseModel):
    """One document a filing is drawn from; its text may travel as a blob reference."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    document_id: str
    title: str
    text: str | BlobRef | None = None


class DocumentsRetrieved(Event):
    """The filing's source documents were gathered and put on legal hold."""

    event_type = "filings.v1.DocumentsRetrieved"

    filing_number: str
    hold_id: str
    documents: list[SourceDocument]


class DocumentsReleased(Event):
    """Compensation of ``DocumentsRetrieved``: the legal hold was lifted."""

    event_type = "filings.v1.DocumentsReleased"

    hold_id: str
    reason: str


class FilingDrafted(Event):
    """A model drafted the filing's text, under the drafting agent's budget."""

    event_type = "filings.v1.FilingDrafted"

    filing_number: str
    draft: str
    lineage: DecisionLineage
    tools_used: list[str] = []
    model_turns: int = 0


class SignatureCaptured(Event):
    """The responsible officer signed the filing (the signing service publishes it)."""

    event_type = "filings.v1.SignatureCaptured"

    filing_number: str
    signed_by: str
    signed_at: dt.datetime


class FilingSubmitted(Event):
    """The signed filing was submitted to the regulator, which acknowledged it."""

    event_type = "filings.v1.FilingSubmitted"

    filing_number: str
    regulator: str
    submission_id: str
    signed_by: str


class FilingWithdrawn(Event):
    """Follow-up of ``FilingSubmitted``: a notice withdrawing the submission."""

    event_type = "filings.v1.FilingWithdrawn"

    filing_number: str
    submission_id: str
    reason: str
