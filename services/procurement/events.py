"""Procurement business events (``schemas/procurement/v1``)."""

from __future__ import annotations

import datetime as dt
import decimal
import enum

from sagalog.contracts.models import Event


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
