"""Metadata a person reads in the Dagster UI: row counts, column schemas, Markdown previews."""

from __future__ import annotations

import polars as pl
from dagster import MetadataValue, TableColumn, TableSchema


def _cell(value: object, width: int) -> str:
    text = "" if value is None else str(value)
    text = text.replace("\n", " ").replace("|", "\\|")
    return text if len(text) <= width else text[: width - 1] + "…"


def markdown_table(frame: pl.DataFrame, columns: list[str] | None = None, *, rows: int = 10, width: int = 80) -> str:
    columns = columns or frame.columns
    head = frame.select(columns).head(rows)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in head.iter_rows():
        lines.append("| " + " | ".join(_cell(v, width) for v in row) + " |")
    if frame.height > rows:
        lines.append(f"\n_{rows} of {frame.height} rows_")
    return "\n".join(lines)


def table_metadata(frame: pl.DataFrame, preview_columns: list[str] | None = None, *, rows: int = 10) -> dict:
    return {
        "dagster/row_count": MetadataValue.int(frame.height),
        "dagster/column_schema": MetadataValue.table_schema(
            TableSchema(columns=[TableColumn(name, str(dtype)) for name, dtype in frame.schema.items()])
        ),
        "preview": MetadataValue.md(markdown_table(frame, preview_columns, rows=rows)),
    }
