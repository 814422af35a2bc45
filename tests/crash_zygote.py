"""A warmed process that forks one real writer process per crash case (tests/test_crash_points.py).

A cold `python` that imports Dagster, spaCy and MiniLM and loads their models takes 15-20 s on two
cores before it writes anything; the crash test runs about a hundred writers. This process pays that
once: it imports everything and loads every model, then, for each
request on stdin, forks a child that runs one `Memory` operation with the request's environment
(``SEEM_CRASH_AT`` among it) and reports how the child ended: its exit code, or the signal that
killed it (SIGKILL at a named point). The child is a real process of its own, killed by a real
SIGKILL; what it had written is on disk as a crash leaves it.

One JSON request a line on stdin: ``{"op": "add"|"forget"|"read", "store": ..., "env": {...}, ...}``;
one JSON reply a line on stdout: ``{"exit": int|null, "signal": int|null, "result": ...}``.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import traceback


def run(request: dict) -> dict:
    from seem_dagster import Memory

    cid = request["conversation"]
    with Memory.open(request["store"]) as memory:
        if request["op"] == "add":
            done = memory.add(cid, request["turns"])
            return {"status": done.status, "passages": done.passages}
        if request["op"] == "forget":
            done = memory.forget(cid, turns=request.get("turns"))
            return {"turns": done.turns, "passages": done.passages, "warnings": list(done.warnings)}
        if request["op"] == "read":  # a command that only reads: it finishes an interrupted forget first
            if cid not in memory.conversations():
                return {"refs": None}
            refs = sorted(memory.index(cid).passages["source_ref"].to_list())
            hits = [h.source_ref for h in memory.search(cid, request.get("question", "what happened?"), k=3)]
            return {"refs": refs, "hits": hits}
    raise ValueError(f"unknown op {request['op']!r}")


def child(request: dict, out: str) -> None:
    os.environ.update(request.get("env") or {})
    try:
        result = {"ok": run(request)}
        code = 0
    except Exception as err:  # noqa: BLE001 - reported to the test, which decides
        result = {"error": f"{type(err).__name__}: {err}", "trace": traceback.format_exc()}
        code = 3
    with open(out, "w") as fh:
        json.dump(result, fh)
    os._exit(code)


def serve() -> None:
    replies = os.fdopen(os.dup(1), "w")  # the protocol's own stdout: whatever else prints goes to stderr
    os.dup2(2, 1)
    warm()
    replies.write(json.dumps({"ready": os.getpid()}) + "\n")
    replies.flush()
    for line in sys.stdin:
        request = json.loads(line)
        fd, out = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        pid = os.fork()
        if pid == 0:
            child(request, out)
        _, status = os.waitpid(pid, 0)
        try:
            with open(out) as fh:
                result = json.load(fh) if os.path.getsize(out) else None
        finally:
            os.unlink(out)
        reply = {"exit": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
                 "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None, "result": result}
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


def warm() -> None:
    """Import everything and load every model a build and a query use, without running any of them:
    polars' and OpenMP's thread pools, started by a first computation, do not survive a fork (a child
    forked after one waits forever on a lock of a thread it does not have), so the children start them."""
    import seem_dagster.definitions  # noqa: F401 - Dagster and every asset module
    from seem_dagster import Memory, backends  # noqa: F401
    from seem_dagster.episodic.extraction import spacy_model

    spacy_model.load()
    spacy_model.tagger()
    backends.embedder("minilm")._loaded  # noqa: B018 - tokenizer and weights, no forward pass
    backends.embedder("minilm-static")._loaded  # noqa: B018 - the distilled table
    backends.query_embedder("minilm")


if __name__ == "__main__":
    serve()
