"""The risk agent: scores a request's risk and records which model decided and why.

Step ``score_risk`` of ``topology/flows/procurement.v1.yaml``: on
``PoliciesRetrieved`` it reads the workflow's ``RequestSubmitted`` and
``RequestClassified``, resolves the retrieved documents in the corpus, and publishes
``RiskScored`` with a score, a level, a rationale for the approver, the risk factors
and the decision's lineage (model id, prompt hash, and the request event and
documents it was built from).

By default the transparent offline model of ``procurement.risk`` decides. With
``RISK_AGENT_LLM_BASE_URL`` and ``RISK_AGENT_LLM_MODEL`` set (and
``RISK_AGENT_LLM_API_KEY`` if the endpoint wants one), an OpenAI-compatible chat
model decides instead (``POST {base}/chat/completions``); an answer that is not the
JSON asked for, or a request the endpoint refuses (4xx), falls back to the offline
model and the rationale says so. An unreachable endpoint or a 5xx is retried with
backoff by the runtime, and its circuit breaker (dependency ``llm``) defers work
while it is down. The model's raw answer is kept in the log as an ``EffectRecorded``,
so a redelivered event gets the same answer and an auditor can read it.

Running it:
    python -m risk_agent              # from the repository root, PYTHONPATH=services
    sagalog run agent risk_agent.agent --path services

Settings come from ``RISK_AGENT_*`` variables (``RiskAgentSettings``). The image is
``deploy/images/agent.Dockerfile`` built with ``--build-arg AGENT=risk_agent``.
"""
