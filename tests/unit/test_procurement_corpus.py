"""The corpus files in the repository, and the errors a broken one gets."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from procurement.corpus import fingerprint, load_documents, load_requests, parse_document
from procurement.exceptions import CorpusError

CATEGORIES = {"hardware", "software", "services", "travel", "facilities", "marketing"}


def test_the_repository_corpus_is_complete() -> None:
    requests = load_requests()
    counts = Counter(r.category for r in requests)
    assert set(counts) == CATEGORIES and min(counts.values()) >= 10
    assert len({r.request_id for r in requests}) == len(requests)
    documents = load_documents()
    kinds = Counter(d.kind for d in documents)
    assert kinds["policy"] >= 12 and kinds["contract"] >= 10
    for document in documents:
        assert set(document.categories) <= CATEGORIES | {"all"}, document.path
        assert document.body, document.path
        if document.kind == "contract":
            assert document.vendor, document.path
    # Every category has a policy with an approval threshold for the risk model.
    for category in CATEGORIES:
        assert any(
            d.applies_to(category) and category in d.categories and d.approval_threshold
            for d in documents
        ), category


def test_a_document_without_front_matter_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "broken.md"
    path.write_text("# No front matter\n")
    with pytest.raises(CorpusError, match=r"broken\.md:1: no front matter"):
        parse_document(path, "policy")
    path.write_text("---\ntitle: no id\n---\nbody\n")
    with pytest.raises(CorpusError, match="lacks or garbles 'id'"):
        parse_document(path, "policy")
    path.write_text("---\nid: X\ntitle: open\nbody\n")
    with pytest.raises(CorpusError, match="not closed"):
        parse_document(path, "policy")


def test_a_duplicate_id_is_refused(tmp_path: Path) -> None:
    for folder in ("policies", "contracts"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "x.md").write_text("---\nid: SAME\ntitle: t\n---\nbody\n")
    with pytest.raises(CorpusError, match="already used"):
        load_documents(tmp_path)


def test_a_malformed_request_line_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "requests.jsonl"
    path.write_text(
        '{"id": "1", "category": "travel", "title": "t", "description": "d"}\n{"id": 2}\n'
    )
    with pytest.raises(CorpusError, match=r"requests\.jsonl:2"):
        load_requests(path)


def test_fingerprint_changes_with_the_content(tmp_path: Path) -> None:
    path = tmp_path / "a.md"
    path.write_text("one")
    before = fingerprint([path])
    assert fingerprint([path]) == before
    path.write_text("two")
    assert fingerprint([path]) != before
