"""A real PostgreSQL server for the tests: Debian's binaries (``make postgres`` installs them), a fresh
cluster in a temp folder, listening on a free loopback port only, stopped and removed afterwards.

PostgreSQL refuses to run as root: when the tests run as root the cluster is made and run by the
``postgres`` system user (Debian's package creates it), in a folder that user owns; otherwise by the
user running the tests. Clients (``pg_dump``, psycopg2, Dagster) connect over TCP as the cluster's
superuser ``postgres`` with trust authentication, which loopback-only listening keeps to this host.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

SUPERUSER = "postgres"
SYSTEM_USER = "postgres"  # who runs the server when the tests run as root


def binaries() -> Path | None:
    """The folder holding initdb, pg_ctl and pg_dump of one PostgreSQL version (the newest installed),
    or None. Debian keeps them in /usr/lib/postgresql/<version>/bin, off the PATH."""
    found = shutil.which("pg_ctl")
    candidates = [Path(found).resolve().parent] if found else []
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name) if Path(p).parent.name.isdigit() else 0)
    candidates += [Path(p) for p in reversed(versions)]
    for folder in candidates:
        if all((folder / name).is_file() for name in ("initdb", "pg_ctl", "postgres", "pg_dump")):
            return folder
    return None


def missing_reason() -> str | None:
    """Why a PostgreSQL test cannot run here, or None when it can."""
    if binaries() is None:
        return "PostgreSQL is not installed (`make postgres` installs Debian's package; `make test` does it first)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SYSTEM_USER)
        except KeyError:
            return f"running as root and there is no {SYSTEM_USER!r} user to run PostgreSQL as (Debian's package creates it)"
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class PostgresServer:
    bin: Path
    root: Path  # owned by the server's user: data/, sockets/, server.log
    port: int = 0
    started_s: float = 0.0  # initdb and start, measured
    _user: pwd.struct_passwd | None = field(default=None, repr=False)

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def log(self) -> Path:
        return self.root / "server.log"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    # ---- the server's user ------------------------------------------------------------------------

    def _as_server_user(self, args: list[str], **kw) -> subprocess.CompletedProcess:
        if self._user is not None:
            kw.update(user=self._user.pw_uid, group=self._user.pw_gid, extra_groups=[],
                      env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.root), "LC_ALL": "C"})
        else:
            kw.setdefault("env", {**os.environ, "LC_ALL": "C"})
        return subprocess.run(args, cwd=self.root, capture_output=True, text=True, **kw)

    def start(self) -> PostgresServer:
        began = time.perf_counter()
        if os.geteuid() == 0:
            self._user = pwd.getpwnam(SYSTEM_USER)
            os.chown(self.root, self._user.pw_uid, self._user.pw_gid)
        (self.root / "sockets").mkdir()
        if self._user is not None:
            os.chown(self.root / "sockets", self._user.pw_uid, self._user.pw_gid)
        done = self._as_server_user([str(self.bin / "initdb"), "-D", str(self.data), "-U", SUPERUSER, "--auth=trust", "--encoding=UTF8",
                                     "--locale=C", "--no-sync", "--no-instructions"], timeout=120)
        if done.returncode:
            raise RuntimeError(f"initdb failed: {done.stderr[-2000:]}")
        for attempt in range(3):  # the free port may be taken between choosing and binding it
            self.port = _free_port()
            options = (f"-c listen_addresses=127.0.0.1 -p {self.port} -c unix_socket_directories={self.root / 'sockets'} "
                       "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=100")
            done = self._as_server_user([str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-o", options,
                                         "-w", "-t", "60", "start"], timeout=90)
            if done.returncode == 0:
                break
            if attempt == 2:
                raise RuntimeError(f"pg_ctl start failed: {done.stderr[-1000:]} {self.log.read_text()[-2000:] if self.log.exists() else ''}")
        self.started_s = time.perf_counter() - began
        return self

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            done = self._as_server_user([str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "-t", "60", "stop"], timeout=90)
            if done.returncode and (self.data / "postmaster.pid").exists():
                pid = int((self.data / "postmaster.pid").read_text().split()[0])  # the server this fixture started
                os.kill(pid, 9)
        shutil.rmtree(self.root, ignore_errors=True)

    # ---- clients ----------------------------------------------------------------------------------

    def execute(self, sql: str, database: str = "postgres") -> list[tuple]:
        """One statement in autocommit (CREATE DATABASE, CHECKPOINT, ...); the rows it returns."""
        import psycopg2

        con = psycopg2.connect(host="127.0.0.1", port=self.port, user=SUPERUSER, dbname=database)
        try:
            con.autocommit = True
            with con.cursor() as cur:
                cur.execute(sql)
                return cur.fetchall() if cur.description else []
        finally:
            con.close()

    def create_database(self) -> str:
        name = f"dagster_{uuid.uuid4().hex[:12]}"
        self.execute(f'CREATE DATABASE "{name}"')
        return name

    def pg_dump(self, database: str) -> bytes:
        """The whole database as SQL, from Debian's pg_dump run as a separate process."""
        done = subprocess.run([str(self.bin / "pg_dump"), "-h", "127.0.0.1", "-p", str(self.port), "-U", SUPERUSER, "--no-owner", database],
                              capture_output=True, timeout=300)
        assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
        return done.stdout

    def database_files(self, database: str) -> list[Path]:
        """The files holding the database's tables and indexes (after a CHECKPOINT, so shared buffers are
        on disk): what a copy of the data folder would carry, WAL aside."""
        self.execute("CHECKPOINT")
        (oid,) = self.execute(f"SELECT oid FROM pg_database WHERE datname = '{database}'")[0]
        folder = self.data / "base" / str(oid)
        return sorted(p for p in folder.iterdir() if p.is_file())

    def files_holding(self, database: str, needle: bytes) -> list[str]:
        return [p.name for p in self.database_files(database) if needle.lower() in p.read_bytes().lower()]


def start_server() -> PostgresServer:
    folder = binaries()
    assert folder is not None, missing_reason()
    # Not under pytest's tmp_path: its folders are private to the user running the tests, and the
    # server's user must reach its own folder. /tmp is world-traversable; mkdtemp's folder is 0700.
    root = Path(tempfile.mkdtemp(prefix="seem-pg-"))
    server = PostgresServer(folder, root)
    try:
        return server.start()
    except BaseException:
        server.stop()
        raise


def dagster_yaml(url: str) -> str:
    """An instance whose run, event-log and schedule storage are all on the PostgreSQL database ``url`` names.
    The URL names its driver: SQLAlchemy 2.1 takes a bare ``postgresql://`` for psycopg 3, and
    dagster-postgres installs psycopg2."""
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg2://" + url[len("postgresql://"):]
    return ("telemetry:\n  enabled: false\n"
            "storage:\n  postgres:\n"
            f"    postgres_url: {url}\n")
