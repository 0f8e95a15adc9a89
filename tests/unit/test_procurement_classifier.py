"""The intake classifier: held-out accuracy on the repository's labelled requests."""

from __future__ import annotations

import math

import pytest

from procurement.classifier import (
    NaiveBayesClassifier,
    accuracy,
    cross_validated_accuracy,
    scope_examples,
    stratified_split,
    train_from_corpus,
)
from procurement.corpus import LabelledRequest, load_documents, load_requests

# Floors, not targets: 6 categories make chance 0.17. Measured on the committed corpus:
# 0.91 cross-validated and 0.78 on the fixed split (an 18-request sample, so coarser).
CROSS_VALIDATED_FLOOR = 0.85
HELD_OUT_FLOOR = 0.70


@pytest.fixture(scope="module")
def requests() -> list[LabelledRequest]:
    return load_requests()


@pytest.fixture(scope="module")
def scope() -> list[LabelledRequest]:
    return scope_examples(load_documents())


def test_held_out_accuracy_is_above_the_floor(
    requests: list[LabelledRequest], scope: list[LabelledRequest]
) -> None:
    train, held_out = stratified_split(requests, every=4)
    assert not {r.request_id for r in train} & {r.request_id for r in held_out}
    model = NaiveBayesClassifier.train([*train, *scope])
    held_out_accuracy = accuracy(model.predict, held_out)
    cross_validated = cross_validated_accuracy(requests, folds=4, always=scope)
    requests_only = cross_validated_accuracy(requests, folds=4)
    print(
        f"\nclassifier: {len(requests)} labelled requests in {len(model.categories)} categories "
        f"+ {len(scope)} policy/contract examples; held-out split ({len(held_out)} requests) "
        f"accuracy {held_out_accuracy:.2f}; 4-fold cross-validated {cross_validated:.2f} "
        f"(requests alone: {requests_only:.2f})"
    )
    assert held_out_accuracy >= HELD_OUT_FLOOR
    assert cross_validated >= CROSS_VALIDATED_FLOOR
    # The scope examples are what carries it: without them the same folds do far worse.
    assert cross_validated > requests_only + 0.2


def test_the_split_is_stratified_and_repeatable(requests: list[LabelledRequest]) -> None:
    train, held_out = stratified_split(requests, every=4)
    assert {r.category for r in held_out} == {r.category for r in requests}
    assert len(train) + len(held_out) == len(requests)
    assert stratified_split(requests, every=4) == (train, held_out)


def test_confidence_is_the_posterior_probability() -> None:
    model = train_from_corpus()
    prediction = model.predict("Renew 40 seats of our design software subscription")
    assert prediction.category == "software"
    assert math.isclose(sum(p for _, p in prediction.posteriors), 1.0)
    assert prediction.posteriors[0] == (prediction.category, prediction.confidence)
    assert [p for _, p in prediction.posteriors] == sorted(
        (p for _, p in prediction.posteriors), reverse=True
    )
    assert set(model.categories) == {
        "facilities",
        "hardware",
        "marketing",
        "services",
        "software",
        "travel",
    }


def test_text_of_unknown_words_gets_the_priors() -> None:
    model = NaiveBayesClassifier.train(
        [
            LabelledRequest("1", "hardware", "laptop", "laptop"),
            LabelledRequest("2", "travel", "flight", "hotel"),
        ]
    )
    prediction = model.predict("zyxxy quux")
    assert math.isclose(prediction.confidence, 0.5)
    assert model.predict("a laptop please").category == "hardware"


@pytest.mark.parametrize(
    ("text", "category"),
    [
        ("Buy 10 laptops and docking stations for the new sales team", "hardware"),
        ("Flights and hotel to Berlin for the conference", "travel"),
        ("Annual renewal of the antivirus subscription licenses", "software"),
        ("Extend the office cleaning and security guard contract", "facilities"),
        ("Gold sponsorship and a booth at the developer conference", "marketing"),
        ("Consultants to audit our payroll process", "services"),
    ],
)
def test_obvious_requests(text: str, category: str) -> None:
    assert train_from_corpus().predict(text).category == category


def test_model_id_names_the_model_and_its_data() -> None:
    model = train_from_corpus()
    assert model.model_id.startswith("multinomial-naive-bayes/1 n=")
    assert model.data_version and model.data_version in model.model_id
    assert train_from_corpus().model_id == model.model_id  # same files, same version
