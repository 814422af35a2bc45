"""`seem mcp --http` under load: many agents, one tenant per conversation, on this machine's cores.

    .venv/bin/python benchmarks/serve_load.py [--store DIR] [--levels 1,8,32] [--calls 160] [--seconds 120]

Without --store it builds the LoCoMo dev conversations into a temporary store first (a few minutes);
with one, it serves a copy, since the run publishes into it. The server runs on loopback with a
tokens file holding one token per conversation. At each level, that many clients ask the stored
questions of their conversations through the `search` tool (one POST per call, as the stateless
server takes them), until ``--calls`` calls or ``--seconds`` have passed. Printed per level:
throughput, p50/p95/p99 latency, errors and timeouts, beside in-process `Memory.search` on the same
questions in the same run. Also: every passage a response returns is checked against its token's
conversation (cross-tenant reads); a rebuild is published (`Memory.add`) while the highest level
runs and the next calls must see it; memory-bomb SQL is sent beside the load and must fail alone;
the server's and its SQL workers' peak RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from seem_dagster import Memory
from seem_dagster.schemas import Passages, Questions
from seem_dagster.store.snapshot import read_table, table_path

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo_dev7.json"
SEEM = Path(sys.executable).parent / "seem"
BOMBS = [
    "SELECT length(repeat('x', 2000000000) || repeat('y', 2000000000)) AS n",
    "SELECT length(string_agg(repeat('x', 1000000), '')) FROM range(5000)",
    "SELECT length(list(i)) AS n FROM range(300000000) t(i)",
]
LIVE = "serve-load-live"
NEW_TURN = "By the way, I just bought a vintage typewriter called the Olivetti Lettera at a flea market."


def family(pid: int) -> list[int]:
    """``pid`` and every process it started, and theirs."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    found, frontier = [pid], [pid]
    while frontier:
        frontier = [child for child, parent in parents.items() if parent in frontier]
        found += frontier
    return found


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of the server's processes so far (ended SQL workers' not counted)."""
    total = 0.0
    for p in family(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] if ordered else float("nan")


def peak_rss_mb(pid: int) -> dict[str, float]:
    """VmHWM of each of the server's processes, named by what it is."""
    peaks = {}
    for p in family(pid):
        try:
            status = Path(f"/proc/{p}/status").read_text()
            command = Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        kind = "sql worker" if "sql.worker" in command else "server"
        line = next(x for x in status.splitlines() if x.startswith("VmHWM:"))
        peaks[f"{kind} {p}"] = int(line.split()[1]) / 1024
    return peaks


class Server:
    def __init__(self, store: str, tokens: Path):
        self.proc = subprocess.Popen([str(SEEM), "mcp", "--store", store, "--http", "127.0.0.1:0", "--tokens-file", str(tokens)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        line = ""
        while "serving http://" not in line:
            if self.proc.poll() is not None:
                sys.exit(f"the server did not start: {self.proc.stderr.read()}")
            if select.select([self.proc.stderr], [], [], 1)[0]:
                line = self.proc.stderr.readline()
        self.url = line.split("serving ")[1].split(" ")[0]
        threading.Thread(target=lambda: shutil.copyfileobj(self.proc.stderr, sys.stderr), daemon=True).start()

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=120)


def body(name: str, arguments: dict) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}).encode()


async def call(client: httpx.AsyncClient, url: str, token: str, name: str, arguments: dict) -> tuple[float, bool, str]:
    started = time.perf_counter()
    response = await client.post(url, content=body(name, arguments), headers={
        "Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream", "Content-Type": "application/json"})
    seconds = time.perf_counter() - started
    if response.status_code != 200:
        return seconds, True, f"HTTP {response.status_code}"
    result = response.json().get("result") or {}
    return seconds, bool(result.get("isError", True)), (result.get("content") or [{}])[0].get("text", "")


class Level:
    def __init__(self, clients: int):
        self.clients = clients
        self.latencies: list[float] = []
        self.slowest: list[tuple[float, float, str]] = []  # (latency, seconds into the level, conversation)
        self.first_calls: list[float] = []  # each client's first call (a new connection), kept apart
        self.errors: list[str] = []
        self.timeouts = 0
        self.cross_tenant = 0
        self.seconds = 0.0

    @property
    def throughput(self) -> float:
        return (len(self.latencies) + len(self.first_calls)) / self.seconds
        self.server_cores = 0.0  # the server's CPU time over the level's wall time
        self.client_cores = 0.0  # this process's (the clients')


async def run_level(url: str, clients: int, work: list[tuple[str, str, str]], tokens: dict[str, str], owned: dict[str, set],
                    calls: int, seconds: float, timeout_s: float) -> Level:
    level = Level(clients)
    queue = asyncio.Queue()
    for i in range(calls):
        queue.put_nowait(work[i % len(work)])
    deadline = time.monotonic() + seconds

    async def client(http: httpx.AsyncClient):
        first = True
        async with http:
            while time.monotonic() < deadline:
                try:
                    cid, question, date = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                arguments = {"question": question, "k": 10, "conversation_id": cid, **({"date": date} if date else {})}
                try:
                    took, error, text = await call(http, url, tokens[cid], "search", arguments)
                except httpx.TimeoutException:
                    level.timeouts += 1
                    continue
                if error:
                    level.errors.append(text[:200])
                    continue
                if first:  # the steady state is what the percentiles describe; first calls are printed apart
                    level.first_calls.append(took)
                    first = False
                else:
                    level.latencies.append(took)
                    level.slowest = sorted([*level.slowest, (took, time.perf_counter() - started, cid)], reverse=True)[:5]
                returned = {p["passage_id"] for p in json.loads(text)["passages"]}
                level.cross_tenant += bool(returned - owned[cid])

    # One client per agent, each with its connection; made before the clock starts (making one
    # costs tens of milliseconds of this process's time, which the first calls would wait for).
    https = [httpx.AsyncClient(timeout=timeout_s) for _ in range(clients)]
    started = time.perf_counter()
    await asyncio.gather(*(client(http) for http in https))
    level.seconds = time.perf_counter() - started
    return level


async def bombs(url: str, token: str, cid: str) -> list[tuple[bool, str]]:
    async with httpx.AsyncClient(timeout=300) as http:
        return [(error, text) for _, error, text in
                [await call(http, url, token, "sql", {"query": q}) for q in BOMBS]]


def build_store(data: Path) -> str:
    store = tempfile.mkdtemp(prefix="seem-serve-")
    subprocess.run([str(SEEM), "build", "--input", str(data), "--store", store, "--quiet"], check=True)
    return store


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", help="a store with the LoCoMo dev conversations built (it is copied, not changed)")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--levels", default="1,8,32")
    parser.add_argument("--calls", type=int, default=160, help="search calls per level at most")
    parser.add_argument("--seconds", type=float, default=120, help="a level stops after this long")
    parser.add_argument("--baseline", type=int, default=40, help="questions asked in-process for the baseline")
    args = parser.parse_args()
    source = args.store or build_store(args.data)
    work_dir = Path(tempfile.mkdtemp(prefix="seem-serve-run-"))
    store = str(work_dir / "store")
    shutil.copytree(source, store, ignore=shutil.ignore_patterns("_eval"))

    memory = Memory.open(store)
    conversations = memory.conversations()
    owned, work = {}, []
    for cid in conversations:
        owned[cid] = set(memory.index(cid).passages[Passages.passage_id].to_list())
        questions = read_table(table_path(store, "questions", cid))
        for q, d in zip(questions[Questions.question].to_list(), questions[Questions.question_date].to_list()):
            work.append((cid, q, d.date().isoformat() if d else None))
    # Interleave conversations, so that concurrent clients ask of different tenants.
    by_cid = {c: [w for w in work if w[0] == c] for c in conversations}
    work = [w for group in zip(*by_cid.values()) for w in group]

    # A conversation of its own for the publish during the load (the benchmark's are built from a file).
    memory.add(LIVE, [{"speaker": "Caroline", "text": "I started learning the cello this spring.", "timestamp": "2023-11-01T10:00:00"}])
    owned[LIVE] = set(memory.index(LIVE).passages[Passages.passage_id].to_list())

    tokens_file = work_dir / "tokens.json"
    tokens = {}
    for cid in [*conversations, LIVE]:
        out = subprocess.run([str(SEEM), "tokens", "add", "--conversations", cid, "--tokens-file", str(tokens_file)],
                             capture_output=True, text=True, check=True).stdout
        tokens[cid] = out.strip().splitlines()[-1]

    # In-process baseline, same questions, warm.
    memory.search(work[0][0], work[0][1], k=10)
    inproc = []
    for cid, q, _ in work[: args.baseline]:
        started = time.perf_counter()
        memory.search(cid, q, k=10)
        inproc.append(time.perf_counter() - started)
    base_p50 = statistics.median(inproc)
    print(f"{len(conversations)} conversations, {len(work)} stored questions; in-process Memory.search p50 "
          f"{base_p50 * 1000:.0f} ms over {len(inproc)} questions")

    server = Server(store, tokens_file)
    timeout_s = memory.config.agent.call_timeout_s + 30
    levels = [int(x) for x in args.levels.split(",")]
    # Warm the server: each process loads its models and each conversation's memory at its first call
    # there, and which process takes a connection is the kernel's choice: several calls per conversation.
    firsts = [w for cid in conversations for w in [x for x in work if x[0] == cid][:16]]
    asyncio.run(run_level(server.url, 32, firsts, tokens, owned, len(firsts), 300, timeout_s))
    results: list[Level] = []
    publish: dict = {}
    bomb_results: list = []
    for clients in levels:
        extra = []
        if clients == max(levels):
            target = LIVE

            def publish_during_load():
                time.sleep(2)
                started = time.perf_counter()
                added = memory.add(target, [{"speaker": "Caroline", "text": NEW_TURN, "timestamp": "2023-12-01T10:00:00"}])
                publish.update(seconds=time.perf_counter() - started, build=added.build_id)

            def bomb_during_load():
                bomb_results.extend(asyncio.run(bombs(server.url, tokens[conversations[-1]], conversations[-1])))

            extra = [threading.Thread(target=publish_during_load), threading.Thread(target=bomb_during_load)]
            for t in extra:
                t.start()
        cpu, mine = cpu_seconds(server.proc.pid), time.process_time()
        level = asyncio.run(run_level(server.url, clients, work, tokens, owned, args.calls, args.seconds, timeout_s))
        level.server_cores = (cpu_seconds(server.proc.pid) - cpu) / level.seconds
        level.client_cores = (time.process_time() - mine) / level.seconds
        for t in extra:
            t.join()
        results.append(level)

    seen = None
    if publish:
        target = LIVE
        owned[target] = set(memory.index(target).passages[Passages.passage_id].to_list())
        _, error, text = asyncio.run(_once(server.url, tokens[target], target))
        seen = not error and any("Olivetti" in p["text"] for p in json.loads(text)["passages"][:3])
    peaks = peak_rss_mb(server.proc.pid)
    server.stop()
    memory.close()

    print(f"\n{'clients':>7} {'calls':>6} {'calls/s':>8} {'p50 ms':>7} {'p95 ms':>7} {'p99 ms':>7} {'errors':>6} {'timeouts':>8} "
          f"{'cross':>5} {'cores: server':>13} {'clients':>7}   (percentiles without each client's first call)")
    for level in results:
        lat = level.latencies
        print(f"{level.clients:>7} {len(lat) + len(level.first_calls):>6} {level.throughput:>8.2f} {percentile(lat, .5) * 1000:>7.0f} "
              f"{percentile(lat, .95) * 1000:>7.0f} {percentile(lat, .99) * 1000:>7.0f} {len(level.errors):>6} {level.timeouts:>8} "
              f"{level.cross_tenant:>5} {level.server_cores:>13.2f} {level.client_cores:>7.2f}")
        print(f"        first call of each client: max {max(level.first_calls, default=0) * 1000:.0f} ms; slowest others: "
              + ", ".join(f"{t * 1000:.0f} ms at {at:.1f} s ({cid})" for t, at, cid in level.slowest))
        for e in level.errors[:3]:
            print(f"        error: {e}")
    one = next((r for r in results if r.clients == 1), None)
    eight = next((r for r in results if r.clients == 8), None)
    top = results[-1]
    print(f"\nin-process Memory.search p50: {base_p50 * 1000:.0f} ms")
    if one and eight:
        ratio = eight.throughput / one.throughput
        p99 = percentile(eight.latencies, .99) / base_p50
        print(f"8 clients: throughput {ratio:.2f}x one client's (goal >= 1.6x); p99 {p99:.1f}x in-process p50 (goal <= 10x)")
    print(f"{top.clients} clients: {len(top.errors)} errors, {top.timeouts} timeouts (goal 0 and 0)")
    print(f"cross-tenant reads: {sum(r.cross_tenant for r in results)} (goal 0)")
    if publish:
        print(f"publish during the {top.clients}-client level: Memory.add took {publish['seconds']:.1f} s; the next search "
              f"{'sees' if seen else 'does NOT see'} the new turn")
    failed_alone = all(error and "\n" not in text for error, text in bomb_results)
    print(f"memory bombs during the {top.clients}-client level: {sum(e for e, _ in bomb_results)}/{len(BOMBS)} failed with one "
          f"line{' each' if failed_alone else ' (NOT all)'}; the other calls: {len(top.errors)} errors")
    for _, text in bomb_results:
        print(f"        {text[:160]}")
    servers = ", ".join(f"{v:.0f}" for k, v in peaks.items() if k.startswith("server")) or "none"
    workers = ", ".join(f"{v:.0f}" for k, v in peaks.items() if k.startswith("sql")) or "none"
    print(f"peak RSS: server processes {servers} MB (models and loaded memories); SQL workers {workers} MB "
          f"(bound: sql.memory_limit_mb={memory.config.sql.memory_limit_mb} beyond the tables each holds)")
    shutil.rmtree(work_dir, ignore_errors=True)


async def _once(url: str, token: str, cid: str):
    async with httpx.AsyncClient(timeout=120) as http:
        return await call(http, url, token, "search", {"question": "What did Caroline buy at the flea market?", "k": 10,
                                                       "conversation_id": cid})


if __name__ == "__main__":
    main()
