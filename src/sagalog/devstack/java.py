"""Finding a Java runtime new enough for each component.

Kafka 4.x needs Java 17, Apicurio Registry 3.3 needs Java 21, and many machines
have several JDKs of which the default is the oldest. So instead of using "the"
java, each component takes the first runtime, in a fixed order of preference,
that meets its own minimum.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from sagalog.devstack.settings import DevStackSettings
from sagalog.errors import LocalStackError

_VERSION_IN_OUTPUT = re.compile(r'version "([^"]+)"')
_VERSION_IN_RELEASE = re.compile(r'^JAVA_VERSION="([^"]+)"', re.MULTILINE)
_LEADING_NUMBER = re.compile(r"^(\d+)")

#: Where JDKs are installed by package managers, searched after the explicit settings.
JVM_ROOTS: tuple[Path, ...] = (
    Path("/usr/lib/jvm"),
    Path("/usr/local/lib/jvm"),
    Path("/opt/java"),
    Path("/Library/Java/JavaVirtualMachines"),
)


@dataclass(frozen=True)
class JavaCandidate:
    """A ``java`` executable and the reason it was considered, for error messages."""

    executable: Path
    origin: str


@dataclass(frozen=True)
class JavaRuntime:
    """A ``java`` executable whose version is known.

    Attributes:
        executable: absolute path of the ``java`` binary, symlinks resolved.
        version: the version string as the JDK prints it (``17.0.15``, ``1.8.0_292``).
        major: the feature release (8, 17, 21, 25) compared against minimums.
        origin: where it was found (``JAVA_HOME``, ``PATH``, ``/usr/lib/jvm``).
    """

    executable: Path
    version: str
    major: int
    origin: str

    def describe(self) -> str:
        """``/usr/lib/jvm/x/bin/java (17.0.15, from PATH)``, as shown to the user."""
        return f"{self.executable} ({self.version}, from {self.origin})"


def parse_java_version(text: str) -> tuple[str, int]:
    """Read the version from ``java -version`` output or a JDK ``release`` file.

    Args:
        text: stderr of ``java -version`` (``openjdk version "17.0.15" 2025-04-15``)
            or the content of ``$JAVA_HOME/release`` (``JAVA_VERSION="25.0.3"``).

    Returns:
        The version string and its feature release number; ``1.8.0_x`` counts as 8.

    Raises:
        ValueError: when no version can be found, so the caller can skip the candidate.
    """
    found = _VERSION_IN_RELEASE.search(text) or _VERSION_IN_OUTPUT.search(text)
    if found is None:
        raise ValueError(f"no Java version in {text[:200]!r}")
    version = found.group(1)
    significant = version[2:] if version.startswith("1.") else version
    number = _LEADING_NUMBER.match(significant)
    if number is None:
        raise ValueError(f"Java version {version!r} does not start with a number")
    return version, int(number.group(1))


def java_candidates(*, settings: DevStackSettings) -> list[JavaCandidate]:
    """List the ``java`` executables to try, most preferred first, without duplicates.

    The explicit settings come first so a user can always force a JDK; then the
    ``java`` on PATH (what the user runs by habit); then every JDK under the usual
    install roots, in reverse name order (``temurin-25`` before ``java-17``).

    Raises:
        LocalStackError: ``SAGALOG_DEV_JAVA_HOME`` is set but holds no ``bin/java``;
            a stale inherited ``JAVA_HOME`` is skipped instead, as shells often carry one.
    """
    ordered: list[JavaCandidate] = []
    if settings.java_home is not None:
        if not (settings.java_home / "bin" / "java").is_file():
            raise LocalStackError(
                f"SAGALOG_DEV_JAVA_HOME={settings.java_home} has no bin/java: point it at the "
                f"home directory of a JDK 17 or newer, or unset it to let sagalog search"
            )
        ordered.append(JavaCandidate(settings.java_home / "bin" / "java", "SAGALOG_DEV_JAVA_HOME"))
    if settings.inherited_java_home is not None:
        ordered.append(JavaCandidate(settings.inherited_java_home / "bin" / "java", "JAVA_HOME"))
    on_path = shutil.which("java")
    if on_path is not None:
        ordered.append(JavaCandidate(Path(on_path), "PATH"))
    for root in JVM_ROOTS:
        if root.is_dir():
            for home in sorted(root.iterdir(), reverse=True):
                for java in (home / "bin" / "java", home / "Contents" / "Home" / "bin" / "java"):
                    ordered.append(JavaCandidate(java, str(root)))
    return _unique_existing(ordered)


def _unique_existing(candidates: Iterable[JavaCandidate]) -> list[JavaCandidate]:
    """Drop missing files and symlink aliases (``/usr/bin/java`` and its target)."""
    seen: set[Path] = set()
    unique: list[JavaCandidate] = []
    for candidate in candidates:
        if not candidate.executable.is_file():
            continue
        real = candidate.executable.resolve()
        if real in seen:
            continue
        seen.add(real)
        unique.append(JavaCandidate(real, candidate.origin))
    return unique


def probe_java(candidate: JavaCandidate) -> JavaRuntime | None:
    """Learn a candidate's version, or None when it does not run.

    The JDK's ``release`` file is read first because it costs no process start;
    ``java -version`` is the fallback for runtimes that ship without one.
    """
    release = candidate.executable.parent.parent / "release"
    if release.is_file():
        try:
            version, major = parse_java_version(
                release.read_text(encoding="utf-8", errors="replace")
            )
        except ValueError:
            pass
        else:
            return JavaRuntime(candidate.executable, version, major, candidate.origin)
    try:
        completed = subprocess.run(
            [str(candidate.executable), "-version"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        version, major = parse_java_version(completed.stderr + completed.stdout)
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None
    return JavaRuntime(candidate.executable, version, major, candidate.origin)


class JavaFinder:
    """Picks a runtime per component, probing each candidate at most once.

    Probing is lazy: a warm ``up`` whose first candidate satisfies both
    components starts no ``java -version`` at all.
    """

    def __init__(self, *, candidates: Sequence[JavaCandidate]) -> None:
        self._candidates = list(candidates)
        self._probed: dict[Path, JavaRuntime | None] = {}

    def _runtime(self, candidate: JavaCandidate) -> JavaRuntime | None:
        if candidate.executable not in self._probed:
            self._probed[candidate.executable] = probe_java(candidate)
        return self._probed[candidate.executable]

    def find(self, *, minimum: int) -> JavaRuntime | None:
        """The first candidate whose major version is at least ``minimum``."""
        for candidate in self._candidates:
            runtime = self._runtime(candidate)
            if runtime is not None and runtime.major >= minimum:
                return runtime
        return None

    def require(self, *, minimum: int, component: str) -> JavaRuntime:
        """Like ``find``, but raise an error that names what was found and what to do.

        Raises:
            LocalStackError: no candidate is new enough.
        """
        runtime = self.find(minimum=minimum)
        if runtime is not None:
            return runtime
        found = [r for r in (self._runtime(c) for c in self._candidates) if r is not None]
        advice = (
            f"install a JDK {minimum} or newer (e.g. `apt-get install openjdk-{max(minimum, 17)}"
            f"-jre-headless`) or point SAGALOG_DEV_JAVA_HOME at one, then rerun `sagalog dev up`"
        )
        if not found:
            raise LocalStackError(
                f"{component} needs Java {minimum}+, but no Java runtime was found "
                f"(looked at SAGALOG_DEV_JAVA_HOME, JAVA_HOME, `java` on PATH and "
                f"{', '.join(str(root) for root in JVM_ROOTS)}): {advice}"
            )
        newest = max(found, key=lambda r: r.major)
        raise LocalStackError(
            f"{component} needs Java {minimum}+, but the newest Java found is "
            f"{newest.describe()}: {advice}"
        )
