"""BM25 over the repository's policies and contracts."""

from __future__ import annotations

import pytest

from procurement.corpus import Document, load_documents
from procurement.retrieval import BM25Index


@pytest.fixture(scope="module")
def index() -> BM25Index:
    return BM25Index(load_documents())


@pytest.mark.parametrize(
    ("query", "first"),
    [
        ("Flights to Singapore and hotel nights for the customer summit travel", "POL-004"),
        ("Observability SaaS subscription with SSO, 3-year term software", "POL-002"),
        ("Buy from a vendor we never used before: sanctions screening, bank details", "POL-008"),
        ("Who can approve a 60,000 EUR request? Approval limits of a director", "POL-010"),
        ("Replace 50 worn-out office chairs facilities", "CTR-2024-033"),
        ("Penetration test consultants will access production systems", "POL-009"),
        ("Urgent purchase during a production outage", "POL-013"),
    ],
)
def test_the_obviously_relevant_document_ranks_first(
    index: BM25Index, query: str, first: str
) -> None:
    hits = index.search(query, top_k=3)
    assert hits[0].document.document_id == first, [
        (h.document.document_id, round(h.score, 2)) for h in hits
    ]
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_top_k_and_no_match(index: BM25Index) -> None:
    assert len(index.search("laptops hotel software cleaning", top_k=2)) == 2
    assert index.search("zyxxy quux", top_k=5) == []
    assert index.search("", top_k=5) == []


def doc(document_id: str, body: str) -> Document:
    from pathlib import Path

    return Document(document_id, "policy", document_id, body, ("all",), Path(document_id))


def test_rare_words_weigh_more_and_repetition_saturates() -> None:
    index = BM25Index(
        [
            doc("a", "laptop laptop laptop laptop laptop laptop"),
            doc("b", "laptop warranty"),
            doc("c", "hotel flight"),
            doc("d", "hotel laptop"),
        ]
    )
    assert index.idf["warranty"] > index.idf["laptop"]  # in 1 document against 3
    assert index.idf["laptop"] > 0  # common words still count, never against
    one = index.score(["laptop"], 1)
    six = index.score(["laptop"], 0)
    assert one < six < 6 * one  # more is better, but with diminishing returns
    ranked = [h.document.document_id for h in index.search("laptop warranty")]
    assert ranked[0] == "b"
