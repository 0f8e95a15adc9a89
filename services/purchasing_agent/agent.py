"""Create the purchase order on a verified approval; cancel it when compensating."""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import SettingsConfigDict

from procurement.events import PurchaseOrderCancelled, PurchaseOrderCreated, RequestSubmitted
from sagalog import (
    Agent,
    AgentSettings,
    CompensationRequested,
    GateDecided,
    GateDecision,
    GateOpened,
    GateSecretError,
    HandlerContext,
    checked_secret,
    verify_gate_token,
)
from standins.client import perform


class PurchasingAgentSettings(AgentSettings):
    """Settings of the purchasing agent (env prefix ``PURCHASING_AGENT_``)."""

    model_config = SettingsConfigDict(
        env_prefix="PURCHASING_AGENT_", env_file=".env", extra="ignore"
    )

    name: str = "purchasing-agent"
    erp_url: str = "http://127.0.0.1:8702"
    gate: str = Field(default="manager_approval", description="The gate whose approval orders.")
    gate_secret: SecretStr = Field(
        default=SecretStr(""),
        description="Key of the gates' HMAC tokens; the saga tracker's gate secret.",
    )

    @field_validator("gate_secret")
    @classmethod
    def _strong_enough(cls, secret: SecretStr) -> SecretStr:
        try:
            checked_secret(
                secret,
                setting="PURCHASING_AGENT_GATE_SECRET",
                remedy="set it to the saga tracker's gate secret: without it no approval "
                "can be verified",
            )
        except GateSecretError as exc:
            raise ValueError(str(exc)) from exc  # pydantic reports ValueErrors only
        return secret


settings = PurchasingAgentSettings()
agent = Agent(settings.name)
log = logging.getLogger(f"sagalog.agent.{settings.name}")


def approval_refusal(event: GateDecided, ctx: HandlerContext, secret: bytes) -> str | None:
    """Why an APPROVED decision must not order anything, or None when it may.

    The token must be the one of the gate's current opening: the attempt comes from
    the workflow's latest ``GateOpened`` (escalations keep the attempt), as the tracker
    checks it. Anything else is forged or expired.
    """
    opened = ctx.workflow.latest(GateOpened)
    if opened is None or opened.gate != event.gate:
        return f"gate '{event.gate}' was never opened in this workflow"
    attempt = opened.attempt
    if not verify_gate_token(
        secret, event.token, workflow_id=ctx.workflow_id, gate=event.gate, attempt=attempt
    ):
        return (
            f"the token does not verify for opening {attempt} of gate '{event.gate}': "
            "forged, or for an earlier opening"
        )
    if ctx.workflow.latest_id(CompensationRequested) is not None:
        return "the workflow is being compensated: the approval came too late"
    return None


def _refuse(event: GateDecided, ctx: HandlerContext, reason: str) -> None:
    log.warning(
        f"refused the approval of gate '{event.gate}' by {event.decided_by}: {reason}",
        extra={
            "sagalog": {
                "agent": settings.name,
                "instance": settings.instance_id,
                "action": "refused",
                "workflow_id": ctx.workflow_id,
                "event_id": ctx.event_id,
                "event_type": GateDecided.event_type,
                "step": ctx.step,
                "outcome": "refused",
            }
        },
    )


def _business_key(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]


def erp_call(
    erp_url: str, operation: str, body: dict[str, Any], *, key: str, idempotency_key: str
) -> dict[str, Any]:
    """Call the ERP under the order's own key, not the runtime's.

    The runtime's key is one per handled event; an order is one per workflow. Two
    approval events (a double click, a redelivery under a new id) or two compensation
    requests (the tracker asks again when a cancellation is slow) must still find one
    order and one cancellation in the ERP. The runtime's key still guards the local
    ledger, so a redelivered event does not call at all.

    The result kept (and so recorded in the log) is the order's id and operation only:
    the ERP echoes the request, and the request holds the requester's address in clear,
    which must enter the log sealed or not at all (``docs/personal-data.md``).
    """
    del idempotency_key  # replaced by the business key, which is as stable and broader
    answer = perform(erp_url, operation, body, idempotency_key=key)
    return {name: answer[name] for name in ("id", "operation") if name in answer}


@agent.handles(step="create_purchase_order", dependencies=["erp"])
async def create_purchase_order(
    event: GateDecided, ctx: HandlerContext
) -> PurchaseOrderCreated | None:
    if event.gate != settings.gate or event.decision is not GateDecision.APPROVED:
        return None  # another gate, or a rejection: the tracker compensates
    reason = approval_refusal(event, ctx, settings.gate_secret.get_secret_value().encode())
    if reason is not None:
        _refuse(event, ctx, reason)
        return None
    if ctx.workflow.latest(PurchaseOrderCreated) is not None:
        return None  # ordered already on an earlier approval
    request = ctx.workflow.require(RequestSubmitted)
    order = await ctx.effect(
        "erp.create_po",
        erp_call,
        settings.erp_url,
        "create_po",
        {
            "request_id": request.request_id,
            "vendor": request.vendor,
            "amount": str(request.amount),
            "currency": request.currency,
            "requester": ctx.reveal(request.requester),  # the ERP needs the address
            "approved_by": event.decided_by,
        },
        key=_business_key("purchase-order", ctx.workflow_id),
    )
    return PurchaseOrderCreated(
        purchase_order_id=order["id"],
        request_id=request.request_id,
        vendor=request.vendor,
        amount=request.amount,
        currency=request.currency,
    )


@agent.compensates("create_purchase_order", dependencies=["erp"])
async def cancel_po(request: CompensationRequested, ctx: HandlerContext) -> PurchaseOrderCancelled:
    reason = request.reason or "compensation"
    created = ctx.workflow.latest(PurchaseOrderCreated)
    if created is None:  # nothing was ordered: cancelling is a no-op, still completed
        return PurchaseOrderCancelled(purchase_order_id="none", reason=reason)
    order_id = created.purchase_order_id
    await ctx.effect(
        "erp.cancel_po",
        erp_call,
        settings.erp_url,
        "cancel_po",
        {"purchase_order_id": order_id, "reason": reason},
        key=_business_key("cancel-purchase-order", ctx.workflow_id, order_id),
    )
    return PurchaseOrderCancelled(purchase_order_id=order_id, reason=reason)
