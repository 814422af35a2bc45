"""The next conversation's extraction in the background (pipeline.prefetch): what it saves is what the
build's own extraction would, a build with it makes the same memory as without, and losing its process
loses nothing."""

import signal

import pytest
from dagster import DagsterInstance

from conftest import message, tree, write_jsonl
from seem_dagster.defs.assemble import build_defs
from seem_dagster.defs.runner import build_conversations
from seem_dagster.extraction.embedded import MODEL, EmbeddedExtractor
from seem_dagster.extraction.interface import extract_with_cache, inputs_from_passages
from seem_dagster.ingest import load_input
from seem_dagster.pipeline import prefetch
from seem_dagster.pipeline.extract import cache_name
from seem_dagster.pipeline.stages import MEMORY_TABLES
from seem_dagster.registry import register_file
from seem_dagster.store import snapshot
from seem_dagster.store.cache import ConversationCache

PLACES = ("market", "library", "harbour", "bakery", "station", "gym", "park")


def _chats(path, conversations: int, turns: int):
    """Conversations of ``turns`` distinct turns each (two speakers, a session per 20 turns)."""
    rows = [message(conversation_id=f"c{c}", speaker=("Ana", "Ben")[i % 2], session_id=f"s{i // 20}",
                    timestamp=f"2024-03-{1 + i // 20:02d}T19:{i % 20:02d}:00",
                    text=f"On day {i} I went to the {PLACES[(i + c) % 7]} with Lena and bought {i % 5 + 2} apples for conversation {c}.")
            for c in range(conversations) for i in range(turns)]
    return write_jsonl(path, rows)


def _background(tmp_path):
    """A store with two registered conversations of 20 turns, and a prefetch for it (not started)."""
    chat, store = _chats(tmp_path / "chats.jsonl", 2, 20), tmp_path / "store"
    register_file(store, str(chat), "jsonl")
    return store, prefetch.ExtractionPrefetch(store, MODEL)


def _expected(chat, conversation_id: str) -> dict[str, str]:
    """What the build's own extraction step stores for the conversation, extracted here."""
    (conv,) = load_input(chat, "jsonl", conversations=[conversation_id])
    return extract_with_cache(EmbeddedExtractor(), inputs_from_passages(conv.passages), {}).new_entries


def test_prefetch_saves_what_the_build_would_and_stops_between_chunks(tmp_path):
    chat, store = _chats(tmp_path / "chats.jsonl", 2, 40), tmp_path / "store"
    register_file(store, str(chat), "jsonl")
    extractor = EmbeddedExtractor()
    name = cache_name(extractor)

    c0, c1 = prefetch.prefetch_inputs(store, "c0"), prefetch.prefetch_inputs(store, "c1")
    assert prefetch.warm_extraction_cache(store, "c0", c0, extractor) == 40
    assert ConversationCache(store, "c0").kv("extraction", name) == _expected(chat, "c0")
    assert prefetch.warm_extraction_cache(store, "c0", c0, extractor) == 0  # all cached: nothing extracted again

    assert prefetch.warm_extraction_cache(store, "c1", c1, extractor, stopped=lambda: True) == 0  # stopped before it began
    assert ConversationCache(store, "c1").kv("extraction", name) == {}
    looks = []  # one look before it begins, then one before each chunk
    saved = prefetch.warm_extraction_cache(store, "c1", c1, extractor, stopped=lambda: looks.append(1) or len(looks) > 2)
    assert saved == prefetch.CHUNK  # stopped after the first chunk, which is saved
    partial = ConversationCache(store, "c1").kv("extraction", name)
    expected = _expected(chat, "c1")
    assert len(partial) == prefetch.CHUNK and all(expected[k] == v for k, v in partial.items())


@pytest.mark.slow
def test_a_build_with_prefetch_makes_the_same_memory_and_uses_it(tmp_path, monkeypatch):
    chat = _chats(tmp_path / "chats.jsonl", 3, 80)
    ids = ["c0", "c1", "c2"]
    saved = []
    close, finish = prefetch.ExtractionPrefetch.close, prefetch.ExtractionPrefetch.finish
    monkeypatch.setattr(prefetch.ExtractionPrefetch, "close", lambda self, kill=False: saved.append(self.saved) or close(self, kill))
    # Each prefetch let to complete: in the idle class, how much it does before a stop depends on the
    # machine's load; completed, every turn of c1 and c2 comes from it.
    monkeypatch.setattr(prefetch.ExtractionPrefetch, "finish", lambda self, stop=True: finish(self, stop=False))

    memories = {}
    for mode, on in (("with", True), ("without", False)):
        store = tmp_path / mode
        register_file(store, str(chat), "jsonl")
        config = tree(store, {"extraction.prefetch": on})
        outcomes = build_conversations(build_defs(config), ids, instance=DagsterInstance.ephemeral(), config=config)
        assert all(o.success for o in outcomes), [o.error for o in outcomes]
        memories[mode] = {cid: snapshot.read_snapshot(store, cid, MEMORY_TABLES) for cid in ids}
    if len(saved) == 0:
        pytest.skip("one core: the build has no idle core to prefetch on (parse_processes needs two)")
    assert saved[0] == 160  # c1 and c2, found in the cache by their runs
    for cid in ids:
        for table in MEMORY_TABLES:
            assert memories["with"][cid][table].equals(memories["without"][cid][table]), (cid, table)


def test_a_stop_does_not_wait_for_the_process_to_start(tmp_path):
    store, background = _background(tmp_path)
    try:
        background.start("c0")
        background.finish()  # at once: the new process is still loading spaCy
        assert background._owed == 1 and background.saved == 0
        background.start("c1")
        background.finish(stop=False)  # the stopped prefetch's reply first, then this one's
        assert background._owed == 0 and background.saved == 20
        assert ConversationCache(store, "c0").kv("extraction", cache_name(EmbeddedExtractor())) == {}
    finally:
        background.close()


def test_a_process_still_starting_is_not_waited_for_at_the_end(tmp_path):
    store, background = _background(tmp_path)
    background.start("c0")
    background.finish()  # at once: still loading spaCy, so it saves nothing
    process = background._worker[0]
    background.close()
    assert process.returncode == -signal.SIGKILL  # ended, not left to finish its start-up
    assert ConversationCache(store, "c0").kv("extraction", cache_name(EmbeddedExtractor())) == {}


def test_a_dead_prefetch_process_loses_nothing(tmp_path, caplog):
    _, background = _background(tmp_path)
    try:
        background.start("c0")
        background.finish(stop=False)
        assert background.saved == 20 and background.pid() is not None
        background._worker[0].kill()
        background._worker[0].wait()
        background.start("c1")  # the build goes on: a warning, no prefetch from here on
        background.finish()
        assert "prefetch process ended" in caplog.text
        assert background.pid() is None and background.saved == 20
        background.start("c1")
        assert background.pid() is None
    finally:
        background.close(kill=True)


def test_a_remote_source_is_read_by_the_prefetch_process_itself(tmp_path, monkeypatch):
    """A local input is parsed once in the build's process and its passages handed over; a remote one
    (no ``file_version``: every read downloads and hashes it) is left to the prefetch process to read."""
    store, background = _background(tmp_path)
    assert len(prefetch.prefetch_inputs(store, "c0", local_only=True)) == 20
    monkeypatch.setattr(prefetch, "file_version", lambda path: None)  # this process only: the worker reads the file
    assert prefetch.prefetch_inputs(store, "c0", local_only=True) is None
    try:
        background.start("c0")
        background.finish(stop=False)
        assert background.saved == 20
    finally:
        background.close()


def test_a_failing_prefetch_is_left_to_the_run(tmp_path, caplog):
    """A conversation the store does not know (or a source that no longer loads): nothing saved, the
    process stays for the next conversation, and the run itself reports what is wrong."""
    caplog.set_level("INFO", logger=prefetch.__name__)
    store, background = _background(tmp_path)
    try:
        background.start("nobody")
        background.finish(stop=False)
        assert background.saved == 0 and background.pid() is not None
        assert "prefetching the extraction of nobody failed" in caplog.text
        background.start("c0")
        background.finish(stop=False)
        assert background.saved == 20
    finally:
        background.close()
    assert background.pid() is None


def test_the_build_never_waits_on_a_helper_without_a_bound(tmp_path, caplog):
    """A helper that gets no core (here: stopped outright) costs the build at most HELPER_REPLY_S at its
    next wait; it is killed and the runs extract their turns themselves. The helper runs at the lowest
    niceness, never in the idle class, where a busy machine would give it no core at all."""
    import os
    import signal
    import time

    from seem_dagster.scheduling import HELPER_NICE, HELPER_REPLY_S

    _, background = _background(tmp_path)
    try:
        background.start("c0")
        background.finish(stop=False)  # started and ready
        pid = background.pid()
        assert os.sched_getscheduler(pid) == os.SCHED_OTHER and os.getpriority(os.PRIO_PROCESS, pid) == HELPER_NICE
        background.start("c1")
        os.kill(pid, signal.SIGSTOP)  # starved: it will not answer
        started = time.monotonic()
        background.finish()
        waited = time.monotonic() - started
        assert HELPER_REPLY_S - 0.5 < waited < HELPER_REPLY_S + 3, waited
        assert background.pid() is None and "no reply within" in caplog.text
        background.start("c1")  # no helper for the rest of the build
        assert background.pid() is None
    finally:
        background.close(kill=True)
