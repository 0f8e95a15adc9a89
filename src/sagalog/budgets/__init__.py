"""Durable token and cost budgets for model calls (``ledger``: the pure rules;
``estimate``: what a call may cost, before it is made; ``tokenizer_files``: tiktoken's
files, installed so the estimate never downloads)."""
