"""The drafting agent: a model drafts the filing in a tool loop, under a token budget.

Step ``draft_filing`` of ``topology/flows/filing.v2.yaml``: on ``DocumentsRetrieved``
it runs ``run_tool_loop`` with the tools ``lookup_rule`` and ``company_facts``
(``filings.tools``; each call an effect with an idempotency key), every model turn a
budgeted ``ctx.model_stream`` (the draft reaches the workflow's stream as the model
writes it, served by the gateway at ``GET /v1/workflows/{id}/stream``), and
publishes ``FilingDrafted`` with the decision's lineage. A trial tenant's filing drafts
under the tiny ``trial`` budget and fails.

The model is any OpenAI-compatible endpoint: ``DRAFTING_AGENT_LLM_BASE_URL`` (with
``DRAFTING_AGENT_LLM_API_KEY`` and ``DRAFTING_AGENT_LLM_MODEL``); the demo points it
at the stand-in model unless it is set. The image is ``deploy/images/agent.Dockerfile``
built with ``--build-arg AGENT=drafting_agent``.
"""
