"""`seem mcp --http HOST:PORT`: the memory tools over MCP's streamable HTTP transport, for many agents.

- ``/mcp``: the MCP endpoint (stateless: each POST is one JSON-RPC message answered in JSON, so any
  number of clients and server restarts need no session affinity). ``/health``: 200 while serving,
  503 while stopping; it says nothing of the store.
- Tenants: with ``agent.tokens_file``, every request to ``/mcp`` needs ``Authorization: Bearer
  <token>``; a missing, unknown or revoked token gets 401 before the MCP layer reads the body. The
  token's scope (``tokens.Tenant``) is put on the request and every tool call reads through it
  (``MemoryTools.scoped``). The file is re-read when it changes. Without a tokens file the server
  binds only to loopback, and every caller sees every conversation (the operator's own use).
- Bodies: a POST's body is read whole before the MCP layer sees it; a client that goes away before
  sending all of it is let go without a word (nothing to answer, nothing for the log). A tool call
  whose arguments hold a string that is no text (JSON's lone "\\ud800") is answered with a tool error
  naming the argument, where the SDK's JSON parser would refuse the whole message unnamed.
- Bounds: the request body (``agent.max_request_bytes``, the SDK answers 413), the calls run at
  once (``agent.concurrent_calls``) and each call's time (``agent.call_timeout_s``); SQL runs in
  worker processes under ``sql.memory_limit_mb`` (``sql/pool.py``).
- Processes: ``agent.http_processes`` of them, each with its own socket on the port
  (``SO_REUSEPORT``) and its own loaded models; the first starts the others and says it serves only
  once every one listens.
- SIGTERM or SIGINT: the listening sockets close, new requests on open connections get 503, calls
  in flight finish (up to ``GRACE_S``), then the processes exit.
"""

from __future__ import annotations

import contextlib
import gc
import ipaddress
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys

from threadpoolctl import threadpool_limits

from seem_dagster.agent.mcp_server import build_server, quiet_libraries, unreadable_argument
from seem_dagster.agent.tokens import TokensFile
from seem_dagster.agent.tools import MemoryTools, ToolInputError

TENANT = "seem.tenant"  # the ASGI scope key the bearer check fills (a client cannot set scope keys)
OPEN = object()  # no tokens file: the loopback operator, every conversation
GRACE_S = 60  # calls in flight at a stop get this long to finish


class ServeError(ValueError):
    """The server cannot start as asked: one line."""


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``:PORT`` (loopback) or ``[v6]:PORT``; port 0 picks a free one."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ServeError(f"--http {text!r}: expected HOST:PORT, for example 127.0.0.1:8765")
    host = host.strip("[]") or "127.0.0.1"
    return host, int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _bearer(scope) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == b"authorization":
            kind, _, token = value.decode("latin-1").partition(" ")
            return token.strip() if kind.lower() == "bearer" else None
    return None


async def _answer(send, status: int, body: dict, headers: list | None = None) -> None:
    payload = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()),
                            *(headers or [])]})
    await send({"type": "http.response.body", "body": payload})


class Gate:
    """The ASGI app in front of the MCP app: health, draining, the bearer check, and reading the body."""

    def __init__(self, inner, tokens: TokensFile | None, max_body: int = 1 << 20):
        self.inner = inner
        self.tokens = tokens
        self.draining = False
        self.max_body = max_body

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":  # lifespan: the MCP app's session manager starts and stops with it
            return await self.inner(scope, receive, send)
        if scope["path"] == "/health":
            if self.draining:
                return await _answer(send, 503, {"status": "stopping"})
            return await _answer(send, 200, {"status": "ok"})
        if self.draining:
            return await _answer(send, 503, {"error": "the server is stopping"}, [(b"connection", b"close")])
        if self.tokens is None:
            scope[TENANT] = OPEN
        else:
            tenant = self.tokens.tenant(_bearer(scope))
            if tenant is None:
                return await _answer(send, 401, {"error": "a valid bearer token is required"},
                                     [(b"www-authenticate", b'Bearer realm="seem-memory"')])
            scope[TENANT] = tenant
        if scope.get("method") != "POST":
            return await self.inner(scope, receive, send)
        read = await _read_body(receive, self.max_body)
        if read is None:
            return None  # the client left mid-body: no one to answer
        body, receive = read
        refused = _unreadable_call(body)
        if refused is not None:
            return await _answer(send, 200, refused)
        return await self.inner(scope, receive, send)


async def _read_body(receive, limit: int):
    """(the body, a ``receive`` that hands it on), or None when the client disconnected before its end.
    Past ``limit`` bytes the reading stops and the SDK, handed what came and the rest, answers 413."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if not message.get("more_body", False) or size > limit:
            break
    body, more = b"".join(chunks), message.get("more_body", False)
    handed = False

    async def replay():
        nonlocal handed
        if not handed:
            handed = True
            return {"type": "http.request", "body": body, "more_body": more}
        return await receive()

    return body, replay


# JSON's escape of a surrogate (a high \\ud800-\\udbff or a low \\udc00-\\udfff): only a body holding one is parsed here.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _unreadable_call(body: bytes) -> dict | None:
    """The JSON-RPC answer (a tool error naming the argument) to a tools/call whose arguments hold a
    lone surrogate, else None (the SDK reads everything else, a pair of surrogates included)."""
    if not _SURROGATE_ESCAPE.search(body):
        return None
    try:
        message = json.loads(body)
    except ValueError:
        return None  # the SDK says what is wrong with it
    if not isinstance(message, dict) or message.get("method") != "tools/call" or not isinstance(message.get("params"), dict):
        return None
    params = message["params"]
    arguments = params.get("arguments")
    if not isinstance(arguments, dict):
        return None
    why = unreadable_argument(str(params.get("name"))[:80].encode("utf-8", "backslashreplace").decode(), arguments)
    if why is None:
        return None
    return {"jsonrpc": "2.0", "id": message.get("id"), "result": {"content": [{"type": "text", "text": why}], "isError": True}}


def tenant_scope(tools: MemoryTools):
    """The tools one call may use: its request's tenant's view (a call without one is refused)."""

    def scope(ctx) -> MemoryTools:
        try:
            request = ctx.request_context.request
        except (AttributeError, ValueError):
            request = None
        tenant = request.scope.get(TENANT) if request is not None else None
        if tenant is None:
            raise ToolInputError("this call carries no verified token")
        return tools if tenant is OPEN else tools.scoped(tenant)

    return scope


def build_app(tools: MemoryTools, tokens: TokensFile | None, host: str = "127.0.0.1") -> Gate:
    from mcp.server.transport_security import TransportSecuritySettings

    server = build_server(tools, scope=tenant_scope(tools))
    agent = tools.config.agent
    # DNS-rebinding protection checks Host against the bound address; behind a proxy or on a
    # public address the bearer token is what guards the memory.
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    inner = server.streamable_http_app(stateless_http=True, json_response=True, max_request_body_size=agent.max_request_bytes,
                                       transport_security=security, host=host)
    return Gate(inner, tokens, agent.max_request_bytes)


def open_tokens(tools: MemoryTools, host: str) -> TokensFile | None:
    path = tools.config.agent.tokens_file
    if path is None:
        if not is_loopback(host):
            raise ServeError(f"--http {host}: serving beyond loopback needs tenants: set agent.tokens_file "
                             "(`seem tokens add --tokens-file F --conversations ...` makes one)")
        return None
    return TokensFile(path)


def serve_http(tools: MemoryTools, address: str) -> None:
    """Serve until SIGTERM or SIGINT. Prints ``seem mcp: serving http://HOST:PORT/mcp`` on stderr
    once listening (with the port chosen when 0 was asked). ``agent.http_processes`` processes share
    the port: this one and its children, each with its own loaded memory; a stop
    signal here is passed on to them, and each lets its calls in flight finish."""
    quiet_libraries()
    host, port = parse_address(address)
    tokens = open_tokens(tools, host)
    sock = _listen(host, port, address)
    children: list[subprocess.Popen] = []

    def stop_children():
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)

    try:
        children += [_spawn(sock, tools, host) for _ in range(tools.config.agent.http_processes - 1)]
        _prepare(tools)  # meanwhile the children prepare; all before the line that says the server serves
        # Until a child listens, every connection goes to this process's socket and stays there (clients
        # keep theirs open), leaving the child cold: the line below waits for each child's word.
        ready = sum(_ready(child) for child in children) + 1
        server = _server(build_app(tools, tokens, host), stop_children)
        bound = sock.getsockname()
        shown = f"[{bound[0]}]" if sock.family == socket.AF_INET6 else bound[0]
        scope = f"{len(tokens)} tokens from {tokens.path}" if tokens is not None else "no tokens file: every conversation, loopback only"
        print(f"seem mcp: serving http://{shown}:{bound[1]}/mcp ({scope}; {ready} processes)", file=sys.stderr, flush=True)
        server.run(sockets=[sock])
    finally:
        stop_children()
        for child in children:
            try:
                child.wait(timeout=GRACE_S + 10)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        sock.close()
        tools.close()


def _listen(host: str, port: int, address: str) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Each process listens on its own socket bound to the same port, and the kernel spreads new
    # connections across them; with one shared socket the least busy process tends to accept every
    # connection (clients keep theirs open), and one process uses one core.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
    except OSError as err:
        sock.close()
        raise ServeError(f"--http {address}: cannot listen there ({err.strerror})") from None
    sock.listen(256)  # connections queue from here while the processes start
    return sock


def _prepare(tools: MemoryTools) -> None:
    """Before a process takes calls."""
    tools.memory.warm()  # the models load before the first caller, not during its call
    # Calls run side by side in threads, one core's worth each: BLAS threads of their own would
    # only contend with the other calls for the same cores.
    threadpool_limits(1)
    # What is loaded by now (the models, the libraries) lives as long as the process: frozen, the
    # collector no longer walks it, and its full collections stop pausing calls for 100-250 ms.
    gc.collect()
    gc.freeze()


def _server(gate: Gate, on_stop=None):
    """The uvicorn server for one process. SIGTERM and SIGINT are taken from here on (not only once it
    runs): a stop signal at any moment after this is a graceful stop."""
    import uvicorn

    class Server(uvicorn.Server):
        def handle_exit(self, sig, frame):  # new requests are refused from the first signal on
            gate.draining = True
            if on_stop is not None:
                on_stop()
            super().handle_exit(sig, frame)

        @contextlib.contextmanager
        def capture_signals(self):
            # Installed at construction; uvicorn's own would re-raise the signal after its graceful
            # stop, where a stop asked for is a clean exit here.
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

    config = uvicorn.Config(gate, log_level="warning", access_log=False, lifespan="on", timeout_graceful_shutdown=GRACE_S)
    server = Server(config)
    previous = {sig: signal.signal(sig, server.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
    return server


# ---- the other processes ------------------------------------------------------------------------

CHILD = "SEEM_MCP_HTTP_CHILD"  # the environment variable that hands a child its address and settings


def _spawn(sock: socket.socket, tools: MemoryTools, host: str) -> subprocess.Popen:
    """A fresh interpreter (not a fork: the parent's threads and loaded libraries stay behind) that
    serves on the same port with the same settings."""
    spec = {"port": sock.getsockname()[1], "host": host, "conversation": tools.default, "config": tools.config.model_dump(mode="json")}
    return subprocess.Popen([sys.executable, "-m", "seem_dagster.agent.http_server"], env={**os.environ, CHILD: json.dumps(spec)},
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)


READY = b"listening\n"  # a child's one line on its stdout, once its socket listens
START_S = 300  # a child that says nothing for this long is left out


def _ready(child: subprocess.Popen) -> bool:
    """Whether the child listens (it says so on its stdout); one that died or is silent is left out
    and named on stderr, and the server carries on with the others."""
    said = child.stdout.readline() if select.select([child.stdout], [], [], START_S)[0] else b""
    child.stdout.close()
    if said == READY:
        return True
    print(f"seem mcp: server process {child.pid} did not start ({'exit ' + str(child.poll()) if child.poll() is not None else 'silent'}); "
          "serving without it", file=sys.stderr, flush=True)
    if child.poll() is None:
        child.kill()
    return False


def _die_with_parent() -> None:
    """Linux: this process gets SIGTERM when its parent ends, so a killed server leaves no children."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def child_main() -> None:
    from seem_dagster.memory import Memory

    spec = json.loads(os.environ.pop(CHILD))
    _die_with_parent()
    quiet_libraries()
    tools = MemoryTools(Memory.open(config=spec["config"]), spec["conversation"])
    path = tools.config.agent.tokens_file
    _prepare(tools)
    server = _server(build_app(tools, TokensFile(path) if path is not None else None, spec["host"]))
    sock = _listen(spec["host"], spec["port"], f"{spec['host']}:{spec['port']}")
    os.write(1, READY)  # to the parent, which says the server serves once every process does
    os.dup2(2, 1)  # nothing else goes to the parent's pipe
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
        tools.close()


if __name__ == "__main__":
    child_main()
