"""Regulatory-filing business events (``schemas/filings/v1``)."""

from __future__ import annotations

import datetime as dt

from sagalog.agents.lineage import DecisionLineage
from sagalog.contracts.models import Event


class FilingOpened(Event):
    """A filing was opened; this starts a filing workflow."""

    event_type = "filings.v1.FilingOpened"

    filing_number: str
    regulator: str
    due: dt.datetime


class SignatureCaptured(Event):
    """The responsible officer signed the filing (the signing service publishes it)."""

    event_type = "filings.v1.SignatureCaptured"

    filing_number: str
    signed_by: str
    signed_at: dt.datetime


class FilingDrafted(Event):
    """A model drafted the filing's text, under the drafting agent's budget."""

    event_type = "filings.v1.FilingDrafted"

    filing_number: str
    draft: str
    lineage: DecisionLineage
