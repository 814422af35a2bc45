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
