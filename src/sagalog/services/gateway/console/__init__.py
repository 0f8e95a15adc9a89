"""The operator console: server-rendered pages served by the gateway under ``/console``.

- ``routes``: the FastAPI routes, thin shells over ``Gateway`` and the read model;
- ``sessions``: sign-in sessions and CSRF tokens, signed with HMAC (no server table);
- ``listing``: the workflows list's filters, index choice and keyset cursors (pure);
- ``overview``, ``gates_inbox``: the overview's tables and the inbox's filters (pure);
- ``stories``: a workflow's story, read by ``sagalog.audit`` and shaped for the page;
- ``paths``: every address of the console, once; ``forms``: urlencoded form bodies;
- ``templates/`` (Jinja2, autoescaped) and ``static/`` (htmx, vendored; our CSS).
"""
