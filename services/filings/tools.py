"""The tools the drafting model may call, each an idempotent effect against a service.

``run_tool_loop`` makes every call a ``ctx.effect`` named ``tool.<name>``: an intent
before it, the idempotency key sent with it, the result recorded, so a redelivered
event gets the recorded answers and a crash mid-loop repeats a call under the same
key, which the service answers as the first time. The service here is the registers
stand-in (``standins.server registers``): it keeps each call's key, and the answer's
content comes from the rulebook and company register it stands for (``rulebook``).
"""

from __future__ import annotations

from typing import Any

from filings.rulebook import facts_of, rule_for
from sagalog import Tool
from standins.client import perform

QUERY = {
    "type": "object",
    "properties": {"query": {"type": "string", "description": "What to look up, by name."}},
    "required": ["query"],
}


def filing_tools(registers_url: str) -> list[Tool]:
    """``lookup_rule`` (a regulator's filing rule) and ``company_facts`` (the filer's
    register entry and signing officer), reaching ``registers_url``."""

    def lookup_rule(query: str, idempotency_key: str) -> dict[str, Any]:
        answer = perform(
            registers_url, "lookup_rule", {"query": query}, idempotency_key=idempotency_key
        )
        return {"reference": answer["id"], **rule_for(query)}

    def company_facts(query: str, idempotency_key: str) -> dict[str, Any]:
        answer = perform(
            registers_url, "company_facts", {"query": query}, idempotency_key=idempotency_key
        )
        return {"reference": answer["id"], **facts_of(query)}

    return [
        Tool(
            "lookup_rule",
            "The filing rule of a regulator (ESMA, FCA, SEC, BaFin): deadline and signatory.",
            QUERY,
            lookup_rule,
            dependency="registers",
        ),
        Tool(
            "company_facts",
            "A company's register entry, seat and the officer who signs its filings.",
            QUERY,
            company_facts,
            dependency="registers",
        ),
    ]
