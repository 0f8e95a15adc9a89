"""The key ring's memory and its re-wrap rate, at up to a million subjects.

``--subjects`` subjects' data keys are wrapped (as a writer would) and fed to a
``SubjectKeys`` ring directly, record by record through ``apply``, the path a
catch-up of the key topic takes for each record: no broker, so a million subjects
fit in a minute on a laptop. With ``--from-topic`` instead, the ring reads the real
key topic of the configured key files (``SAGALOG_PERSONAL_DATA_KEY_FILE`` and
``SAGALOG_PERSONAL_DATA_KEK_FILE``) to its end, as a service does at start.

Then ``--reads`` random keys are opened (each a cache hit or an index lookup and one
unwrap). Printed: the process's RSS before, after the load and after the reads, its
peak, and the load, read and re-wrap rates (the re-wrap is ``rotation.rewrap`` over
every record, the CPU part of ``sagalog keys rotate``; the broker part is measured
on the real broker by ``tests/integration/test_key_rotation.py``).

    python -m tests.bench.key_ring --subjects 1000000
    sagalog dev run -- python -m tests.bench.key_ring --from-topic
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

from sagalog.personal.cipher import personal_data
from sagalog.personal.keys import KekSet, LocalKeyService, new_data_key, new_kek
from sagalog.personal.ring import SubjectKeys
from sagalog.personal.rotation import rewrap
from sagalog.settings import ClientSettings


def rss_mb() -> tuple[float, float]:
    """This process's resident set and its peak, in MB (``/proc/self/status``)."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subjects", type=int, default=1_000_000)
    parser.add_argument("--reads", type=int, default=100_000)
    parser.add_argument("--cache-keys", type=int, default=10_000)
    parser.add_argument("--from-topic", action="store_true")
    args = parser.parse_args()

    before, _ = rss_mb()
    started = time.perf_counter()
    if args.from_topic:
        personal = personal_data(ClientSettings())
        if personal is None:
            raise SystemExit("set SAGALOG_PERSONAL_DATA_KEY_FILE (sagalog dev run -- does)")
        ring = personal.keys
        ring.catch_up()
        count = sum(1 for _ in ring.index.records())
        every = max(1, count // args.reads)  # read a spread of them, not a list of all
        sample = [(s, k) for n, (s, k, _) in enumerate(ring.index.records()) if n % every == 0]
    else:
        service = LocalKeyService(
            old_secret := new_kek(), origin="bench", keks=KekSet("r1", {"r1": new_kek()})
        )
        old = LocalKeyService(old_secret, origin="bench")  # the same naming, KEK v0
        ring = SubjectKeys(ClientSettings(), service, cache_keys=args.cache_keys)
        ring.mark_caught_up()
        for n in range(args.subjects):  # ids from n, so no list of them is held
            subject, key_id = f"{n:032x}", f"{n:016x}"
            ring.apply(subject, key_id, old.wrap(subject, key_id, new_data_key()[1]))
        count = args.subjects
        picks = random.sample(range(count), min(args.reads, count))
        sample = [(f"{n:032x}", f"{n:016x}") for n in picks]
    loaded_s = time.perf_counter() - started
    loaded, _ = rss_mb()

    started = time.perf_counter()
    for subject, key_id in sample:
        assert ring.reading_key(subject, key_id) is not None
    read_s = time.perf_counter() - started
    after_reads, peak = rss_mb()

    started = time.perf_counter()
    rewrapped = sum(rewrap(ring.service, s, k, w) is not None for s, k, w in ring.index.records())
    rewrap_s = time.perf_counter() - started
    ring.close()

    print(f"subjects: {count:,} ({'the key topic' if args.from_topic else 'fed, no broker'})")
    print(
        f"RSS MB: before {before:.0f}, loaded {loaded:.0f}, after {len(sample):,} reads "
        f"{after_reads:.0f}, peak {peak:.0f}"
    )
    print(
        f"load: {count / loaded_s:,.0f} keys/s; reads: {len(sample) / read_s:,.0f}/s; "
        f"re-wrap (CPU only, {rewrapped:,} keys): {rewrapped / rewrap_s:,.0f}/s"
    )


if __name__ == "__main__":
    main()
