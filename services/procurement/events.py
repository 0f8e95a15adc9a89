"""Procurement business events (``schemas/procurement/v1``)."""

from __future__ import annotations

import datetime as dt
import decimal
import enum

from pydantic import BaseModel, ConfigDict

from sagalog import BlobRef, DecisionLineage, Event


class Priority(enum.StrEnum):
    LOW = "LOW"
    NORMAL = "NORMAL"
    HIGH = "HIGH"
    URGENT = "URGENT"


class RequestSubmitted(Event):
    """An employee submitted a purchase request; this starts a procurement workflow."""

    event_type = "procurement.v1.RequestSubmitted"

    request_id: str
    requester: str
    department: str
    title: str
    description: str
    amount: decimal.Decimal
    currency: str
    vendor: str
    priority: Priority = Priority.NORMAL
    submitted_at: dt.datetime


class BudgetReserved(Event):
    """The ledger holds the amount against a cost center until spent or released."""

    event_type = "procurement.v1.BudgetReserved"

    reservation_id: str
    cost_center: str
    amount: decimal.Decimal
    currency: str


class BudgetReleased(Event):
    """Compensation of BudgetReserved."""

    event_type = "procurement.v1.BudgetReleased"

    reservation_id: str
    reason: str


class RequestClassified(Event):
    """The intake agent classified a request and extracted its fields from the text."""

    event_type = "procurement.v1.RequestClassified"

    request_id: str
    category: str
    confidence: float
    extracted: dict[str, str]
    classifier: str


class RetrievedDocument(BaseModel):
    """One policy or prior contract that applies to a request, best match first."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    document_id: str
    kind: str
    title: str
    score: float


class PoliciesRetrieved(Event):
    """The retrieval agent found the policies and prior contracts for a request."""

    event_type = "procurement.v1.PoliciesRetrieved"

    request_id: str
    documents: list[RetrievedDocument]
    retriever: str


class RiskLevel(enum.StrEnum):
    LOW = "LOW"
    MEDIUM = "MEDIUM"
    HIGH = "HIGH"


class RiskScored(Event):
    """The risk agent scored a request; ``lineage`` says which model decided and why."""

    event_type = "procurement.v1.RiskScored"

    request_id: str
    score: float
    level: RiskLevel
    rationale: str
    factors: list[str]
    lineage: DecisionLineage
    prompt: str | BlobRef | None = None


class PurchaseOrderCreated(Event):
    """The purchasing agent created a purchase order in the ERP."""

    event_type = "procurement.v1.PurchaseOrderCreated"

    purchase_order_id: str
    request_id: str
    vendor: str
    amount: decimal.Decimal
    currency: str


class PurchaseOrderCancelled(Event):
    """Compensation of PurchaseOrderCreated."""

    event_type = "procurement.v1.PurchaseOrderCancelled"

    purchase_order_id: str
    reason: str


class VendorNotified(Event):
    """The vendor was sent the purchase order: irreversible, its follow-up is a correction."""

    event_type = "procurement.v1.VendorNotified"

    request_id: str
    purchase_order_id: str
    vendor: str
    channel: str
    message_id: str


class CorrectionNoticeSent(Event):
    """Follow-up of VendorNotified: the vendor was told the order no longer stands."""

    event_type = "procurement.v1.CorrectionNoticeSent"

    request_id: str
    purchase_order_id: str
    vendor: str
    message_id: str
    reason: str
