"""Issue 18's faults, as a new user and a hostile one would meet them: each test names its item.

Bad input is a one-line error (exit 2) that names the file, record and field; a secret never reaches
storage or output; paths survive a change of folder. The pipeline and server cases are in
test_publish.py and test_fault_builds.py (slow).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

import polars as pl
import pytest
from upath import UPath

from conftest import files_under, message, write_jsonl
from seem_dagster.cli import EXIT_INPUT, main
from seem_dagster.config import IngestConfig, LlmConfig
from seem_dagster.ingest import InputError, load_input
from seem_dagster.llm.client import LlmClient
from seem_dagster.llm.engine import EngineError
from seem_dagster.llm.http import OpenAICompatibleEngine
from seem_dagster.llm.prompts import passage
from seem_dagster.registry import register_file
from seem_dagster.store import snapshot
from tests.echoing_server import SECRET, EchoingServer


def run_build(path, store, *extra):
    return main(["build", "--input", str(path), "--store", str(store), "--quiet", *extra])


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


# ---- item 2: a server's error body cannot carry the API key into storage or output -----------------

@pytest.fixture
def echoing_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), EchoingServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def _engine(url: str) -> OpenAICompatibleEngine:
    return OpenAICompatibleEngine(LlmConfig(backend="openai", model="m", base_url=url, api_key_env="SEEM_TEST_KEY",
                                            response_format="json_object", backoff_s=0.0, max_retries=1))


@pytest.mark.parametrize("status", ["401", "403"])
def test_item2_refused_credentials_stop_the_run_with_a_message_that_never_shows_the_key(status, echoing_server, monkeypatch):
    monkeypatch.setenv("SEEM_TEST_KEY", SECRET)
    EchoingServer.mode = status
    with pytest.raises(EngineError) as caught:
        LlmClient(_engine(echoing_server)).run(passage.PROMPT, [("p1", {"turn": "hello"}), ("p2", {"turn": "bye"})])
    message = str(caught.value)
    assert f"HTTP {status}" in message and "refused the credentials" in message and "$SEEM_TEST_KEY" in message
    assert SECRET not in message and "[REDACTED]" in message


@pytest.mark.parametrize("status", ["500", "200"])
def test_item2_a_stored_error_or_reply_never_holds_the_key(status, echoing_server, monkeypatch):
    monkeypatch.setenv("SEEM_TEST_KEY", SECRET)
    EchoingServer.mode = status
    run = LlmClient(_engine(echoing_server)).run(passage.PROMPT, [("p1", {"turn": "hello"})])
    record = run.records[0]
    assert record.status == ("unanswered" if status == "500" else "failed")
    stored = json.dumps([record.__dict__, run.new_entries])  # what llm_calls and the reply cache keep
    assert SECRET not in stored and "[REDACTED]" in stored


# ---- item 3: registered paths are absolute ---------------------------------------------------------

def test_item3_a_relative_input_path_is_registered_absolute(tmp_path, monkeypatch):
    (tmp_path / "in").mkdir()
    write_jsonl(tmp_path / "in" / "good.jsonl", [message()])
    monkeypatch.chdir(tmp_path)
    (reg,) = register_file(tmp_path / "store", "in/good.jsonl")
    from seem_dagster.store.sources import pending_path

    recorded = json.loads(pending_path(tmp_path / "store", "c1").read_text())
    assert recorded["path"] == str(tmp_path / "in" / "good.jsonl") and reg.status == "new"
    monkeypatch.chdir("/")  # the schedule, or a re-run in the UI, started from elsewhere
    (again,) = register_file(tmp_path / "store", recorded["path"])
    assert again.status == "new" and again.waiting  # the same registration, still waiting for its build


# ---- item 4: an empty conversation is refused, a skipped one reported ------------------------------

def test_item4_a_locomo_sample_without_sessions_is_refused(tmp_path, capsys):
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([{"sample_id": "empty-1", "conversation": {"speaker_a": "A", "speaker_b": "B"}, "qa": []}]))
    assert run_build(path, tmp_path / "store", "--format", "locomo") == EXIT_INPUT
    err = one_line_error(capsys)
    assert f"{path}: sample 0 (empty-1): field 'conversation': no turns" in err
    assert files_under(tmp_path / "store") == []


def test_item4_a_longmemeval_item_with_an_empty_haystack_is_refused(tmp_path, capsys):
    item = {"question_id": "q-empty", "question_type": "single-session-user", "question": "What?", "answer": "x",
            "question_date": "2023/07/01 (Sat) 02:36", "haystack_session_ids": [], "haystack_dates": [], "haystack_sessions": [],
            "answer_session_ids": []}
    path = tmp_path / "lme.json"
    path.write_text(json.dumps([item]))
    assert run_build(path, tmp_path / "store", "--format", "longmemeval") == EXIT_INPUT
    assert f"{path}: question 0 (q-empty): field 'haystack_sessions': no turns" in one_line_error(capsys)
    item |= {"haystack_session_ids": ["s"], "haystack_dates": ["2023/07/01 (Sat) 02:36"], "haystack_sessions": [[]]}
    path.write_text(json.dumps([item]))
    with pytest.raises(InputError, match="no turns"):
        load_input(path, "longmemeval")


def test_item4_a_conversation_whose_only_turn_is_blank_is_reported_not_lost(tmp_path, capsys):
    path = write_jsonl(tmp_path / "chat.jsonl", [message(conversation_id="c2", text="  ")])
    with pytest.raises(InputError, match="no messages found"):
        load_input(path, options=IngestConfig(allow_empty_turns=True))
    write_jsonl(path, [message(), message(conversation_id="c2", text="  ")])
    emptied = []
    (kept,) = load_input(path, options=IngestConfig(allow_empty_turns=True), emptied=emptied)
    assert kept.conversation_id == "c1" and [c.conversation_id for c in emptied] == ["c2"]
    assert emptied[0].skipped == ["line 2: empty text"]
    with pytest.raises(InputError, match="c2: every turn is empty"):  # a caller that cannot report it is refused
        load_input(path, options=IngestConfig(allow_empty_turns=True))
    registered = register_file(tmp_path / "store", str(path), options=IngestConfig(allow_empty_turns=True))
    assert [(r.conversation_id, r.status) for r in registered] == [("c1", "new"), ("c2", "empty")]
    from seem_dagster.store.sources import pending_path

    assert not pending_path(tmp_path / "store", "c2").exists()


def test_item4_the_build_command_says_which_conversation_it_skipped(tmp_path, capsys):
    path = write_jsonl(tmp_path / "chat.jsonl", [message(conversation_id="c2", text=" "), message(conversation_id="c3", text="")])
    assert run_build(path, tmp_path / "store", "--allow-empty-turns") == EXIT_INPUT
    assert "no messages found (every message is empty)" in capsys.readouterr().err


# ---- item 5: one-line errors, not tracebacks -------------------------------------------------------

@pytest.mark.parametrize("cid", ["", "x" * 201, "a...b", "a\x00b"])
def test_item5_an_unusable_conversation_id_in_a_query_is_a_one_line_error(cid, tmp_path, capsys):
    code = main(["query", "--store", str(tmp_path), "--conversation", cid, "--json", "anything?"])
    out, err = capsys.readouterr()
    assert code == EXIT_INPUT and len(err.strip().splitlines()) == 1 and "--conversation: conversation id" in err
    assert json.loads(out)["exit_code"] == EXIT_INPUT and json.loads(out)["error"] in err  # --json gets it too


def test_item5_a_missing_questions_file_is_bad_input(tmp_path, capsys):
    path = write_jsonl(tmp_path / "chat.jsonl", [message()])
    assert run_build(path, tmp_path / "store", "--questions", str(tmp_path / "MISSING")) == EXIT_INPUT
    assert f"{tmp_path / 'MISSING'}: file not found" in one_line_error(capsys)
    assert files_under(tmp_path / "store") == []


def test_item5_a_query_of_an_unbuilt_conversation_says_so_on_stdout_too(tmp_path, capsys):
    assert main(["query", "--store", str(tmp_path), "--conversation", "nobody", "--json", "anything?"]) == EXIT_INPUT
    out, err = capsys.readouterr()
    assert json.loads(out)["error"] == "no memory of conversation 'nobody' in this store" and len(err.strip().splitlines()) == 1


# ---- item 6: query arguments are checked -----------------------------------------------------------

@pytest.mark.parametrize("args, expected", [
    (["--k", "-1"], "setting query.k"), (["--k", "0"], "setting query.k"), (["--budget", "-5"], "setting query.budget_tokens"),
    ([], "the question is empty"),
])
def test_item6_bad_query_arguments_are_refused(args, expected, tmp_path, capsys):
    question = "   " if not args else "Where does Tomas work?"
    assert main(["query", "--store", str(tmp_path), "--conversation", "c1", *args, question]) == EXIT_INPUT
    assert expected in one_line_error(capsys)


# ---- item 7: LoCoMo evidence must name a turn ------------------------------------------------------

@pytest.mark.parametrize("evidence, shown", [([3], "integer 3"), (["3"], "string '3'"), ([None], "null None"), ([["D1:1"]], "array")])
def test_item7_locomo_evidence_that_is_not_a_dialogue_id_is_refused(evidence, shown, tmp_path, capsys):
    sample = {"sample_id": "s", "conversation": {"speaker_a": "A", "speaker_b": "B", "session_1_date_time": "1:56 pm on 8 May, 2023",
                                                 "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "Hi"}]},
              "qa": [{"question": "Q?", "answer": "x", "category": 1, "evidence": ["D1:1", *evidence]}]}
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([sample]))
    assert run_build(path, tmp_path / "store", "--format", "locomo") == EXIT_INPUT
    err = one_line_error(capsys)
    assert "sample 0 (s), qa 0: field 'evidence': item 1 is " + shown in err and "dialogue id" in err


def test_item7_the_public_files_broken_ids_are_still_read(locomo_dev):
    assert len(load_input(locomo_dev)) == 7  # 'D8:6; D9:17', 'D:11:26', 'D': repaired or dropped by evaluation


# ---- item 9: a killed write's temp file is removed by the next write ------------------------------

WRITER = textwrap.dedent(
    """
    import os, sys, time, polars as pl
    from upath import UPath
    from seem_dagster.store import snapshot
    real_fsync = os.fsync
    def stop_here(fd):  # the temp file is written and not renamed yet: say so, then wait to be killed
        real_fsync(fd)
        print("written", flush=True)
        time.sleep(600)
    os.fsync = stop_here
    snapshot.write_table(UPath(sys.argv[1]), pl.DataFrame({"v": ["new"]}), {"version": "new"})
    """
)


def test_item9_the_next_write_of_a_table_removes_what_a_killed_write_left(tmp_path):
    path = UPath(tmp_path / "_cache" / "embeddings" / "m" / "c1.parquet")
    snapshot.write_table(path, pl.DataFrame({"v": ["old"]}), {"version": "old"})
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "written"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    temps = [p.name for p in Path(path.parent.path).iterdir() if p.name.startswith(snapshot.TEMP_PREFIX)]
    assert len(temps) == 1  # what the kill left behind
    assert snapshot.read_footer(path)["version"] == "old"
    snapshot.write_table(path, pl.DataFrame({"v": ["newer"]}), {"version": "newer"})
    assert sorted(p.name for p in Path(path.parent.path).iterdir()) == ["c1.parquet"]


def test_item9_a_temp_file_of_a_live_writer_is_left_alone(tmp_path):
    from seem_dagster.store.files import temp_name

    target = tmp_path / "t.parquet"
    live = tmp_path / temp_name(target.name)  # this process's: alive
    live.write_bytes(b"in progress")
    snapshot.write_table(UPath(target), pl.DataFrame({"v": [1]}), {})
    assert live.exists()


# ---- item 10: a clash with a generated source ref names the line that has the id -------------------

def test_item10_a_generated_ref_clash_names_the_line_with_the_id(tmp_path, capsys):
    rows = [message(session_id="s1", text="first"), message(session_id="s1", text="second", id="s1:0")]
    path = write_jsonl(tmp_path / "chat.jsonl", rows)
    assert run_build(path, tmp_path / "store") == EXIT_INPUT
    err = one_line_error(capsys)
    assert f"{path}: line 2: field 'id': 's1:0' is also the source ref generated for line 1" in err and "has no id" in err
    rows = [message(session_id="s1", text="first", id="s1:1"), message(session_id="s1", text="second")]
    write_jsonl(path, rows)
    assert run_build(path, tmp_path / "store") == EXIT_INPUT
    assert f"{path}: line 1: field 'id': 's1:1' is also the source ref generated for line 2" in one_line_error(capsys)


def test_the_seem_command_runs_its_exit_handlers_and_ends_without_the_native_teardown(tmp_path):
    """`seem` ends with os._exit after Python's exit handlers (Arrow's thread pool can abort in the C++
    teardown after the work is done): a handler still runs, output still arrives, codes still hold."""
    script = textwrap.dedent("""
        import atexit, sys, threading
        from seem_dagster import cli
        atexit.register(lambda: print("handler ran", flush=True))
        # A non-daemon thread Python would wait for at exit: os._exit must not hang on it, and it must not be needed.
        threading.Thread(target=lambda: None).start()
        sys.argv = ["seem", *sys.argv[1:]]
        cli.run()
        print("not reached")
    """)
    shown = subprocess.run([sys.executable, "-c", script, "config", "show", "--format", "json"], capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0 and json.loads(shown.stdout.rsplit("handler ran", 1)[0])["store"]
    assert shown.stdout.rstrip().endswith("handler ran") and "not reached" not in shown.stdout
    refused = subprocess.run([sys.executable, "-c", script, "query", "--store", str(tmp_path), "--conversation", "nobody", "hi"],
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == EXIT_INPUT and "no memory of conversation 'nobody'" in refused.stderr and "handler ran" in refused.stdout
