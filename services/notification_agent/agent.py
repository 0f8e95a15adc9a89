"""Notify the vendor of a purchase order; send a correction notice when it is undone."""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic_settings import SettingsConfigDict

from procurement.events import CorrectionNoticeSent, PurchaseOrderCreated, VendorNotified
from sagalog import Agent, AgentSettings, CompensationRequested, HandlerContext
from standins.client import perform


class NotificationAgentSettings(AgentSettings):
    """Settings of the notification agent (env prefix ``NOTIFICATION_AGENT_``)."""

    model_config = SettingsConfigDict(
        env_prefix="NOTIFICATION_AGENT_", env_file=".env", extra="ignore"
    )

    name: str = "notification-agent"
    mail_url: str = "http://127.0.0.1:8703"
    sender: str = "procurement@example.com"


settings = NotificationAgentSettings()
agent = Agent(settings.name)
CHANNEL = "email"


def message_key(purpose: str, workflow_id: str, purchase_order_id: str) -> str:
    """The mail service's idempotency key of one message: one per workflow, order and
    purpose, so a redelivered event or a repeated compensation request (the tracker
    asks again when the first is slow) never mails the vendor twice."""
    material = "\x1f".join((purpose, workflow_id, purchase_order_id))
    return hashlib.sha256(material.encode()).hexdigest()[:32]


def send_mail(
    mail_url: str, body: dict[str, Any], *, key: str, idempotency_key: str
) -> dict[str, Any]:
    """Send under the message's own key (see ``message_key``), not the runtime's, which
    is one per handled event; the runtime's still keeps a redelivery from calling."""
    del idempotency_key
    return perform(mail_url, "send", body, idempotency_key=key)


@agent.handles(step="notify_vendor", dependencies=["mail"])
async def notify_vendor(event: PurchaseOrderCreated, ctx: HandlerContext) -> VendorNotified | None:
    notified = ctx.workflow.latest(VendorNotified)
    if notified is not None and notified.purchase_order_id == event.purchase_order_id:
        return None  # this order was sent already (the order was announced twice)
    message = await ctx.effect(
        "mail.send",
        send_mail,
        settings.mail_url,
        {
            "from": settings.sender,
            "to": event.vendor,
            "subject": f"Purchase order {event.purchase_order_id}",
            "text": (
                f"Please supply the goods or services of purchase order "
                f"{event.purchase_order_id} (request {event.request_id}) for "
                f"{event.amount} {event.currency}."
            ),
            "purchase_order_id": event.purchase_order_id,
            "request_id": event.request_id,
        },
        key=message_key("purchase-order", ctx.workflow_id, event.purchase_order_id),
    )
    return VendorNotified(
        request_id=event.request_id,
        purchase_order_id=event.purchase_order_id,
        vendor=event.vendor,
        channel=CHANNEL,
        message_id=message["id"],
    )


@agent.compensates("notify_vendor", dependencies=["mail"])
async def send_correction_notice(
    request: CompensationRequested, ctx: HandlerContext
) -> CorrectionNoticeSent:
    reason = request.reason or "the purchase order was withdrawn"
    notified = ctx.workflow.latest(VendorNotified)
    if notified is None:  # the vendor was never told: nothing to correct, still completed
        ordered = ctx.workflow.latest(PurchaseOrderCreated)
        return CorrectionNoticeSent(
            request_id="none" if ordered is None else ordered.request_id,
            purchase_order_id="none" if ordered is None else ordered.purchase_order_id,
            vendor="none" if ordered is None else ordered.vendor,
            message_id="none",
            reason=reason,
        )
    order_id, vendor = notified.purchase_order_id, notified.vendor
    message = await ctx.effect(
        "mail.send_correction",
        send_mail,
        settings.mail_url,
        {
            "from": settings.sender,
            "to": vendor,
            "subject": f"Correction: purchase order {order_id} is withdrawn",
            "text": (
                f"Please disregard purchase order {order_id} sent earlier "
                f"(message {notified.message_id}): {reason}."
            ),
            "purchase_order_id": order_id,
            "request_id": notified.request_id,
            "corrects": notified.message_id,
        },
        key=message_key("correction-notice", ctx.workflow_id, order_id),
    )
    return CorrectionNoticeSent(
        request_id=notified.request_id,
        purchase_order_id=order_id,
        vendor=vendor,
        message_id=message["id"],
        reason=reason,
    )
