"""Registering a schema is idempotent, also when the registry client retried the create.

confluent-kafka's registry client retries a request answered 5xx or not at all; when
the first create had landed, Apicurio answers the retry 409 "already exists". That
is not a compatibility refusal: ``register`` returns the id the schema has.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka.schema_registry.error import SchemaRegistryError

from sagalog.contracts.catalog import SchemaCatalog
from sagalog.contracts.registry import SchemaRegistry
from sagalog.errors import SchemaCompatibilityError
from sagalog.settings import ClientSettings

REPO = Path(__file__).resolve().parents[2]


class RacingClient:
    """A registry client whose create answers 409 with ``message``."""

    def __init__(self, message: str, *, registered_id: int | None) -> None:
        self.message, self.registered_id = message, registered_id

    def set_compatibility(self, **_: Any) -> None:
        return None

    def register_schema(self, subject: str, schema: Any) -> int:
        raise SchemaRegistryError(409, 409, self.message)

    def lookup_schema(self, subject: str, schema: Any) -> Any:
        if self.registered_id is None:
            raise SchemaRegistryError(404, 40403, "schema not found")
        return SimpleNamespace(schema_id=self.registered_id)


def registry(client: RacingClient) -> SchemaRegistry:
    built = SchemaRegistry(ClientSettings(_env_file=None))  # type: ignore[call-arg]
    built.client = client  # type: ignore[assignment]
    return built


@pytest.fixture
def schema() -> Any:
    return SchemaCatalog.load(REPO / "schemas")["procurement.v1.RequestSubmitted"]


def test_a_create_that_landed_before_its_retry_returns_the_registered_id(schema: Any) -> None:
    racing = RacingClient(
        "An artifact with ID 'x' in group 'null' already exists.", registered_id=7
    )
    assert registry(racing).register("orders-value", schema) == 7


def test_already_exists_without_the_schema_is_still_a_refusal(schema: Any) -> None:
    racing = RacingClient("An artifact with ID 'x' already exists.", registered_id=None)
    with pytest.raises(SchemaCompatibilityError, match="orders-value"):
        registry(racing).register("orders-value", schema)


def test_an_incompatible_schema_is_refused_with_what_to_do(schema: Any) -> None:
    racing = RacingClient("Incompatible schema", registered_id=7)
    with pytest.raises(SchemaCompatibilityError, match="Give new fields a default"):
        registry(racing).register("orders-value", schema)
