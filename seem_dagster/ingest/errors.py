"""The one error type for bad input: it names the file, the record and the field."""

from __future__ import annotations


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
        super().__init__(": ".join(where) + f": {problem}")


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
