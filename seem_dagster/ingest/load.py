"""Read an input file, decode it strictly, detect its format and hand it to the right reader."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from upath import UPath

from seem_dagster.config import IngestConfig
from seem_dagster.ingest import jsonl, locomo, longmemeval
from seem_dagster.ingest.conversation import Conversation, clear_fingerprints
from seem_dagster.ingest.errors import InputError

FORMATS = ("locomo", "longmemeval", "jsonl")
# Parsed files by content hash: a build of N conversations from one file (every partition's
# ingest step re-reads it) parses it once per process instead of N times.
_PARSED: OrderedDict[tuple, list[Conversation]] = OrderedDict()
_PARSED_MAX = 2
# A local file's version as last read -> its key in _PARSED: a build's next partition finds the file
# unchanged by its stat alone instead of reading and hashing it again (for a file of hundreds of MB,
# a large part of a small conversation's run).
_READ: dict[tuple, tuple[tuple, tuple]] = {}
# What a writer last wrote to a local file (``written``): (file, format, options) -> (the file's version
# then, its length in bytes, its lines, its key in _PARSED).
_WRITTEN: dict[tuple, tuple[tuple, int, int, tuple]] = {}


def clear_parsed() -> None:
    """Drop every parsed file this process keeps (after a forget: no copy of a forgotten turn stays in memory)."""
    _PARSED.clear()
    _READ.clear()
    _WRITTEN.clear()
    clear_fingerprints()


def file_version(path: str | Path | UPath) -> tuple | None:
    """A local file's identity and version (device, inode, size, modification and change times in
    ns; a rewrite changes the change time even when it keeps size and modification time), or None
    for a remote path, whose content is always read and hashed."""
    if not isinstance(UPath(path), Path):
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def read_bytes(path: str | Path | UPath) -> bytes:
    try:
        return UPath(path).read_bytes()
    except FileNotFoundError:
        raise InputError(str(path), None, None, "file not found") from None
    except IsADirectoryError:
        raise InputError(str(path), None, None, "is a directory, expected a file") from None
    except PermissionError:
        raise InputError(str(path), None, None, "permission denied") from None


def decode(raw: bytes, file: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        raise InputError(file, f"line {line}", None, f"not UTF-8: byte 0x{raw[err.start]:02x} at offset {err.start}") from None


def _load_json(text: str, file: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(file, f"line {err.lineno}", None, f"malformed JSON at column {err.colno}: {err.msg}") from None


def detect_format(path: str | Path | UPath, text: str) -> str:
    if str(path).endswith(".jsonl"):
        return "jsonl"
    head = text.lstrip()[:200_000]
    if '"haystack_sessions"' in head:
        return "longmemeval"
    if '"conversation"' in head and '"sample_id"' in text:
        return "locomo"
    if head.startswith("{"):
        return "jsonl"
    raise InputError(str(path), None, None, "cannot tell the format; pass --format locomo|longmemeval|jsonl")


def parse_text(text: str, file: str, fmt: str, options: IngestConfig) -> list[Conversation]:
    if fmt == "jsonl":
        return jsonl.read(text, file, options)
    if fmt == "locomo":
        return locomo.read(_load_json(text, file), file, options)
    if fmt == "longmemeval":
        return longmemeval.read(_load_json(text, file), file, options)
    raise InputError(file, None, None, f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")


def _remember(key: tuple, parsed: list[Conversation]) -> None:
    _PARSED[key] = parsed
    while len(_PARSED) > _PARSED_MAX:
        gone, _ = _PARSED.popitem(last=False)
        for asked_before in [a for a, (_, k) in _READ.items() if k == gone]:
            del _READ[asked_before]


@dataclass(frozen=True)
class ToWrite:
    """A parse of what a writer is about to give a file (``parse_to_write``); ``written`` once it is there."""

    conversations: list[Conversation]
    key: tuple  # in _PARSED
    length: int  # bytes
    lines: int


def parse_to_write(path: str | Path | UPath, raw: bytes, fmt: str, options: IngestConfig, *, extends: int | None = None) -> ToWrite:
    """Parse ``raw``, the content a writer is about to give ``path`` (it validates what it writes),
    and keep the parse for ``load_input`` to find once the writer says it is ``written``: reading the
    file then parses nothing again. ``extends``: the length of the file now, when ``raw`` starts with
    it; if the file is still what this process last wrote to it, only the lines past it are read
    (``jsonl.extend``, whose result is always a whole read's) and nothing is hashed but them.
    Raises InputError, naming ``path``."""
    file = str(path)
    asked = (file, fmt, options)
    last = _WRITTEN.get(asked)
    lines = None
    if (extends is not None and fmt == "jsonl" and last is not None and last[1] == extends and last[3] in _PARSED
            and last[0] == file_version(path)):
        tail = raw[extends:]
        key = (hashlib.blake2b(last[3][0].encode() + hashlib.blake2b(tail, digest_size=16).digest(), digest_size=16).hexdigest(),
               file, fmt, options)
        lines = last[2] + tail.count(b"\n")
        if key not in _PARSED:
            parsed = jsonl.extend(_PARSED[last[3]], decode(tail, file), last[2] + 1, file, options)
            _remember(key, parsed if parsed is not None else parse_text(decode(raw, file), file, fmt, options))
    else:
        key = (hashlib.blake2b(raw, digest_size=16).hexdigest(), file, fmt, options)
        if key not in _PARSED:
            _remember(key, parse_text(decode(raw, file), file, fmt, options))
    _PARSED.move_to_end(key)
    return ToWrite([dataclasses.replace(c, skipped=list(c.skipped)) for c in _PARSED[key]], key, len(raw),
                   lines if lines is not None else raw.count(b"\n"))


def written(path: str | Path | UPath, parse: ToWrite) -> None:
    """``parse``'s content is now the file's (a local one): ``load_input`` and the next
    ``parse_to_write`` know it by the file's version, without reading it."""
    version = file_version(path)
    if version is None or parse.key not in _PARSED:
        return
    asked = parse.key[1:]
    _WRITTEN[asked] = (version, parse.length, parse.lines, parse.key)
    _READ[asked] = (version, parse.key)


def load_input(
    path: str | Path | UPath,
    fmt: str | None = None,
    options: IngestConfig | None = None,
    *,
    questions: str | Path | UPath | None = None,
    conversations: list[str] | None = None,
    emptied: list[Conversation] | None = None,
) -> list[Conversation]:
    """Parse and validate a whole input file. Raises InputError; never writes anything.

    A conversation whose every turn was empty and skipped (``ingest.allow_empty_turns``) has nothing
    to build: it goes to ``emptied`` (its ``skipped`` says why) when the caller passes a list to report
    it in, and is an InputError otherwise; never silently dropped.
    """
    options = options or IngestConfig()
    file = str(path)
    version, asked = file_version(path), (file, fmt, options)
    seen = _READ.get(asked)
    if version is not None and seen is not None and seen[0] == version:  # entries leave with their parse
        key = seen[1]
    else:
        raw = read_bytes(path)
        text = decode(raw, file)
        key = (hashlib.blake2b(raw, digest_size=16).hexdigest(), file, fmt or detect_format(path, text), options)
        if key not in _PARSED:
            _remember(key, parse_text(text, file, key[2], options))
        del raw, text
        if version is not None:
            _READ[asked] = (version, key)
    fmt = key[2]
    _PARSED.move_to_end(key)
    parsed = [dataclasses.replace(c, skipped=list(c.skipped)) for c in _PARSED[key]]
    if questions is not None:
        if fmt != "jsonl":
            raise InputError(str(questions), None, None, f"--questions is for jsonl input; {fmt} files carry their own")
        qfile = str(questions)
        jsonl.read_questions(decode(read_bytes(questions), qfile), qfile, parsed)
    if conversations:
        known = {c.conversation_id for c in parsed}
        missing = [c for c in conversations if c not in known]
        if missing:
            raise InputError(file, None, None, f"no conversation {missing[0]!r} in this file (it has {len(known)})")
        wanted = set(conversations)
        parsed = [c for c in parsed if c.conversation_id in wanted]
    for conv in [c for c in parsed if c.passages.is_empty()]:
        if emptied is None or conversations:
            raise InputError(file, conv.conversation_id, None,
                             f"every turn is empty ({'; '.join(conv.skipped[:3])}{'; ...' if len(conv.skipped) > 3 else ''}): nothing to build")
        emptied.append(conv)
        parsed.remove(conv)
    if options.only_speakers:
        for conv in parsed:
            conv.keep_speakers(options.only_speakers)
            if conv.passages.is_empty():
                raise InputError(file, conv.conversation_id, "speaker", f"no turn by {', '.join(options.only_speakers)}")
    return parsed
