"""Fetching and checking the Kafka classpath and the Apicurio Registry distribution.

Both come from Maven Central through ``mvn`` so that a user's mirror, proxy and
credentials in ``~/.m2/settings.xml`` apply unchanged. Each is fetched once into
the cache directory, checked against the lock file, and only then moved into
place: a half-finished or tampered download never becomes the cache.
"""

from __future__ import annotations

import shutil
import subprocess
import tarfile
from collections.abc import Callable, Sequence
from pathlib import Path

from sagalog.devstack.lockfile import (
    DevStackLock,
    RegistryDistribution,
    describe_mismatch,
    sha256_of,
    verify_directory,
)
from sagalog.errors import LocalStackError

#: Pinned so the goals behave the same whatever Maven's built-in default is.
MAVEN_DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
MAVEN_TIMEOUT_S = 1800.0
_VERIFIED_MARKER = ".sagalog-verified"

Progress = Callable[[str], None]


def kafka_jar_dir(*, cache_dir: Path, lock: DevStackLock) -> Path:
    """Where the verified classpath of the locked Kafka version lives."""
    return cache_dir / "kafka" / lock.kafka.version


def registry_home(*, cache_dir: Path, distribution: RegistryDistribution) -> Path:
    """Where a verified, unpacked Apicurio Registry distribution lives."""
    return cache_dir / "apicurio-registry" / distribution.version


def maven_command(*, goal: str, arguments: Sequence[str]) -> list[str]:
    """The ``mvn`` command line for one goal of the dependency plugin.

    Raises:
        LocalStackError: ``mvn`` is not installed; it is only needed on a cold cache.
    """
    mvn = shutil.which("mvn")
    if mvn is None:
        raise LocalStackError(
            "Maven (`mvn`) is not on PATH; sagalog needs it once to fetch Kafka and the "
            "schema registry from Maven Central into the cache: install it "
            "(`apt-get install maven`, or `brew install maven`) and rerun `sagalog dev up`"
        )
    return [
        mvn,
        "-B",
        "-q",
        "--strict-checksums",
        "-Dstyle.color=never",
        f"{MAVEN_DEPENDENCY_PLUGIN}:{goal}",
        *arguments,
    ]


def run_maven(*, command: Sequence[str], cwd: Path, what: str) -> None:
    """Run Maven, turning a failure into an error that shows what Maven said."""
    try:
        completed = subprocess.run(
            list(command),
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=MAVEN_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise LocalStackError(
            f"Maven did not finish fetching {what} within {MAVEN_TIMEOUT_S:.0f}s "
            f"(`{' '.join(command)}`): check the network path to Maven Central and rerun"
        ) from exc
    if completed.returncode != 0:
        output = (completed.stdout + completed.stderr).strip().splitlines()
        tail = "\n".join(output[-20:])
        raise LocalStackError(
            f"Maven could not fetch {what} (exit {completed.returncode}) with "
            f"`{' '.join(command)}`:\n{tail}\nCheck access to Maven Central (or the mirror in "
            f"~/.m2/settings.xml) and rerun `sagalog dev up`"
        )


def _staging_dir(final: Path) -> Path:
    """A fresh sibling of ``final`` to build into; renamed over it only when complete."""
    staging = final.with_name(f".{final.name}.partial")
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    return staging


def _promote(*, staging: Path, final: Path) -> None:
    """Move a complete staging directory into place, tolerating a concurrent winner."""
    try:
        staging.rename(final)
    except OSError:
        if not final.is_dir():
            raise
        shutil.rmtree(staging, ignore_errors=True)


def ensure_kafka_jars(*, cache_dir: Path, lock: DevStackLock, progress: Progress) -> Path:
    """Return the directory of the verified Kafka classpath, resolving it on first use.

    A warm cache costs one sha256 pass over the jars (about 45 MB) and no Maven call.

    Raises:
        LocalStackError: Maven is missing or fails, or a jar differs from the lock.
    """
    final = kafka_jar_dir(cache_dir=cache_dir, lock=lock)
    if final.is_dir():
        mismatches = verify_directory(directory=final, expected=lock.kafka.jars)
        if mismatches:
            raise LocalStackError(
                "checksum mismatch in the cached Kafka classpath:\n"
                + "\n".join(describe_mismatch(m) for m in mismatches)
                + f"\nDelete the cache entry (`rm -r {final}`) and rerun `sagalog dev up` "
                "to fetch it again"
            )
        return final
    progress(f"kafka: resolving Kafka {lock.kafka.version} jars with Maven (first run only)…")
    staging = _staging_dir(final)
    command = maven_command(
        goal="copy-dependencies",
        arguments=[
            "-f",
            str(lock.kafka_pom),
            f"-DoutputDirectory={staging}",
            "-DincludeScope=runtime",
        ],
    )
    run_maven(command=command, cwd=staging, what=f"the Kafka {lock.kafka.version} jars")
    mismatches = verify_directory(directory=staging, expected=lock.kafka.jars)
    if mismatches:
        shutil.rmtree(staging, ignore_errors=True)
        raise LocalStackError(
            f"the jars Maven resolved from {lock.kafka_pom} do not match the lock:\n"
            + "\n".join(describe_mismatch(m) for m in mismatches)
            + "\nA mirror served other bytes or the pom and lock disagree: delete the "
            "affected entries under ~/.m2/repository and retry, or refresh the lock "
            "(deploy/local/README.md)"
        )
    _promote(staging=staging, final=final)
    return final


def ensure_registry(
    *, cache_dir: Path, distribution: RegistryDistribution, progress: Progress
) -> Path:
    """Return the directory of the unpacked, verified registry, fetching it on first use.

    The tarball is checked before it is unpacked and deleted afterwards; a marker
    holding its digest tells later runs that the directory came from the locked bytes.

    Raises:
        LocalStackError: Maven is missing or fails, or the tarball differs from the lock.
    """
    final = registry_home(cache_dir=cache_dir, distribution=distribution)
    marker = final / _VERIFIED_MARKER
    if marker.is_file() and marker.read_text(encoding="utf-8").strip() == distribution.sha256:
        return final
    if final.exists():
        raise LocalStackError(
            f"the cached Apicurio Registry {distribution.version} in {final} was not verified "
            f"against the lock (missing or different {_VERIFIED_MARKER}): delete the cache "
            f"entry (`rm -r {final}`) and rerun `sagalog dev up` to fetch it again"
        )
    progress(
        f"registry: fetching Apicurio Registry {distribution.version} with Maven "
        "(first run only, about 110-160 MB)…"
    )
    staging = _staging_dir(final)
    download = staging / ".download"
    download.mkdir()
    command = maven_command(
        goal="copy",
        arguments=[f"-Dartifact={distribution.artifact}", f"-DoutputDirectory={download}"],
    )
    run_maven(
        command=command, cwd=download, what=f"Apicurio Registry {distribution.version}"
    )
    tarball = download / distribution.file_name
    actual = sha256_of(tarball) if tarball.is_file() else None
    if actual != distribution.sha256:
        shutil.rmtree(staging, ignore_errors=True)
        raise LocalStackError(
            f"checksum mismatch for {tarball}: expected sha256 {distribution.sha256}, "
            f"got {actual or 'no file'}; delete the cache entry "
            f"(~/.m2/repository/io/apicurio/apicurio-registry-app/{distribution.version}) "
            "and retry"
        )
    progress(f"registry: unpacking Apicurio Registry {distribution.version}…")
    with tarfile.open(tarball, mode="r:gz") as archive:
        archive.extractall(staging, filter="data")
    shutil.rmtree(download)
    if not (staging / distribution.launcher).is_file():
        shutil.rmtree(staging, ignore_errors=True)
        raise LocalStackError(
            f"{distribution.file_name} has no {distribution.launcher}; the lock's launcher "
            "entry is wrong for this distribution: fix deploy/local/devstack-lock.json"
        )
    (staging / _VERIFIED_MARKER).write_text(distribution.sha256 + "\n", encoding="utf-8")
    _promote(staging=staging, final=final)
    return final
