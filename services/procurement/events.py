"""Procurement business events (``schemas/procurement/v1``)."""

from __future__ import annotations

import datetime as dt
import decimal
import enum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from sagalog import BlobRef, DecisionLineage, Event, PersonalData, enum_default

Money = Annotated[decimal.Decimal, Field(max_digits=14, decimal_places=2)]
"""An amount in a currency's units, to the cent (Avro decimal, precision 14, scale 2)."""


@enum_default("NORMAL")
class Priority(enum.StrEnum):
    LOW = "LOW"
    NORMAL = "NORMAL"
    HIGH = "HIGH"
    URGENT = "URGENT"


class RequestSubmitted(Event):
    """An employee submitted a purchase request; this starts a procurement workflow."""

    event_type = "procurement.v1.RequestSubmitted"

    request_id: str
    requester: Annotated[str, PersonalData(subject="requester")]
    """The requester's e-mail address: personal data, encrypted per requester
    (sagalog.personal)."""
    department: str
    title: str
    description: str
    amount: Money
    currency: str
    """ISO 4217 code."""
    vendor: str
    priority: Priority = Priority.NORMAL
    submitted_at: dt.datetime


class BudgetReserved(Event):
    """The budget ledger holds the request's amount against a cost center until it is spent
    or released."""

    event_type = "procurement.v1.BudgetReserved"

    reservation_id: str
    cost_center: str
    amount: Money
    currency: str


class BudgetReleased(Event):
    """Compensation of BudgetReserved: the reservation no longer holds any amount."""

    event_type = "procurement.v1.BudgetReleased"

    reservation_id: str
    reason: str


class RequestClassified(Event):
    """The intake agent classified a purchase request and extracted its fields from the free
    text."""

    event_type = "procurement.v1.RequestClassified"

    request_id: str
    category: str
    """The purchase category, e.g. software, hardware, services, travel."""
    confidence: float
    """The classifier's confidence in the category, 0 to 1."""
    extracted: dict[str, str]
    """Fields read from the request's text (e.g. quantity, cost_center, contract_term)."""
    classifier: str
    """Which classifier decided, with its version."""


class RetrievedDocument(BaseModel):
    """One policy or prior contract, best match first."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    document_id: str
    kind: str
    """policy or contract."""
    title: str
    score: float
    """The retriever's relevance score."""


class PoliciesRetrieved(Event):
    """The retrieval agent found the policies and prior contracts that apply to a
    request."""

    event_type = "procurement.v1.PoliciesRetrieved"

    request_id: str
    documents: list[RetrievedDocument]
    retriever: str
    """Which retriever searched, e.g. bm25 over the policy corpus."""


@enum_default("HIGH")
class RiskLevel(enum.StrEnum):
    LOW = "LOW"
    MEDIUM = "MEDIUM"
    HIGH = "HIGH"


class RiskScored(Event):
    """The risk agent scored a request; its lineage says which model decided, on what prompt
    and from which inputs."""

    event_type = "procurement.v1.RiskScored"

    request_id: str
    score: float
    """Risk from 0 (none) to 1 (certain)."""
    level: RiskLevel
    rationale: str
    """Why, for the approver."""
    factors: list[str]
    """The risk factors found."""
    lineage: DecisionLineage
    prompt: str | BlobRef | None = None
    """The prompt the model was given: inline when small, else a blob of the blob store,
    which the audit checks against this hash (sagalog.blobs)."""


class PurchaseOrderCreated(Event):
    """The purchasing agent created a purchase order in the ERP."""

    event_type = "procurement.v1.PurchaseOrderCreated"

    purchase_order_id: str
    """The ERP's id of the order."""
    request_id: str
    vendor: str
    amount: Money
    currency: str
    """ISO 4217 code."""


class PurchaseOrderCancelled(Event):
    """Compensation of PurchaseOrderCreated: the ERP order is cancelled."""

    event_type = "procurement.v1.PurchaseOrderCancelled"

    purchase_order_id: str
    reason: str


class VendorNotified(Event):
    """The notification agent sent the purchase order to the vendor; a sent message cannot
    be unsent."""

    event_type = "procurement.v1.VendorNotified"

    request_id: str
    purchase_order_id: str
    vendor: str
    channel: str
    """How the vendor was reached, e.g. email."""
    message_id: str
    """The mail service's id of the message."""


class CorrectionNoticeSent(Event):
    """Follow-up of the irreversible VendorNotified: the vendor was told the order no longer
    stands."""

    event_type = "procurement.v1.CorrectionNoticeSent"

    request_id: str
    purchase_order_id: str
    vendor: str
    message_id: str
    reason: str
