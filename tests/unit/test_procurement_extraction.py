"""Fields read from a request's free text."""

from __future__ import annotations

import pytest

from procurement.extraction import extract_fields


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "We need 6 laptops with 32 GB RAM. Cost center CC-4410. Delivery by 2026-01-05.",
            {
                "quantity": "6",
                "unit": "laptops",
                "cost_center": "CC-4410",
                "delivery_date": "2026-01-05",
            },
        ),
        (
            "12 27-inch monitors for the support desks. Deliver before 15 December 2026.",
            {"quantity": "12", "unit": "monitors", "delivery_date": "2026-12-15"},
        ),
        ("Quantity: 20 USB-C docking stations", {"quantity": "20", "unit": "docking stations"}),
        ("qty 3", {"quantity": "3"}),
        ("Licenses for the CI pipeline, 60 developer seats.", {"quantity": "60", "unit": "seats"}),
        ("Print 2,000 brochures", {"quantity": "2000", "unit": "brochures"}),
        ("5x headsets", {"quantity": "5", "unit": "headsets"}),
        (
            "15 smartphones; cost centre 5120",
            {"quantity": "15", "unit": "smartphones", "cost_center": "CC-5120"},
        ),
        ("Charge it to cost center MKT-220", {"cost_center": "MKT-220"}),
        ("needed no later than March 3, 2027", {"delivery_date": "2027-03-03"}),
        (
            "Renew 25 seats, 12-month subscription",
            {"quantity": "25", "unit": "seats", "contract_term": "12 months"},
        ),
        ("Extend the cleaning service for another 12 months", {"contract_term": "12 months"}),
        ("a 3-year term was quoted", {"contract_term": "3 years"}),
    ],
)
def test_fields_found(text: str, expected: dict[str, str]) -> None:
    assert extract_fields(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "Two 48-port PoE switches",  # 48 counts ports, not switches
        "Budget EUR 300 licenses",  # a price, not a count
        "Arriving on 15 December 2026",  # a date without a delivery cue
        "deliver by 2026-02-30",  # not a date
        "The team of 20 percent growth",  # no unit
        "Travel on 2026-04-12 with two-year warranty",  # a warranty is not a contract term
        "",
    ],
)
def test_nothing_guessed(text: str) -> None:
    assert extract_fields(text) == {}
