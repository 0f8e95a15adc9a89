"""The lock file that pins every byte the dev stack runs.

``deploy/local/devstack-lock.json`` records the sha256 of each Kafka runtime jar
and of each Apicurio Registry distribution. A classpath resolved by Maven, or a
tarball downloaded from a mirror, is only used when it matches: the broker a
newcomer starts is the one the tests ran against, byte for byte.

Run ``python -m sagalog.devstack.lockfile <jar-dir>`` after bumping
``deploy/local/kafka/pom.xml`` to print the new ``jars`` table.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sagalog.errors import LocalStackError

LOCK_FILE_NAME = "devstack-lock.json"
_CHUNK = 1 << 20


@dataclass(frozen=True)
class KafkaLock:
    """The pinned Kafka classpath.

    Attributes:
        version: the ``kafka_2.13`` version the pom asks for.
        min_java: the oldest Java this Kafka runs on.
        pom: the pom's path relative to the lock file's directory.
        jars: jar file name to sha256, the complete runtime classpath.
    """

    version: str
    min_java: int
    pom: str
    jars: Mapping[str, str]


@dataclass(frozen=True)
class RegistryDistribution:
    """One Apicurio Registry distribution, in order of preference in the lock.

    Attributes:
        version: Apicurio Registry version.
        min_java: the oldest Java its classes run on (3.3 is built for 21).
        artifact: Maven coordinates ``group:artifact:version:type:classifier``.
        file_name: the file Maven stores, e.g. ``apicurio-registry-app-3.3.3-all.tar.gz``.
        sha256: digest of that file.
        launcher: the jar to run with ``java -jar`` once unpacked.
        management_interface: whether it opens Quarkus' separate management port.
    """

    version: str
    min_java: int
    artifact: str
    file_name: str
    sha256: str
    launcher: str
    management_interface: bool


@dataclass(frozen=True)
class DevStackLock:
    """The whole lock file, plus the directory its relative paths start from."""

    base_dir: Path
    kafka: KafkaLock
    registries: tuple[RegistryDistribution, ...]

    @property
    def kafka_pom(self) -> Path:
        """Absolute path of the pom that resolves the Kafka classpath."""
        return self.base_dir / self.kafka.pom


@dataclass(frozen=True)
class DigestMismatch:
    """A file whose content is not what the lock pins (``actual`` None: the file is missing)."""

    path: Path
    expected: str
    actual: str | None


def bundled_dir() -> Path:
    """Where the pom, lock and log4j2 configuration live.

    A wheel carries ``deploy/local`` as ``sagalog/devstack/bundled``; an editable
    install of the repository reads ``deploy/local`` itself.
    """
    here = Path(__file__).resolve().parent
    for candidate in (here / "bundled", here.parents[2] / "deploy" / "local"):
        if (candidate / LOCK_FILE_NAME).is_file():
            return candidate
    raise LocalStackError(
        f"{LOCK_FILE_NAME} is neither in {here / 'bundled'} nor in the repository's "
        f"deploy/local: the sagalog installation is incomplete; reinstall it "
        f"(`pip install --force-reinstall sagalog`)"
    )


def parse_lock(data: Mapping[str, Any], *, base_dir: Path) -> DevStackLock:
    """Build a ``DevStackLock`` from the decoded JSON.

    Raises:
        LocalStackError: a key is missing or has the wrong type; the lock is
            shipped with sagalog, so this means a bad edit or a broken install.
    """
    try:
        kafka = data["kafka"]
        registries = tuple(
            RegistryDistribution(
                version=str(entry["version"]),
                min_java=int(entry["min_java"]),
                artifact=str(entry["artifact"]),
                file_name=str(entry["file_name"]),
                sha256=str(entry["sha256"]).lower(),
                launcher=str(entry["launcher"]),
                management_interface=bool(entry["management_interface"]),
            )
            for entry in data["registry"]
        )
        lock = DevStackLock(
            base_dir=base_dir,
            kafka=KafkaLock(
                version=str(kafka["version"]),
                min_java=int(kafka["min_java"]),
                pom=str(kafka["pom"]),
                jars={str(name): str(digest).lower() for name, digest in kafka["jars"].items()},
            ),
            registries=registries,
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise LocalStackError(
            f"{base_dir / LOCK_FILE_NAME} is malformed ({type(exc).__name__}: {exc}); "
            f"restore it from the sagalog repository"
        ) from exc
    if not lock.kafka.jars or not lock.registries:
        raise LocalStackError(
            f"{base_dir / LOCK_FILE_NAME} pins no Kafka jars or no registry distribution; "
            f"restore it from the sagalog repository"
        )
    return lock


def load_lock(*, directory: Path | None = None) -> DevStackLock:
    """Read the lock file from ``directory`` (default: the bundled one)."""
    base_dir = directory if directory is not None else bundled_dir()
    path = base_dir / LOCK_FILE_NAME
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise LocalStackError(
            f"cannot read {path} ({exc}); restore it from the sagalog repository"
        ) from exc
    return parse_lock(data, base_dir=base_dir)


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file, read in chunks so a 150 MB tarball costs no memory."""
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def verify_directory(*, directory: Path, expected: Mapping[str, str]) -> list[DigestMismatch]:
    """Compare the files of ``directory`` with the pinned digests.

    Returns:
        One entry per missing or altered file, empty when everything matches.
        Files present but not pinned are reported with ``expected`` ``"(not in lock)"``,
        so an outdated lock cannot slip an unverified jar onto the classpath.
    """
    mismatches: list[DigestMismatch] = []
    for name, digest in sorted(expected.items()):
        path = directory / name
        if not path.is_file():
            mismatches.append(DigestMismatch(path, digest, None))
            continue
        actual = sha256_of(path)
        if actual != digest:
            mismatches.append(DigestMismatch(path, digest, actual))
    if directory.is_dir():
        for path in sorted(directory.iterdir()):
            if path.is_file() and path.name not in expected:
                mismatches.append(DigestMismatch(path, "(not in lock)", sha256_of(path)))
    return mismatches


def describe_mismatch(mismatch: DigestMismatch) -> str:
    """One line per file, the form every checksum error in the dev stack uses."""
    if mismatch.actual is None:
        return f"{mismatch.path}: missing (expected sha256 {mismatch.expected})"
    return f"{mismatch.path}: expected sha256 {mismatch.expected}, got {mismatch.actual}"


def jar_table(directory: Path) -> dict[str, str]:
    """The ``jars`` table of a freshly resolved classpath, for refreshing the lock."""
    return {path.name: sha256_of(path) for path in sorted(directory.glob("*.jar"))}


def main(argv: list[str]) -> int:
    """Print the ``jars`` table for the jar directory given as the only argument."""
    if len(argv) != 1 or not Path(argv[0]).is_dir():
        print("usage: python -m sagalog.devstack.lockfile <resolved-jar-directory>")
        return 2
    print(json.dumps(jar_table(Path(argv[0])), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
