"""The catalog refuses schema files that break the layout rules, naming the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sagalog.contracts.catalog import SchemaCatalog, file_name_for
from sagalog.errors import SchemaError

RECORD = {
    "type": "record",
    "name": "OrderPlaced",
    "namespace": "shop.v1",
    "fields": [{"name": "order_id", "type": "string"}],
}


def write(root: Path, relative: str, content: object) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def test_repository_schemas_load(catalog: SchemaCatalog) -> None:
    assert "procurement.v1.RequestSubmitted" in catalog
    assert catalog["sagalog.v1.StepFailed"].path == Path("sagalog/v1/step_failed.avsc")


def test_file_name_mirrors_record_name() -> None:
    assert file_name_for("BudgetReserved") == "budget_reserved.avsc"
    assert file_name_for("PO2Created") == "po2_created.avsc"


def test_namespace_must_mirror_path(tmp_path: Path) -> None:
    write(tmp_path, "shop/v2/order_placed.avsc", RECORD)
    with pytest.raises(
        SchemaError,
        match=r"shop/v2/order_placed.avsc: namespace is 'shop.v1' "
        r"but the path says 'shop.v2'",
    ):
        SchemaCatalog.load(tmp_path)


def test_file_name_must_mirror_record(tmp_path: Path) -> None:
    write(tmp_path, "shop/v1/placed.avsc", RECORD)
    with pytest.raises(SchemaError, match=r"must live in 'order_placed\.avsc'"):
        SchemaCatalog.load(tmp_path)


def test_invalid_json_names_line(tmp_path: Path) -> None:
    write(tmp_path, "shop/v1/order_placed.avsc", '{"type": "record",\n "name": }')
    with pytest.raises(SchemaError, match=r"order_placed.avsc: not valid JSON at line 2"):
        SchemaCatalog.load(tmp_path)


def test_invalid_avro_is_refused(tmp_path: Path) -> None:
    bad = {**RECORD, "fields": [{"name": "order_id", "type": "strin"}]}
    write(tmp_path, "shop/v1/order_placed.avsc", bad)
    with pytest.raises(SchemaError, match="not a valid Avro schema"):
        SchemaCatalog.load(tmp_path)


def test_unknown_event_type_lists_known(tmp_path: Path) -> None:
    write(tmp_path, "shop/v1/order_placed.avsc", RECORD)
    catalog = SchemaCatalog.load(tmp_path)
    with pytest.raises(
        SchemaError, match=r"unknown event type 'shop.v1.Nope'.*shop.v1.OrderPlaced"
    ):
        catalog["shop.v1.Nope"]
