"""Fetching and checking the Kafka classpath and the Apicurio Registry distribution.

The Kafka classpath is resolved by ``mvn`` (it needs transitive resolution), so a
user's mirror, proxy and credentials in ``~/.m2/settings.xml`` apply unchanged;
the registry is one file, downloaded over HTTPS (see ``download``). Each is
fetched once into the cache directory, checked against the lock file, and only
then moved into place: a half-finished or tampered download never becomes the cache.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import tarfile
from collections.abc import Callable, Sequence
from pathlib import Path

from sagalog.devstack.download import download_verified, repository_path
from sagalog.devstack.lockfile import (
    DevStackLock,
    RegistryDistribution,
    describe_mismatch,
    verify_directory,
)
from sagalog.errors import LocalStackError

#: Pinned so the goals behave the same whatever Maven's built-in default is.
MAVEN_DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
MAVEN_TIMEOUT_S = 1800.0
_VERIFIED_MARKER = ".sagalog-verified"
#: Maven 3.8 prints colour resets even with -B -q; they would garble error messages.
_ANSI = re.compile(r"\x1b\[[0-9;]*m")

Progress = Callable[[str], None]


def kafka_jar_dir(*, cache_dir: Path, lock: DevStackLock) -> Path:
    """Where the verified classpath of the locked Kafka version lives.

    Named by the version and a digest of the pinned jar table: two checkouts whose
    poms differ (one adds ``kafka-tools``) share the cache without failing each
    other's checksum check on the same directory.
    """
    table = "".join(f"{name}={digest}\n" for name, digest in sorted(lock.kafka.jars.items()))
    digest = hashlib.sha256(table.encode("utf-8")).hexdigest()[:12]
    return cache_dir / "kafka" / f"{lock.kafka.version}-{digest}"


def registry_home(*, cache_dir: Path, distribution: RegistryDistribution) -> Path:
    """Where a verified, unpacked Apicurio Registry distribution lives."""
    return cache_dir / "apicurio-registry" / distribution.version


def find_maven() -> str:
    """The ``mvn`` executable.

    Raises:
        LocalStackError: ``mvn`` is not installed; it is only needed on a cold cache.
    """
    mvn = shutil.which("mvn")
    if mvn is None:
        raise LocalStackError(
            "Maven (`mvn`) is not on PATH; sagalog needs it once to resolve Kafka's jars "
            "from Maven Central into the cache: install it (`apt-get install maven`, or "
            "`brew install maven`) and rerun `sagalog dev up`"
        )
    return mvn


def maven_command(*, mvn: str, goal: str, arguments: Sequence[str]) -> list[str]:
    """The ``mvn`` command line for one goal of the (pinned) dependency plugin."""
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
        output = _ANSI.sub("", completed.stdout + completed.stderr).strip().splitlines()
        tail = "\n".join(line for line in output[-20:] if line.strip())
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
    mvn = find_maven()
    progress(f"kafka: resolving Kafka {lock.kafka.version} jars with Maven (first run only)…")
    staging = _staging_dir(final)
    command = maven_command(
        mvn=mvn,
        goal="copy-dependencies",
        arguments=[
            "-f",
            str(lock.kafka_pom),
            f"-DoutputDirectory={staging}",
            "-DincludeScope=runtime",
        ],
    )
    try:
        run_maven(command=command, cwd=staging, what=f"the Kafka {lock.kafka.version} jars")
        mismatches = verify_directory(directory=staging, expected=lock.kafka.jars)
        if mismatches:
            raise LocalStackError(
                f"the jars Maven resolved from {lock.kafka_pom} do not match the lock:\n"
                + "\n".join(describe_mismatch(m) for m in mismatches)
                + "\nA mirror served other bytes or the pom and lock disagree: delete the "
                "affected entries under ~/.m2/repository and retry, or refresh the lock "
                "(deploy/local/README.md)"
            )
    except LocalStackError:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    _promote(staging=staging, final=final)
    return final


def ensure_registry(
    *,
    cache_dir: Path,
    distribution: RegistryDistribution,
    repository_url: str,
    progress: Progress,
) -> Path:
    """Return the directory of the unpacked, verified registry, fetching it on first use.

    The tarball is checked before it is unpacked and deleted afterwards; a marker
    holding its digest tells later runs that the directory came from the locked bytes.

    Raises:
        LocalStackError: the download fails, or the tarball differs from the lock.
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
    url = f"{repository_url.rstrip('/')}/{repository_path(distribution.artifact)}"
    progress(f"registry: downloading Apicurio Registry {distribution.version} (first run only)…")
    staging = _staging_dir(final)
    tarball = staging / distribution.file_name
    download_verified(
        url=url,
        target=tarball,
        expected_sha256=distribution.sha256,
        report=_quarter_reporter(progress, label=f"registry: {distribution.file_name}"),
    )
    progress(f"registry: unpacking Apicurio Registry {distribution.version}…")
    with tarfile.open(tarball, mode="r:gz") as archive:
        archive.extractall(staging, filter="data")
    tarball.unlink()
    if not (staging / distribution.launcher).is_file():
        shutil.rmtree(staging, ignore_errors=True)
        raise LocalStackError(
            f"{distribution.file_name} has no {distribution.launcher}; the lock's launcher "
            "entry is wrong for this distribution: fix deploy/local/devstack-lock.json"
        )
    (staging / _VERIFIED_MARKER).write_text(distribution.sha256 + "\n", encoding="utf-8")
    _promote(staging=staging, final=final)
    return final


def _quarter_reporter(progress: Progress, *, label: str) -> Callable[[int, int | None], None]:
    """Turn byte counts into at most four progress lines (25, 50, 75, 100 %)."""
    reported = 0

    def report(received: int, total: int | None) -> None:
        nonlocal reported
        if not total:
            return
        quarter = received * 4 // total
        if quarter > reported:
            reported = quarter
            progress(f"{label}: {received >> 20} of {total >> 20} MB")

    return report
