"""The purchasing agent: creates the purchase order in the ERP once a manager approved.

Step ``create_purchase_order`` of ``topology/flows/procurement.v1.yaml``, after the
human gate ``manager_approval``: on a ``GateDecided`` for that gate it creates the
order through the ERP (operation ``create_po``) and publishes
``PurchaseOrderCreated``, only when all of these hold:

- the decision is APPROVED (a rejection creates nothing; the tracker compensates);
- the token verifies with the gate secret for the opening the workflow's latest
  ``GateOpened`` announced (``sagalog.tracker.gates``): a forged approval, or one
  for an earlier opening, creates nothing;
- the workflow is not being compensated, and has no purchase order yet.

A refused approval is logged (``"action": "refused"``) and produces no event: failing
the step would let anyone able to publish a forged approval cancel a workflow.

Its compensation ``cancel_po`` cancels the order in the ERP and publishes
``PurchaseOrderCancelled``.

Running it:
    python -m purchasing_agent        # from the repository root, PYTHONPATH=services
    sagalog run agent purchasing_agent.agent --path services

Settings come from ``PURCHASING_AGENT_*`` variables (``PurchasingAgentSettings``);
``PURCHASING_AGENT_GATE_SECRET`` is required and must equal the saga tracker's gate
secret (at least 16 bytes); ``PURCHASING_AGENT_ERP_URL`` points at the ERP. The
image is ``deploy/images/agent.Dockerfile`` built with
``--build-arg AGENT=purchasing_agent``.
"""
