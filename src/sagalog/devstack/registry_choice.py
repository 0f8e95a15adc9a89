"""Which Apicurio Registry distribution to run, on which local JDK.

The lock lists distributions in order of preference (3.3.3 needs Java 21, 3.0.9
runs on 17); the plaintext stack takes the best one a local JDK can run and says
when it falls back. The secure stack takes the preferred one only: its basic auth
was checked on Apicurio 3.3 (``registry_login_properties``), and an older fallback
that ignored the setting would serve every schema to anyone.
"""

from __future__ import annotations

from collections.abc import Sequence

from sagalog.devstack.artifacts import Progress
from sagalog.devstack.java import JavaFinder, JavaRuntime
from sagalog.devstack.lockfile import RegistryDistribution


def choose_registry(
    *,
    registries: Sequence[RegistryDistribution],
    finder: JavaFinder,
    secure: bool,
    announce: Progress | None,
) -> tuple[RegistryDistribution, JavaRuntime]:
    """The most preferred distribution a local JDK can run, with that JDK.

    ``announce`` receives the fallback notice (None: say nothing, as ``status`` does).

    Raises:
        LocalStackError: no JDK can run the preferred distribution (secure) or even
            the oldest one (plaintext).
    """
    preferred = registries[0]
    if secure:
        return preferred, finder.require(
            minimum=preferred.min_java,
            component=f"Apicurio Registry {preferred.version} (the secure stack's registry)",
        )
    for distribution in registries:
        java = finder.find(minimum=distribution.min_java)
        if java is None:
            continue
        if distribution is not preferred and announce is not None:
            announce(
                f"registry: no Java {preferred.min_java}+ found, so falling back to "
                f"Apicurio Registry {distribution.version} on Java {java.major}; install a "
                f"JDK {preferred.min_java}+ (or set SAGALOG_DEV_JAVA_HOME) to get "
                f"{preferred.version}"
            )
        return distribution, java
    oldest = min(registries, key=lambda d: d.min_java)
    return oldest, finder.require(
        minimum=oldest.min_java, component=f"Apicurio Registry {oldest.version}"
    )
