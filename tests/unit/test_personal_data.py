"""Personal data: envelopes, schema marks, the key file, sealing and the codec hook.

No broker: the key topic (``ring.SubjectKeys``) is replaced by an in-memory stand-in
that keeps data keys in a dict, and the schema registry by one that hands out an id
per event type, so every rule is checked with plain function calls.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import logging
import stat
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from sagalog.contracts.catalog import EventSchema, SchemaCatalog
from sagalog.contracts.codec import EventCodec
from sagalog.errors import PersonalDataError, SchemaError
from sagalog.personal import ERASED, PersonalField, personal_fields, schema_problems
from sagalog.personal.cipher import PersonalData
from sagalog.personal.envelope import Envelope, open_envelope, parse, seal
from sagalog.personal.keys import LocalKeyService, new_data_key

REPO = Path(__file__).resolve().parents[2]
TOPIC = "procurement.events"
REQUEST = "procurement.v1.RequestSubmitted"
EMAIL = "ada.lovelace@example.com"
OTHER_EMAIL = "grace.hopper@example.com"
SUBJECT = "0123456789abcdef0123456789abcdef"
KEY_ID = "00112233aabbccdd"


# --- stand-ins ---------------------------------------------------------------------


class MemoryKeys:
    """The key topic in a dict: what ``PersonalData`` calls of ``SubjectKeys``."""

    def __init__(self, service: LocalKeyService) -> None:
        self.service = service
        self.keys: dict[str, dict[str, bytes]] = {}
        self.closed = False

    def writing_key(self, subject: str) -> tuple[str, bytes]:
        keys = self.keys.setdefault(subject, {})
        if not keys:
            key_id, data_key = new_data_key()
            keys[key_id] = data_key
        key_id = min(keys)
        return key_id, keys[key_id]

    def reading_key(self, subject: str, key_id: str) -> bytes | None:
        return self.keys.get(subject, {}).get(key_id)

    def erase(self, subject: str) -> list[str]:
        return sorted(self.keys.pop(subject, {}))

    def close(self) -> None:
        self.closed = True


class KnownIds:
    """A schema registry that knows every schema of the catalog: one id per event type."""

    def __init__(self, catalog: SchemaCatalog) -> None:
        self.by_type = {name: n + 1 for n, name in enumerate(sorted(catalog))}
        self.by_id = {n: json.loads(catalog[name].text) for name, n in self.by_type.items()}

    def schema_id(self, subject: str, schema: EventSchema) -> int:
        return self.by_type[schema.name]

    def writer_schema(self, schema_id: int) -> Any:
        return self.by_id[schema_id]


@pytest.fixture
def service(tmp_path: Path) -> LocalKeyService:
    return LocalKeyService.load(tmp_path / "keys" / "personal.key", create=True)


@pytest.fixture
def keys(service: LocalKeyService) -> MemoryKeys:
    return MemoryKeys(service)


def sealer(keys: MemoryKeys, *, reveal: bool = True) -> PersonalData:
    return PersonalData(keys, reveal=reveal)  # type: ignore[arg-type]


REQUESTER = PersonalField("requester", "requester")
NOTE = PersonalField("note", "requester")


def request(**changes: Any) -> dict[str, Any]:
    """A procurement.v1.RequestSubmitted datum, as ``to_avro_datum`` gives it."""
    datum: dict[str, Any] = {
        "request_id": "req-1",
        "requester": EMAIL,
        "department": "research",
        "title": "Analytical engine parts",
        "description": "Brass gears for the mill",
        "amount": Decimal("1234.50"),
        "currency": "EUR",
        "vendor": "Babbage & Co",
        "priority": "NORMAL",
        "submitted_at": dt.datetime(2027, 1, 15, 8, tzinfo=dt.UTC),
    }
    datum.update(changes)
    return datum


# --- envelope ----------------------------------------------------------------------


def test_an_envelope_opens_to_the_text_it_sealed() -> None:
    _, key = new_data_key()

    text = seal(key, subject=SUBJECT, key_id=KEY_ID, plaintext=EMAIL)
    envelope = parse(text)

    assert envelope is not None
    assert (envelope.subject, envelope.key_id) == (SUBJECT, KEY_ID)
    assert text.startswith(f"pd1:{SUBJECT}:{KEY_ID}:")
    assert open_envelope(key, envelope) == EMAIL


def test_an_envelope_round_trips_text_beyond_ascii() -> None:
    _, key = new_data_key()
    name = "Zoë Ørsted 李雷 📧"

    envelope = parse(seal(key, subject=SUBJECT, key_id=KEY_ID, plaintext=name))

    assert envelope is not None
    assert open_envelope(key, envelope) == name


def test_two_seals_of_the_same_text_differ_but_both_open() -> None:
    _, key = new_data_key()

    first = seal(key, subject=SUBJECT, key_id=KEY_ID, plaintext=EMAIL)
    second = seal(key, subject=SUBJECT, key_id=KEY_ID, plaintext=EMAIL)

    assert first != second
    for text in (first, second):
        envelope = parse(text)
        assert envelope is not None
        assert open_envelope(key, envelope) == EMAIL


def test_an_envelope_never_contains_its_plaintext() -> None:
    _, key = new_data_key()

    text = seal(key, subject=SUBJECT, key_id=KEY_ID, plaintext=EMAIL)

    assert EMAIL not in text
    assert "lovelace" not in text
    assert "example.com" not in text


def test_an_envelope_does_not_open_under_another_key() -> None:
    _, key = new_data_key()
    _, other = new_data_key()
    envelope = parse(seal(key, subject=SUBJECT, key_id=KEY_ID, plaintext=EMAIL))
    assert envelope is not None

    with pytest.raises(PersonalDataError, match=rf"subject {SUBJECT} \(key {KEY_ID}\)"):
        open_envelope(other, envelope)


def test_an_envelope_moved_to_another_subject_does_not_open() -> None:
    _, key = new_data_key()
    text = seal(key, subject=SUBJECT, key_id=KEY_ID, plaintext=EMAIL)
    other_subject = "f" * 32
    moved = parse(text.replace(SUBJECT, other_subject))
    assert moved is not None and moved.subject == other_subject

    with pytest.raises(PersonalDataError, match="does not open under its key"):
        open_envelope(key, moved)


def test_an_envelope_given_another_key_id_does_not_open() -> None:
    _, key = new_data_key()
    text = seal(key, subject=SUBJECT, key_id=KEY_ID, plaintext=EMAIL)
    other_key_id = "e" * 16
    moved = parse(text.replace(KEY_ID, other_key_id))
    assert moved is not None and moved.key_id == other_key_id

    with pytest.raises(PersonalDataError, match="does not open under its key"):
        open_envelope(key, moved)


def test_an_envelope_with_a_changed_ciphertext_does_not_open() -> None:
    _, key = new_data_key()
    envelope = parse(seal(key, subject=SUBJECT, key_id=KEY_ID, plaintext=EMAIL))
    assert envelope is not None
    flipped = bytes([envelope.sealed[-1] ^ 1])
    altered = Envelope(envelope.subject, envelope.key_id, envelope.sealed[:-1] + flipped)

    with pytest.raises(PersonalDataError):
        open_envelope(key, altered)


@pytest.mark.parametrize("length", [0, 4, 7])
def test_a_truncated_envelope_does_not_open_and_says_so(length: int) -> None:
    """An altered record is a PersonalDataError, whatever was cut off."""
    _, key = new_data_key()
    envelope = parse(seal(key, subject=SUBJECT, key_id=KEY_ID, plaintext=EMAIL))
    assert envelope is not None
    truncated = Envelope(envelope.subject, envelope.key_id, envelope.sealed[:length])

    with pytest.raises(PersonalDataError):
        open_envelope(key, truncated)


@pytest.mark.parametrize(
    "value",
    [
        None,
        42,
        3.5,
        b"pd1:" + SUBJECT.encode(),
        "",
        EMAIL,
        "pd1:",
        "pd1:not-an-envelope",
        f"pd1:{SUBJECT}:{KEY_ID}",  # no ciphertext
        f"pd1:{SUBJECT}:{KEY_ID}:",  # empty ciphertext
        f"pd1:{SUBJECT[:-1]}:{KEY_ID}:AAAA",  # subject id too short
        f"pd1:{SUBJECT.upper()}:{KEY_ID}:AAAA",  # not lower-case hex
        f"pd1:{SUBJECT}:{KEY_ID}x:AAAA",  # key id too long
        f"pd1:{SUBJECT}:{KEY_ID}:AA AA",  # not base64url
        f"pd1:{SUBJECT}:{KEY_ID}:AA==",  # padding is stripped, never written
        f"pd2:{SUBJECT}:{KEY_ID}:AAAA",  # another version
        f" pd1:{SUBJECT}:{KEY_ID}:AAAA",  # leading space
    ],
)
def test_parse_finds_no_envelope_in_anything_else(value: object) -> None:
    assert parse(value) is None


@pytest.mark.parametrize("text", ["A", "AAAAA", "AAAAAAAAA"])
def test_parse_finds_no_envelope_in_base64_of_impossible_length(text: str) -> None:
    """A ``pd1:`` string whose ciphertext no base64 encoder writes (4n + 1 characters)
    is not an envelope: parse says None rather than raise."""
    assert parse(f"pd1:{SUBJECT}:{KEY_ID}:{text}") is None


# --- fields and schema marks --------------------------------------------------------


def event(*fields: dict[str, Any]) -> dict[str, Any]:
    return {"type": "record", "name": "ThingDone", "namespace": "acme.v1", "fields": list(fields)}


GOOD = event(
    {"name": "thing_id", "type": "string"},
    {"name": "requester", "type": "string", "sagalog.personal": "requester"},
    {"name": "note", "type": ["null", "string"], "default": None, "sagalog.personal": "requester"},
    {"name": "count", "type": "int"},
)


def test_personal_fields_lists_marked_fields_with_their_subject_in_schema_order() -> None:
    assert personal_fields(GOOD) == (REQUESTER, NOTE)


def test_personal_fields_of_an_unmarked_schema_is_empty() -> None:
    assert personal_fields(event({"name": "thing_id", "type": "string"})) == ()


def test_a_well_marked_schema_has_no_problems() -> None:
    assert schema_problems(GOOD) == []


def test_a_mark_may_name_another_string_field_as_subject() -> None:
    schema = event(
        {"name": "customer", "type": "string"},
        {"name": "address", "type": ["string", "null"], "sagalog.personal": "customer"},
    )

    assert schema_problems(schema) == []
    assert personal_fields(schema) == (PersonalField("address", "customer"),)


def test_a_mark_on_an_int_field_is_a_problem_naming_the_field() -> None:
    schema = event(
        {"name": "requester", "type": "string"},
        {"name": "age", "type": "int", "sagalog.personal": "requester"},
    )

    problems = schema_problems(schema)

    assert len(problems) == 1
    assert "'age'" in problems[0]
    assert "'int'" in problems[0]


def test_a_mark_naming_a_missing_subject_field_is_a_problem() -> None:
    schema = event(
        {"name": "requester", "type": "string", "sagalog.personal": "customer"},
    )

    problems = schema_problems(schema)

    assert len(problems) == 1
    assert "'requester'" in problems[0]
    assert "'customer'" in problems[0]


def test_a_mark_that_is_not_a_field_name_is_a_problem() -> None:
    schema = event({"name": "requester", "type": "string", "sagalog.personal": True})

    problems = schema_problems(schema)

    assert len(problems) == 1
    assert "'requester'" in problems[0]


@pytest.mark.parametrize("subject_type", [["null", "string"], ["string", "null"], "int", "bytes"])
def test_a_subject_field_that_is_optional_or_not_a_string_is_a_problem(
    subject_type: Any,
) -> None:
    schema = event(
        {"name": "customer", "type": subject_type},
        {"name": "address", "type": "string", "sagalog.personal": "customer"},
    )

    problems = schema_problems(schema)

    assert len(problems) == 1
    assert "'address'" in problems[0]
    assert "subject field 'customer'" in problems[0]


def test_a_mark_inside_a_nested_record_is_a_problem_naming_its_path() -> None:
    schema = event(
        {"name": "requester", "type": "string"},
        {
            "name": "contact",
            "type": {
                "type": "record",
                "name": "Contact",
                "fields": [
                    {"name": "email", "type": "string", "sagalog.personal": "email"},
                ],
            },
        },
    )

    problems = schema_problems(schema)

    assert len(problems) == 1
    assert "'contact.email'" in problems[0]
    assert "nested record" in problems[0]


def test_a_mark_inside_an_array_of_records_is_a_problem_naming_its_path() -> None:
    schema = event(
        {"name": "requester", "type": "string"},
        {
            "name": "approvers",
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "Approver",
                    "fields": [
                        {"name": "name", "type": "string"},
                        {"name": "email", "type": "string", "sagalog.personal": "name"},
                    ],
                },
            },
        },
    )

    problems = schema_problems(schema)

    assert len(problems) == 1
    assert "'approvers[].email'" in problems[0]


def test_a_mark_inside_an_optional_map_of_records_is_a_problem() -> None:
    schema = event(
        {
            "name": "contacts",
            "type": [
                "null",
                {
                    "type": "map",
                    "values": {
                        "type": "record",
                        "name": "Contact",
                        "fields": [{"name": "email", "type": "string", "sagalog.personal": "x"}],
                    },
                },
            ],
            "default": None,
        },
    )

    problems = schema_problems(schema)

    assert len(problems) == 1
    assert "'contacts{}.email'" in problems[0]


def test_the_repositorys_request_submitted_marks_the_requester() -> None:
    catalog = SchemaCatalog.load(REPO / "schemas")

    definition = catalog[REQUEST].definition

    assert personal_fields(definition) == (REQUESTER,)
    assert schema_problems(definition) == []


# --- catalog -----------------------------------------------------------------------


def write_schema(root: Path, schema: dict[str, Any]) -> Path:
    path = root / "acme" / "v1" / "thing_done.avsc"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(schema), encoding="utf-8")
    return path


def test_the_catalog_loads_a_well_marked_schema(tmp_path: Path) -> None:
    write_schema(tmp_path, GOOD)

    catalog = SchemaCatalog.load(tmp_path)

    assert personal_fields(catalog["acme.v1.ThingDone"].definition) == (REQUESTER, NOTE)


def test_the_catalog_refuses_a_schema_with_a_bad_mark_naming_file_and_field(
    tmp_path: Path,
) -> None:
    write_schema(
        tmp_path,
        event(
            {"name": "requester", "type": "string"},
            {"name": "shoe_size", "type": "int", "sagalog.personal": "requester"},
        ),
    )

    with pytest.raises(SchemaError) as raised:
        SchemaCatalog.load(tmp_path)

    message = str(raised.value)
    assert str(Path("acme", "v1", "thing_done.avsc")) in message
    assert "'shoe_size'" in message


def test_the_catalog_refuses_a_mark_inside_a_nested_record(tmp_path: Path) -> None:
    write_schema(
        tmp_path,
        event(
            {
                "name": "contact",
                "type": {
                    "type": "record",
                    "name": "Contact",
                    "fields": [{"name": "email", "type": "string", "sagalog.personal": "email"}],
                },
            },
        ),
    )

    with pytest.raises(SchemaError, match=r"thing_done\.avsc.*'contact\.email'"):
        SchemaCatalog.load(tmp_path)


# --- the key file ------------------------------------------------------------------


def test_load_with_create_writes_a_key_file_only_its_owner_can_read(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "dir" / "personal.key"

    LocalKeyService.load(path, create=True)

    assert path.is_file()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["personal.key"]  # no temporary left


def test_a_second_load_with_create_reads_the_same_key(tmp_path: Path) -> None:
    path = tmp_path / "personal.key"
    first = LocalKeyService.load(path, create=True)
    text = path.read_text(encoding="ascii")

    second = LocalKeyService.load(path, create=True)
    third = LocalKeyService.load(path)

    assert path.read_text(encoding="ascii") == text
    assert second.service_id == first.service_id == third.service_id
    assert second.subject_id(EMAIL) == first.subject_id(EMAIL) == third.subject_id(EMAIL)


def test_load_without_create_of_a_missing_file_names_the_path(tmp_path: Path) -> None:
    path = tmp_path / "nowhere" / "personal.key"

    with pytest.raises(PersonalDataError, match="SAGALOG_PERSONAL_DATA_KEY_FILE") as raised:
        LocalKeyService.load(path)

    assert str(path) in str(raised.value)
    assert not path.exists()


@pytest.mark.parametrize("secret_bytes", [0, 16, 31, 33, 64])
def test_a_key_file_with_a_key_of_the_wrong_length_is_refused(
    tmp_path: Path, secret_bytes: int
) -> None:
    path = tmp_path / "personal.key"
    path.write_text(base64.b64encode(b"k" * secret_bytes).decode() + "\n", encoding="ascii")

    with pytest.raises(PersonalDataError, match=rf"{secret_bytes} bytes, not 32") as raised:
        LocalKeyService.load(path)

    assert str(path) in str(raised.value)


def test_a_key_file_that_is_not_base64_is_refused_naming_the_path(tmp_path: Path) -> None:
    path = tmp_path / "personal.key"
    path.write_text("this is not a key!\n", encoding="ascii")

    with pytest.raises(PersonalDataError, match="cannot read the personal-data key file"):
        LocalKeyService.load(path)


def test_a_subject_id_is_32_hex_digits_stable_and_distinct_per_value(
    service: LocalKeyService,
) -> None:
    subject = service.subject_id(EMAIL)

    assert len(subject) == 32
    assert int(subject, 16) >= 0 and subject == subject.lower()
    assert service.subject_id(EMAIL) == subject
    assert service.subject_id(OTHER_EMAIL) != subject
    assert EMAIL not in subject


def test_two_key_files_name_the_same_subject_differently(tmp_path: Path) -> None:
    one = LocalKeyService.load(tmp_path / "one.key", create=True)
    two = LocalKeyService.load(tmp_path / "two.key", create=True)

    assert one.subject_id(EMAIL) != two.subject_id(EMAIL)
    assert one.service_id != two.service_id
    assert len(one.service_id) == 16
    int(one.service_id, 16)


def test_an_effects_arguments_digest_is_keyed_where_the_agent_holds_a_key(
    tmp_path: Path,
) -> None:
    """The digest goes to the log forever: a plain sha256 of a request holding an
    address would let anyone confirm a guessed address, even after erasure."""
    import hashlib
    import json

    from sagalog.agents.intents import arguments_digest

    one = LocalKeyService.load(tmp_path / "one.key", create=True)
    two = LocalKeyService.load(tmp_path / "two.key", create=True)
    request = {"order": "PO-1", "requester": EMAIL}
    plain = arguments_digest([], request)
    guessed = json.dumps(
        {"args": [], "kwargs": request}, sort_keys=True, separators=(",", ":")
    ).encode()
    assert plain == hashlib.sha256(guessed).hexdigest()  # anyone can compute it
    keyed = arguments_digest([], request, keyed=one.digest)
    assert keyed != plain and len(keyed) == 64
    assert keyed == arguments_digest([], request, keyed=one.digest)  # stable per key file
    assert keyed != arguments_digest([], request, keyed=two.digest)
    assert keyed != arguments_digest([], {**request, "requester": OTHER_EMAIL}, keyed=one.digest)


def test_a_wrapped_data_key_unwraps_to_itself(service: LocalKeyService) -> None:
    key_id, data_key = new_data_key()

    wrapped = service.wrap(SUBJECT, key_id, data_key)

    assert data_key not in wrapped
    assert service.unwrap(SUBJECT, key_id, wrapped) == data_key


def test_a_wrapped_key_does_not_unwrap_for_another_subject(service: LocalKeyService) -> None:
    key_id, data_key = new_data_key()
    wrapped = service.wrap(SUBJECT, key_id, data_key)

    with pytest.raises(PersonalDataError, match="was not wrapped by the key in"):
        service.unwrap("f" * 32, key_id, wrapped)


def test_a_wrapped_key_does_not_unwrap_under_another_key_id(service: LocalKeyService) -> None:
    key_id, data_key = new_data_key()
    wrapped = service.wrap(SUBJECT, key_id, data_key)
    other_id, _ = new_data_key()

    with pytest.raises(PersonalDataError, match=other_id):
        service.unwrap(SUBJECT, other_id, wrapped)


def test_a_wrapped_key_does_not_unwrap_under_another_key_file(tmp_path: Path) -> None:
    one = LocalKeyService.load(tmp_path / "one.key", create=True)
    two = LocalKeyService.load(tmp_path / "two.key", create=True)
    key_id, data_key = new_data_key()
    wrapped = one.wrap(SUBJECT, key_id, data_key)

    with pytest.raises(PersonalDataError, match=str(tmp_path / "two.key")):
        two.unwrap(SUBJECT, key_id, wrapped)


@pytest.mark.parametrize("length", [0, 3, 7])
def test_a_truncated_wrapped_key_is_refused_as_personal_data_error(
    service: LocalKeyService, length: int
) -> None:
    """A damaged key-topic record is reported as such, not as a crypto library error."""
    key_id, data_key = new_data_key()
    wrapped = service.wrap(SUBJECT, key_id, data_key)

    with pytest.raises(PersonalDataError):
        service.unwrap(SUBJECT, key_id, wrapped[:length])


def test_new_data_keys_are_fresh_256_bit_keys_with_16_hex_digit_ids() -> None:
    (id_one, key_one), (id_two, key_two) = new_data_key(), new_data_key()

    assert len(key_one) == len(key_two) == 32
    assert key_one != key_two and id_one != id_two
    assert len(id_one) == 16
    int(id_one, 16)


# --- sealing and opening fields ----------------------------------------------------


def test_seal_fields_seals_a_plaintext_marked_field_and_leaves_the_rest(
    keys: MemoryKeys,
) -> None:
    personal = sealer(keys)
    datum = {"requester": EMAIL, "title": "gears"}

    sealed = personal.seal_fields([REQUESTER], datum)

    envelope = parse(sealed["requester"])
    assert envelope is not None
    assert envelope.subject == keys.service.subject_id(EMAIL) == personal.subject_id(EMAIL)
    assert sealed["title"] == "gears"
    assert EMAIL not in json.dumps(dict(sealed))


def test_seal_fields_does_not_change_its_input(keys: MemoryKeys) -> None:
    datum = {"requester": EMAIL, "note": "needs a wheelchair ramp"}
    before = dict(datum)

    sealed = sealer(keys).seal_fields([REQUESTER, NOTE], datum)

    assert datum == before
    assert sealed is not datum
    assert parse(sealed["requester"]) is not None
    assert parse(sealed["note"]) is not None


def test_seal_fields_passes_an_existing_envelope_through_unchanged(keys: MemoryKeys) -> None:
    personal = sealer(keys)
    envelope = personal.seal_fields([REQUESTER], {"requester": EMAIL})["requester"]
    datum = {"requester": envelope, "title": "gears"}

    sealed = personal.seal_fields([REQUESTER], datum)

    assert sealed["requester"] == envelope
    assert sealed is datum  # nothing sealed, no copy


def test_seal_fields_passes_erased_and_null_values_through(keys: MemoryKeys) -> None:
    personal = sealer(keys)
    datum = {"requester": ERASED, "note": None}

    sealed = personal.seal_fields([REQUESTER, NOTE], datum)

    assert sealed == {"requester": ERASED, "note": None}
    assert keys.keys == {}  # no key was made for nobody


def test_a_field_about_another_fields_subject_is_sealed_under_that_subject(
    keys: MemoryKeys,
) -> None:
    personal = sealer(keys)

    sealed = personal.seal_fields([NOTE], {"requester": EMAIL, "note": "allergic to brass"})

    note = parse(sealed["note"])
    assert note is not None
    assert note.subject == personal.subject_id(EMAIL)
    assert sealed["requester"] == EMAIL  # only the marked field given is sealed


def test_both_fields_of_one_subject_share_its_key(keys: MemoryKeys) -> None:
    personal = sealer(keys)

    sealed = personal.seal_fields([REQUESTER, NOTE], {"requester": EMAIL, "note": "hi"})

    requester, note = parse(sealed["requester"]), parse(sealed["note"])
    assert requester is not None and note is not None
    assert (requester.subject, requester.key_id) == (note.subject, note.key_id)
    assert list(keys.keys) == [personal.subject_id(EMAIL)]


def test_a_field_whose_subject_is_already_sealed_uses_the_envelopes_subject(
    keys: MemoryKeys,
) -> None:
    """An agent that copies a sealed requester and adds a note about them needs no
    plaintext to find the subject."""
    personal = sealer(keys)
    envelope = personal.seal_fields([REQUESTER], {"requester": EMAIL})["requester"]

    sealed = personal.seal_fields([REQUESTER, NOTE], {"requester": envelope, "note": "hi"})

    note = parse(sealed["note"])
    assert note is not None
    assert note.subject == personal.subject_id(EMAIL)
    assert sealed["requester"] == envelope
    assert personal.open_value(sealed["note"]) == "hi"


@pytest.mark.parametrize("subject_value", ["", None, ERASED])
def test_a_field_whose_subject_is_missing_cannot_be_sealed(
    keys: MemoryKeys, subject_value: Any
) -> None:
    datum = {"requester": subject_value, "note": "about whom?"}

    with pytest.raises(PersonalDataError, match=r"'note'.*'requester'"):
        sealer(keys).seal_fields([NOTE], datum)


def test_open_fields_gives_back_the_plaintext(keys: MemoryKeys) -> None:
    personal = sealer(keys)
    sealed = dict(personal.seal_fields([REQUESTER, NOTE], {"requester": EMAIL, "note": "hi"}))

    opened = personal.open_fields([REQUESTER, NOTE], sealed)

    assert opened == {"requester": EMAIL, "note": "hi"}


def test_open_fields_leaves_plain_and_null_values_as_they_are(keys: MemoryKeys) -> None:
    payload = {"requester": EMAIL, "note": None}

    assert sealer(keys).open_fields([REQUESTER, NOTE], payload) == {
        "requester": EMAIL,
        "note": None,
    }


def test_open_value_gives_any_other_value_as_it_is(keys: MemoryKeys) -> None:
    personal = sealer(keys)

    for value in (EMAIL, None, 7, ERASED, "pd1:nonsense"):
        assert personal.open_value(value) == value


def test_after_erasure_a_subjects_values_show_erased_and_others_still_open(
    keys: MemoryKeys,
) -> None:
    personal = sealer(keys)
    ada = personal.seal_fields([REQUESTER], {"requester": EMAIL})["requester"]
    grace = personal.seal_fields([REQUESTER], {"requester": OTHER_EMAIL})["requester"]

    erased = keys.erase(personal.subject_id(EMAIL))

    assert len(erased) == 1
    assert personal.open_value(ada) == ERASED
    assert personal.open_value(grace) == OTHER_EMAIL
    assert personal.open_fields([REQUESTER], {"requester": ada}) == {"requester": ERASED}


def test_an_envelope_altered_in_the_log_is_an_error_not_a_value(keys: MemoryKeys) -> None:
    personal = sealer(keys)
    ada = personal.seal_fields([REQUESTER], {"requester": EMAIL})["requester"]
    keys.writing_key("f" * 32)  # another subject with a key under another id
    (other_id,) = keys.keys["f" * 32]
    envelope = parse(ada)
    assert envelope is not None
    moved = ada.replace(envelope.subject, "f" * 32).replace(envelope.key_id, other_id)

    with pytest.raises(PersonalDataError):
        personal.open_value(moved)


def test_close_closes_the_keys(keys: MemoryKeys) -> None:
    sealer(keys).close()

    assert keys.closed


# --- the codec hook ----------------------------------------------------------------


def codec(catalog: SchemaCatalog, personal: PersonalData | None) -> EventCodec:
    return EventCodec(catalog=catalog, registry=KnownIds(catalog), personal=personal)  # type: ignore[arg-type]


def test_the_codec_seals_personal_fields_and_a_revealing_reader_opens_them(
    catalog: SchemaCatalog, keys: MemoryKeys
) -> None:
    writer = codec(catalog, sealer(keys, reveal=False))
    reader = codec(catalog, sealer(keys, reveal=True))
    datum = request()

    data = writer.encode(TOPIC, REQUEST, datum)

    assert EMAIL.encode() not in data
    assert b"lovelace" not in data
    assert b"Brass gears for the mill" in data  # unmarked fields stay as they are
    assert datum["requester"] == EMAIL  # the caller's datum is not changed
    decoded = reader.decode(data)
    assert decoded.event_type == REQUEST
    assert decoded.payload["requester"] == EMAIL
    assert decoded.payload["title"] == datum["title"]


def test_a_codec_that_does_not_reveal_decodes_to_the_envelope(
    catalog: SchemaCatalog, keys: MemoryKeys
) -> None:
    personal = sealer(keys, reveal=False)
    service_codec = codec(catalog, personal)

    payload = service_codec.decode(service_codec.encode(TOPIC, REQUEST, request())).payload

    envelope = parse(payload["requester"])
    assert envelope is not None
    assert envelope.subject == personal.subject_id(EMAIL)
    assert personal.open_value(payload["requester"]) == EMAIL  # need to know: ctx.personal


def test_a_codec_without_personal_data_decodes_the_envelope_as_written(
    catalog: SchemaCatalog, keys: MemoryKeys
) -> None:
    data = codec(catalog, sealer(keys)).encode(TOPIC, REQUEST, request())

    payload = codec(catalog, None).decode(data).payload

    assert parse(payload["requester"]) is not None


def test_a_revealing_codec_shows_erased_after_the_subject_was_erased(
    catalog: SchemaCatalog, keys: MemoryKeys
) -> None:
    personal = sealer(keys, reveal=True)
    both = codec(catalog, personal)
    data = both.encode(TOPIC, REQUEST, request())

    keys.erase(personal.subject_id(EMAIL))

    assert both.decode(data).payload["requester"] == ERASED


def test_the_codec_passes_a_copied_envelope_through_without_sealing_again(
    catalog: SchemaCatalog, keys: MemoryKeys
) -> None:
    writer = codec(catalog, sealer(keys, reveal=False))
    first = writer.decode(writer.encode(TOPIC, REQUEST, request())).payload["requester"]

    second = writer.decode(writer.encode(TOPIC, REQUEST, request(requester=first))).payload

    assert second["requester"] == first


def test_a_codec_without_personal_data_writes_in_clear_and_warns_once_per_type(
    catalog: SchemaCatalog, caplog: pytest.LogCaptureFixture
) -> None:
    clear = codec(catalog, None)

    with caplog.at_level(logging.WARNING, logger="sagalog.contracts.codec"):
        first = clear.encode(TOPIC, REQUEST, request())
        clear.encode(TOPIC, REQUEST, request(request_id="req-2"))

    assert EMAIL.encode() in first
    assert clear.decode(first).payload["requester"] == EMAIL
    warnings = [r for r in caplog.records if r.name == "sagalog.contracts.codec"]
    assert len(warnings) == 1
    assert warnings[0].levelno == logging.WARNING
    assert REQUEST in warnings[0].getMessage()
    assert "requester" in warnings[0].getMessage()


def test_a_codec_without_personal_data_does_not_warn_for_an_envelope(
    catalog: SchemaCatalog, keys: MemoryKeys, caplog: pytest.LogCaptureFixture
) -> None:
    envelope = sealer(keys).seal_fields([REQUESTER], {"requester": EMAIL})["requester"]
    clear = codec(catalog, None)

    with caplog.at_level(logging.WARNING, logger="sagalog.contracts.codec"):
        clear.encode(TOPIC, REQUEST, request(requester=envelope))

    assert [r for r in caplog.records if r.name == "sagalog.contracts.codec"] == []


def test_the_key_topic_is_declared_as_the_runtime_creates_it() -> None:
    """The ring creates the key topic where the topology was not applied; both must agree."""
    from sagalog.contracts.catalog import SchemaCatalog as Catalog
    from sagalog.personal.ring import KEY_TOPIC, KEY_TOPIC_CONFIG
    from sagalog.topology.loader import load_topology

    root = Path(__file__).resolve().parents[2]
    topology = load_topology(root / "topology", known_schemas=Catalog.load(root / "schemas"))
    declared = topology.topic(KEY_TOPIC)
    assert declared is not None
    assert declared.partitions == 1
    assert declared.kafka_config() == KEY_TOPIC_CONFIG


def test_the_erasures_topic_is_declared_in_the_topology() -> None:
    """`sagalog erase` writes to ERASURES_TOPIC by default: the topology must declare it."""
    from sagalog.contracts.catalog import SchemaCatalog as Catalog
    from sagalog.personal.erasure import ERASURES_TOPIC
    from sagalog.topology.loader import load_topology

    root = Path(__file__).resolve().parents[2]
    topology = load_topology(root / "topology", known_schemas=Catalog.load(root / "schemas"))
    declared = topology.topic(ERASURES_TOPIC)
    assert declared is not None
    assert "sagalog.v1.SubjectErased" in declared.schemas
