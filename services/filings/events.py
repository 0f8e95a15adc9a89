"""Regulatory-filing business events (``schemas/filings/v1``)."""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, ConfigDict

from sagalog import BlobRef, DecisionLineage, Event, Int32


class FilingOpened(Event):
    """A regulatory filing was opened; this starts a filing workflow."""

    event_type = "filings.v1.FilingOpened"

    filing_number: str
    """The regulator's reference, e.g. F-2026-0042."""
    regulator: str
    due: dt.datetime
    """When the regulator expects it."""
    company: str = ""
    """The filer, whose facts and documents the filing is drawn from."""
    tenant: str = "standard"
    """The customer account the filing is made for; its plan decides the model budget the
    drafting runs under."""


# One document a filing is drawn from; its text may travel as a blob reference. (No docstring: the
# record's doc is its class docstring, and the registry holds it without one.)
class SourceDocument(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    document_id: str
    title: str
    text: str | BlobRef | None = None
    """The document's text: inline when small, a blob reference when over the threshold and
    a store is set."""


class DocumentsRetrieved(Event):
    """The filing's source documents were gathered and put on legal hold in the records
    system, so they cannot change while the filing is prepared."""

    event_type = "filings.v1.DocumentsRetrieved"

    filing_number: str
    hold_id: str
    """The records system's legal hold; released when the filing is compensated."""
    documents: list[SourceDocument]


class DocumentsReleased(Event):
    """Compensation of DocumentsRetrieved: the legal hold on the filing's source documents
    was lifted."""

    event_type = "filings.v1.DocumentsReleased"

    hold_id: str
    reason: str


class FilingDrafted(Event):
    """A model drafted the filing's text; its lineage says which model, on what prompt and
    from which inputs. The model calls were made under a budget (sagalog.budgets)."""

    event_type = "filings.v1.FilingDrafted"

    filing_number: str
    draft: str
    """The drafted text, for the legal review."""
    lineage: DecisionLineage
    tools_used: list[str] = []
    """The tools the model called, in order (each an effect named tool.<name>)."""
    model_turns: Int32 = 0
    """The model calls the draft took, each under the drafting budget."""


class SignatureCaptured(Event):
    """The responsible officer signed the filing (published by the signing service, not a
    flow step)."""

    event_type = "filings.v1.SignatureCaptured"

    filing_number: str
    signed_by: str
    signed_at: dt.datetime


class FilingSubmitted(Event):
    """The signed filing was submitted to the regulator, which acknowledged it; a submission
    cannot be taken back, only withdrawn by a further filing."""

    event_type = "filings.v1.FilingSubmitted"

    filing_number: str
    regulator: str
    submission_id: str
    """The regulator's acknowledgement."""
    signed_by: str


class FilingWithdrawn(Event):
    """Follow-up of FilingSubmitted: a notice withdrawing a submission the workflow could
    not stand by."""

    event_type = "filings.v1.FilingWithdrawn"

    filing_number: str
    submission_id: str
    reason: str
