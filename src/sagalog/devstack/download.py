"""Downloading a file from a Maven repository over HTTPS, checked as it streams.

Used for the Apicurio Registry distributions: they are single files that need
no dependency resolution, and Maven cannot fetch 3.0.9 at all (its parent pom,
``io.apicurio:apicurio-registry:3.0.9``, is not on Maven Central, so
``dependency:copy`` fails reading the artifact descriptor). The sha256 pinned in
the lock file makes any mirror as trustworthy as Central.
"""

from __future__ import annotations

import hashlib
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from sagalog.errors import LocalStackError

_CHUNK = 1 << 20
_TIMEOUT_S = 60.0


def repository_path(coordinates: str) -> str:
    """The path of an artifact inside a Maven repository.

    Args:
        coordinates: ``group:artifact:version:type:classifier``, the form
            ``mvn dependency:copy -Dartifact=`` takes.

    Returns:
        ``io/apicurio/apicurio-registry-app/3.3.3/apicurio-registry-app-3.3.3-all.tar.gz``
        for ``io.apicurio:apicurio-registry-app:3.3.3:tar.gz:all``.

    Raises:
        ValueError: the coordinates do not have five parts.
    """
    parts = coordinates.split(":")
    if len(parts) != 5 or not all(parts):
        raise ValueError(f"{coordinates!r} is not group:artifact:version:type:classifier")
    group, artifact, version, kind, classifier = parts
    file_name = f"{artifact}-{version}-{classifier}.{kind}"
    return f"{group.replace('.', '/')}/{artifact}/{version}/{file_name}"


def download_verified(
    *,
    url: str,
    target: Path,
    expected_sha256: str,
    report: Callable[[int, int | None], None],
) -> None:
    """Stream ``url`` into ``target`` and check its sha256 before returning.

    Args:
        url: where to fetch from.
        target: the file to write; deleted again when anything goes wrong.
        expected_sha256: the digest from the lock file.
        report: called with (bytes so far, total or None) after each chunk, for progress.

    Raises:
        LocalStackError: the download failed or the bytes differ from the lock.
    """
    digest = hashlib.sha256()
    try:
        with urllib.request.urlopen(url, timeout=_TIMEOUT_S) as response, target.open("wb") as out:
            length = response.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
            received = 0
            while chunk := response.read(_CHUNK):
                out.write(chunk)
                digest.update(chunk)
                received += len(chunk)
                report(received, total)
    except (OSError, urllib.error.URLError) as exc:
        target.unlink(missing_ok=True)
        raise LocalStackError(
            f"downloading {url} failed ({exc}); check the network path to the repository "
            f"(or set SAGALOG_DEV_MAVEN_REPOSITORY_URL to a mirror) and rerun `sagalog dev up`"
        ) from exc
    actual = digest.hexdigest()
    if actual != expected_sha256:
        target.unlink(missing_ok=True)
        raise LocalStackError(
            f"checksum mismatch for {target.name} from {url}: expected sha256 "
            f"{expected_sha256}, got {actual}; the download was deleted: retry "
            f"`sagalog dev up`, and if it persists, the repository serves other bytes "
            f"than Maven Central (check SAGALOG_DEV_MAVEN_REPOSITORY_URL)"
        )
