"""The shape of a dev stack (how many brokers, plaintext or secure), kept with its data.

A state directory formatted for one broker has one node id and one data directory;
a secure one has a CA, credentials seeded into its metadata and no plaintext
listener. Neither can be turned into the other in place, so the shape is written
next to the data on the first ``up`` and every later command reads it from there:
``status``, ``down``, ``env`` and ``logs`` need no flags, and an ``up`` asking for
another shape is refused with what to do instead.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from sagalog.errors import ConfigurationError, LocalStackError

#: The broker counts a stack can have: one (the default) or a quorum of three.
#: Two would be a quorum that loses its majority with either node, and a replication
#: profile (RF 2, min ISR 2 or 1) that is neither the dev default nor production's.
BROKER_COUNTS: tuple[int, ...] = (1, 3)
SHAPE_FILE_NAME = "stack.json"


@dataclass(frozen=True)
class StackShape:
    """How many KRaft nodes the stack runs, and whether it is the secure variant.

    Attributes:
        brokers: 1 or 3 combined broker+controller nodes.
        secure: TLS everywhere, SASL/SCRAM and mTLS for clients, ACLs enforced.
    """

    brokers: int = 1
    secure: bool = False

    def __post_init__(self) -> None:
        if self.brokers not in BROKER_COUNTS:
            raise ConfigurationError(
                f"a dev stack has 1 or 3 brokers, not {self.brokers}: rerun with "
                f"`--brokers 1` or `--brokers 3`"
            )

    def describe(self) -> str:
        """``1 broker, plaintext`` / ``3 brokers, secure``: the words of every message."""
        noun = "broker" if self.brokers == 1 else "brokers"
        return f"{self.brokers} {noun}, {'secure' if self.secure else 'plaintext'}"

    def flags(self) -> str:
        """The ``up`` flags that ask for this shape (empty for the default)."""
        parts = [f"--brokers {self.brokers}"] if self.brokers != 1 else []
        if self.secure:
            parts.append("--secure")
        return " ".join(parts)


def shape_file(state_dir: Path) -> Path:
    """Where the shape is kept: at the root of the state directory."""
    return state_dir / SHAPE_FILE_NAME


def read_shape(state_dir: Path) -> StackShape | None:
    """The recorded shape; None for a state directory no ``up`` has used yet.

    A state directory from before shapes were recorded holds a one-broker
    plaintext broker (``kafka/data``), so it reads as that.

    Raises:
        LocalStackError: the file exists but is not a shape.
    """
    path = shape_file(state_dir)
    if not path.is_file():
        if (state_dir / "kafka" / "data" / "meta.properties").is_file():
            return StackShape()
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return StackShape(brokers=int(data["brokers"]), secure=bool(data["secure"]))
    except (OSError, ValueError, KeyError, TypeError, ConfigurationError) as exc:
        raise LocalStackError(
            f"{path} does not describe a dev stack ({exc}); if you edited it, restore "
            f'{{"brokers": 1, "secure": false}} (or what the stack was created with)'
        ) from exc


def write_shape(state_dir: Path, shape: StackShape) -> None:
    """Record the shape before the first node is formatted."""
    path = shape_file(state_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"brokers": shape.brokers, "secure": shape.secure}
    path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")


def decide_shape(
    *,
    requested_brokers: int | None,
    requested_secure: bool | None,
    stored: StackShape | None,
    state_dir: Path,
) -> StackShape:
    """The shape to run: what was asked, else what is recorded, else the default.

    ``None`` means "not asked" (no flag given). Asking for something else than the
    recorded shape is refused, because the data on disk belongs to that shape.

    Raises:
        LocalStackError: the request contradicts the recorded shape.
        ConfigurationError: a broker count other than 1 or 3.
    """
    base = stored if stored is not None else StackShape()
    wanted = StackShape(
        brokers=base.brokers if requested_brokers is None else requested_brokers,
        secure=base.secure if requested_secure is None else requested_secure,
    )
    if stored is not None and wanted != stored:
        again = f"sagalog dev up {stored.flags()}".rstrip()
        raise LocalStackError(
            f"the dev stack in {state_dir} was created as {stored.describe()}, so it "
            f"cannot start as {wanted.describe()}: its data, node ids and listeners belong "
            f"to the first shape. Run `{again}` (or no flags: the shape is remembered) to "
            f"use it as it is; or `sagalog dev down`, then delete {state_dir} (its topics "
            f"and schemas go with it) or point SAGALOG_DEV_STATE_DIR at a new directory, "
            f"and rerun `sagalog dev up {wanted.flags()}`"
        )
    return wanted
