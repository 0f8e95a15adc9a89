"""Give freed heap back to the operating system after a burst of allocation.

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
