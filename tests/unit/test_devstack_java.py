"""Java discovery: version parsing and per-component choice, without running a JVM."""

from __future__ import annotations

from pathlib import Path

import pytest

from sagalog.devstack.java import (
    JavaCandidate,
    JavaFinder,
    java_candidates,
    parse_java_version,
    probe_java,
)
from sagalog.devstack.settings import DevStackSettings
from sagalog.errors import LocalStackError


@pytest.mark.parametrize(
    ("text", "version", "major"),
    [
        ('openjdk version "17.0.15" 2025-04-15\nOpenJDK Runtime Environment', "17.0.15", 17),
        ('openjdk version "25.0.3" 2026-04-21 LTS', "25.0.3", 25),
        ('java version "1.8.0_292"\nJava(TM) SE Runtime Environment', "1.8.0_292", 8),
        ('openjdk version "21" 2023-09-19', "21", 21),
        ('openjdk version "22-ea" 2024-03-19', "22-ea", 22),
        ('IMPLEMENTOR="Eclipse Adoptium"\nJAVA_VERSION="21.0.4"\nOS_NAME="Linux"', "21.0.4", 21),
    ],
)
def test_parse_java_version_reads_cli_output_and_release_files(
    text: str, version: str, major: int
) -> None:
    assert parse_java_version(text) == (version, major)


@pytest.mark.parametrize("text", ["", "command not found", 'openjdk version "ea"'])
def test_parse_java_version_rejects_text_without_a_version(text: str) -> None:
    with pytest.raises(ValueError):
        parse_java_version(text)


def _fake_jdk(root: Path, name: str, version: str) -> Path:
    """A directory shaped like a JDK: an (unrunnable) bin/java and a release file."""
    home = root / name
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text("#!/bin/false\n")
    (home / "release").write_text(f'JAVA_VERSION="{version}"\n')
    return java


def test_probe_java_uses_the_release_file_without_starting_a_jvm(tmp_path: Path) -> None:
    java = _fake_jdk(tmp_path, "jdk-21", "21.0.4")
    runtime = probe_java(JavaCandidate(java, "test"))
    assert runtime is not None
    assert (runtime.version, runtime.major, runtime.origin) == ("21.0.4", 21, "test")


def test_finder_picks_per_component_the_first_runtime_meeting_its_minimum(tmp_path: Path) -> None:
    jdk17 = _fake_jdk(tmp_path, "jdk-17", "17.0.15")
    jdk25 = _fake_jdk(tmp_path, "jdk-25", "25.0.3")
    finder = JavaFinder(
        candidates=[JavaCandidate(jdk17, "PATH"), JavaCandidate(jdk25, "/usr/lib/jvm")]
    )
    kafka = finder.find(minimum=17)
    registry = finder.find(minimum=21)
    assert kafka is not None and kafka.executable == jdk17
    assert registry is not None and registry.executable == jdk25
    assert finder.find(minimum=26) is None


def test_require_names_the_newest_java_found_and_what_to_do(tmp_path: Path) -> None:
    jdk11 = _fake_jdk(tmp_path, "jdk-11", "11.0.2")
    finder = JavaFinder(candidates=[JavaCandidate(jdk11, "JAVA_HOME")])
    with pytest.raises(LocalStackError) as caught:
        finder.require(minimum=17, component="Kafka 4.4.0")
    message = str(caught.value)
    assert "Kafka 4.4.0 needs Java 17+" in message
    assert str(jdk11) in message and "11.0.2" in message
    assert "SAGALOG_DEV_JAVA_HOME" in message


def test_require_says_when_no_java_exists_at_all() -> None:
    with pytest.raises(LocalStackError, match="no Java runtime was found"):
        JavaFinder(candidates=[]).require(minimum=17, component="Kafka 4.4.0")


def test_candidates_put_the_explicit_setting_first_and_drop_duplicates(tmp_path: Path) -> None:
    java = _fake_jdk(tmp_path, "jdk-25", "25.0.3")
    home = java.parent.parent
    settings = DevStackSettings(java_home=home, inherited_java_home=home)
    candidates = java_candidates(settings=settings)
    assert candidates[0] == JavaCandidate(java.resolve(), "SAGALOG_DEV_JAVA_HOME")
    assert [c.executable for c in candidates].count(java.resolve()) == 1


def test_a_java_home_setting_without_java_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(LocalStackError, match="has no bin/java"):
        java_candidates(settings=DevStackSettings(java_home=tmp_path))
