"""The procurement knowledge kept in the repository, loaded into frozen objects.

``corpus/requests.jsonl`` holds past purchase requests labelled with their category
(the intake classifier's training data); ``corpus/policies/*.md`` and
``corpus/contracts/*.md`` are the documents the retrieval agent searches and the risk
model reads thresholds and known vendors from. A document is Markdown behind a YAML
front matter block::

    ---
    id: POL-001
    title: Hardware and IT equipment purchasing
    categories: [hardware]          # or [all]
    approval_threshold: 5000        # policies: above this, more approvals are needed
    currency: EUR
    vendor: Dell Technologies       # contracts: who the contract is with
    aliases: [Dell]
    ---
    # Body ...

Keeping them as files makes every change reviewable and every model version
reproducible: ``fingerprint`` hashes the files a model was built from.
"""

from __future__ import annotations

import decimal
import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from procurement.exceptions import CorpusError

CORPUS_DIR = Path(__file__).resolve().parent / "corpus"
REQUESTS_FILE = CORPUS_DIR / "requests.jsonl"
KINDS = {"policies": "policy", "contracts": "contract"}


@dataclass(frozen=True)
class LabelledRequest:
    """A past purchase request and the category a buyer gave it."""

    request_id: str
    category: str
    title: str
    description: str

    @property
    def text(self) -> str:
        return f"{self.title}\n{self.description}"


@dataclass(frozen=True)
class Document:
    """A policy or prior contract.

    Attributes:
        categories: the purchase categories it applies to; ``("all",)`` for every one.
        approval_threshold: a policy's amount above which more approvals are needed.
        vendor: a contract's counterparty (``aliases``: other names it goes by).
    """

    document_id: str
    kind: str
    title: str
    body: str
    categories: tuple[str, ...]
    path: Path
    approval_threshold: decimal.Decimal | None = None
    currency: str | None = None
    vendor: str | None = None
    aliases: tuple[str, ...] = ()

    def applies_to(self, category: str) -> bool:
        return "all" in self.categories or category in self.categories

    @property
    def searchable_text(self) -> str:
        """What the retriever indexes: the title twice (it says most), the body, the
        categories and the vendor."""
        parts = [self.title, self.title, self.body, " ".join(self.categories), self.vendor or ""]
        return "\n".join(parts)


def load_requests(path: Path = REQUESTS_FILE) -> list[LabelledRequest]:
    """Read the labelled requests, one JSON object a line.

    Raises:
        CorpusError: naming the file and line of a malformed entry.
    """
    requests = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            requests.append(
                LabelledRequest(
                    request_id=str(entry["id"]),
                    category=str(entry["category"]),
                    title=str(entry["title"]),
                    description=str(entry["description"]),
                )
            )
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise CorpusError(
                f"{path}:{number}: not a labelled request ({exc.__class__.__name__}: {exc}); "
                'each line must be {"id", "category", "title", "description"}'
            ) from exc
    if not requests:
        raise CorpusError(f"{path}: no labelled requests; the classifier has nothing to learn")
    return requests


def load_documents(root: Path = CORPUS_DIR) -> list[Document]:
    """Every policy and contract under ``root``, sorted by id.

    Raises:
        CorpusError: a file without front matter, without an id or title, or an id
            used twice.
    """
    documents: list[Document] = []
    for folder, kind in KINDS.items():
        documents.extend(
            parse_document(path, kind) for path in sorted((root / folder).glob("*.md"))
        )
    seen: dict[str, Path] = {}
    for document in documents:
        if document.document_id in seen:
            raise CorpusError(
                f"{document.path}: id {document.document_id!r} is already used by "
                f"{seen[document.document_id]}; give each document its own id"
            )
        seen[document.document_id] = document.path
    return sorted(documents, key=lambda d: d.document_id)


def parse_document(path: Path, kind: str) -> Document:
    """One Markdown document with YAML front matter (see the module docstring)."""
    text = path.read_text(encoding="utf-8")
    head, body = _split_front_matter(path, text)
    meta = _front_matter(path, head)
    try:
        threshold = meta.get("approval_threshold")
        return Document(
            document_id=str(meta["id"]),
            kind=kind,
            title=str(meta["title"]),
            body=body.strip(),
            categories=tuple(str(c) for c in meta.get("categories") or ["all"]),
            path=path,
            approval_threshold=decimal.Decimal(str(threshold)) if threshold is not None else None,
            currency=str(meta["currency"]) if "currency" in meta else None,
            vendor=str(meta["vendor"]) if "vendor" in meta else None,
            aliases=tuple(str(a) for a in meta.get("aliases") or ()),
        )
    except (KeyError, decimal.InvalidOperation) as exc:
        raise CorpusError(
            f"{path}: front matter lacks or garbles {exc}; a document needs at least "
            "`id` and `title`, and `approval_threshold` must be a number"
        ) from exc


def _split_front_matter(path: Path, text: str) -> tuple[str, str]:
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        raise CorpusError(f"{path}:1: no front matter; start the file with a '---' line")
    for number, line in enumerate(lines[1:], 2):
        if line.strip() == "---":
            return "\n".join(lines[1 : number - 1]), "\n".join(lines[number:])
    raise CorpusError(f"{path}: the front matter is not closed by a '---' line")


def _front_matter(path: Path, head: str) -> dict[str, Any]:
    try:
        meta = yaml.safe_load(head)
    except yaml.YAMLError as exc:
        raise CorpusError(f"{path}: the front matter is not valid YAML: {exc}") from exc
    if not isinstance(meta, dict):
        raise CorpusError(f"{path}: the front matter must be a mapping of keys to values")
    return meta


def fingerprint(paths: Iterable[Path]) -> str:
    """A short, stable hash of the files' names and contents (a model's data version)."""
    digest = hashlib.sha256()
    for path in sorted(paths):
        digest.update(path.name.encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def documents_fingerprint(documents: Sequence[Document]) -> str:
    return fingerprint(d.path for d in documents)
