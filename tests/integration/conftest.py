"""Integration fixtures: the real broker and registry, and throwaway projects on them.

These tests need the stack running (`sagalog dev up`, which `make test` does). They
fail, rather than skip, when it is not: a green run that skipped the broker would
prove nothing.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient

from sagalog.cluster import connect_admin
from sagalog.errors import ServiceUnavailableError
from sagalog.settings import ClientSettings

from .project import REPO, Project


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


# Fixtures that live next to the helpers they drive.
from .agent_harness import lab_factory  # noqa: E402, F401
from .service_harness import service_lab  # noqa: E402, F401
from .tracker_harness import tracker_lab  # noqa: E402, F401
