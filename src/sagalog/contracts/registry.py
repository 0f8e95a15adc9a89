"""The schema registry, reached through ``confluent_kafka.schema_registry``.

Subjects follow ``TopicRecordNameStrategy`` (``sagalog.contracts.subjects``). Every
subject sagalog registers carries the compatibility rule ``FULL_TRANSITIVE``: old
events are replayed by new code forever (backward), and agents deploy independently,
so an old consumer must also read a new producer's events (forward). ``sagalog
schemas check`` applies the same rule before a commit.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient, SchemaRegistryError
from confluent_kafka.schema_registry.common._httpx_compat import httpx

from sagalog.contracts.catalog import EventSchema
from sagalog.errors import SchemaCompatibilityError, SchemaError, ServiceUnavailableError
from sagalog.settings import ClientSettings

COMPATIBILITY_RULE = "FULL_TRANSITIVE"

T = TypeVar("T")


@dataclass(frozen=True)
class RegisteredVersion:
    """The latest version of a subject as the registry holds it."""

    subject: str
    version: int
    schema_id: int
    definition: Any


class SchemaRegistry:
    """The registry operations sagalog needs, with errors that say what to do."""

    def __init__(self, settings: ClientSettings) -> None:
        self.url = settings.schema_registry_url
        self.client = SchemaRegistryClient(settings.registry_config())

    def _call(self, what: str, call: Callable[[], T]) -> T:
        try:
            return call()
        except SchemaRegistryError:
            raise
        except httpx.TransportError as exc:  # the registry client's HTTP layer (httpx)
            raise ServiceUnavailableError(
                f"schema registry at {self.url} did not answer ({what}): {exc.__class__.__name__}; "
                "start it with `sagalog dev up` or set SAGALOG_SCHEMA_REGISTRY_URL"
            ) from exc

    def latest(self, subject: str) -> RegisteredVersion | None:
        """The latest registered version of ``subject``, or None when it has none."""
        try:
            registered = self._call(
                f"latest version of {subject}", lambda: self.client.get_latest_version(subject)
            )
        except SchemaRegistryError as exc:
            if exc.http_status_code == 404:
                return None
            raise SchemaError(f"registry refused to read subject {subject}: {exc}") from exc
        return RegisteredVersion(
            subject=subject,
            version=int(registered.version or 0),
            schema_id=int(registered.schema_id or 0),
            definition=json.loads(registered.schema.schema_str or "null"),
        )

    def compatibility(self, subject: str) -> str | None:
        """The compatibility rule set on ``subject`` itself, or None when it inherits."""
        try:
            return str(
                self._call(
                    f"compatibility of {subject}",
                    lambda: self.client.get_compatibility(subject),
                )
            )
        except SchemaRegistryError as exc:
            if exc.http_status_code == 404:
                return None
            raise SchemaError(f"registry refused to read the rule of {subject}: {exc}") from exc

    def set_rule(self, subject: str) -> None:
        """Set ``COMPATIBILITY_RULE`` on ``subject`` (before its first version exists)."""
        self._call(
            f"set compatibility of {subject}",
            lambda: self.client.set_compatibility(subject_name=subject, level=COMPATIBILITY_RULE),
        )

    def register(self, subject: str, schema: EventSchema) -> int:
        """Register ``schema`` under ``subject`` with the rule set first; return its id.

        Registering an already registered schema is a no-op returning the same id.

        Raises:
            SchemaCompatibilityError: the registry refused the change under its rule.
        """
        self.set_rule(subject)
        try:
            return self._call(
                f"register {subject}",
                lambda: self.client.register_schema(subject, Schema(schema.text, "AVRO")),
            )
        except SchemaRegistryError as exc:
            if exc.http_status_code == 409 and "already exists" in str(exc.error_message):
                # Not a refusal: the create raced with itself. The client retries a
                # request the registry was slow to answer (a loaded machine), and
                # Apicurio answers the retry of a create that landed with "already
                # exists". The schema is registered; its id is what was asked for.
                found = self._registered_id(subject, schema)
                if found is not None:
                    return found
            if exc.http_status_code == 409:
                raise SchemaCompatibilityError(
                    f"registry refused {schema.name} ({schema.path}) under subject {subject}: "
                    f"{COMPATIBILITY_RULE} violated: {exc.error_message}. Give new fields a "
                    "default and keep every field that has none, or start a new major "
                    "version (a new namespace such as v2)"
                ) from exc
            raise SchemaError(f"registry refused {subject}: {exc}") from exc

    def _registered_id(self, subject: str, schema: EventSchema) -> int | None:
        """The id ``schema`` has under ``subject``, or None when it is not registered."""
        try:
            found = self._call(
                f"look up {schema.name} under {subject}",
                lambda: self.client.lookup_schema(subject, Schema(schema.text, "AVRO")),
            )
        except SchemaRegistryError:
            return None
        return int(found.schema_id) if found.schema_id is not None else None

    def schema_id(self, subject: str, schema: EventSchema) -> int:
        """The id of ``schema`` as registered under ``subject``.

        Raises:
            SchemaError: the schema is not registered there, with the command to fix it.
        """
        try:
            registered = self._call(
                f"look up {subject}",
                lambda: self.client.lookup_schema(subject, Schema(schema.text, "AVRO")),
            )
        except SchemaRegistryError as exc:
            if exc.http_status_code == 404:
                raise SchemaError(
                    f"{schema.name} ({schema.path}) is not registered under subject {subject}; "
                    "run `sagalog topology apply` to register the schemas the topology declares"
                ) from exc
            raise SchemaError(f"registry refused to look up {subject}: {exc}") from exc
        return int(registered.schema_id or 0)

    def writer_schema(self, schema_id: int) -> Any:
        """The schema JSON registered under global ``schema_id`` (cached by the client)."""
        try:
            schema = self._call(f"schema id {schema_id}", lambda: self.client.get_schema(schema_id))
        except SchemaRegistryError as exc:
            raise SchemaError(f"unknown schema id {schema_id} in {self.url}: {exc}") from exc
        return json.loads(schema.schema_str or "null")
