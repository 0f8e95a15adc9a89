"""Every loaded flow version, looked up by name and version.

New workflows start on a flow's latest version; a workflow in flight names the
version it started with in its state and finishes under it, so older versions stay
loaded until no workflow needs them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from sagalog.errors import FlowDefinitionError
from sagalog.flows.model import Flow


class FlowRegistry:
    """Loaded flow versions; immutable once built."""

    def __init__(self, flows: Iterable[Flow]) -> None:
        self._flows: dict[tuple[str, int], Flow] = {}
        for flow in flows:
            key = (flow.name, flow.version)
            if key in self._flows:
                raise FlowDefinitionError(
                    f"flow '{flow.name}' v{flow.version} is defined twice: in "
                    f"{self._flows[key].source} and {flow.source}; keep one file"
                )
            self._flows[key] = flow

    def get(self, name: str, version: int) -> Flow:
        """The flow ``name`` at ``version``.

        Raises:
            FlowDefinitionError: when that version is not loaded, saying which are.
        """
        flow = self._flows.get((name, version))
        if flow is None:
            loaded = self.versions(name)
            if not loaded:
                raise FlowDefinitionError(self._unknown(name))
            listed = ", ".join(f"v{v}" for v in loaded)
            raise FlowDefinitionError(
                f"flow '{name}' v{version} is not loaded (loaded: {listed}); a workflow "
                f"finishes under the version it started with, so {name}.v{version}.yaml "
                "stays in topology/flows/ while any workflow of that version runs"
            )
        return flow

    def latest(self, name: str) -> Flow:
        """The newest version of ``name``: the one new workflows start on.

        Raises:
            FlowDefinitionError: when no version of ``name`` is loaded.
        """
        loaded = self.versions(name)
        if not loaded:
            raise FlowDefinitionError(self._unknown(name))
        return self._flows[(name, loaded[-1])]

    def versions(self, name: str) -> tuple[int, ...]:
        """The loaded versions of ``name``, oldest first (empty when none is)."""
        return tuple(sorted(v for n, v in self._flows if n == name))

    def names(self) -> tuple[str, ...]:
        """Every flow name, sorted."""
        return tuple(sorted({n for n, _ in self._flows}))

    def started_by(self, event_type: str, *, topic: str) -> Flow | None:
        """The latest version of the flow that ``event_type`` on ``topic`` starts, if any."""
        for name in self.names():
            flow = self.latest(name)
            if flow.starts_on == event_type and flow.topic == topic:
                return flow
        return None

    def __contains__(self, key: object) -> bool:
        return key in self._flows

    def __iter__(self) -> Iterator[Flow]:
        """Every loaded flow version, by name then version."""
        return iter(self._flows[k] for k in sorted(self._flows))

    def __len__(self) -> int:
        return len(self._flows)

    def _unknown(self, name: str) -> str:
        return (
            f"no flow '{name}' is loaded (flows: {', '.join(self.names()) or 'none'}); "
            f"add topology/flows/{name}.v1.yaml or fix the name"
        )
