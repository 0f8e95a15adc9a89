"""The tracker's own processor and record reader, imported as they are, never copied.

A replay is only worth something if it decides with the code the tracker runs: the
same reading of a record (``read_event``: which records are tracked, skipped as the
tracker's own echo, or unreadable) and the same ``Processor`` (parked events,
admission, duplicates, timers table) around the same rules. Both still live in the
tracker service, ``services/saga_tracker``; this module is the one place the replay
imports them from, so moving them into ``sagalog.tracker`` changes one import here.
Until then ``sagalog replay`` needs ``services/`` on ``PYTHONPATH`` (a checkout, as
``python -m saga_tracker`` does).
"""

from __future__ import annotations

from sagalog.replay.exceptions import ReplayError

try:
    from saga_tracker.decoding import OwnEcho, Unreadable, read_event
    from saga_tracker.processor import Batch, Processor
except ModuleNotFoundError as exc:  # pragma: no cover - depends on the installation
    raise ReplayError(
        f"sagalog replay decides with the saga tracker's processor, which it cannot import "
        f"({exc}); run it from a sagalog checkout with PYTHONPATH=services"
    ) from exc

__all__ = ["Batch", "OwnEcho", "Processor", "Unreadable", "read_event"]
