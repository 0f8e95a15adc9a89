"""The budget agent: reserves budget for a request in the ledger, and releases it."""
