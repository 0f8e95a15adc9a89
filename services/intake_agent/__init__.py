"""The intake agent: classifies a purchase request and reads its fields from the text.

Step ``classify_request`` of ``topology/flows/procurement.v1.yaml``: on
``RequestSubmitted`` it publishes ``RequestClassified`` with the category chosen by a
naive Bayes classifier (trained at start-up from ``procurement/corpus``; the
confidence is the category's posterior probability) and the fields extracted by
``procurement.extraction`` (quantity, unit, delivery date, cost center, term).
It changes nothing outside the workflow (``effect: none``).

Running it:
    python -m intake_agent            # from the repository root, PYTHONPATH=services
    sagalog run agent intake_agent.agent --path services

Settings come from ``INTAKE_AGENT_*`` variables (``IntakeAgentSettings``), e.g.
``INTAKE_AGENT_BOOTSTRAP_SERVERS``, ``INTAKE_AGENT_SCHEMA_REGISTRY_URL``,
``INTAKE_AGENT_INSTANCE_ID`` (one per live instance), ``INTAKE_AGENT_DATA_DIR`` and
``INTAKE_AGENT_CORPUS_DIR`` (another set of labelled requests). Scale out by starting
more instances; the container image is ``deploy/images/agent.Dockerfile`` built with
``--build-arg AGENT=intake_agent``.
"""
