"""Durable token and cost budgets for model calls (``ledger``: the pure rules)."""
