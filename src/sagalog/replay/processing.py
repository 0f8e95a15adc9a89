"""The tracker's own processor and record reader, imported as they are, never copied.

A replay is only worth something if it decides with the code the tracker runs: the
same reading of a record (``read_event``: which records are tracked, skipped as the
tracker's own echo, or unreadable) and the same ``Processor`` (parked events,
admission, duplicates, timers table) around the same rules. Both live in
``sagalog.tracker`` (the service adds only faust's wiring), so an installed
``sagalog`` replays without the service's sources.
"""

from __future__ import annotations

from sagalog.tracker.decoding import Closer, OwnEcho, Unreadable, payload_types, read_event
from sagalog.tracker.processor import Batch, Processor

__all__ = ["Batch", "Closer", "OwnEcho", "Processor", "Unreadable", "payload_types", "read_event"]
