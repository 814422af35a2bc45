"""What a hostile probe sent, through the real entries: files read by the real readers and `seem
build`, turns given to `Memory.add`, arguments of the real `seem` CLI in a subprocess, calls to the
real MCP server over HTTP, a failed run's log written onto a really full disk. Each bad input ends in
one line naming the file, record and field (or the argument), writes nothing wrong, loses nothing
already acknowledged, and prints no traceback."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import date, datetime, timedelta
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from conftest import files_under, message, write_jsonl
from seem_dagster.config import IngestConfig
from seem_dagster.ingest import InputError, load_input
from seem_dagster.ingest.dates import FIRST, LAST

SEEM = str(Path(sys.executable).parent / "seem")
SURROGATE = "\ud800"


def _raw_jsonl(path: Path, *lines: str) -> Path:
    """Lines written as they are: JSON text holding escapes Python's own dumps would never write."""
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _line(**fields) -> str:
    """One JSONL line; a value holding a lone surrogate is written as its JSON escape (ASCII JSON)."""
    return json.dumps(message(**fields))


def _refused(path: Path, fmt: str | None = None, **kw) -> InputError:
    with pytest.raises(InputError) as caught:
        load_input(path, fmt, IngestConfig(), **kw)
    assert "\n" not in str(caught.value)
    return caught.value


def seem(*args, timeout: int = 600, **kw) -> subprocess.CompletedProcess:
    """The real CLI; ``args`` may be bytes (a terminal's argument that is not UTF-8)."""
    return subprocess.run([SEEM, *args], capture_output=True, timeout=timeout, **kw)


def _one_line_error(done: subprocess.CompletedProcess, code: int = 2) -> str:
    err = done.stderr.decode("utf-8")
    assert done.returncode == code, (done.returncode, err[-2000:])
    assert err.count("\n") == 1 and err.startswith("seem: error: ") and "Traceback" not in err, err[-2000:]
    return err.strip()


# ---- 1. a lone surrogate, wherever it is ----------------------------------------------------------

@pytest.mark.parametrize("field", ["text", "speaker", "id", "timestamp", "session_id"])
def test_a_lone_surrogate_in_any_field_of_a_jsonl_line_is_refused_naming_the_line_and_field(tmp_path, field):
    value = {"timestamp": "2024-03-02T19:05:00" + SURROGATE}.get(field, "abc" + SURROGATE)
    path = _raw_jsonl(tmp_path / "chat.jsonl", _line(), _line(**{field: value, "id": "m2"} if field != "id" else {field: value}))
    err = _refused(path)
    assert (err.record, err.field) == ("line 2", field)
    assert "lone surrogate U+D800" in err.problem


def test_a_lone_surrogate_in_a_question_file_is_refused_naming_its_line_and_field(tmp_path):
    chat = write_jsonl(tmp_path / "chat.jsonl", [message(id="m1")])
    for field, value in (("question", "Where?" + SURROGATE), ("answer", "\udfff"), ("evidence", ["m1", "\udc80"])):
        questions = _raw_jsonl(tmp_path / "q.jsonl", json.dumps({"question_id": "q1", "conversation_id": "c1", "question": "Where?",
                                                                   field: value}))
        err = _refused(chat, "jsonl", questions=questions)
        assert (err.file, err.record, err.field) == (str(questions), "line 1", field) and "lone surrogate" in err.problem


def _locomo(**turn) -> list:
    return [{"sample_id": "s1", "conversation": {"session_1_date_time": "1:56 pm on 8 May, 2023",
                                                 "session_1": [{"speaker": "Ana", "dia_id": "D1:1", "text": "Hi there."},
                                                               {"speaker": "Bo", "dia_id": "D1:2", "text": "Hello.", **turn}]},
             "qa": [{"question": "Who said hi?", "answer": "Ana", "evidence": ["D1:1"], "category": 1}]}]


def _lme(**turn) -> list:
    return [{"question_id": "q1", "question_type": "single-session-user", "question": "Who?", "answer": "Ana",
             "question_date": "2023/07/01 (Sat) 02:36", "haystack_session_ids": ["a1"], "haystack_dates": ["2023/06/30 (Fri) 10:00"],
             "haystack_sessions": [[{"role": "user", "content": "Hi, I am Ana."}, {"role": "assistant", "content": "Hello.", **turn}]],
             "answer_session_ids": ["a1"]}]


@pytest.mark.parametrize("fmt, data, record, field", [
    ("locomo", _locomo(text="Hel" + SURROGATE), "sample 0 (s1), session_1, turn 1 (D1:2)", "text"),
    ("locomo", _locomo(speaker=SURROGATE), "sample 0 (s1), session_1, turn 1 (D1:2)", "speaker"),
    ("locomo", _locomo(dia_id="D1:" + SURROGATE), "sample 0 (s1), session_1, turn 1", "dia_id"),
    ("locomo", _locomo(blip_caption="a photo " + SURROGATE), "sample 0 (s1), session_1, turn 1 (D1:2)", "blip_caption"),
    ("longmemeval", _lme(content="Hel" + SURROGATE), "question 0 (q1), session 0, turn 1", "content"),
    ("longmemeval", _lme(role="\udc00"), "question 0 (q1), session 0, turn 1", "role"),
])
def test_a_lone_surrogate_in_a_locomo_or_longmemeval_field_is_refused_naming_it(tmp_path, fmt, data, record, field):
    path = tmp_path / "data.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    err = _refused(path, fmt)
    assert (err.record, err.field) == (record, field) and "lone surrogate" in err.problem


@pytest.mark.parametrize("fmt, edit, field", [
    ("locomo", lambda d: d[0]["qa"][0].update(answer="An" + SURROGATE), "answer"),
    ("locomo", lambda d: d[0]["qa"][0].update(question="Who" + SURROGATE), "question"),
    ("longmemeval", lambda d: d[0].update(answer="An" + SURROGATE), "answer"),
    ("longmemeval", lambda d: d[0].update(question="Who" + SURROGATE), "question"),
    ("longmemeval", lambda d: d[0].update(haystack_session_ids=["a" + SURROGATE]), "haystack_session_ids"),
    ("longmemeval", lambda d: d[0].update(answer_session_ids=["\udc00"]), "answer_session_ids"),
])
def test_a_lone_surrogate_in_a_benchmark_files_questions_is_refused_naming_the_field(tmp_path, fmt, edit, field):
    data = _locomo() if fmt == "locomo" else _lme()
    edit(data)
    path = tmp_path / "data.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    err = _refused(path, fmt)
    assert err.field == field and "lone surrogate" in err.problem


def test_seem_build_refuses_a_file_with_a_lone_surrogate_in_one_line_and_writes_nothing(tmp_path):
    store = tmp_path / "store"
    path = _raw_jsonl(tmp_path / "chat.jsonl", _line(id="m1"), _line(id="m2", text="I moved to Leeds" + SURROGATE))
    err = _one_line_error(seem("build", "--input", str(path), "--store", str(store), "--quiet"))
    assert f"{path}: line 2: field 'text': not valid Unicode: a lone surrogate U+D800 at character 16" in err
    assert files_under(store) == []


def _memory(tmp_path):
    from seem_dagster import Memory

    return Memory.open(tmp_path / "store")


def _input_logs(store: Path) -> list[Path]:
    return [p for p in files_under(store) if p.suffix == ".jsonl"]


@pytest.mark.parametrize("field", ["text", "speaker", "id", "timestamp"])
def test_memory_add_refuses_a_lone_surrogate_in_any_field_of_a_turn_and_writes_nothing(tmp_path, field):
    turn = {"speaker": "Ana", "text": "I adopted a cat.", "timestamp": "2024-03-02T19:05:00", "id": "m1"}
    turn[field] = turn[field] + SURROGATE
    with _memory(tmp_path) as memory, pytest.raises(InputError) as caught:
        memory.add("c1", [{"speaker": "Bo", "text": "Hello."}, turn])
    assert str(caught.value).startswith(f"add to 'c1': turn 2: field '{field}': not valid Unicode: a lone surrogate U+D800")
    with _memory(tmp_path) as memory, pytest.raises(InputError) as caught:
        memory.add("c1", [{"speaker": "Bo", "text": "Hello."}], session_id="s" + SURROGATE)
    assert caught.value.field == "session_id" and "lone surrogate" in caught.value.problem
    assert _input_logs(tmp_path / "store") == []


# ---- 2. an empty or blank id ----------------------------------------------------------------------

@pytest.mark.parametrize("bad", ["", "  ", "\t"])
def test_an_empty_or_blank_id_is_refused_when_the_file_is_read(tmp_path, bad):
    err = _refused(write_jsonl(tmp_path / "chat.jsonl", [message(id="m1"), message(id=bad, text="Second.")]))
    assert (err.record, err.field) == ("line 2", "id") and err.problem.startswith("empty id")
    locomo = tmp_path / "locomo.json"
    locomo.write_text(json.dumps(_locomo(dia_id=bad)))
    err = _refused(locomo, "locomo")
    assert err.field == "dia_id" and err.problem.startswith("empty id")


@pytest.mark.parametrize("bad", ["", "  "])
def test_memory_add_refuses_an_empty_or_blank_id_before_writing(tmp_path, bad):
    with _memory(tmp_path) as memory, pytest.raises(InputError) as caught:
        memory.add("c1", [{"speaker": "Ana", "text": "Hi.", "id": "m1"}, {"speaker": "Bo", "text": "Hello.", "id": bad}])
    assert str(caught.value).startswith("add to 'c1': turn 2: field 'id': empty id")
    assert _input_logs(tmp_path / "store") == []


# ---- 3. a value JSON cannot hold ------------------------------------------------------------------

@pytest.mark.parametrize("field, value, kind", [
    ("text", b"I adopted a cat.", "bytes"), ("speaker", b"Ana", "bytes"), ("text", {"a", "set"}, "set"),
    ("id", b"m1", "bytes"), ("timestamp", date(2024, 3, 2), "date"), ("text", object(), "object"),
])
def test_memory_add_refuses_a_value_that_is_no_json_naming_the_field_never_its_python_repr(tmp_path, field, value, kind):
    turn = {"speaker": "Ana", "text": "I adopted a cat.", "timestamp": "2024-03-02T19:05:00", field: value}
    with _memory(tmp_path) as memory, pytest.raises(InputError) as caught:
        memory.add("c1", [turn])
    assert str(caught.value) == f"add to 'c1': turn 1: field '{field}': expected {memory_kinds()[field]}, got {kind}"
    assert _input_logs(tmp_path / "store") == []


def memory_kinds() -> dict:
    return {"speaker": "string", "text": "string", "timestamp": "ISO text or a datetime", "id": "string or integer"}


# ---- 7. unknown fields ----------------------------------------------------------------------------

def test_a_jsonl_line_or_question_with_an_unknown_field_is_refused_as_memory_add_refuses_it(tmp_path):
    err = _refused(write_jsonl(tmp_path / "chat.jsonl", [message(), message(text="Second.", colour="red")]))
    assert str(err) == (f"{tmp_path / 'chat.jsonl'}: line 2: field 'colour': unknown field "
                        "(a line has conversation_id, session_id, timestamp, speaker, text, id)")
    chat = write_jsonl(tmp_path / "ok.jsonl", [message(id="m1")])
    questions = write_jsonl(tmp_path / "q.jsonl", [{"question_id": "q1", "conversation_id": "c1", "question": "Who?", "evidense": ["m1"]}])
    err = _refused(chat, "jsonl", questions=questions)
    assert (err.record, err.field) == ("line 1", "evidense") and err.problem.startswith("unknown field (a question line has ")
    with _memory(tmp_path) as memory, pytest.raises(InputError) as caught:
        memory.add("c1", [{"speaker": "Ana", "text": "Hi.", "colour": "red"}])
    # The same words: "<where>: field '<name>': unknown field (<what> has <fields>)".
    assert str(caught.value) == "add to 'c1': turn 1: field 'colour': unknown field (a turn has speaker, text, timestamp, id)"


# ---- 4. dates out of the supported range ----------------------------------------------------------

@pytest.mark.parametrize("stamp", ["9999-12-31T23:59:00", "0001-01-01", "1899-12-31T23:59:59", "2201-01-01"])
def test_a_date_outside_the_supported_range_is_refused_in_a_file_and_by_memory_add(tmp_path, stamp):
    err = _refused(write_jsonl(tmp_path / "chat.jsonl", [message(), message(timestamp=stamp, text="Later.")]))
    assert (err.record, err.field) == ("line 2", "timestamp")
    assert err.problem == f"{stamp[:10]} is outside the supported dates (1900-01-01 to 2200-12-31)"
    with _memory(tmp_path) as memory, pytest.raises(InputError) as caught:
        memory.add("c1", [{"speaker": "Ana", "text": "Hi.", "timestamp": datetime.fromisoformat(stamp)}])
    assert caught.value.field == "timestamp" and "outside the supported dates" in caught.value.problem
    assert _input_logs(tmp_path / "store") == []


def test_benchmark_dates_outside_the_supported_range_are_refused(tmp_path):
    locomo = _locomo()
    locomo[0]["conversation"]["session_1_date_time"] = "1:56 pm on 8 May, 9999"
    lme = _lme()
    lme[0]["question_date"] = "0001/01/01 (Mon) 00:00"
    for fmt, data, field in (("locomo", locomo, "session_1_date_time"), ("longmemeval", lme, "question_date")):
        path = tmp_path / f"{fmt}.json"
        path.write_text(json.dumps(data))
        err = _refused(path, fmt)
        assert err.field == field and "outside the supported dates (1900-01-01 to 2200-12-31)" in err.problem


EXPRESSIONS = ["99999999 days ago", "3000 years ago", "9999 years ago", "99999 months ago", "10000 weeks ago",
               "99999999999999999999 days ago", "1" * 400 + " years ago", "in the last 99999 years", "in the past 99999999 days",
               "in 500 years", "in 9000 years", "next year", "last year", "next week", "next weekend", "the week before last",
               "next christmas", "over the holidays", "next winter", "the end of next year", "winter 9999", "in the winter of 9999",
               "winter 0000", "spring 0000", "in may 0000", "mid-march 0000", "since may 0000", "between may 0000 and june 9999",
               "on march 15th, 0000", "on december 31st, 9999", "12/25/0000", "12/31/9999", "on 12/31/99", "tomorrow", "yesterday",
               "the beginning of next month", "late december", "this past weekend", "two saturdays ago", "a few months ago"]


@pytest.mark.parametrize("base", [FIRST, FIRST + timedelta(hours=12), datetime(2024, 5, 1), LAST - timedelta(hours=12), LAST])
def test_no_time_expression_raises_for_any_date_in_the_supported_range(base):
    from seem_dagster.episodic.extraction import timex
    from seem_dagster.retrieval.question_time import question_window

    for expression in EXPRESSIONS:
        for prefer in ("past", "future"):
            timex.resolve(expression, base, prefer=prefer)
            timex.resolve(expression, base.date(), prefer=prefer)
        question_window(f"What did I do {expression}?", base)
        question_window(f"What happened {expression} and yesterday?", base.date())
    # What the calendar holds still resolves next to what it cannot.
    assert question_window("What did I buy 3000 years ago and yesterday?", datetime(2024, 5, 2)).start == date(2024, 5, 1)


# ---- 6. control characters on the terminal ---------------------------------------------------------

CONTROLS = "Bell\x07 and \x1b[2J\x1b[31mred\x1b[0m, a CSI\x9b1m, a DEL\x7f and a CR\rover"
SHOWN = "Bell\\x07 and \\x1b[2J\\x1b[31mred\\x1b[0m, a CSI\\x9b1m, a DEL\\x7f and a CR\\x0dover"
TURNS = [{"speaker": "Alice", "text": "I moved to Leeds in March.", "timestamp": "2024-03-02T19:05:00", "id": "m1"},
         {"speaker": "Bob", "text": f"The pottery class starts Monday. {CONTROLS}", "timestamp": "2024-03-02T19:06:00", "id": "m2"},
         {"speaker": "Alice", "text": "Lovely, I love the new flat in Leeds.", "timestamp": "2024-03-02T19:07:00", "id": "m3"}]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """A memory built through Dagster whose turns hold control characters."""
    from seem_dagster import Memory

    root = tmp_path_factory.mktemp("bad-input") / "store"
    with Memory.open(root) as memory:
        memory.add("alice", TURNS)
    return root


def _raw_controls(text: str) -> list[str]:
    return sorted({c for c in text if (ord(c) < 0x20 and c not in "\n\t") or 0x7f <= ord(c) <= 0x9f})


@pytest.mark.slow
def test_seem_query_and_seem_sql_show_control_characters_escaped_and_keep_them_exact(store):
    query = seem("query", "--conversation", "alice", "--store", str(store), "When does the pottery class start?")
    out = query.stdout.decode("utf-8")
    assert query.returncode == 0 and _raw_controls(out) == [] and SHOWN in out, out
    sql = "SELECT text, 'x' || chr(27) || '[1m' AS \"odd\x07name\" FROM passages WHERE source_ref = 'm2'"
    for fmt in ("table", "csv"):
        done = seem("sql", "--store", str(store), "--format", fmt, sql)
        out = done.stdout.decode("utf-8")
        assert done.returncode == 0 and _raw_controls(out) == [], out
        assert "\\x1b[2J" in out and "x\\x1b[1m" in out and "odd\\x07name" in out
    exact = json.loads(seem("sql", "--store", str(store), "--format", "json", sql).stdout)
    assert exact["rows"][0]["text"] == TURNS[1]["text"]  # the memory keeps the text as said
    as_json = json.loads(seem("query", "--conversation", "alice", "--store", str(store), "--json", "pottery").stdout)
    assert TURNS[1]["text"] in [p["text"] for p in as_json["passages"]]


# ---- 1 and 4 through the CLI: a terminal's bytes that are no UTF-8, and dates out of range --------

@pytest.mark.slow
def test_seem_query_and_sql_refuse_text_that_is_no_unicode_and_dates_out_of_range_in_one_line(store):
    s = str(store)
    err = _one_line_error(seem("query", "--conversation", "alice", "--store", s, b"Where does \xff Alice live?"))
    assert "the question: not valid Unicode: a lone surrogate U+DCFF at character 11" in err
    err = _one_line_error(seem("sql", "--store", s, b"SELECT text FROM passages WHERE text = '\xfe'"))
    assert "the query: not valid Unicode: a lone surrogate U+DCFE" in err
    for flag, value in (("--date", "9999-12-31"), ("--as-of", "0001-01-01"), ("--date", "2201-01-01T00:00:00")):
        err = _one_line_error(seem("query", "--conversation", "alice", "--store", s, flag, value, "Where does Alice live?"))
        assert err == (f"seem: error: {flag} '{value}': {value[:10]} is outside the supported dates (1900-01-01 to 2200-12-31)")
    err = _one_line_error(seem("forget", "--conversation", "alice", "--store", s, "--before", "9999-01-01"))
    assert "--before '9999-01-01': 9999-01-01 is outside the supported dates" in err
    for edge in (f"{FIRST:%Y-%m-%d}", f"{LAST:%Y-%m-%dT%H:%M}"):  # the range's edges are dates like any other
        done = seem("query", "--conversation", "alice", "--store", s, "--date", edge, "What did Alice do 500 years ago, next week?")
        assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.slow
def test_the_api_refuses_a_date_out_of_range_given_as_text(store):
    from seem_dagster import Memory
    from seem_dagster.memory import InvalidRequest

    with Memory.open(store) as memory:
        for name in ("date", "as_of"):
            with pytest.raises(InvalidRequest) as caught:
                memory.search("alice", "Where does Alice live?", **{name: "9999-12-31"})
            assert "\n" not in str(caught.value) and name in str(caught.value)
        with pytest.raises(InvalidRequest):
            memory.properties("alice", as_of="0001-01-01")
        assert memory.search("alice", "Where does Alice live?", date=LAST)  # the last supported moment answers


@pytest.mark.slow
def test_the_api_refuses_a_datetime_out_of_range_in_words(tmp_path):
    from seem_dagster import Memory
    from seem_dagster.memory import InvalidRequest

    with Memory.open(tmp_path / "store") as memory:
        with pytest.raises(InvalidRequest, match="outside the supported dates"):
            memory.query("nobody", "Where?", date=datetime(9999, 12, 31))
        for text in ("1899-01-01", "9999-12-31T10:00:00"):  # given as text: the same words, not "not an ISO date"
            with pytest.raises(InvalidRequest, match="date: .*outside the supported dates"):
                memory.query("nobody", "Where?", date=text)
        with pytest.raises(InvalidRequest, match="the question must be text, got bytes"):
            memory.query("nobody", b"Where?")


@pytest.mark.parametrize("call", [lambda m: m.query("c1", "Where\ud800?"), lambda m: m.sql("SELECT '\udfff' AS x", "c1"),
                                  lambda m: m.properties("c1", entity="T\ud800")])
def test_the_api_refuses_a_question_sql_or_name_that_is_no_text_in_words(tmp_path, call):
    from seem_dagster import Memory
    from seem_dagster.memory import InvalidRequest

    with Memory.open(tmp_path / "store") as memory:
        with pytest.raises(InvalidRequest, match="lone surrogate"):
            call(memory)


# ---- 8, 1, 4, 9: the MCP server over HTTP ----------------------------------------------------------

class HttpServer:
    """`seem mcp --http 127.0.0.1:0` in one process; its log (stderr) kept for the test to read."""

    def __init__(self, store: Path):
        self.proc = subprocess.Popen([SEEM, "mcp", "--store", str(store), "--http", "127.0.0.1:0", "--set", "agent.http_processes=1"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.log, deadline = b"", time.monotonic() + 180
        while b"serving http://" not in self.log:
            assert self.proc.poll() is None and time.monotonic() < deadline, self.log.decode()
            if select.select([self.proc.stderr], [], [], 1)[0]:
                self.log += os.read(self.proc.stderr.fileno(), 65536)
        self.url = self.log.decode().split("serving ")[1].split("/mcp")[0] + "/mcp"

    def post(self, body: str) -> dict:
        import httpx

        response = httpx.post(self.url, content=body.encode(), timeout=120,
                              headers={"Accept": "application/json, text/event-stream", "Content-Type": "application/json"})
        assert response.status_code == 200, response.text
        return response.json()

    def call(self, name: str, arguments: dict) -> tuple[bool, str]:
        result = self.post(json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": name, "arguments": arguments}}))
        assert result["id"] == 7
        return result["result"]["isError"], result["result"]["content"][0]["text"]

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(timeout=120) == 0
        self.log += self.proc.stderr.read()
        self.proc.stderr.close()
        return self.log.decode()


@pytest.fixture(scope="module")
def http(store):
    server = HttpServer(store)
    yield server
    with contextlib.suppress(Exception):
        server.stop()


@pytest.mark.slow
def test_mcp_arguments_are_strictly_typed_never_coerced(http):
    for arguments, why in ((dict(k="5"), "search: k: expected integer, got string"), (dict(k=True), "search: k: expected integer, got boolean"),
                           (dict(k=5.0), "search: k: expected integer, got number"),
                           (dict(date=20240101), "search: date: expected string or null, got integer")):
        assert http.call("search", {"question": "Where does Alice live?", **arguments}) == (True, why)
    assert http.call("property_search", {"limit": "3"}) == (True, "property_search: limit: expected integer, got string")
    assert http.call("sql", {"query": ["SELECT 1"]}) == (True, "sql: query: expected string, got array")
    error, text = http.call("search", {"question": "Where does Alice live?", "k": 2})
    assert not error and len(json.loads(text)["passages"]) == 2


@pytest.mark.slow
def test_mcp_arguments_holding_a_lone_surrogate_or_a_date_out_of_range_are_refused_naming_them(http):
    # Written as JSON writes a lone surrogate: the six characters \ud800.
    body = '{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "search", "arguments": {"question": "Where\\ud800?"}}}'
    result = http.post(body)["result"]
    assert result["isError"] and result["content"][0]["text"] == "search: question: not valid Unicode: a lone surrogate U+D800 at character 5"
    body = '{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "sql", "arguments": {"query": "SELECT \'\\udfff\'"}}}'
    assert http.post(body)["result"]["content"][0]["text"] == "sql: query: not valid Unicode: a lone surrogate U+DFFF at character 8"
    pair = '{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "search", "arguments": {"question": "Where \\ud83d\\ude00?"}}}'
    assert not http.post(pair)["result"]["isError"]  # a surrogate pair is a character like any other
    for name, arguments in (("search", {"question": "Where?", "date": "9999-12-31"}), ("property_search", {"as_of": "0001-01-01"})):
        argument = "date" if name == "search" else "as_of"
        value = arguments[argument]
        assert http.call(name, arguments) == (True, f"{name}: {argument}: {value} is outside the supported dates (1900-01-01 to 2200-12-31)")
    error, text = http.call("search", {"question": "What did Alice do 500 years ago?", "date": f"{LAST:%Y-%m-%d}"})
    assert not error, text


@pytest.mark.slow
def test_a_client_that_disconnects_mid_body_leaves_no_traceback_in_the_servers_log(store):
    server = HttpServer(store)
    port = int(server.url.rsplit(":", 1)[1].split("/")[0])
    try:
        for _ in range(3):
            with socket.create_connection(("127.0.0.1", port)) as sock:
                sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                             b"Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{\"jsonrpc\": \"2.0\", ")
        time.sleep(1.0)
        assert server.call("schema", {})[0] is False  # and it serves on
    finally:
        log = server.stop()
    assert "Traceback" not in log and "ClientDisconnect" not in log and "ERROR" not in log, log[-3000:]


# ---- 5. a full disk while a failed run's log is written --------------------------------------------

@contextlib.contextmanager
def full_disk(folder: Path):
    """``folder`` as a 64 KiB tmpfs filled to the last byte (root only; else the test skips)."""
    folder.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to fill ({mounted.stderr.strip()}): needs root")
    try:
        fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while True:
                os.write(fd, b"\0" * 4096)
        except OSError as err:
            assert err.errno == errno.ENOSPC
        finally:
            os.close(fd)
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


@pytest.mark.slow
def test_a_full_disk_while_a_failed_runs_log_is_written_is_one_line_and_loses_nothing(tmp_path):
    from seem_dagster import Memory
    from tests.echoing_server import EchoingServer

    refusing = ThreadingHTTPServer(("127.0.0.1", 0), EchoingServer)
    EchoingServer.mode = "401"
    threading.Thread(target=refusing.serve_forever, daemon=True).start()
    store = tmp_path / "store"
    with Memory.open(store) as memory:  # acknowledged: built and published
        memory.add("c1", TURNS[:1])
    chat = write_jsonl(tmp_path / "chat.jsonl", [message(conversation_id="c2", id="n1")])
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
    try:
        with full_disk(store / "_logs") as logs:
            done = seem("build", "--input", str(chat), "--store", str(store), "--quiet", "--backend", "openai", "--model", "m",
                        "--base-url", f"http://127.0.0.1:{refusing.server_address[1]}/v1", "--response-format", "json_object", env=env)
            err = _one_line_error(done, code=1)
            assert "the build of c2 failed: extract_frames" in err and "HTTP 401" in err
            assert f"its log could not be written to {logs}: No space left on device" in err
            assert sorted(p.name for p in logs.iterdir()) == ["filler"]  # no part of a log left behind
            refused_key = {"llm.backend": "openai", "llm.model": "m", "llm.response_format": "json_object",
                           "llm.base_url": f"http://127.0.0.1:{refusing.server_address[1]}/v1"}
            with Memory.open(store, config=refused_key) as memory:
                with pytest.raises(Exception) as caught:
                    memory.add("c1", TURNS[1:2])
            assert type(caught.value).__name__ == "RunLogError" and "\n" not in str(caught.value)
            assert "No space left on device" in str(caught.value)
            with Memory.open(store) as memory:  # the memory published before stays whole and readable
                assert [h.source_ref for h in memory.search("c1", "Where did Alice move?")] == ["m1"]
    finally:
        refusing.shutdown()
    with Memory.open(store) as memory:  # room again: the turn given to the failed add is in the input log, and builds
        memory.add("c1", TURNS[2:])
        assert sorted(h.source_ref for h in memory.search("c1", "pottery class Leeds flat", k=5)) == ["m1", "m2", "m3"]
