"""The store from the command line: `hermod db upgrade --store URL` (once, twice: harmless, one
line each time) on both back-ends, and `hermod run --data DIR` (the SQLite store DIR/hermod.db).
"""
from __future__ import annotations

import subprocess
import sys

from proton import Message
from sqlalchemy import text

from hermod import store
from durable_clients import StoreView, body_of, queue_stats, receive_exactly, send_durable


def hermod(*args: str, cwd=None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hermod.broker", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)


def test_db_upgrade_twice_is_harmless_and_says_one_line(store_url, tmp_path):
    first = hermod("db", "upgrade", "--store", store_url, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert len(first.stdout.splitlines()) == 1 and first.stderr == ""
    assert store.schema.current_revision(store_url) == store.schema.head_revision()
    with StoreView(store_url) as view, view.engine.begin() as connection:
        connection.execute(text("INSERT INTO addresses (name, anycast, multicast, auto_created)"
                                " VALUES ('cli.kept', true, false, false)"))

    second = hermod("db", "upgrade", "--store", store_url, cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout and second.stderr == ""
    store.schema.check(store_url)  # at head and matching the models
    with StoreView(store_url) as view:
        assert view.address_names() == {"cli.kept"}


def test_db_upgrade_of_a_corrupt_sqlite_file_gives_one_line_and_exit_2(tmp_path):
    path = tmp_path / "hermod.db"
    path.write_bytes(b"\x00garbage" * 1000)
    result = hermod("db", "upgrade", "--store", f"sqlite:///{path}", cwd=tmp_path)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and result.stdout == ""


def test_run_with_data_dir_creates_the_sqlite_store_there(start_broker, tmp_path):
    data = tmp_path / "data"
    broker = start_broker("--data", str(data), store=None)
    database = data / "hermod.db"
    assert database.is_file()
    store_url = f"sqlite:///{database}"
    assert store.schema.current_revision(store_url) == store.schema.head_revision()
    send_durable(broker.url, "cli.data", [Message(body="kept", durable=True)])

    broker.kill()
    broker = start_broker("--data", str(data), store=None)
    assert queue_stats(broker.url)["cli.data"]["messages"] == 1
    assert [body_of(m) for m in receive_exactly(broker.url, "cli.data", 1)] == ["kept"]


def test_store_password_never_appears_in_cli_output(durable_pg_cluster, tmp_path):
    secret = "s3cret-pw"
    # Trust authentication accepts any password: the URL works and carries one.
    name = "hermod_cli_password"
    durable_pg_cluster.create_database(name)
    try:
        url = durable_pg_cluster.url(name).replace("postgres@", f"postgres:{secret}@")
        upgraded = hermod("db", "upgrade", "--store", url, cwd=tmp_path)
        assert upgraded.returncode == 0, upgraded.stderr
        unreachable = url.replace(f":{durable_pg_cluster.port}/", ":1/")
        failed = hermod("run", "--port", "0", "--store", unreachable, cwd=tmp_path)
        assert failed.returncode == 2
        for output in (upgraded.stdout, upgraded.stderr, failed.stdout, failed.stderr):
            assert secret not in output
    finally:
        durable_pg_cluster.drop_database(name)
