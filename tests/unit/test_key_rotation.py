"""Key rotation's pure parts: the KEK set file, records naming their KEK, the old
records read as KEK v0, re-wrapping, the repair of a raced erasure, and the bounded
key ring fed without a broker."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from sagalog.errors import PersonalDataError
from sagalog.personal.keys import LEGACY_KEK, KekSet, LocalKeyService, new_data_key, new_kek
from sagalog.personal.ring import SubjectKeys, UnwrappedKeys, WrappedKeyIndex
from sagalog.personal.rotation import kek_counts, rewrap, to_repair
from sagalog.settings import ClientSettings

SUBJECT = "0123456789abcdef0123456789abcdef"
SECRET = bytes(range(32))


def service(*keks: str, current: str | None = None) -> LocalKeyService:
    if not keks:
        return LocalKeyService(SECRET, origin="naming.key")
    chosen = current or keks[-1]
    held = KekSet(current=chosen, keys={k: _key(k) for k in keks}, origin="keks.json")
    return LocalKeyService(SECRET, origin="naming.key", keks=held)


def _key(kek_id: str) -> bytes:
    return (kek_id.encode() * 32)[:32]


# --- the KEK set file ----------------------------------------------------------------


def test_a_kek_set_saves_readable_by_its_owner_only_and_loads_back(tmp_path: Path) -> None:
    path = tmp_path / "keks.json"
    KekSet(current="b", keys={"a": new_kek(), "b": new_kek()}).save(path)

    loaded = KekSet.load(path)

    assert loaded.current == "b" and sorted(loaded.keys) == ["a", "b"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_missing_kek_set_file_names_the_file_and_how_to_write_it(tmp_path: Path) -> None:
    with pytest.raises(PersonalDataError, match=r"keks.json.*sagalog keys add-kek"):
        KekSet.load(tmp_path / "keks.json")


@pytest.mark.parametrize(
    ("document", "says"),
    [
        ("not json", "cannot read"),
        ('{"keys": {}}', "no 'current' entry"),
        ('{"current": "a", "keys": {"a": "!!"}}', "cannot read"),
        ('{"current": "b", "keys": {"a": "' + "A" * 43 + '="}}', "'current' is 'b'"),
        ('{"current": "a", "keys": {"a": "AAAA"}}', "3 bytes, not 32"),
        ('{"current": "v0", "keys": {"v0": "' + "A" * 43 + '="}}', "reserved"),
        ('{"current": "A:B", "keys": {"A:B": "' + "A" * 43 + '="}}', "is not 1-32"),
    ],
)
def test_a_bad_kek_set_file_is_refused_naming_the_file_and_the_problem(
    tmp_path: Path, document: str, says: str
) -> None:
    path = tmp_path / "keks.json"
    path.write_text(document)

    with pytest.raises(PersonalDataError, match=str(path)) as raised:
        KekSet.load(path)
    assert says in str(raised.value)


# --- records naming their KEK ---------------------------------------------------------


def test_without_a_kek_set_the_current_kek_is_v0_and_records_are_the_old_60_bytes() -> None:
    key_id, data_key = new_data_key()
    wrapped = service().wrap(SUBJECT, key_id, data_key)

    assert service().current_kek == LEGACY_KEK
    assert len(wrapped) == 60 and service().kek_of(wrapped) == LEGACY_KEK


def test_a_record_written_before_kek_sets_still_opens_under_a_kek_set() -> None:
    key_id, data_key = new_data_key()
    old = service().wrap(SUBJECT, key_id, data_key)

    assert service("2026-12").unwrap(SUBJECT, key_id, old) == data_key


def test_a_record_names_the_kek_that_wrapped_it() -> None:
    key_id, data_key = new_data_key()
    wrapped = service("a", "b", current="b").wrap(SUBJECT, key_id, data_key)

    assert wrapped.startswith(b"k:b:")
    assert service("a", "b", current="a").kek_of(wrapped) == "b"
    assert service("a", "b", current="a").unwrap(SUBJECT, key_id, wrapped) == data_key


def test_the_naming_key_does_not_change_with_the_kek() -> None:
    assert service().subject_id("x@example.com") == service("a").subject_id("x@example.com")
    assert service().service_id == service("a").service_id
    assert service().digest(b"x") == service("a").digest(b"x")


def test_a_record_of_a_kek_the_set_lacks_names_the_kek_and_the_file() -> None:
    key_id, data_key = new_data_key()
    wrapped = service("gone").wrap(SUBJECT, key_id, data_key)

    with pytest.raises(PersonalDataError, match=r"KEK .gone., which keks.json does not hold"):
        service("new").unwrap(SUBJECT, key_id, wrapped)


def test_a_record_relabelled_with_another_kek_id_does_not_open() -> None:
    key_id, data_key = new_data_key()
    wrapped = service("a", "b", current="a").wrap(SUBJECT, key_id, data_key)
    relabelled = b"k:b:" + wrapped[len(b"k:a:") :]

    with pytest.raises(PersonalDataError, match="KEK 'b'"):
        service("a", "b").unwrap(SUBJECT, key_id, relabelled)


def test_a_record_of_neither_shape_is_refused() -> None:
    with pytest.raises(PersonalDataError, match="no wrapped key"):
        service("a").kek_of(b"k:a:" + b"x" * 10)


# --- re-wrapping ----------------------------------------------------------------------


def test_rewrap_moves_a_v0_record_under_the_current_kek_keeping_the_data_key() -> None:
    key_id, data_key = new_data_key()
    old = service().wrap(SUBJECT, key_id, data_key)
    rotating = service("2026-12")

    new = rewrap(rotating, SUBJECT, key_id, old)

    assert new is not None and rotating.kek_of(new) == "2026-12"
    assert rotating.unwrap(SUBJECT, key_id, new) == data_key


def test_rewrap_of_a_record_already_under_the_current_kek_is_none() -> None:
    key_id, data_key = new_data_key()
    rotating = service("a")

    assert rewrap(rotating, SUBJECT, key_id, rotating.wrap(SUBJECT, key_id, data_key)) is None


def test_kek_counts_counts_records_by_kek() -> None:
    key_id, data_key = new_data_key()
    both = service("a", current="a")
    records = [service().wrap(SUBJECT, key_id, data_key)] * 2 + [
        both.wrap(SUBJECT, key_id, data_key)
    ]

    assert kek_counts(both, records) == {"v0": 2, "a": 1}


def test_only_keys_erased_during_the_rotation_and_live_again_are_repaired() -> None:
    live = {("s1", "k1"), ("s3", "k3")}

    repairs = to_repair([("s1", "k1"), ("s2", "k2"), ("s1", "k1")], lambda s, k: (s, k) in live)

    assert repairs == [("s1", "k1")]


# --- the bounded ring -----------------------------------------------------------------


def test_unwrapped_keys_keep_only_the_most_recently_used() -> None:
    cache = UnwrappedKeys(2)
    cache.put("s", "1", b"one")
    cache.put("s", "2", b"two")
    assert cache.get("s", "1") == b"one"  # now the most recent

    cache.put("s", "3", b"three")

    assert len(cache) == 2
    assert cache.get("s", "2") is None and cache.get("s", "1") == b"one"


def test_the_index_lists_a_subjects_key_ids_and_nobody_elses(tmp_path: Path) -> None:
    index = WrappedKeyIndex(tmp_path / "index")
    try:
        index.put("a" * 32, "2", b"w2")
        index.put("a" * 32, "1", b"w1")
        index.put("b" * 32, "1", b"w3")
        index.delete("b" * 32, "1")

        assert index.key_ids("a" * 32) == ["1", "2"]
        assert index.key_ids("b" * 32) == []
        assert index.get("a" * 32, "1") == b"w1"
        assert [r[2] for r in index.records()] == [b"w1", b"w2"]
    finally:
        index.close()


def test_a_temporary_index_is_removed_at_close() -> None:
    index = WrappedKeyIndex()
    index.put(SUBJECT, "1", b"w")
    index.close()

    assert not index.path.exists()


def fed_ring(keys: LocalKeyService, cache_keys: int = 2) -> SubjectKeys:
    ring = SubjectKeys(ClientSettings(), keys, cache_keys=cache_keys, clock=lambda: 0.0)
    ring.mark_caught_up()
    return ring


def test_a_fed_ring_opens_keys_beyond_its_cache_from_the_index() -> None:
    keys = service("a")
    ring = fed_ring(keys)
    made = {f"{n:032x}": new_data_key() for n in range(5)}
    try:
        for subject, (key_id, data_key) in made.items():
            ring.apply(subject, key_id, keys.wrap(subject, key_id, data_key))

        for _ in range(2):
            for subject, (key_id, data_key) in made.items():
                assert ring.reading_key(subject, key_id) == data_key
    finally:
        ring.close()


def test_a_tombstone_erases_every_wrapping_and_reports_it() -> None:
    keys = service("a")
    ring = fed_ring(keys)
    seen: list[tuple[str, str]] = []
    ring.on_tombstone = lambda s, k: seen.append((s, k))
    key_id, data_key = new_data_key()
    try:
        ring.apply(SUBJECT, key_id, service().wrap(SUBJECT, key_id, data_key))
        ring.apply(SUBJECT, key_id, keys.wrap(SUBJECT, key_id, data_key))  # the re-wrap
        assert ring.reading_key(SUBJECT, key_id) == data_key

        ring.apply(SUBJECT, key_id, None)

        assert seen == [(SUBJECT, key_id)]
        assert ring.index.key_ids(SUBJECT) == []
        ring._absent.add((SUBJECT, key_id))  # what a read after the catch-up records
        assert ring.reading_key(SUBJECT, key_id) is None
    finally:
        ring.close()


def test_a_ring_fed_a_record_of_an_unknown_kek_fails_at_once() -> None:
    key_id, data_key = new_data_key()
    ring = fed_ring(service("new"))
    try:
        with pytest.raises(PersonalDataError, match="'gone'"):
            ring.apply(SUBJECT, key_id, service("gone").wrap(SUBJECT, key_id, data_key))
    finally:
        ring.close()


def test_the_kek_set_file_is_json_an_operator_can_read(tmp_path: Path) -> None:
    path = tmp_path / "keks.json"
    KekSet(current="a", keys={"a": new_kek()}).save(path)

    assert set(json.loads(path.read_text())) == {"current", "keys"}


def test_a_new_index_removes_those_of_processes_that_died(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    dead = tmp_path / "sagalog-keys-999999999-abc"
    dead.mkdir()
    alive = tmp_path / f"sagalog-keys-{os.getpid()}-abc"
    alive.mkdir()

    WrappedKeyIndex().close()

    assert not dead.exists() and alive.exists()
