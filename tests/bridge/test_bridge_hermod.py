"""[[bridge]] between two Hermod brokers on loopback (issue 19 item 3): real broker processes,
real sockets, Proton clients at both ends. A message leaves the local queue only once the remote
accepted it; kills of either side lose nothing, and duplicates come only from the unconfirmed
window; a remote that refuses the login leaves the bridge backing off, visible, the broker fine;
a remote that rejects sends the message to the local dead-letter address."""
from __future__ import annotations

import socket
import subprocess
import sys
from collections import Counter

from proton import Message

from bridge_testing import (REMOTE_CONFIG, bridge_row, bridged_queue_config, free_port, numbered,
                            queue_row, read_all, send_all)
from hermod.broker.bridge import WINDOW
from hermod.broker.security.passwords import hash_password
from hermod_testing import ROOT, wait_for


def _remote(run_broker, tmp_path, port: int = 0, extra: str = ""):
    store = f"sqlite:///{tmp_path / 'remote.db'}"
    return run_broker("remote", REMOTE_CONFIG + extra, port=port, store=store)


def test_forwards_bodies_properties_and_order(run_broker, tmp_path):
    remote = _remote(run_broker, tmp_path)
    local = run_broker("local", bridged_queue_config(remote.url))
    sent = [Message(id=f"id-{i}", subject="s", body=f"payload {i}", durable=i % 2 == 0,
                    properties={"n": i, "kind": "order"}, annotations={"x-opt-origin": "dc1"})
            for i in range(50)]
    assert send_all(local.url, "outbound", sent) == 50
    got = read_all(remote.url, "inbound", 50)
    assert [m.id for m in got] == [f"id-{i}" for i in range(50)]
    assert [m.body for m in got] == [f"payload {i}" for i in range(50)]
    assert [m.properties for m in got] == [{"n": i, "kind": "order"} for i in range(50)]
    assert [m.durable for m in got] == [i % 2 == 0 for i in range(50)]
    assert all(m.subject == "s" and m.annotations.get("x-opt-origin") == "dc1" for m in got)
    wait_for(lambda: queue_row(local.url, "outbound")["messages"] == 0, message="local queue drained")
    row = bridge_row(local.url)
    assert (row["state"], row["forwarded"], row["backlog"], row["last_error"]) == ("up", 50, 0, "")


def _queue_then_start_remote(run_broker, tmp_path, total: int, store: str = "memory"):
    """A local broker holding `total` numbered messages for a remote that starts only then (so a
    kill lands mid-traffic), and that remote once it has taken some. Returns the local broker,
    its config, the remote and the remote's port."""
    port = free_port()
    config = bridged_queue_config(f"amqp://127.0.0.1:{port}")
    local = run_broker("local", config, store=store)
    assert send_all(local.url, "outbound", numbered(total)) == total
    remote = _remote(run_broker, tmp_path, port)
    wait_for(lambda: queue_row(remote.url, "inbound")["messages"] >= 300, timeout=30,
             message="some messages forwarded")
    return local, config, remote, port


def _all_arrived_duplicates_within_window(local, remote, total: int) -> None:
    wait_for(lambda: queue_row(local.url, "outbound")["messages"] == 0, timeout=90, message="backlog forwarded")
    got = read_all(remote.url, "inbound", total, idle=0.5)
    counts = Counter(m.properties["n"] for m in got)
    assert set(counts) == set(range(total))
    assert sum(c - 1 for c in counts.values()) <= WINDOW  # duplicates only from unconfirmed sends


def test_remote_killed_mid_traffic_loses_nothing(run_broker, tmp_path):
    total = 10000
    local, _, remote, port = _queue_then_start_remote(run_broker, tmp_path, total)
    remote.kill()
    wait_for(lambda: bridge_row(local.url)["state"] in ("backoff", "connecting"), message="bridge down")
    row = bridge_row(local.url)
    assert row["last_error"] and row["backlog"] > 0, row
    remote = _remote(run_broker, tmp_path, port)
    _all_arrived_duplicates_within_window(local, remote, total)
    assert bridge_row(local.url)["state"] == "up"


def test_local_killed_mid_traffic_resumes_from_its_store(run_broker, tmp_path):
    total = 10000
    store = f"sqlite:///{tmp_path / 'local.db'}"
    local, config, remote, _ = _queue_then_start_remote(run_broker, tmp_path, total, store)
    local.kill()
    assert queue_row(remote.url, "inbound")["messages"] < total  # the kill was mid-traffic
    local = run_broker("local", config, store=store)
    _all_arrived_duplicates_within_window(local, remote, total)


def test_messages_wait_while_the_remote_is_away_then_go(run_broker, tmp_path):
    port = free_port()
    local = run_broker("local", bridged_queue_config(f"amqp://127.0.0.1:{port}"))
    assert send_all(local.url, "outbound", numbered(20)) == 20
    wait_for(lambda: bridge_row(local.url)["state"] == "backoff", message="backing off")
    row = bridge_row(local.url)
    assert row["backlog"] == 20 and "cannot connect" in row["last_error"]
    remote = _remote(run_broker, tmp_path, port)
    got = read_all(remote.url, "inbound", 20, timeout=40)
    assert [m.properties["n"] for m in got] == list(range(20))


def _user_config(password: str) -> str:
    return ('[security]\nanonymous = false\nmechanisms = ["PLAIN"]\n'
            f'[[security.user]]\nname = "bridge"\npassword_hash = "{hash_password(password)}"\n'
            'roles = ["admin"]\n')


def test_remote_refusing_the_login_leaves_the_bridge_backing_off(run_broker, tmp_path):
    remote = _remote(run_broker, tmp_path, extra=_user_config("right-password"))
    config = bridged_queue_config(remote.url, user="bridge", password_env="BRIDGE_PW")
    local = run_broker("local", config, env={"BRIDGE_PW": "wrong-password"})
    assert send_all(local.url, "outbound", numbered(5)) == 5
    wait_for(lambda: bridge_row(local.url)["last_error"], message="bridge backing off")
    row = bridge_row(local.url)
    # Between tries the state is backoff, or connecting (the last error stays until a link is up).
    assert row["state"] in ("backoff", "connecting"), row
    assert row["last_error"].startswith("amqp:unauthorized-access"), row
    assert row["backlog"] == 5 and row["forwarded"] == 0
    stat = subprocess.run([sys.executable, "-m", "hermod.broker", "queue", "stat", "--url", local.url],
                          capture_output=True, text=True, timeout=30, cwd=ROOT)
    assert stat.returncode == 0, stat.stderr
    bridge_lines = [line.split() for line in stat.stdout.splitlines() if line.startswith("bridge to-remote")]
    assert len(bridge_lines) == 1, stat.stdout
    assert bridge_lines[0][5] in ("backoff", "connecting") and bridge_lines[0][6:9] == [
        "5", "0", "amqp:unauthorized-access:"], stat.stdout
    assert local.proc.poll() is None


def test_plain_login_with_the_password_from_the_environment(run_broker, tmp_path):
    remote = _remote(run_broker, tmp_path, extra=_user_config("s3cret"))
    config = bridged_queue_config(remote.url, user="bridge", password_env="BRIDGE_PW")
    local = run_broker("local", config, env={"BRIDGE_PW": "s3cret"})
    assert send_all(local.url, "outbound", numbered(10)) == 10
    got = read_all(remote.url, "inbound", 10, user="bridge", password="s3cret", allowed_mechs="PLAIN",
                   allow_insecure_mechs=True)
    assert [m.properties["n"] for m in got] == list(range(10))


def test_missing_password_variable_is_a_one_line_start_error(tmp_path):
    cfg = tmp_path / "local.toml"
    cfg.write_text(bridged_queue_config("amqp://127.0.0.1:1", user="bridge", password_env="NO_SUCH_VARIABLE_X"))
    env = {k: v for k, v in __import__("os").environ.items() if k != "NO_SUCH_VARIABLE_X"}
    run = subprocess.run([sys.executable, "-m", "hermod.broker", "run", "--port", "0", "--config", str(cfg),
                          "--store", "memory", "--http-port", "-1"], capture_output=True, text=True,
                         timeout=30, env=env, cwd=tmp_path)
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "bridge[0].password_env" in lines[0] and "NO_SUCH_VARIABLE_X" in lines[0], run.stderr


def test_remote_rejection_dead_letters_locally(run_broker, tmp_path):
    # The remote validates user-id: a message claiming another user is rejected there.
    remote = _remote(run_broker, tmp_path, extra="[security]\nvalidate_user_id = true\n")
    dla = ('[[address_settings]]\nmatch = "#"\ndead_letter_address = "DLQ"\n'
           '[[address]]\nname = "DLQ"\n  [[address.queue]]\n  name = "DLQ"\n')
    local = run_broker("local", bridged_queue_config(remote.url, extra=dla))
    messages = numbered(3)
    messages[1].user_id = b"mallory"
    assert send_all(local.url, "outbound", messages) == 3
    got = read_all(remote.url, "inbound", 2, idle=0.5)
    assert [m.properties["n"] for m in got] == [0, 2]
    dead = read_all(local.url, "DLQ", 1)
    assert dead[0].properties["n"] == 1 and dead[0].body == "body 1"
    wait_for(lambda: queue_row(local.url, "outbound")["messages"] == 0, message="nothing left on the queue")
    assert bridge_row(local.url)["forwarded"] == 2


def test_a_remote_that_never_answers_is_given_up_on_and_retried(run_broker):
    # A peer that accepts the socket and says nothing (a wrong port, a hung broker): the bridge's
    # idle timeout ([server] idle_timeout_s) ends the try, and it tries again later.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        url = f"amqp://127.0.0.1:{silent.getsockname()[1]}"
        local = run_broker("local", bridged_queue_config(url, extra="[server]\nidle_timeout_s = 1\n"))
        wait_for(lambda: any(why in bridge_row(local.url)["last_error"] for why in ("idle-timeout", "did not open")),
                 timeout=20, message="the bridge gives up on the silent peer")
        assert bridge_row(local.url)["state"] in ("backoff", "connecting")
        assert local.proc.poll() is None
    finally:
        silent.close()
