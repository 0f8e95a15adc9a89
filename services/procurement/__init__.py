"""The procurement approval workflow: its events and the pure code its agents share.

- ``events``: the event classes (``schemas/procurement/v1``);
- ``corpus``: labelled past requests, policies and prior contracts kept in
  ``corpus/``, loaded into frozen objects;
- ``text``: the tokenizer; ``classifier``: naive Bayes for the purchase category;
  ``extraction``: fields read from a request's text; ``retrieval``: BM25 over the
  policies and contracts; ``risk``: the offline risk model and the contract a
  language model's answer must meet.

No I/O beyond reading the corpus files: the agents (``intake_agent``,
``retrieval_agent``, ``risk_agent``, ``budget_agent``, ``purchasing_agent``,
``notification_agent``) wrap this code in handlers.
"""
