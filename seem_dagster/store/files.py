"""Whole-file writes that a reader sees entirely or not at all, on a local disk or an object store.

Locally: a hidden temp file in the target's folder, fsync, ``os.replace`` (atomic on POSIX), fsync of
the folder. The temp file's name says which process wrote it, so the next write of the same target
removes the leftovers of a writer that was killed. On an object store the whole object goes up in
one PUT, which S3 and its kin make visible only when complete: no temp object, nothing to clean.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

from upath import UPath

from seem_dagster.store import owner

TEMP_PREFIX = ".tmp-"
# A temp file whose writer cannot be asked (another host, or an older naming) is left alone this long.
STALE_TEMP_S = 3600.0


def as_root(root: str | os.PathLike | UPath) -> UPath:
    return root if isinstance(root, UPath) else UPath(root)


def is_local(path: UPath) -> bool:
    return getattr(path, "protocol", "") in ("", "file", "local")


def temp_name(target: str) -> str:
    me = owner.me()
    return f"{TEMP_PREFIX}{target}.{me['host']}-{me['pid']}-{me['pid_start']}-{uuid.uuid4().hex[:8]}"


def _temp_writer(suffix: str) -> dict | None:
    try:
        host, pid, start, _ = suffix.split("-")
        return {"host": host, "pid": int(pid), "pid_start": None if start == "None" else int(start)}
    except ValueError:
        return None  # an older naming (a bare uuid): its writer is unknown


def remove_stale_temps(target: Path) -> list[Path]:
    """Delete the temp files of ``target`` left by dead writers (or, writer unknown, older than an hour)."""
    prefix = f"{TEMP_PREFIX}{target.name}."
    removed = []
    try:
        entries = [e for e in os.scandir(target.parent) if e.name.startswith(prefix)]
    except FileNotFoundError:
        return removed
    for entry in entries:
        writer = _temp_writer(entry.name[len(prefix):])
        state = owner.alive(writer) if writer else None
        try:
            stale = state is False or (state is None and time.time() - entry.stat().st_mtime > STALE_TEMP_S)
            if stale:
                os.unlink(entry.path)
                removed.append(Path(entry.path))
        except FileNotFoundError:
            pass
    return removed


def fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomic(path: UPath, write, *, durable: bool = True) -> None:
    """``write(fh)`` writes the whole content to a binary file handle; the target appears whole or not at all.

    ``durable=False`` skips the fsyncs (the rename stays atomic for readers): for a build's own tables,
    which nobody reads before the publish, and the publish makes them durable (``sync``) first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not is_local(path):
        with path.open("wb") as fh:  # one PUT
            write(fh)
        return
    target = Path(path.path)
    temp = target.parent / temp_name(target.name)
    try:
        with open(temp, "wb") as fh:
            write(fh)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(temp, target)
        if durable:
            fsync_dir(target.parent)
    finally:
        temp.unlink(missing_ok=True)
    remove_stale_temps(target)


def write_bytes_atomic(path: UPath, data: bytes, *, durable: bool = True) -> None:
    write_atomic(path, lambda fh: fh.write(data), durable=durable)


def sync(paths: list[UPath]) -> None:
    """Make files written with ``durable=False`` durable, and their folders (local; an object store's PUT is)."""
    folders = set()
    for path in paths:
        if is_local(path):
            fd = os.open(path.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            folders.add(Path(path.path).parent)
    for folder in folders:
        fsync_dir(folder)


def remove_tree(path: UPath) -> None:
    """Delete a folder (or an object-store prefix) and everything under it; gone already is fine."""
    try:
        if is_local(path):
            import shutil

            shutil.rmtree(path.path, ignore_errors=False)
        else:
            path.fs.rm(path.path, recursive=True)
    except FileNotFoundError:
        pass


def children(path: UPath) -> list[UPath]:
    """What a folder (or an object-store prefix) holds; none when it does not exist. An object store
    says NotADirectoryError of a prefix that holds nothing, a disk FileNotFoundError."""
    try:
        return list(path.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []


def jsonl_lines(text: str, *, keepends: bool = False) -> list[str]:
    """The lines of a JSONL text, split at line feeds alone (a CR before one goes with it unless
    ``keepends``). Not ``str.splitlines``: it also splits at U+2028, U+2029, U+0085, form feeds and
    other separators, which JSON carries raw inside a string (pasted text holds them), and so broke a
    turn in two."""
    pieces = text.split("\n")
    last = pieces.pop()
    if keepends:
        return [piece + "\n" for piece in pieces] + ([last] if last else [])
    return [piece.removesuffix("\r") for piece in pieces] + ([last.removesuffix("\r")] if last else [])
