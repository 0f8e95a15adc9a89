"""Re-wrap every subject's data keys under the current KEK: ``sagalog keys rotate``.

A rotation writes, for each record of the key topic that another KEK wrapped, a record
under the same topic key (``<service id>:<subject>:<key id>``) holding the same data
key wrapped by the current KEK. No event is rewritten: an envelope names its subject
and key id, never the KEK, so it opens the same before and after; compaction then
drops the old wrapping. A rotation is idempotent and resumable: it re-wraps only what
the topic's latest record for each key says is not under the current KEK yet, so a
second run after an interruption does the rest, and a run after a finished one writes
nothing.

An erasure racing a rotation must not be undone by it: a re-wrap written after the
erasure's tombstone would bring the key back. So the rotation reads the topic again
before each batch (skipping keys tombstoned meanwhile) and once at its end, and
tombstones again any key that was tombstoned during the rotation but whose latest
record is a re-wrap (``repair``). The window in which such a key is readable is the
time between the two writes, a batch at most.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from sagalog.errors import PersonalDataError
from sagalog.personal.cipher import personal_data
from sagalog.personal.keys import LEGACY_KEK, KeyService
from sagalog.personal.ring import SubjectKeys
from sagalog.settings import ClientSettings

BATCH = 2_000
"""Records written per batch; the topic is read again for tombstones between batches."""


@dataclass(frozen=True)
class Rotation:
    """What a rotation did."""

    kek: str
    """The KEK every key is now wrapped by."""
    rewrapped: int
    already: int
    """Keys the current KEK wrapped before this run (a resumed or repeated rotation)."""
    repaired: int
    """Keys erased during the rotation and tombstoned again after their re-wrap."""
    by_kek_before: dict[str, int]
    seconds: float

    @property
    def rate(self) -> float:
        """Keys re-wrapped a second."""
        return self.rewrapped / self.seconds if self.seconds > 0 else 0.0


def kek_counts(service: KeyService, wrapped: Iterable[bytes]) -> dict[str, int]:
    """How many of the ``wrapped`` records each KEK wrapped."""
    counts: dict[str, int] = {}
    for value in wrapped:
        kek = service.kek_of(value)
        counts[kek] = counts.get(kek, 0) + 1
    return counts


def rewrap(service: KeyService, subject: str, key_id: str, wrapped: bytes) -> bytes | None:
    """``wrapped`` re-wrapped under the current KEK, or None when it already is."""
    if service.kek_of(wrapped) == service.current_kek:
        return None
    return service.wrap(subject, key_id, service.unwrap(subject, key_id, wrapped))


def to_repair(
    tombstoned: Iterable[tuple[str, str]], live: Callable[[str, str], bool]
) -> list[tuple[str, str]]:
    """The keys tombstoned during a rotation that are ``live`` again after it: each one
    a re-wrap written after its erasure, to tombstone again."""
    return sorted(key for key in set(tombstoned) if live(*key))


def rotate_keys(
    settings: ClientSettings,
    *,
    progress: Callable[[int, int], None] | None = None,
    batch: int = BATCH,
    clock: Callable[[], float] = time.monotonic,
) -> Rotation:
    """Re-wrap every data key of this service under its current KEK.

    Raises:
        PersonalDataError: no personal-data key or no KEK set is configured (the
            current KEK would be ``v0``, the key being rotated away from), or a
            record names a KEK the set lacks.
    """
    personal = personal_data(settings)
    if personal is None:
        raise PersonalDataError(
            "no personal-data key is configured, so there are no data keys to re-wrap: "
            "set SAGALOG_PERSONAL_DATA_KEY_FILE to the key file the writers use"
        )
    keys = personal.keys
    try:
        if keys.service.current_kek == LEGACY_KEK:
            raise PersonalDataError(
                "no KEK set is configured (SAGALOG_PERSONAL_DATA_KEK_FILE), so the "
                f"current KEK is '{LEGACY_KEK}', the one derived from the key file: write "
                "a new KEK with `sagalog keys add-kek <id> --current`, give the file to "
                "every service, then rotate"
            )
        return _rotate(keys, progress=progress, batch=batch, clock=clock)
    finally:
        personal.close()


def _rotate(
    keys: SubjectKeys,
    *,
    progress: Callable[[int, int], None] | None,
    batch: int,
    clock: Callable[[], float],
) -> Rotation:
    service = keys.service
    started = clock()
    tombstoned: set[tuple[str, str]] = set()
    keys.on_tombstone = lambda subject, key_id: tombstoned.add((subject, key_id))
    keys.catch_up()
    tombstoned.clear()  # erased before the rotation began: not in the index
    before = kek_counts(service, (wrapped for _, _, wrapped in keys.index.records()))
    already = before.get(service.current_kek, 0)
    total = sum(before.values()) - already
    done = 0
    pending: list[tuple[str, str, bytes | None]] = []
    if progress is not None:
        progress(0, total)
    for subject, key_id, wrapped in keys.index.records():  # an iterator over a snapshot
        rewrapped = rewrap(service, subject, key_id, wrapped)
        if rewrapped is None:
            continue
        pending.append((subject, key_id, rewrapped))
        if len(pending) >= batch:
            done += _write_batch(keys, pending, tombstoned)
            pending = []
            if progress is not None:
                progress(done, total)
    if pending:
        done += _write_batch(keys, pending, tombstoned)
    keys.catch_up()
    repairs = to_repair(tombstoned, lambda s, k: keys.index.get(s, k) is not None)
    if repairs:
        keys.write([(subject, key_id, None) for subject, key_id in repairs])
    if progress is not None:
        progress(done, total)
    return Rotation(
        kek=service.current_kek,
        rewrapped=done,
        already=already,
        repaired=len(repairs),
        by_kek_before=before,
        seconds=clock() - started,
    )


def _write_batch(
    keys: SubjectKeys,
    pending: list[tuple[str, str, bytes | None]],
    tombstoned: set[tuple[str, str]],
) -> int:
    keys.catch_up()  # tombstones written since the last batch: those keys stay erased
    live = [record for record in pending if (record[0], record[1]) not in tombstoned]
    keys.write(live)
    return len(live)
