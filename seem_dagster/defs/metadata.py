"""Metadata a person reads in the Dagster UI: row counts, column schemas, Markdown previews.

Previews never carry words of the conversations: a column of text (a turn, a summary, a fact's
words, an entity's name, a model's raw reply) is shown as its length. The event log keeps what a
run reported for as long as the instance keeps runs, often in a database shared by a whole team, and
a user's turns must be forgettable: the text lives in the memory's tables (``seem sql``, the
notebooks), where forgetting reaches it.
"""

from __future__ import annotations

from collections.abc import Collection

import polars as pl
from dagster import MetadataValue, TableColumn, TableSchema


def _cell(value: object, width: int, text: bool) -> str:
    if text and value is not None:
        size = len(value) if isinstance(value, str | list | tuple) else len(str(value))
        return f"‹{size} {'items' if isinstance(value, list | tuple) else 'chars'}›"
    out = "" if value is None else str(value)
    out = out.replace("\n", " ").replace("|", "\\|")
    return out if len(out) <= width else out[: width - 1] + "…"


def markdown_table(frame: pl.DataFrame, columns: list[str] | None = None, *, rows: int = 10, width: int = 80,
                   text: Collection[str] = ()) -> str:
    """The first ``rows`` rows as a Markdown table; ``text`` columns shown as their lengths only."""
    columns = columns or frame.columns
    head = frame.select(columns).head(rows)
    hidden = [c in text for c in columns]
    lines = ["| " + " | ".join(f"{c} (length)" if h else c for c, h in zip(columns, hidden)) + " |", "|" + "---|" * len(columns)]
    for row in head.iter_rows():
        lines.append("| " + " | ".join(_cell(v, width, h) for v, h in zip(row, hidden)) + " |")
    if frame.height > rows:
        lines.append(f"\n_{rows} of {frame.height} rows_")
    return "\n".join(lines)


def table_metadata(frame: pl.DataFrame, preview_columns: list[str] | None = None, *, rows: int = 10,
                   text: Collection[str] = ()) -> dict:
    return {
        "dagster/row_count": MetadataValue.int(frame.height),
        "dagster/column_schema": MetadataValue.table_schema(
            TableSchema(columns=[TableColumn(name, str(dtype)) for name, dtype in frame.schema.items()])
        ),
        "preview": MetadataValue.md(markdown_table(frame, preview_columns, rows=rows, text=text)),
    }
