"""`seem mcp --http`: the memory tools over MCP's streamable HTTP transport, tested with the MCP SDK's
own client against the real server process on loopback, over a store of three conversations built
through Dagster. Each token sees only its conversations on every path; missing, wrong and revoked
tokens get 401; memory bombs fail alone while another tenant's calls answer; SIGTERM lets a call in
flight finish."""

from __future__ import annotations

import gc
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import httpx
import pytest

pytestmark = pytest.mark.slow  # builds three memories through Dagster and serves them

SEEM = str(Path(sys.executable).parent / "seem")
SECRET = "zeppelin"  # said only in bob-1: no response to alice's token may hold it


def _turns(*texts: str) -> list[dict]:
    return [{"speaker": "Alice" if n % 2 == 0 else "Bob", "text": t, "timestamp": f"2024-03-02T19:{n:02d}:00", "id": f"m{n}"}
            for n, t in enumerate(texts)]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    from seem_dagster import Memory

    root = tmp_path_factory.mktemp("tenants") / "store"
    with Memory.open(root) as memory:
        memory.add("alice", _turns("I moved to Leeds in March.", "How do you like the new flat?",
                                   "I love it, the light is lovely in the mornings."))
        memory.add("bob-1", _turns("My password hint is the word zeppelin.", "Where did you get that idea?",
                                   f"From the {SECRET} museum in Friedrichshafen, where Bob lives."))
        memory.add("bob-2", _turns("Bob adopted a beagle called Pixel.", "Lovely, how old is Pixel?", "Two years old."))
    # Dagster's SQLite handles die here, in the thread that made them: collected later in a client
    # thread, their finalizers fail and can break the compile that thread was doing.
    gc.collect()
    return root


def _tokens(path: Path, *args: str) -> str:
    done = subprocess.run([SEEM, "tokens", *args, "--tokens-file", str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]  # the token is the output's last line


class Server:
    """`seem mcp --http 127.0.0.1:0` as a process; ``url`` once it answers /health."""

    def __init__(self, store: Path, *extra: str, cwd: Path | None = None):
        self.proc = subprocess.Popen([SEEM, "mcp", "--store", str(store), "--http", "127.0.0.1:0", *extra],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=cwd)
        line, deadline = "", time.monotonic() + 120
        while "serving http://" not in line:
            assert self.proc.poll() is None, self.proc.stderr.read()
            assert time.monotonic() < deadline, "the server did not say where it listens"
            if select.select([self.proc.stderr], [], [], 1)[0]:
                line = self.proc.stderr.readline()
        self.base = line.split("serving ")[1].split("/mcp")[0]
        self.url = self.base + "/mcp"
        assert httpx.get(self.base + "/health", timeout=10).json() == {"status": "ok"}

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=120)
        self.proc.stderr.close()
        return code

    def peak_rss_mb(self) -> tuple[list[float], list[float]]:
        """VmHWM in MB of the server's processes, and of the SQL workers they started."""
        servers, workers = [], []
        for pid in [self.proc.pid, *_descendants(self.proc.pid)]:
            try:
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            peak = int(next(x for x in status.splitlines() if x.startswith("VmHWM:")).split()[1]) / 1024
            (workers if pid in _sql_workers(self.proc.pid) else servers).append(peak)
        return servers, workers


def _descendants(pid: int) -> dict[int, str]:
    """The processes ``pid`` started, and theirs: pid -> command line."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError):
            continue
    found, frontier = {}, {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier}
        for child in frontier:
            try:
                found[child] = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
    return found


def _sql_workers(pid: int) -> list[int]:
    return [p for p, command in _descendants(pid).items() if "seem_dagster.sql.worker" in command]


async def _calls(url: str, token: str | None, calls: list[tuple[str, dict]], out: list) -> list[tuple[bool, str]]:
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=120) as http:
        async with streamable_http_client(url, http_client=http) as streams, ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            for name, arguments in calls:
                result = await session.call_tool(name, arguments)
                out.append((bool(result.is_error), result.content[0].text))
            return out


def calls(url, token, *pairs, out: list | None = None) -> list[tuple[bool, str]]:
    """Each call's (is an error, text), appended to ``out`` as it comes."""
    out = [] if out is None else out
    return anyio.run(lambda: _calls(url, token, list(pairs), out))


def _post(url: str, token: str | None, body: bytes | None = None) -> httpx.Response:
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    ping = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    return httpx.post(url, content=body if body is not None else ping, headers=headers, timeout=60)


@pytest.fixture(scope="module")
def served(store, tmp_path_factory):
    tokens = tmp_path_factory.mktemp("tokens") / "tokens.json"
    alice = _tokens(tokens, "add", "--conversations", "alice", "--name", "alice's agent")
    bob = _tokens(tokens, "add", "--prefix", "bob-")
    server = Server(store, "--tokens-file", str(tokens), "--set", "sql.memory_limit_mb=256", "--set", "agent.allow_forget=true")
    yield server, tokens, alice, bob
    assert server.stop() == 0


def test_the_tokens_file_holds_hashes_only(served):
    _, tokens, alice, bob = served
    text = tokens.read_text()
    assert alice not in text and bob not in text and alice.startswith("seem_")
    assert oct(tokens.stat().st_mode & 0o777) == "0o600"


def test_a_token_reads_its_conversations_and_nothing_of_another_tenants_on_any_path(served):
    server, _, alice, _ = served
    hostile = [
        ("search", {"question": "What is the password hint?"}),  # no id: alice's own, the only one it reads
        ("search", {"question": "What is the password hint?", "conversation_id": "bob-1"}),
        ("search", {"question": "What is the password hint?", "conversation_id": "nobody"}),
        ("search", {"question": "hint", "conversation_id": "../bob-1"}),
        ("entity_lookup", {"name": "Bob", "conversation_id": "bob-1"}),
        ("property_search", {"query": "zeppelin museum", "conversation_id": "bob-1"}),
        ("sql", {"query": "SELECT * FROM passages"}),
        ("sql", {"query": "SELECT conversation_id, count(*) AS n FROM passages GROUP BY 1"}),
        ("sql", {"query": "SELECT text FROM passages UNION ALL SELECT text FROM passages WHERE conversation_id = 'bob-1'"}),
        ("sql", {"query": "SELECT text FROM passages WHERE conversation_id IN (SELECT 'bob-1') OR text LIKE '%zeppelin%'"}),
        ("sql", {"query": "SELECT * FROM read_parquet('**/*.parquet')"}),
        ("sql", {"query": "SELECT * FROM duckdb_tables()"}),
        ("schema", {}),
        ("search", {"question": "x" * 2001}),
    ]
    results = calls(server.url, alice, *hostile)
    every = "\n".join(text for _, text in results)
    assert SECRET not in every and "Friedrichshafen" not in every and "bob-2" not in every and "Pixel" not in every
    own, named, unknown, pathlike = results[:4]
    assert not own[0] and json.loads(own[1])["passages"][0]["source_ref"].startswith("m")
    # Another tenant's conversation is refused in the words used for one that does not exist.
    assert named[0] and unknown[0] and named[1].replace("bob-1", "X") == unknown[1].replace("nobody", "X")
    assert pathlike[0] and all(error for error, _ in results[4:6])
    rows, counts = (json.loads(text) for _, text in results[6:8])
    assert {r["conversation_id"] for r in rows["rows"]} == {"alice"} and counts["rows"] == [{"conversation_id": "alice", "n": 3}]
    union, subquery = (json.loads(text) for _, text in results[8:10])
    assert union["row_count"] == 3 and subquery["row_count"] == 0
    assert results[10][0]  # a table function reading files is refused
    schema = json.loads(results[12][1])
    assert schema["conversations"] == ["alice"] and schema["views"]["passages"]["rows"] == 3
    assert results[13] == (True, "search: question: String should have at most 2000 characters")


def test_a_prefix_token_reads_every_conversation_under_it_and_must_name_one(served):
    server, _, _, bob = served
    unnamed, named, other, sql = calls(server.url, bob, ("search", {"question": "What dog did Bob adopt?"}),
                                       ("search", {"question": "What dog did Bob adopt?", "conversation_id": "bob-2"}),
                                       ("search", {"question": "Where did Alice move?", "conversation_id": "alice"}),
                                       ("sql", {"query": "SELECT DISTINCT conversation_id FROM passages ORDER BY 1"}))
    assert unnamed[0] and "this token reads 2 conversations" in unnamed[1] and "alice" not in unnamed[1]
    assert not named[0] and "Pixel" in named[1] and other[0] and "Leeds" not in other[1]
    assert json.loads(sql[1])["rows"] == [{"conversation_id": "bob-1"}, {"conversation_id": "bob-2"}]


def test_forget_is_scoped_to_the_tokens_conversations_like_every_tool(served):
    server, _, alice, bob = served
    (other,) = calls(server.url, alice, ("forget", {"turns": ["m0"], "conversation_id": "bob-1"}))
    (unnamed,) = calls(server.url, bob, ("forget", {"turns": ["m0"]}))
    assert other == (True, "Error executing tool forget: conversation_id 'bob-1' is not in this store")
    assert unnamed[0] and "this token reads 2 conversations" in unnamed[1]
    (kept,) = calls(server.url, bob, ("sql", {"query": "SELECT count(*) AS n FROM passages WHERE text LIKE '%zeppelin%'"}))
    assert json.loads(kept[1])["rows"] == [{"n": 2}]


def test_an_unknown_argument_is_refused_not_ignored(served):
    server, _, alice, _ = served
    ((error, text),) = calls(server.url, alice, ("search", {"question": "Where did Alice move?", "conversation": "alice"}))
    assert error and text == "search has no argument 'conversation'; it takes: conversation_id, date, k, question"


def test_missing_wrong_and_revoked_tokens_get_401_and_a_new_token_works_without_a_restart(served):
    server, tokens, _, _ = served
    assert _post(server.url, None).status_code == 401
    assert _post(server.url, "seem_" + "x" * 43).status_code == 401
    assert _post(server.url, "not-even-a-token").headers["www-authenticate"].startswith("Bearer")
    carol = _tokens(tokens, "add", "--conversations", "alice")
    ((error, _),) = calls(server.url, carol, ("schema", {}))
    assert not error
    listed = json.loads(subprocess.run([SEEM, "tokens", "list", "--tokens-file", str(tokens)], capture_output=True,
                                       text=True, check=True).stdout)
    carol_id = listed[-1]["id"]
    assert "sha256" not in listed[-1]
    subprocess.run([SEEM, "tokens", "revoke", carol_id, "--tokens-file", str(tokens)], check=True, capture_output=True)
    assert _post(server.url, carol).status_code == 401


def test_an_oversized_request_body_is_refused_before_any_tool_runs(served):
    server, _, alice, _ = served
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": "search", "arguments": {"question": "x" * 2_000_000}}}).encode()
    assert _post(server.url, alice, body).status_code == 413


BOMBS = [
    "SELECT length(repeat('x', 2000000000) || repeat('y', 2000000000)) AS n",
    "SELECT length(string_agg(repeat('x', 1000000), '')) FROM range(5000)",
    "WITH RECURSIVE t(s) AS (SELECT 'x' UNION ALL SELECT s || s FROM t WHERE length(s) < 4000000000) SELECT max(length(s)) FROM t",
    "SELECT length(list(i)) AS n FROM range(300000000) t(i)",
]


def test_memory_bombs_fail_alone_with_one_line_while_another_tenant_keeps_answering(served):
    server, _, alice, bob = served
    answers: list[tuple[bool, str]] = []

    def other_tenant():
        for _ in range(3):
            answers.extend(calls(server.url, bob, ("search", {"question": "What dog did Bob adopt?", "conversation_id": "bob-2"}),
                                 ("sql", {"query": "SELECT count(*) AS n FROM passages"})))

    reader = threading.Thread(target=other_tenant)
    reader.start()
    bombed = calls(server.url, alice, *[("sql", {"query": q}) for q in BOMBS])
    reader.join(timeout=300)
    for (error, text), query in zip(bombed, BOMBS):
        assert error and "\n" not in text and ("memory" in text or "time limit" in text), (query, text)
    assert len(answers) == 6 and not any(error for error, _ in answers), answers
    assert server.proc.poll() is None
    after = calls(server.url, alice, ("sql", {"query": "SELECT count(*) AS n FROM passages"}))
    assert json.loads(after[0][1])["rows"] == [{"n": 3}]
    servers, workers = server.peak_rss_mb()
    # Each server process holds the models (MiniLM, spaCy); each SQL worker its tables and at most
    # sql.memory_limit_mb (256 here) beyond them, where the first bomb alone would take 4 GB.
    assert len(servers) == 2 and workers and max(servers) < 2500 and max(workers) < 256 + 400, (servers, workers)


# An aggregate far over sql.memory_limit_mb: with a temp folder DuckDB spills its groups, bob's text among
# them, there (about 12 s at 128 MB); without one it fails on the limit at once.
SPILLING = "SELECT p.text || i::VARCHAR AS t, count(*) AS n FROM passages p, range(4000000) r(i) GROUP BY t HAVING n > 1"
PLANTED = "quillbarrow"  # in .tmp/ of the server's working folder, where DuckDB spills by default
PEEKS = ["SELECT * FROM glob('.tmp/**')", "SELECT * FROM glob('**')", "SELECT content FROM read_blob('.tmp/**')",
         "SELECT content FROM read_text('.tmp/notes.txt')", "SELECT * FROM read_csv('.tmp/notes.txt')",
         "SELECT name, value FROM duckdb_settings() WHERE name IN ('temp_directory', 'allowed_directories', 'home_directory')",
         "SELECT * FROM duckdb_temporary_files()"]


def test_while_one_tenants_query_would_spill_another_reads_no_file_of_it_or_of_the_server(store, tmp_path):
    """The probe that read a tenant's turns: bob's big sort spilling while alice globbed the temp folder
    and read its files. Nothing spills now (the sort fails on the memory limit alone), and no file of
    the server's working folder, the store or another worker can be listed or read."""
    cwd = tmp_path / "served-from"
    (cwd / ".tmp").mkdir(parents=True)
    (cwd / ".tmp" / "notes.txt").write_text(f"word\n{PLANTED}\n")
    tokens = tmp_path / "tokens.json"
    alice = _tokens(tokens, "add", "--conversations", "alice")
    bob = _tokens(tokens, "add", "--prefix", "bob-")
    server = Server(store.resolve(), "--tokens-file", str(tokens), "--set", "sql.memory_limit_mb=128",
                    "--set", "sql.timeout_s=60", cwd=cwd)
    try:
        spilled: list[tuple[bool, str]] = []
        spiller = threading.Thread(target=lambda: calls(server.url, bob, ("sql", {"query": SPILLING}), out=spilled))
        spiller.start()
        peeks: list[tuple[bool, str]] = []
        while spiller.is_alive() or not peeks:
            calls(server.url, alice, *[("sql", {"query": q}) for q in PEEKS], out=peeks)
        spiller.join(timeout=300)
        ((error, text),) = spilled
        assert error and "memory" in text and "\n" not in text, text  # it fails alone, on its limit, in one line
        every = "\n".join(t for _, t in peeks)
        for never in (SECRET, "Friedrichshafen", PLANTED, str(cwd), str(store.resolve()), str(tmp_path)):  # a refusal echoes the path asked for, no other
            assert never not in every, never
        for (error, text), query in zip(peeks, PEEKS * (len(peeks) // len(PEEKS))):
            assert error or not json.loads(text)["rows"] or query.startswith("SELECT name"), (query, text)
        assert not list((cwd / ".tmp").glob("duckdb_temp*"))  # and nothing was spilled where the server runs
    finally:
        assert server.stop() == 0


def test_remember_adds_turns_only_for_a_write_token_on_its_own_conversations(store, tmp_path):
    """The MCP write tool over HTTP: a write token adds turns (a new conversation too) that its next
    search finds; a read-only token, another tenant's conversation and bad turns are refused in one
    line each, naming the turn and field as `Memory.add` does; nothing else changes."""
    import shutil

    copy = tmp_path / "store"
    shutil.copytree(store, copy, symlinks=True)  # a copied store is its own: the module's stays as it was
    tokens = tmp_path / "tokens.json"
    writer = _tokens(tokens, "add", "--conversations", "carol", "--write")
    reader = _tokens(tokens, "add", "--conversations", "carol")
    team = _tokens(tokens, "add", "--prefix", "team-", "--write")
    server = Server(copy, "--tokens-file", str(tokens), "--set", "agent.allow_add=true")
    turn = {"speaker": "Carol", "text": "I keep the spare bike lock in the garden shed.", "timestamp": "2024-05-01T08:00:00"}
    try:
        first, found = calls(server.url, writer, ("remember", {"turns": [turn, {**turn, "text": "The shed code is 4471."}]}),
                             ("search", {"question": "Where is the spare bike lock?"}))
        assert not first[0] and json.loads(first[1])["turns_added"] == 2 and json.loads(first[1])["conversation_id"] == "carol"
        assert not found[0] and "garden shed" in json.loads(found[1])["passages"][0]["text"]
        refused = calls(server.url, reader, ("remember", {"turns": [turn]}))
        refused += calls(server.url, writer, ("remember", {"turns": [turn], "conversation_id": "alice"}),
                         ("remember", {"turns": [turn], "conversation_id": "nobody"}),
                         ("remember", {"turns": [{"speaker": "Carol"}]}),
                         ("remember", {"turns": [{**turn, "colour": "red"}]}),
                         ("remember", {"turns": [{**turn, "text": 5}]}),
                         ("remember", {"turns": [turn] * 101}))
        refused += calls(server.url, team, ("remember", {"turns": [turn]}))
        assert all(error and "\n" not in text for error, text in refused), refused
        texts = [text for _, text in refused]
        assert "may not write" in texts[0] and "seem tokens add --write" in texts[0]
        assert texts[1].replace("alice", "X") == texts[2].replace("nobody", "X")  # another's is refused as one that is not there
        assert "turn 1" in texts[3] and "'text'" in texts[3] and "turn 1" in texts[4] and "colour" in texts[4]
        assert "text" in texts[5] and "100" in texts[6]
        assert "name the conversation_id" in texts[7]
        (new,) = calls(server.url, team, ("remember", {"turns": [turn], "conversation_id": "team-a"}))
        assert not new[0] and json.loads(new[1])["turns_added"] == 1
        (alice,) = calls(server.url, _tokens(tokens, "add", "--conversations", "alice"), ("sql", {"query": "SELECT count(*) AS n FROM passages"}))
        assert json.loads(alice[1])["rows"] == [{"n": 3}]
    finally:
        assert server.stop() == 0


def test_without_allow_add_there_is_no_remember_tool(served):
    server, _, alice, _ = served
    ((error, text),) = calls(server.url, alice, ("remember", {"turns": [{"speaker": "A", "text": "hi"}]}))
    assert error and "remember" in text


def _tool_post(url: str, name: str, arguments: dict) -> httpx.Response:
    """One tools/call as one POST (the server is stateless: no session to open first)."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}})
    return _post(url, None, body.encode())


def test_sigterm_lets_the_call_in_flight_finish_then_refuses_new_ones(store):
    server = Server(store, "--set", "sql.timeout_s=60")  # loopback, no tokens: the operator's own server
    slow = "SELECT sum(hash(i)) AS s FROM range(600000000) t(i)"  # a couple of seconds on one DuckDB thread
    answered: list[httpx.Response] = []
    caller = threading.Thread(target=lambda: answered.append(_tool_post(server.url, "sql", {"query": slow})))
    caller.start()
    deadline = time.monotonic() + 60
    while not _sql_workers(server.proc.pid):  # a pool starts a SQL worker when the call arrives
        assert time.monotonic() < deadline and caller.is_alive()
        time.sleep(0.05)
    time.sleep(0.3)
    server.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    try:
        late = _tool_post(server.url, "sql", {"query": "SELECT 1 AS one"}).status_code
    except httpx.ConnectError:
        late = "refused"
    caller.join(timeout=120)
    assert late in ("refused", 503)
    (response,) = answered
    result = response.json()["result"]
    assert response.status_code == 200 and not result["isError"] and json.loads(result["content"][0]["text"])["row_count"] == 1
    assert server.proc.wait(timeout=120) == 0  # the one signal stopped every process; none was forced
    server.proc.stderr.close()


def test_without_a_tokens_file_the_server_refuses_to_listen_beyond_loopback(store):
    done = subprocess.run([SEEM, "mcp", "--store", str(store), "--http", "0.0.0.0:0"], capture_output=True, text=True, timeout=120,
                          env={**os.environ})
    assert done.returncode == 2 and "needs tenants: set agent.tokens_file" in done.stderr and done.stderr.count("\n") == 1
