"""The offline risk model and the contract a language model's answer must meet."""

from __future__ import annotations

import decimal
import itertools
import json

import pytest

from procurement.corpus import load_documents
from procurement.events import RiskLevel
from procurement.exceptions import ModelAnswerError
from procurement.risk import (
    DEFAULT_THRESHOLD,
    RiskInput,
    applicable_threshold,
    build_messages,
    contract_with,
    level_of,
    parse_answer,
    prompt_text,
    score_offline,
)

DOCUMENTS = load_documents()
BY_ID = {d.document_id: d for d in DOCUMENTS}
CONTRACTS = tuple(d for d in DOCUMENTS if d.kind == "contract")


def facts(
    amount: str = "1000.00",
    *,
    category: str = "hardware",
    vendor: str = "Dell Technologies",
    confidence: float = 0.95,
    priority: str = "NORMAL",
    currency: str = "EUR",
    documents: tuple[str, ...] = ("POL-001", "CTR-2024-017", "POL-007"),
) -> RiskInput:
    return RiskInput(
        request_id="PR-1",
        title="Laptops",
        description="4 laptops",
        category=category,
        confidence=confidence,
        amount=decimal.Decimal(amount),
        currency=currency,
        vendor=vendor,
        priority=priority,
        documents=tuple(BY_ID[d] for d in documents),
        contracts=CONTRACTS,
    )


@pytest.mark.parametrize("vendor", ["Dell Technologies", "Unknown Ltd"])
@pytest.mark.parametrize("priority", ["LOW", "URGENT"])
@pytest.mark.parametrize("confidence", [0.3, 0.99])
def test_score_is_monotonic_in_the_amount(vendor: str, priority: str, confidence: float) -> None:
    amounts = [decimal.Decimal(n) for n in range(0, 20_001, 250)]
    scores = [
        score_offline(facts(str(a), vendor=vendor, priority=priority, confidence=confidence)).score
        for a in amounts
    ]
    assert scores == sorted(scores)
    # Strictly increasing up to twice the hardware threshold (5000 EUR), flat after.
    below = [s for a, s in zip(amounts, scores, strict=True) if a <= 10_000]
    assert all(b > a for a, b in itertools.pairwise(below))
    assert len({s for a, s in zip(amounts, scores, strict=True) if a >= 10_000}) == 1


def test_each_factor_adds_and_says_why() -> None:
    base = score_offline(facts("2500.00"))
    assert base.score == 0.125 and base.level is RiskLevel.LOW  # 0.5 x 0.50 / 2
    assert base.factors == (
        "amount 2500.00 EUR is 0.50x the hardware approval threshold of 5000 EUR (POL-001)",
    )
    assert "Vendor under contract CTR-2024-017" in base.rationale
    new_vendor = score_offline(facts("2500.00", vendor="Brightstage Events Ltd"))
    assert new_vendor.score == pytest.approx(0.325)
    assert "vendor 'Brightstage Events Ltd' has no prior contract" in new_vendor.factors[1]
    doubtful = score_offline(facts("2500.00", confidence=0.4))
    assert doubtful.score == pytest.approx(0.225) and "doubtful" in doubtful.factors[1]
    urgent = score_offline(facts("2500.00", priority="URGENT"))
    assert urgent.score == pytest.approx(0.275) and urgent.factors[1] == "priority URGENT"
    dollars = score_offline(facts("2500.00", currency="USD"))
    assert "compared unconverted" in dollars.factors[1]
    worst = score_offline(
        facts("99999.00", vendor="Nobody", confidence=0.1, priority="URGENT", currency="USD")
    )
    assert worst.score == 1.0 and worst.level is RiskLevel.HIGH


def test_levels() -> None:
    assert [level_of(s) for s in (0.0, 0.29, 0.3, 0.59, 0.6, 1.0)] == [
        RiskLevel.LOW,
        RiskLevel.LOW,
        RiskLevel.MEDIUM,
        RiskLevel.MEDIUM,
        RiskLevel.HIGH,
        RiskLevel.HIGH,
    ]


def test_threshold_comes_from_the_category_policy_first() -> None:
    retrieved = [BY_ID["POL-007"], BY_ID["POL-001"], BY_ID["POL-002"]]
    assert applicable_threshold("hardware", retrieved).source == "POL-001"
    assert applicable_threshold("software", retrieved).amount == 10000
    # Only a policy for every category: its threshold.
    assert applicable_threshold("travel", retrieved).source == "POL-007"
    fallback = applicable_threshold("travel", [BY_ID["POL-008"]])
    assert (fallback.amount, fallback.source) == (DEFAULT_THRESHOLD, "default")


@pytest.mark.parametrize(
    ("vendor", "contract"),
    [
        ("Dell Technologies", "CTR-2024-017"),
        ("DELL", "CTR-2024-017"),
        ("Steelcase Inc.", "CTR-2024-033"),
        ("Amex GBT", "CTR-2022-015"),
        ("Acme", None),
        ("", None),
    ],
)
def test_vendor_matches_a_contract_by_name_or_alias(vendor: str, contract: str | None) -> None:
    found = contract_with(vendor, CONTRACTS)
    assert (found.document_id if found else None) == contract


def test_prompt_carries_the_facts_and_is_canonical() -> None:
    messages = build_messages(facts("7200.00"))
    user = messages[-1]["content"]
    for expected in ("PR-1", "7200.00 EUR", "5000 EUR (POL-001)", "prior contract CTR-2024-017"):
        assert expected in user
    assert "[POL-007]" in user and "JSON" in messages[0]["content"]
    assert prompt_text(messages) == prompt_text(build_messages(facts("7200.00")))
    assert prompt_text(messages) != prompt_text(build_messages(facts("7300.00")))


ANSWER = {"score": 0.4, "level": "MEDIUM", "rationale": "Above threshold.", "factors": ["x"]}


@pytest.mark.parametrize(
    "content",
    [json.dumps(ANSWER), f"```json\n{json.dumps(ANSWER)}\n```", f"```\n{json.dumps(ANSWER)}```"],
)
def test_a_valid_answer(content: str) -> None:
    assessment = parse_answer(content)
    assert (assessment.score, assessment.level, assessment.factors) == (
        0.4,
        RiskLevel.MEDIUM,
        ("x",),
    )


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("The request looks fine.", "not JSON"),
        ("[0.4]", "not an object"),
        (json.dumps({**ANSWER, "score": 1.7}), "score"),
        (json.dumps({**ANSWER, "level": "SEVERE"}), "level"),
        (json.dumps({"score": 0.4, "level": "LOW"}), "rationale"),
        (json.dumps({**ANSWER, "rationale": ""}), "rationale"),
        (json.dumps({**ANSWER, "factors": "x"}), "factors"),
    ],
)
def test_an_invalid_answer_is_refused_with_the_reason(content: str, problem: str) -> None:
    with pytest.raises(ModelAnswerError, match=problem):
        parse_answer(content)


def test_facts_are_plain_data() -> None:
    data = facts().facts()
    assert json.loads(json.dumps(data)) == data
    assert data["documents"] == ["POL-001", "CTR-2024-017", "POL-007"]
