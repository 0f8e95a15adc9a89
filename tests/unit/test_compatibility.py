"""The FULL_TRANSITIVE rule as a pure function: backward and forward, against every version."""

from __future__ import annotations

from typing import Any

from sagalog.contracts.compatibility import EarlierVersion, check


def record(*fields: dict[str, Any], symbols: list[str] | None = None) -> dict[str, Any]:
    all_fields = list(fields)
    if symbols is not None:
        all_fields.append(
            {"name": "level", "type": {"type": "enum", "name": "Level", "symbols": symbols}}
        )
    return {"type": "record", "name": "OrderPlaced", "namespace": "shop.v1", "fields": all_fields}


ID = {"name": "order_id", "type": "string"}
NOTE = {"name": "note", "type": "string"}
NOTE_DEFAULT = {"name": "note", "type": "string", "default": ""}


def v(definition: dict[str, Any], label: str = "commit abc1234") -> EarlierVersion:
    return EarlierVersion(label=label, definition=definition)


def test_adding_a_field_with_a_default_is_compatible() -> None:
    assert check("shop.v1.OrderPlaced", record(ID, NOTE_DEFAULT), [v(record(ID))]) == []


def test_removing_a_field_with_a_default_is_compatible() -> None:
    assert check("shop.v1.OrderPlaced", record(ID), [v(record(ID, NOTE_DEFAULT))]) == []


def test_adding_a_field_without_default_breaks_backward() -> None:
    problems = check("shop.v1.OrderPlaced", record(ID, NOTE), [v(record(ID))])
    assert [p.direction for p in problems] == ["backward"]
    text = str(problems[0])
    assert text.startswith("shop.v1.OrderPlaced: FULL_TRANSITIVE violated against commit abc1234")
    assert "field 'note' was added without a default" in text
    assert "/fields/1" in text


def test_removing_a_field_without_default_breaks_forward() -> None:
    problems = check("shop.v1.OrderPlaced", record(ID), [v(record(ID, NOTE))])
    assert [p.direction for p in problems] == ["forward"]
    assert "field 'note' was removed but has no default" in str(problems[0])


def test_transitive_checks_every_earlier_version() -> None:
    # v1 had no note; v2 added it with a default; v3 drops the default: v3 vs v2 is
    # fine backward (v2 data has note) but v3 cannot read v1 data.
    v1, v2 = v(record(ID), "commit 1111111"), v(record(ID, NOTE_DEFAULT), "commit 2222222")
    problems = check("shop.v1.OrderPlaced", record(ID, NOTE), [v2, v1])
    assert {(p.against, p.direction) for p in problems} == {("commit 1111111", "backward")}


def test_enum_symbol_removed_and_added() -> None:
    removed = check(
        "shop.v1.OrderPlaced", record(ID, symbols=["A"]), [v(record(ID, symbols=["A", "B"]))]
    )
    assert [p.direction for p in removed] == ["backward"]
    assert "enum symbols were removed" in str(removed[0])
    added = check(
        "shop.v1.OrderPlaced", record(ID, symbols=["A", "B"]), [v(record(ID, symbols=["A"]))]
    )
    assert [p.direction for p in added] == ["forward"]


def test_type_change_is_refused_both_ways() -> None:
    retyped = record({"name": "order_id", "type": "long"})
    problems = check("shop.v1.OrderPlaced", retyped, [v(record(ID))])
    assert {p.direction for p in problems} == {"backward", "forward"}
