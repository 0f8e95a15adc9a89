"""The budget agent: reserves budget for a request in the ledger, and releases it.

Step ``reserve_budget`` of ``topology/flows/procurement.v1.yaml``: on ``RiskScored``
it reserves the amount of the workflow's ``RequestSubmitted`` in the ledger
(operation ``reserve``) and publishes ``BudgetReserved``; its compensation
``release_budget`` releases it (``BudgetReleased``).

Running it:
    python -m budget_agent            # from the repository root, PYTHONPATH=services
    sagalog run agent budget_agent.agent --path services

Settings come from ``BUDGET_AGENT_*`` variables (``BudgetAgentSettings``), e.g.
``BUDGET_AGENT_LEDGER_URL``, ``BUDGET_AGENT_INSTANCE_ID`` (one per live instance) and
``BUDGET_AGENT_BOOTSTRAP_SERVERS``. The image is ``deploy/images/agent.Dockerfile``
built with ``--build-arg AGENT=budget_agent``.
"""
