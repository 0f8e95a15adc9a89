"""The report's tables as files other tools read: CSV always, Parquet with pyarrow.

One file per table, named after it (``dwell_by_state.csv``), so a notebook or a BI
tool picks the table it wants. Durations are integer milliseconds in ``..._ms``
columns, times ISO-8601 UTC (CSV) or timestamps (Parquet).
"""

from __future__ import annotations

import csv
import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sagalog.analytics.tables import Table, machine
from sagalog.errors import ConfigurationError


def write_csv(tables: Sequence[Table], directory: Path) -> list[Path]:
    """Write each table to ``directory/<name>.csv`` (created if missing); the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for table in tables:
        path = directory / f"{table.name}.csv"
        with path.open("w", newline="", encoding="utf-8") as out:
            writer = csv.writer(out)
            writer.writerow([c.name for c in table.columns])
            for row in table.rows:
                writer.writerow(
                    [machine(c.kind, v) for c, v in zip(table.columns, row, strict=True)]
                )
        written.append(path)
    return written


def parquet_available() -> bool:
    return importlib.util.find_spec("pyarrow") is not None


def require_parquet() -> None:
    """Raises ConfigurationError, saying how to get Parquet, when pyarrow is missing."""
    if not parquet_available():
        raise ConfigurationError(
            "--parquet needs pyarrow, which is not installed: `pip install pyarrow` "
            "(or use --csv DIR, which needs nothing)"
        )


def write_parquet(tables: Sequence[Table], directory: Path) -> list[Path]:
    """Write each table to ``directory/<name>.parquet``; the paths written.

    Raises:
        ConfigurationError: pyarrow is not installed.
    """
    require_parquet()
    import pyarrow as pa  # type: ignore[import-not-found, unused-ignore]
    import pyarrow.parquet as pq  # type: ignore[import-not-found, unused-ignore]

    types: dict[str, Any] = {
        "text": pa.string(),
        "int": pa.int64(),
        "ms": pa.int64(),
        "time": pa.timestamp("ms", tz="UTC"),
        "share": pa.float64(),
    }
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for table in tables:
        columns = {
            c.name: pa.array([row[i] for row in table.rows], type=types[c.kind])
            for i, c in enumerate(table.columns)
        }
        path = directory / f"{table.name}.parquet"
        pq.write_table(pa.table(columns), path)
        written.append(path)
    return written
