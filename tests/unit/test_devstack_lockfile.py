"""The lock file: its shipped content, parsing, and verification of files against it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from sagalog.devstack.download import repository_path
from sagalog.devstack.lockfile import (
    LOCK_FILE_NAME,
    describe_mismatch,
    jar_table,
    load_lock,
    parse_lock,
    verify_directory,
)
from sagalog.errors import LocalStackError

REPO = Path(__file__).resolve().parents[2]


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_the_shipped_lock_pins_kafka_4_4_and_prefers_apicurio_3_3() -> None:
    lock = load_lock(directory=REPO / "deploy" / "local")
    assert lock.kafka.version == "4.4.0"
    assert "kafka_2.13-4.4.0.jar" in lock.kafka.jars
    assert "log4j-slf4j-impl-2.24.3.jar" in lock.kafka.jars
    assert all(len(digest) == 64 for digest in lock.kafka.jars.values())
    assert lock.kafka_pom.is_file()
    assert [(r.version, r.min_java) for r in lock.registries] == [("3.3.3", 21), ("3.0.9", 17)]
    for registry in lock.registries:
        assert repository_path(registry.artifact).endswith("/" + registry.file_name)


def test_the_pom_asks_for_the_locked_kafka_version() -> None:
    lock = load_lock(directory=REPO / "deploy" / "local")
    pom = lock.kafka_pom.read_text()
    assert f"<artifactId>kafka_2.13</artifactId><version>{lock.kafka.version}</version>" in pom


def test_parse_lock_reports_a_malformed_file_with_its_path(tmp_path: Path) -> None:
    with pytest.raises(LocalStackError, match=LOCK_FILE_NAME):
        parse_lock({"kafka": {"version": "4.4.0"}}, base_dir=tmp_path)


def test_load_lock_reports_unreadable_json(tmp_path: Path) -> None:
    (tmp_path / LOCK_FILE_NAME).write_text("{not json")
    with pytest.raises(LocalStackError, match="cannot read"):
        load_lock(directory=tmp_path)


def test_verify_directory_accepts_exactly_the_locked_files(tmp_path: Path) -> None:
    (tmp_path / "a.jar").write_bytes(b"a")
    (tmp_path / "b.jar").write_bytes(b"b")
    expected = {"a.jar": _sha(b"a"), "b.jar": _sha(b"b")}
    assert verify_directory(directory=tmp_path, expected=expected) == []
    assert jar_table(tmp_path) == expected


def test_verify_directory_reports_altered_missing_and_unpinned_files(tmp_path: Path) -> None:
    (tmp_path / "a.jar").write_bytes(b"tampered")
    (tmp_path / "extra.jar").write_bytes(b"x")
    expected = {"a.jar": _sha(b"a"), "b.jar": _sha(b"b")}
    mismatches = {m.path.name: m for m in verify_directory(directory=tmp_path, expected=expected)}
    assert set(mismatches) == {"a.jar", "b.jar", "extra.jar"}
    assert mismatches["a.jar"].actual == _sha(b"tampered")
    assert mismatches["b.jar"].actual is None
    assert mismatches["extra.jar"].expected == "(not in lock)"
    line = describe_mismatch(mismatches["a.jar"])
    assert str(tmp_path / "a.jar") in line and _sha(b"a") in line and _sha(b"tampered") in line
    assert "missing" in describe_mismatch(mismatches["b.jar"])


def test_repository_path_follows_the_maven_layout() -> None:
    assert repository_path("io.apicurio:apicurio-registry-app:3.3.3:tar.gz:all") == (
        "io/apicurio/apicurio-registry-app/3.3.3/apicurio-registry-app-3.3.3-all.tar.gz"
    )
    with pytest.raises(ValueError):
        repository_path("io.apicurio:apicurio-registry-app:3.3.3")


def test_lock_file_is_valid_json_with_a_comment_on_how_to_refresh_it() -> None:
    data = json.loads((REPO / "deploy" / "local" / LOCK_FILE_NAME).read_text())
    assert "sagalog.devstack.lockfile" in data["_comment"]
