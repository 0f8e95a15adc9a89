"""Give freed heap back to the operating system after a burst of allocation, and keep
Python's cycle collector from traversing the heap for nothing on a hot path.

glibc's malloc keeps freed memory in its arenas, so a service that once rebuilt a
projection of 100,000 workflows would keep that peak as its RSS while it waits.
``malloc_trim(0)`` returns the free pages; it costs a few milliseconds and is called
after bursts (hydration, restores), never per event. A no-op where libc has none.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc

# glibc's ``mallopt`` parameter for the most arenas (malloc.h: M_ARENA_MAX).
_M_ARENA_MAX = -8


def limit_arenas(count: int) -> bool:
    """Let glibc's malloc keep at most ``count`` arenas; whether it took the setting.

    glibc gives threads that allocate at the same time arenas of their own, up to
    eight per core, and memory freed in one stays there: a service with librdkafka
    clients (several threads each, allocating every fetch and delivery report) ends a
    burst with its peak spread over arenas that ``malloc_trim`` cannot shrink from the
    middle. Called first thing, before those threads start (what it saves:
    docs/design/tuning-measurements.md).
    """
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    mallopt = getattr(ctypes.CDLL(name), "mallopt", None)
    return bool(mallopt is not None and mallopt(_M_ARENA_MAX, count))


def release_free_memory() -> bool:
    """Collect garbage and trim the C heap; whether the heap was trimmed."""
    gc.collect()
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    libc = ctypes.CDLL(name)
    trim = getattr(libc, "malloc_trim", None)
    if trim is None:
        return False
    return bool(trim(0))


def tune_collector(young_threshold: int) -> None:
    """Collect the youngest generation every ``young_threshold`` allocations instead of
    Python's 700 (0: leave the default).

    A hot path that allocates per event but makes no reference cycles (decoding,
    deciding, encoding) pays for every collection its allocations trigger, each
    traversing the young objects and, every hundred or so, the whole heap (on the
    tracker's decide path, about a quarter of its time: docs/design/tuning-measurements.md).
    Reference counting still frees everything at once; the collector still runs, rarer.

    Not ``gc.freeze()``: frozen objects are never collected, and faust's stream
    generators end in reference cycles whose finalization its shutdown waits for (a
    tracker frozen after start-up hung on SIGTERM).
    """
    if young_threshold:
        _, middle, old = gc.get_threshold()
        gc.set_threshold(young_threshold, middle, old)
