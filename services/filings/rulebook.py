"""What the drafting model may look up: the regulators' rules and the company register.

Stand-ins for two outside services the tools reach (``filings.tools``). Lookups match
loosely, by a name contained in the query, because the query is whatever the model
wrote: a real model passes ``"ESMA"``, the stand-in model quotes the user's request.
"""

from __future__ import annotations

RULES = {
    "ESMA": "ESMA transparency rule 4.1: annual financial reports within four months of "
    "the year end, signed by a person responsible within the issuer.",
    "FCA": "FCA DTR 4.1: the annual financial report is published within four months "
    "and a responsibility statement is signed by a director.",
    "SEC": "SEC Form 10-K: filed within 60 to 90 days of the fiscal year end, signed by "
    "the principal executive and financial officers.",
    "BaFin": "BaFin WpHG section 114: the annual financial report within four months, "
    "with a responsibility statement by the legal representatives.",
}

COMPANIES = {
    "Acme Holdings": {"register": "HRB 10421", "seat": "Frankfurt", "officer": "CFO J. Alvarez"},
    "Northwind plc": {"register": "GB 0482211", "seat": "London", "officer": "CFO M. Osei"},
    "Contoso SE": {"register": "SE 77120", "seat": "Paris", "officer": "CFO L. Martin"},
    "Globex Corp": {"register": "DE 5521-0", "seat": "Wilmington", "officer": "CFO R. Chen"},
    "Initech AG": {"register": "CHE-101.992", "seat": "Zurich", "officer": "CFO A. Keller"},
}


def rule_for(query: str) -> dict[str, str]:
    """The rule of the first regulator named in ``query``; ``found: no`` when none is."""
    for regulator, rule in RULES.items():
        if regulator.lower() in query.lower():
            return {"regulator": regulator, "rule": rule, "found": "yes"}
    return {"regulator": "", "rule": "", "found": "no"}


def facts_of(query: str) -> dict[str, str]:
    """The register entry of the first company named in ``query``."""
    for company, facts in COMPANIES.items():
        if company.lower() in query.lower():
            return {"company": company, **facts, "found": "yes"}
    return {"company": "", "found": "no"}
