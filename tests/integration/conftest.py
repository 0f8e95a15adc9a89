"""Integration fixtures: the real broker and registry, and throwaway projects on them.

These tests need the stack running (`sagalog dev up`, which `make test` does). They
fail, rather than skip, when it is not: a green run that skipped the broker would
prove nothing.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient

from sagalog.cluster import connect_admin
from sagalog.contracts.catalog import SchemaCatalog
from sagalog.errors import ServiceUnavailableError
from sagalog.settings import ClientSettings
from sagalog.topology.apply import TopologyClient
from sagalog.topology.loader import load_topology

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def settings() -> ClientSettings:
    settings = ClientSettings(connect_timeout_s=15)
    try:
        connect_admin(settings)
    except ServiceUnavailableError as exc:
        pytest.fail(
            f"{exc}\nintegration tests need the local stack: run `sagalog dev up`", pytrace=False
        )
    return settings


@dataclass
class Project:
    """A throwaway sagalog project whose topics have unique names."""

    root: Path
    settings: ClientSettings
    suffix: str

    def topic(self, name: str) -> str:
        return f"{name}.{self.suffix}"

    @property
    def catalog(self) -> SchemaCatalog:
        return SchemaCatalog.load(self.root / "schemas")

    def write_topology(self, text: str) -> None:
        (self.root / "topology" / "topics.yaml").write_text(text.replace("{s}", self.suffix))

    def client(self) -> TopologyClient:
        return TopologyClient(self.settings, self.catalog)

    def topology(self):  # type: ignore[no-untyped-def]
        return load_topology(self.root / "topology", known_schemas=self.catalog)

    def apply(self, *, force: bool = False) -> list[object]:
        client = self.client()
        return list(client.apply(client.plan(self.topology()), force=force, report=lambda _: None))


@pytest.fixture
def project(tmp_path: Path, settings: ClientSettings) -> Iterator[Project]:
    root = tmp_path / "project"
    shutil.copytree(REPO / "schemas", root / "schemas")
    (root / "topology").mkdir(parents=True)
    suffix = uuid.uuid4().hex[:10]
    project = Project(
        root=root, settings=settings.model_copy(update={"project_dir": str(root)}), suffix=suffix
    )
    # Only this test's topics are managed; everything else on the shared cluster is ignored.
    project.write_topology("""
ignore: ["*"]
topics:
  procurement.events.{s}:
    partitions: 3
    retention: forever
    schemas: [procurement.v1.RequestSubmitted, procurement.v1.BudgetReserved]
""")
    yield project
    admin, metadata = connect_admin(settings)
    mine = [t for t in metadata.topics if suffix in t]
    if mine:
        for future in admin.delete_topics(mine, request_timeout=15).values():
            future.result(timeout=15)
    registry = SchemaRegistryClient(settings.registry_config())
    for subject in registry.get_subjects():
        if suffix in subject:
            registry.delete_subject(subject)
            registry.delete_subject(subject, permanent=True)


# Fixtures that live next to the helpers they drive (imported last: they import Project).
from .agent_harness import lab_factory  # noqa: E402, F401
from .service_harness import service_lab  # noqa: E402, F401
from .tracker_harness import tracker_lab  # noqa: E402, F401
