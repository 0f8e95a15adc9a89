"""Timer ticks against a million pending timers: a tick's cost is its due timers only.

The tracker's timer table is keyed ``{due_ms:015d}|...`` in RocksDB, so a tick seeks
to the start and stops at the first key not yet due (an iterate upper bound). This
fills a rocksdict database the way the tracker does (``FaustTables.scan`` is the same
call) with ``pending`` timers spread over 30 days and times ticks that find 0, 100
and 10,000 due timers: if the cost grew with the pending count, the 0-due tick
would not be near-free.
"""

from __future__ import annotations

import random
import tempfile
import time
from pathlib import Path
from typing import Any

import rocksdict

from sagalog.tracker.timers import TimerKind, due_range, timer_key

DAY_MS = 86_400_000


def measure_timer_ticks(pending: int = 1_000_000, seed: int = 11) -> dict[str, Any]:
    rng = random.Random(seed)
    start = 1_800_000_000_000
    with tempfile.TemporaryDirectory(prefix="sagalog-timers-") as tmp:
        options = rocksdict.Options(raw_mode=True)  # as faust opens its tables
        db = rocksdict.Rdict(str(Path(tmp) / "timers.db"), options=options)
        t0 = time.perf_counter()
        batch = rocksdict.WriteBatch(raw_mode=True)
        dues = sorted(start + rng.randrange(1, 30 * DAY_MS) for _ in range(pending))
        for i, due in enumerate(dues):
            key = timer_key(
                due_ms=due, workflow_id=f"wf-{i}", kind=TimerKind.STEP_TIMEOUT, ref="step"
            )
            batch.put(key.encode(), b"")
            if len(batch) >= 50_000:
                db.write(batch)
                batch = rocksdict.WriteBatch(raw_mode=True)
        db.write(batch)
        load_s = time.perf_counter() - t0
        ticks = {}
        for due_count in (0, 100, 10_000):
            now = start if due_count == 0 else dues[due_count - 1]
            _, upper = due_range(now)
            bound = rocksdict.ReadOptions()
            bound.set_iterate_upper_bound(upper.encode())
            t0 = time.perf_counter()
            found = sum(1 for _ in db.keys(from_key=b"", read_opt=bound))
            ticks[str(due_count)] = {
                "found": found,
                "ms": round((time.perf_counter() - t0) * 1000, 3),
            }
        db.close()
        rocksdict.Rdict.destroy(str(Path(tmp) / "timers.db"), options)
    return {"timer_pending": pending, "timer_load_s": round(load_s, 2), "timer_tick_ms": ticks}


if __name__ == "__main__":
    print(measure_timer_ticks())
