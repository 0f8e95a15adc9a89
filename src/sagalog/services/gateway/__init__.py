"""The gateway: the HTTP door through which people and outside systems reach workflows.

People decide human gates (``POST /v1/gates/decisions``, or the console's ``/console/gates``);
outside systems report through webhooks (``POST /v1/webhooks/{kind}``); both become
events on the workflow's topic, published like any agent's. Reads (``/v1/gates``,
``/v1/workflows``) come from a local read model that follows the saga tracker's
records changelog and the transitions topic: the gateway never asks the tracker
anything and holds no state the log cannot rebuild.

Layout by concern:

- ``settings``: ``GatewaySettings`` (env prefix ``GATEWAY_``).
- ``read_model``: the RocksDB store of records, open gates, histories and offsets.
- ``follower``: the background consumer that keeps the read model up to date.
- ``decisions``, ``webhooks``: the pure checks of what a request may publish.
- ``views``: the JSON shapes of the API (and so of the OpenAPI document).
- ``api``: the FastAPI application; ``console/``: the server-rendered pages for people
  (``/console``); ``reviews``: the old page's address, a redirect to the console.
- ``workflow_index``: the read model's listing indexes (what their keys and values hold).
"""
