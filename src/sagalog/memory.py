"""Give freed heap back to the operating system after a burst of allocation, and keep
Python's cycle collector off what a long-running service holds for good.

glibc's malloc keeps freed memory in its arenas, so a service that once rebuilt a
projection of 100,000 workflows would keep that peak as its RSS while it waits.
``malloc_trim(0)`` returns the free pages; it costs a few milliseconds and is called
after bursts (hydration, restores), never per event. A no-op where libc has none.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc


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
    """Freeze what the service holds now, and collect the youngest generation every
    ``young_threshold`` allocations (0: leave Python's default).

    Called once a service is ready (its tables restored, its modules loaded): the
    objects alive then live as long as the process, and frozen, no collection
    traverses them again. A hot path that allocates per event but makes no cycles
    (decoding, deciding, encoding) pays for every collection its allocations trigger,
    each traversing the young objects and, every hundred or so, the whole heap: on
    the tracker's decide path that was a fifth of its time. Reference counting still
    frees everything at once; the collector still runs, rarer.
    """
    gc.freeze()
    if young_threshold:
        _, middle, old = gc.get_threshold()
        gc.set_threshold(young_threshold, middle, old)
