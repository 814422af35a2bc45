"""Bearer tokens for `seem mcp --http`: who may read which conversations.

The tokens file (setting ``agent.tokens_file``) is JSON holding, per token, an id, the SHA-256 of the
token (the token itself is printed once by `seem tokens add` and stored nowhere), and its scope: a
list of conversation ids, a prefix of them, or both; and whether it may write (add turns to those
conversations, or start one under its prefix): only when the operator said so (`--write`). A token
is a 256-bit random secret, so its hash is looked up directly.

The server re-reads the file when it changes (its size, time or inode), so a token added or revoked
takes effect at its next request without a restart. A file that cannot be read or parsed after a
change lets no token in (fail closed) and says why on stderr. Writes take a lock beside the file
and replace it whole, so a reader never sees half a file and two writers do not lose each other's
tokens.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import secrets
import sys
import tempfile
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from seem_dagster.store.keys import InvalidConversationId, check_conversation_id

PREFIX = "seem_"  # tokens start with it, so a leaked one is recognisable in a scan
VERSION = 1


class TokensError(ValueError):
    """A tokens file or a request to change it that cannot be used: one line."""


@dataclass(frozen=True)
class Tenant:
    """What one token may read: the conversations named, and those whose id starts with ``prefix``;
    with ``write``, it may add turns to them too."""

    token_id: str
    conversations: frozenset[str]
    prefix: str | None = None
    name: str = ""
    write: bool = False

    def may_read(self, conversation_id: str) -> bool:
        return conversation_id in self.conversations or (self.prefix is not None and conversation_id.startswith(self.prefix))

    def may_write(self, conversation_id: str) -> bool:
        return self.write and self.may_read(conversation_id)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _tenant(record: dict, where: str) -> tuple[str, Tenant]:
    try:
        token_id, sha = record["id"], record["sha256"]
        conversations = record.get("conversations") or []
        prefix = record.get("prefix")
        write = record.get("write", False)
    except (KeyError, TypeError, AttributeError):
        raise TokensError(f"{where}: a token record needs id, sha256 and conversations or prefix") from None
    if not isinstance(sha, str) or len(sha) != 64:
        raise TokensError(f"{where}: sha256 is not a SHA-256 hex digest")
    if not isinstance(conversations, list) or not all(isinstance(c, str) for c in conversations):
        raise TokensError(f"{where}: conversations must be a list of ids")
    if prefix is not None and (not isinstance(prefix, str) or not prefix):
        raise TokensError(f"{where}: prefix must be a non-empty string")
    if not conversations and prefix is None:
        raise TokensError(f"{where}: the token names no conversation and no prefix")
    if not isinstance(write, bool):
        raise TokensError(f"{where}: write must be true or false")
    return sha, Tenant(str(token_id), frozenset(conversations), prefix, str(record.get("name", "")), write)


def parse(text: str, path: str) -> dict[str, Tenant]:
    """Hash -> tenant, from the file's text; a malformed file raises ``TokensError`` naming the record."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise TokensError(f"{path}: not JSON ({err.msg} at line {err.lineno})") from None
    if not isinstance(data, dict) or not isinstance(data.get("tokens"), list):
        raise TokensError(f"{path}: expected an object with a \"tokens\" list")
    tenants: dict[str, Tenant] = {}
    for i, record in enumerate(data["tokens"]):
        sha, tenant = _tenant(record, f"{path}: token {i + 1}")
        tenants[sha] = tenant
    return tenants


class TokensFile:
    """The tokens file as the server reads it: ``tenant(token)`` re-reads the file when it changed."""

    def __init__(self, path: str | os.PathLike):
        self.path = str(path)
        self._stamp: tuple | None = None
        self._tenants: dict[str, Tenant] = {}
        self._guard = threading.Lock()
        self.load()  # a missing or malformed file at start is the operator's error, raised here

    def load(self) -> None:
        stamp = self._stat()
        if stamp is None:
            raise TokensError(f"{self.path}: no tokens file (create one with `seem tokens add`)")
        self._tenants = parse(Path(self.path).read_text(encoding="utf-8"), self.path)
        self._stamp = stamp

    def _stat(self) -> tuple | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_ino, st.st_size, st.st_mtime_ns

    def _current(self) -> dict[str, Tenant]:
        stamp = self._stat()
        if stamp == self._stamp:
            return self._tenants
        with self._guard:
            if stamp != self._stamp:
                try:
                    self.load()
                except (TokensError, OSError) as err:
                    self._tenants, self._stamp = {}, stamp
                    print(f"seem mcp: the tokens file cannot be used, every token is refused: {err}", file=sys.stderr)
            return self._tenants

    def tenant(self, token: str | None) -> Tenant | None:
        if not token or not token.startswith(PREFIX) or len(token) > 200:
            return None
        return self._current().get(digest(token))

    def __len__(self) -> int:
        return len(self._current())


# ---- changing the file (`seem tokens`) ----------------------------------------------------------


@contextlib.contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _records(path: Path) -> list[dict]:
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8")
    parse(text, str(path))  # refuse to rewrite a file that does not parse
    return json.loads(text)["tokens"]


def _write(path: Path, records: list[dict]) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".tokens-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"version": VERSION, "tokens": records}, fh, indent=1)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o600)  # hashes only, yet nobody else's business
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def add(path: str | os.PathLike, conversations: list[str], prefix: str | None = None, name: str = "",
        write: bool = False) -> tuple[str, dict]:
    """A new token for ``conversations`` and/or ``prefix`` (``write``: it may also add turns to them):
    (the token, its record). The token is not stored; only its hash is."""
    for cid in conversations:
        try:
            check_conversation_id(cid)
        except InvalidConversationId as err:
            raise TokensError(f"conversation {cid[:80]!r}: {err}") from None
    if prefix is not None and not prefix.strip():
        raise TokensError("--prefix is empty (a token for every conversation is not offered: list them or give a prefix)")
    if not conversations and prefix is None:
        raise TokensError("name the token's conversations (--conversations a,b) or a prefix (--prefix p)")
    token = PREFIX + secrets.token_urlsafe(32)
    record = {"id": "tok_" + secrets.token_hex(6), "sha256": digest(token), "conversations": sorted(set(conversations)),
              "prefix": prefix, "name": name, "write": write, "created": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    target = Path(path)
    with _locked(target):
        _write(target, [*_records(target), record])
    return token, record


def revoke(path: str | os.PathLike, token_id: str) -> dict:
    """Remove the token with this id; its next request is refused. Returns its record."""
    target = Path(path)
    with _locked(target):
        records = _records(target)
        kept = [r for r in records if r.get("id") != token_id]
        if len(kept) == len(records):
            raise TokensError(f"no token with id {token_id[:40]!r} in {target}")
        _write(target, kept)
    return next(r for r in records if r.get("id") == token_id)


def listed(path: str | os.PathLike) -> list[dict]:
    """The records without their hashes."""
    target = Path(path)
    if not target.exists():
        raise TokensError(f"{target}: no tokens file (create one with `seem tokens add`)")
    return [{k: v for k, v in r.items() if k != "sha256"} for r in _records(target)]
