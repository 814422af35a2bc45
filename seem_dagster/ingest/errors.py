"""The one error type for bad input: it names the file, the record and the field; and the checks
every reader (and ``Memory.add``, whose turns go through the JSONL reader) makes of what it reads."""

from __future__ import annotations

from collections.abc import Iterable, Mapping


class InputError(ValueError):
    def __init__(self, file: str, record: str | None, field: str | None, problem: str):
        self.file = file
        self.record = record
        self.field = field
        self.problem = problem
        where = [file]
        if record:
            where.append(record)
        if field:
            where.append(f"field '{field}'")
        # A name or value quoted in it may hold a lone surrogate (a file name from a terminal, a field's
        # name): escaped, so the message can always be printed.
        super().__init__(escape_surrogates(": ".join(where) + f": {problem}"))


def text_problem(value: str) -> str | None:
    """Why ``value`` cannot be stored as text, or None. The one check of a string's content that every
    entry makes (the readers, ``Memory.add``, the CLI's and the MCP tools' arguments): a lone surrogate
    (JSON's "\\ud800" alone decodes to one, and so does a byte that is not UTF-8 in a command's
    arguments) is no character, and no UTF-8 file, Parquet column or hash can hold it."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as err:
        return f"not valid Unicode: a lone surrogate U+{ord(value[err.start]):04X} at character {err.start}"
    return None


def escape_surrogates(text: str) -> str:
    """``text`` with each lone surrogate written as its escape (\\udcff), so it can be printed."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8") if text_problem(text) else text


def unknown_field(obj: Mapping, fields: Iterable[str], what: str) -> tuple[str, str] | None:
    """(field, problem) for the first key of ``obj`` that is none of ``fields``, else None: the same words
    for a JSONL line and a turn given to ``Memory.add`` ("unknown field (a turn has speaker, text, ...)")."""
    known = tuple(fields)
    extra = next((k for k in obj if k not in known), None)
    if extra is None:
        return None
    return str(extra)[:40], f"unknown field ({what} has {', '.join(known)})"


class Located:
    """Helpers bound to one file and record, so every check names where it failed."""

    def __init__(self, file: str, record: str):
        self.file = file
        self.record = record

    def fail(self, field: str | None, problem: str) -> InputError:
        return InputError(self.file, self.record, field, problem)

    def require(self, obj: object, field: str, kind: type | tuple[type, ...], *, optional: bool = False):
        if not isinstance(obj, dict):
            raise self.fail(None, f"expected a JSON object, got {json_type(obj)}")
        if field not in obj or obj[field] is None:
            if optional:
                return None
            raise self.fail(field, "missing")
        value = obj[field]
        # bool is an int in Python; JSON true is never a valid number or string here.
        if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
            raise self.fail(field, f"expected {_kind_name(kind)}, got boolean")
        if not isinstance(value, kind):
            raise self.fail(field, f"expected {_kind_name(kind)}, got {json_type(value)}")
        # A string, or the strings of an array of them (evidence, ids); what an object or an array of
        # objects holds is checked field by field where it is read.
        for text in [value] if isinstance(value, str) else [v for v in value if isinstance(v, str)] if isinstance(value, list) else []:
            self.checked(field, text)
        return value

    def checked(self, field: str, value):
        """``value`` (any JSON value) when every string in it can be stored (``text_problem``)."""
        if isinstance(value, str):
            problem = text_problem(value)
            if problem is not None:
                raise self.fail(field, problem)
        elif isinstance(value, list):
            for item in value:
                self.checked(field, item)
        elif isinstance(value, dict):
            for key, item in value.items():
                self.checked(field, key)
                self.checked(field, item)
        return value

    def only(self, obj: Mapping, fields: Iterable[str], what: str) -> None:
        """Refuse a field the record cannot have (a misspelt one would be dropped without a word)."""
        unknown = unknown_field(obj, fields, what)
        if unknown is not None:
            raise self.fail(*unknown)

    def identifier(self, obj: object, field: str, kind: type | tuple[type, ...] = str, *, optional: bool = False):
        """An id (a turn's, a question's): present unless ``optional``, and never empty or blank."""
        value = self.require(obj, field, kind, optional=optional)
        if isinstance(value, str) and not value.strip():
            raise self.fail(field, f"empty id {value!r}: give a non-empty one" + (", or leave the field out" if optional else ""))
        return value

    def text(self, obj: object, field: str, *, max_chars: int | None = None, optional: bool = False) -> str | None:
        value = self.require(obj, field, str, optional=optional)
        if value is None:
            return None
        if not value.strip():
            raise self.fail(field, "empty text")
        if max_chars is not None and len(value) > max_chars:
            raise self.fail(field, f"{len(value)} characters, over the limit of {max_chars} (max_turn_chars)")
        return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(_NAMES.get(k, k.__name__) for k in kinds)


_NAMES = {str: "string", int: "integer", float: "number", list: "array", dict: "object", bool: "boolean"}


def json_type(value: object) -> str:
    if value is None:
        return "null"
    for k, name in _NAMES.items():
        if isinstance(value, k) and not (k is int and isinstance(value, bool)):
            return name
    return type(value).__name__
