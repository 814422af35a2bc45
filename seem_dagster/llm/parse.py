"""Model output -> a checked JSON object, or the reason it is not one."""

from __future__ import annotations

import json
from functools import lru_cache

from jsonschema import Draft202012Validator


@lru_cache(maxsize=64)
def _validator(schema_json: str) -> Draft202012Validator:
    return Draft202012Validator(json.loads(schema_json))


def _strip_fences(text: str) -> str:
    text = text.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        if text.rstrip().endswith("```"):
            text = text.rstrip()[:-3]
    return text.strip()


def parse_reply(text: str | None, schema: dict) -> tuple[dict | None, str | None]:
    """(object, None) when ``text`` is JSON satisfying ``schema``; (None, reason) otherwise."""
    if text is None or not text.strip():
        return None, "empty output"
    try:
        value = json.loads(_strip_fences(text))
    except json.JSONDecodeError as err:
        return None, f"not valid JSON: {err.msg} at line {err.lineno} column {err.colno}"
    errors = sorted(_validator(json.dumps(schema, sort_keys=True)).iter_errors(value), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        where = "/".join(str(p) for p in first.absolute_path) or "(root)"
        more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
        return None, f"breaks the schema at {where}: {first.message[:200]}{more}"
    return value, None
