"""What the drafting agent asks the model, and under which budget: pure functions.

Each tenant's plan decides its model budget. A trial tenant drafts under the
``trial`` budget, whose limit is far below one drafting call, so the step fails at
once, naming the budget, and the filing is compensated: what a filing whose budget
has run out looks like, on every run the same (``docs/filing.md``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from filings.events import FilingOpened
from filings.sources import excerpt

STANDARD_BUDGET = "model"
TRIAL_BUDGET = "trial"

INSTRUCTIONS = (
    "You draft regulatory filings. Look up the regulator's rule and the company's "
    "register entry with the tools, then answer with the filing's cover statement: "
    "who files, what, under which rule, and who signs."
)


def budget_for(tenant: str) -> str:
    """The budget a tenant's model calls are made under."""
    return TRIAL_BUDGET if tenant.startswith("trial") else STANDARD_BUDGET


def request_text(opened: FilingOpened) -> str:
    """The user's request; it names the regulator and the company first, so a tool's
    arguments quoting it (the stand-in model's) still name both."""
    return (
        f"{opened.regulator} {opened.company}: draft filing {opened.filing_number}, "
        f"due {opened.due:%Y-%m-%d}, from the documents below."
    )


def messages(opened: FilingOpened, documents: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    """The conversation's start: the instructions, then the request with an excerpt of
    each ``(title, text)`` document."""
    shown = "\n\n".join(f"## {title}\n{excerpt(text)}" for title, text in documents)
    return [
        {"role": "system", "content": INSTRUCTIONS},
        {"role": "user", "content": f"{request_text(opened)}\n\n{shown}"},
    ]
