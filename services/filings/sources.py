"""The documents a filing is drawn from, as the records system holds them.

A stand-in for a document archive: each company has the same three documents, their
text made from the company, the regulator and the period, so every run retrieves the
same bytes. The annual report is long on purpose (over the 16 KiB blob threshold):
it is the payload that travels by reference when a blob store is set.
"""

from __future__ import annotations

from dataclasses import dataclass

ANNUAL_REPORT_SECTIONS = (
    "Revenue",
    "Operating costs",
    "Capital expenditure",
    "Liquidity",
    "Risk factors",
    "Governance",
    "Related parties",
    "Subsequent events",
)


@dataclass(frozen=True)
class Source:
    document_id: str
    title: str
    text: str


def documents_for(company: str, regulator: str, year: int) -> list[Source]:
    """The annual report, the board minutes approving it, and last year's filing."""
    slug = "".join(c for c in company.lower() if c.isalnum())[:16] or "company"
    return [
        Source(
            f"{slug}-ar-{year}", f"{company} annual report {year}", _annual_report(company, year)
        ),
        Source(
            f"{slug}-bm-{year}",
            f"{company} board minutes approving the {year} accounts",
            f"The board of {company} approved the {year} accounts and authorised the "
            f"chief financial officer to sign the {regulator} filing on its behalf.",
        ),
        Source(
            f"{slug}-pf-{year - 1}",
            f"{company} {regulator} filing {year - 1}",
            f"{company} filed its {year - 1} return with {regulator} on time; the "
            "regulator raised no query.",
        ),
    ]


def excerpt(text: str, *, chars: int = 400) -> str:
    """The start of a document, for the model's prompt: a draft needs the gist, and a
    whole report in every turn would cost its tokens again at each turn."""
    return text if len(text) <= chars else text[:chars].rsplit(" ", 1)[0] + " [...]"


def _annual_report(company: str, year: int) -> str:
    paragraphs = [f"{company}: annual report for the financial year {year}."]
    for n, section in enumerate(ANNUAL_REPORT_SECTIONS, start=1):
        for part in range(1, 13):
            paragraphs.append(
                f"{n}.{part} {section}. In {year} {company} reports on {section.lower()} "
                f"as required by its regulator; figures are stated in thousands of euro and "
                f"were audited without qualification. Note {n}.{part} sets out the basis."
            )
    return "\n\n".join(paragraphs)
