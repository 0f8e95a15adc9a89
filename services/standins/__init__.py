"""Stand-ins for the external systems agents call (budget ledger, ERP, mail).

Each honours idempotency keys, keeps a record of every effect and every call, and has
switchable fault injection (latency, errors, outage), so retries, deduplication and
circuit breakers can be seen and counted from outside the agents.
"""
