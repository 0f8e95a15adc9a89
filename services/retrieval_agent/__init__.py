"""The retrieval agent: finds the policies and prior contracts that apply to a request.

Step ``retrieve_policies`` of ``topology/flows/procurement.v1.yaml``: on
``RequestClassified`` it searches ``procurement/corpus/policies`` and
``procurement/corpus/contracts`` with BM25 (``procurement.retrieval``), the query being
the request's title and description (from the workflow's ``RequestSubmitted``) and its
category, and publishes the best ``top_k`` as ``PoliciesRetrieved``. It changes
nothing outside the workflow (``effect: none``).

Running it:
    python -m retrieval_agent         # from the repository root, PYTHONPATH=services
    sagalog run agent retrieval_agent.agent --path services

Settings come from ``RETRIEVAL_AGENT_*`` variables (``RetrievalAgentSettings``):
``RETRIEVAL_AGENT_TOP_K`` (default 5), ``RETRIEVAL_AGENT_CORPUS_DIR``, and the
connection and instance settings every agent has (``..._BOOTSTRAP_SERVERS``,
``..._INSTANCE_ID``, ``..._DATA_DIR``). The image is ``deploy/images/agent.Dockerfile``
built with ``--build-arg AGENT=retrieval_agent``.
"""
