"""The notification agent: sends the purchase order to the vendor, and a correction
notice when the workflow is undone after that.

Step ``notify_vendor`` of ``topology/flows/procurement.v1.yaml``: on
``PurchaseOrderCreated`` it e-mails the vendor through the mail service (operation
``send``) and publishes ``VendorNotified``. A sent e-mail cannot be unsent, so the
step is irreversible; when the tracker undoes the workflow it publishes
``CompensationRequested(step="notify_vendor", compensation="send_correction_notice")``
and this agent sends the vendor a correction notice (``CorrectionNoticeSent``).

Each message is sent once per workflow and order whatever the redeliveries: the mail
service deduplicates on the message's own key (workflow, order, purpose).

Running it:
    python -m notification_agent      # from the repository root, PYTHONPATH=services
    sagalog run agent notification_agent.agent --path services

Settings come from ``NOTIFICATION_AGENT_*`` variables (``NotificationAgentSettings``):
``NOTIFICATION_AGENT_MAIL_URL`` and ``NOTIFICATION_AGENT_SENDER`` besides the
connection and instance settings every agent has. The image is
``deploy/images/agent.Dockerfile`` built with ``--build-arg AGENT=notification_agent``.
"""
