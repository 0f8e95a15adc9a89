"""Risk of a purchase request: a transparent offline model, and the contract with a
language model that may replace it.

The offline model adds up a handful of named contributions, each of which an approver
can check against a document:

- **amount** against the approval threshold of the category's policy (retrieved for
  this request), up to ``AMOUNT_WEIGHT`` at twice the threshold;
- **new vendor**: no prior contract names the vendor (POL-008's due diligence applies);
- **doubtful category**: the classifier was unsure, so the policy compared may be the
  wrong one;
- **urgency**: urgent requests skip competition (POL-013) and are where mistakes hide;
- **currency**: the amount is in another currency than the threshold and is compared
  unconverted (no exchange rates offline), so the comparison is approximate.

Every contribution is monotonic in its input, so the score is monotonic in the
amount: a larger request is never scored lower, all else equal.

A language model, when configured, gets the same facts in a prompt and must answer
with JSON (``parse_answer`` checks it); any other answer is a ``ModelAnswerError``
and the offline model decides instead.
"""

from __future__ import annotations

import decimal
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from procurement.corpus import Document
from procurement.events import RiskLevel
from procurement.exceptions import ModelAnswerError

OFFLINE_MODEL_ID = "sagalog-risk-rules/1"
AMOUNT_WEIGHT = 0.5
NEW_VENDOR_WEIGHT = 0.2
LOW_CONFIDENCE = 0.6
LOW_CONFIDENCE_WEIGHT = 0.1
URGENCY_WEIGHTS = {"URGENT": 0.15, "HIGH": 0.05}
CURRENCY_WEIGHT = 0.05
DEFAULT_THRESHOLD = decimal.Decimal(10000)  # POL-010: a line manager's limit
DEFAULT_CURRENCY = "EUR"
MEDIUM_FROM = 0.3
HIGH_FROM = 0.6

_LEGAL_SUFFIXES = {"inc", "ltd", "llc", "gmbh", "ag", "sa", "sas", "bv", "plc", "co", "corp"}


@dataclass(frozen=True)
class RiskInput:
    """The facts a risk decision is made from."""

    request_id: str
    title: str
    description: str
    category: str
    confidence: float
    amount: decimal.Decimal
    currency: str
    vendor: str
    priority: str
    documents: tuple[Document, ...]
    contracts: tuple[Document, ...]

    def facts(self) -> dict[str, object]:
        """The input as plain data: what the offline model's lineage hashes."""
        return {
            "request_id": self.request_id,
            "category": self.category,
            "confidence": round(self.confidence, 4),
            "amount": str(self.amount),
            "currency": self.currency,
            "vendor": self.vendor,
            "priority": self.priority,
            "documents": [d.document_id for d in self.documents],
        }


@dataclass(frozen=True)
class RiskAssessment:
    score: float
    level: RiskLevel
    rationale: str
    factors: tuple[str, ...]


@dataclass(frozen=True)
class Threshold:
    amount: decimal.Decimal
    currency: str
    source: str  # the policy's id, or "default"


def level_of(score: float) -> RiskLevel:
    if score >= HIGH_FROM:
        return RiskLevel.HIGH
    return RiskLevel.MEDIUM if score >= MEDIUM_FROM else RiskLevel.LOW


def applicable_threshold(category: str, documents: Sequence[Document]) -> Threshold:
    """The lowest approval threshold among the policies for ``category`` (policies for
    every category count only when none is specific), or the default."""
    policies = [d for d in documents if d.kind == "policy" and d.approval_threshold is not None]
    specific = [d for d in policies if category in d.categories]
    general = [d for d in policies if "all" in d.categories]
    candidates = specific or general
    if not candidates:
        return Threshold(DEFAULT_THRESHOLD, DEFAULT_CURRENCY, "default")
    best = min(candidates, key=lambda d: (d.approval_threshold, d.document_id))
    assert best.approval_threshold is not None
    return Threshold(best.approval_threshold, best.currency or DEFAULT_CURRENCY, best.document_id)


def normalized_vendor(name: str) -> str:
    words = re.findall(r"[a-z0-9]+", name.lower())
    return " ".join(w for w in words if w not in _LEGAL_SUFFIXES)


def contract_with(vendor: str, contracts: Sequence[Document]) -> Document | None:
    """The prior contract whose vendor (or an alias of it) is ``vendor``, if any."""
    wanted = normalized_vendor(vendor)
    if not wanted:
        return None
    for contract in contracts:
        names = [contract.vendor or "", *contract.aliases]
        if any(normalized_vendor(n) == wanted for n in names if n):
            return contract
    return None


def score_offline(facts: RiskInput) -> RiskAssessment:
    """The transparent model: a sum of named contributions, capped at 1."""
    contributions: list[tuple[float, str]] = []
    threshold = applicable_threshold(facts.category, facts.documents)
    ratio = float(facts.amount / threshold.amount) if threshold.amount > 0 else 2.0
    where = (
        f"the {facts.category} approval threshold of {threshold.amount} {threshold.currency} "
        f"({threshold.source})"
        if threshold.source != "default"
        else f"the default threshold of {threshold.amount} {threshold.currency} (no policy "
        f"with a threshold was retrieved for {facts.category})"
    )
    contributions.append(
        (
            AMOUNT_WEIGHT * min(ratio, 2.0) / 2.0,
            f"amount {facts.amount} {facts.currency} is {ratio:.2f}x {where}",
        )
    )
    contract = contract_with(facts.vendor, facts.contracts)
    if contract is None:
        contributions.append(
            (NEW_VENDOR_WEIGHT, f"vendor '{facts.vendor}' has no prior contract (POL-008 applies)")
        )
    if facts.confidence < LOW_CONFIDENCE:
        contributions.append(
            (
                LOW_CONFIDENCE_WEIGHT,
                f"category '{facts.category}' is doubtful: classifier confidence "
                f"{facts.confidence:.2f} < {LOW_CONFIDENCE:.2f}",
            )
        )
    urgency = URGENCY_WEIGHTS.get(facts.priority.upper(), 0.0)
    if urgency:
        contributions.append((urgency, f"priority {facts.priority.upper()}"))
    if facts.currency.upper() != threshold.currency.upper():
        contributions.append(
            (
                CURRENCY_WEIGHT,
                f"amount in {facts.currency} compared unconverted with a threshold in "
                f"{threshold.currency}",
            )
        )
    score = round(min(1.0, sum(weight for weight, _ in contributions)), 4)
    level = level_of(score)
    parts = "; ".join(f"{text} (+{weight:.2f})" for weight, text in contributions)
    known = f" Vendor under contract {contract.document_id}." if contract is not None else ""
    rationale = f"{level} risk, score {score:.2f}: {parts}.{known}"
    return RiskAssessment(
        score=score,
        level=level,
        rationale=rationale,
        factors=tuple(text for weight, text in contributions if weight > 0),
    )


# -- the language model's contract --------------------------------------------------------

SYSTEM_PROMPT = (
    "You are a procurement risk analyst. Score the purchase request's risk from 0 (none) "
    "to 1 (certain) using only the facts and policies given. Answer with one JSON object "
    'and nothing else: {"score": <number 0..1>, "level": "LOW"|"MEDIUM"|"HIGH", '
    '"rationale": "<one or two sentences for the approver>", "factors": ["<risk factor>", '
    "...]}."
)


def build_messages(facts: RiskInput) -> list[dict[str, str]]:
    """The chat messages asking a model for a risk score of ``facts``."""
    threshold = applicable_threshold(facts.category, facts.documents)
    contract = contract_with(facts.vendor, facts.contracts)
    documents = "\n\n".join(
        f"[{d.document_id}] {d.title}\n{d.body[:1200]}" for d in facts.documents
    )
    user = (
        f"Request {facts.request_id}: {facts.title}\n{facts.description}\n\n"
        f"Category: {facts.category} (classifier confidence {facts.confidence:.2f})\n"
        f"Amount: {facts.amount} {facts.currency}\n"
        f"Approval threshold for the category: {threshold.amount} {threshold.currency} "
        f"({threshold.source})\n"
        f"Vendor: {facts.vendor} "
        f"({'prior contract ' + contract.document_id if contract else 'no prior contract'})\n"
        f"Priority: {facts.priority}\n\n"
        f"Applicable policies and prior contracts:\n{documents or '(none found)'}"
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def prompt_text(messages: Sequence[dict[str, str]]) -> str:
    """The messages as one canonical string: what the lineage's prompt hash covers."""
    return json.dumps(list(messages), sort_keys=True, ensure_ascii=False, separators=(",", ":"))


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore")

    score: float = Field(ge=0.0, le=1.0)
    level: RiskLevel
    rationale: str = Field(min_length=1, max_length=4000)
    factors: list[str] = Field(default_factory=list, max_length=32)


_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


def parse_answer(content: str) -> RiskAssessment:
    """The model's answer as an assessment.

    Accepts the JSON object alone or inside a Markdown code fence (models add one
    even when told not to); nothing else.

    Raises:
        ModelAnswerError: not JSON, not an object, or a field missing or out of range.
    """
    fenced = _FENCE.match(content)
    text = fenced.group(1) if fenced else content.strip()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ModelAnswerError(f"the answer is not JSON ({exc.msg}): {content[:200]!r}") from exc
    if not isinstance(data, dict):
        raise ModelAnswerError(f"the answer is JSON but not an object: {content[:200]!r}")
    try:
        answer = _Answer.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'answer'}: {e['msg']}" for e in exc.errors()
        )
        raise ModelAnswerError(f"the answer breaks the contract: {problems}") from exc
    return RiskAssessment(
        score=answer.score,
        level=answer.level,
        rationale=answer.rationale.strip(),
        factors=tuple(f.strip() for f in answer.factors if f.strip()),
    )
