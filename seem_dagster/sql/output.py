"""A query result as a text table, CSV or JSON (what `seem sql --format` prints and the tools return)."""

from __future__ import annotations

import json

import polars as pl

from seem_dagster.sql.guard import SqlRefused, first_line
from seem_dagster.sql.memory import SqlResult

FORMATS = ("table", "csv", "json")
CELL = 60


def _flat(frame: pl.DataFrame) -> pl.DataFrame:
    """Nested columns (lists, arrays, structs) as JSON text, so every format can print them."""
    nested = [c for c, t in frame.schema.items() if t.is_nested()]
    if not nested:
        return frame
    return frame.with_columns(
        pl.col(c).map_elements(lambda v: json.dumps(v.to_list() if hasattr(v, "to_list") else v, default=str),
                               return_dtype=pl.String) for c in nested
    )


def _cell(value) -> str:
    text = "NULL" if value is None else str(value).replace("\n", " ")
    return text if len(text) <= CELL else text[: CELL - 1] + "…"


def as_records(result: SqlResult) -> dict:
    return {"columns": result.frame.columns, "types": result.types, "rows": result.frame.to_dicts(),
            "row_count": result.frame.height, "truncated": result.truncated}


def render(result: SqlResult, fmt: str, max_rows: int) -> str:
    """The result as ``fmt``; a value no format can hold raises ``SqlRefused`` with one line."""
    try:
        return _render(result, fmt, max_rows)
    except Exception as err:  # a type the casts in memory.py did not foresee: one line, not a traceback
        raise SqlRefused(f"the result cannot be written as {fmt}: {first_line(err)}") from None


def _render(result: SqlResult, fmt: str, max_rows: int) -> str:
    note = f"({result.frame.height} rows{'; cut at sql.max_rows=' + str(max_rows) if result.truncated else ''})"
    if fmt == "json":
        return json.dumps(as_records(result), ensure_ascii=False, default=str, indent=1)
    flat = _flat(result.frame)
    if fmt == "csv":
        return flat.write_csv().rstrip("\n")
    rows = [[_cell(v) for v in row] for row in flat.iter_rows()]
    widths = [max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(flat.columns)]
    line = " | ".join(c.ljust(w) for c, w in zip(flat.columns, widths))
    out = [line, "-+-".join("-" * w for w in widths)]
    out += [" | ".join(v.ljust(w) for v, w in zip(r, widths)) for r in rows]
    return "\n".join(out + [note])


def render_schema(description: dict, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(description, indent=1)
    lines = [f"conversations: {', '.join(description['conversations'])}"]
    for name, view in description["views"].items():
        lines.append(f"\n{name} ({view['rows']} rows)")
        lines += [f"  {col} {typ}" for col, typ in view["columns"].items()]
    if description["macros"]:
        lines.append("\nmacros: " + ", ".join(description["macros"].values()) + " -- the properties that held on a day")
    limits = description["limits"]
    lines.append(f"limits: {limits['max_rows']} rows, {limits['timeout_s']:g} s per query; one SELECT or WITH statement, read-only")
    return "\n".join(lines)
