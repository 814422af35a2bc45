"""What `Memory` raises: every error is one line a person or an agent can act on."""

from __future__ import annotations


class InvalidRequest(ValueError):
    """An argument the memory refuses (a bad date, an empty question, a count out of range); nothing changed."""


class UnknownConversation(InvalidRequest):
    """A conversation this store holds no memory of. The message names only the id asked for."""


class BuildFailed(RuntimeError):
    """A build through Dagster failed: the published memory is the one before it, and the turns it was
    given stay in the store's input log for the next build. ``log_path``: the run's whole log."""

    def __init__(self, message: str, log_path: str | None = None):
        super().__init__(message)
        self.log_path = log_path


def check_text(value: str, name: str) -> str:
    """``value``, or InvalidRequest naming ``name`` when it is no text (a lone surrogate:
    ``ingest.errors.text_problem``, the one check every entry makes): for the strings `Memory`'s
    calls are given (a question, SQL, an entity's name)."""
    from seem_dagster.ingest.errors import text_problem

    problem = text_problem(value) if isinstance(value, str) else None
    if problem is not None:
        raise InvalidRequest(f"{name}: {problem}")
    return value


def check_date(moment, name: str):
    """``moment`` (a datetime or date), or InvalidRequest naming ``name`` when it lies outside the
    supported dates (``ingest.dates.check_range``)."""
    from seem_dagster.ingest.dates import DateOutOfRange, check_range

    try:
        return check_range(moment) if moment is not None else None
    except DateOutOfRange as err:
        raise InvalidRequest(f"{name}: {err}") from None
