"""A private PostgreSQL cluster for tests and benchmarks: initdb in a temp dir, a free port on
127.0.0.1, trust authentication, stopped and removed at the end.

Self-contained (standard library and psycopg) so that it can move to a top-level
tests/conftest.py or be imported by a benchmark. PostgreSQL refuses to run as root: when the
effective uid is 0 every server command runs as the `postgres` system user (created by the
Debian package) through `runuser`, and the temp dir is handed to that user.
"""
from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

SERVER_USER = "postgres"
START_TIMEOUT_S = 30.0


def find_bindir() -> Path | None:
    """The directory holding initdb and pg_ctl: PATH first, then Debian's versioned dirs."""
    on_path = shutil.which("initdb")
    if on_path and shutil.which("pg_ctl"):
        return Path(os.path.realpath(on_path)).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    return Path(candidates[-1]).parent if candidates else None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgCluster:
    """`with PgCluster() as pg: url = pg.create_database("t1")`."""

    def __init__(self, *, durable: bool = True, bindir: Path | None = None) -> None:
        self.bindir = bindir or find_bindir()
        if self.bindir is None:
            raise RuntimeError("PostgreSQL server binaries (initdb, pg_ctl) not found")
        # durable=False turns off fsync: fine for tests of behaviour, not for benchmarks.
        self.durable = durable
        self.port = free_port()
        self.tmp = Path(tempfile.mkdtemp(prefix="hermod-pg-"))
        self.data = self.tmp / "data"
        self.log = self.tmp / "server.log"
        self._as_other_user = os.geteuid() == 0
        if self._as_other_user:
            shutil.chown(self.tmp, SERVER_USER, SERVER_USER)
        self.running = False

    # -- lifecycle -----------------------------------------------------------------------------

    def __enter__(self) -> "PgCluster":
        try:
            self.initdb()
            self.start()
        except BaseException:
            self.destroy()
            raise
        return self

    def __exit__(self, *_exc: object) -> None:
        self.destroy()

    def initdb(self) -> None:
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", SERVER_USER,
                  "-E", "UTF8", "--locale=C", "--no-sync")

    def start(self) -> None:
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.tmp}"
        if not self.durable:
            options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-W", "-o", options,
                  "start")
        self._wait_ready()
        self.running = True

    def stop(self) -> None:
        if self.data.exists():
            self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop", check=False)
        self.running = False

    def destroy(self) -> None:
        if self.running:
            self.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- databases -----------------------------------------------------------------------------

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://{SERVER_USER}@127.0.0.1:{self.port}/{database}"

    def dsn(self, database: str = "postgres") -> str:
        return f"host=127.0.0.1 port={self.port} user={SERVER_USER} dbname={database}"

    def create_database(self, name: str) -> str:
        with psycopg.connect(self.dsn(), autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            connection.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def drop_database(self, name: str) -> None:
        with psycopg.connect(self.dsn(), autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    # -- helpers -------------------------------------------------------------------------------

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                with psycopg.connect(self.dsn(), connect_timeout=2):
                    return
            except psycopg.OperationalError as error:
                last = error
                time.sleep(0.05)  # polling interval, bounded by the deadline
        log = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
        raise RuntimeError(f"PostgreSQL did not accept connections on port {self.port} within "
                           f"{START_TIMEOUT_S:.0f} s: {last}\n{log}")

    def _run(self, program: str, *args: str, check: bool = True) -> None:
        command = [str(self.bindir / program), *args]
        if self._as_other_user:
            command = ["runuser", "-u", SERVER_USER, "--", *command]
        result = subprocess.run(command, cwd=self.tmp, capture_output=True, text=True,
                                env={**os.environ, "LC_ALL": "C"})
        if check and result.returncode != 0:
            raise RuntimeError(f"{program} failed ({result.returncode}): "
                               f"{result.stderr.strip() or result.stdout.strip()}")


def module_cluster():
    """Body of a module-scoped fixture: a private, non-durable cluster (skips the module where
    the PostgreSQL server binaries are not installed)."""
    import pytest

    if find_bindir() is None:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) are not installed")
    with PgCluster(durable=False) as cluster:
        yield cluster


def fresh_database(cluster: PgCluster, name: str, prepare=None):
    """Body of a per-test fixture: (cluster, database name, store URL) of a new database,
    `prepare(url)` run on it first (e.g. the schema upgrade), dropped afterwards."""
    url = cluster.create_database(name)
    if prepare is not None:
        prepare(url)
    yield cluster, name, url
    cluster.drop_database(name)
