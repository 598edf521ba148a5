"""The client commands as an operator meets them (issue 33, findings 1 and 6): an ordinary
refusal is one line naming the AMQP condition, exit 2, never a traceback; a password never
appears in anything printed; credentials and a CA come from options, the URL from `--url` or
`$HERMOD_URL`. Real broker, the real `hermod` command."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from hermod.broker.security.passwords import hash_password

SECRET = "s3cret-Pa55"
CONFIG = f"""
[server]
max_message_size = 4096
[security]
anonymous = false
  [[security.user]]
  name = "admin"
  password_hash = "{hash_password(SECRET, iterations=64)}"
  roles = ["admin"]
  [[security.user]]
  name = "reader"
  password_hash = "{hash_password(SECRET, iterations=64)}"
  roles = ["reader"]
  [[security.permission]]
  match = "#"
  send = ["admin"]
  consume = ["admin", "reader"]
  browse = ["admin", "reader"]
  create_address = ["admin"]
  create_durable_queue = ["admin"]
  delete_queue = ["admin"]
  manage = ["admin"]
[[address_settings]]
match = "strict.#"
auto_create_addresses = false
auto_create_queues = false
"""


def hermod(*args: str, stdin: str | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hermod.broker", *args], capture_output=True, text=True,
                          timeout=60, input=stdin, env=dict(os.environ, **(env or {})))


def one_line_refusal(result: subprocess.CompletedProcess, *expected: str) -> str:
    out = result.stdout + result.stderr
    assert result.returncode == 2, out
    assert "Traceback" not in out, out
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for text in expected:
        assert text in lines[0], lines[0]
    assert SECRET not in out
    return lines[0]


@pytest.fixture
def secured(start_broker, tmp_path):
    b = start_broker(config=CONFIG)
    pw = tmp_path / "pw"
    pw.write_text(SECRET + "\n")
    return b, ["--url", b.url, "--user", "admin", "--password-file", str(pw)]


def test_a_round_trip_with_user_and_password_file(secured):
    b, admin = secured
    sent = hermod("producer", *admin, "--address", "cli.ok", "--count", "1", "--body", "hello",
                  "--property", "n=5", "--property", "who=ops")
    assert sent.returncode == 0, sent.stderr
    assert sent.stdout.strip() == "sent 1 message to cli.ok"
    browsed = hermod("queue", "browse", *admin, "cli.ok", "--json")
    assert browsed.returncode == 0, browsed.stderr
    import json
    [m] = json.loads(browsed.stdout)
    assert m["body"] == "hello" and m["properties"]["n"] == 5 and m["properties"]["who"] == "ops"


def test_password_stdin_and_hermod_url(secured):
    b, _ = secured
    r = hermod("queue", "stat", "--user", "admin", "--password-stdin", stdin=SECRET + "\n",
               env={"HERMOD_URL": b.url})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[:3] == ["address", "queue", "routing_type"]


def test_a_bad_selector_is_one_line(secured):
    b, admin = secured
    one_line_refusal(hermod("consumer", *admin, "--address", "cli.sel", "--count", "1", "--selector", "a = = b"),
                     "amqp:invalid-field", "cli.sel")


def test_an_unknown_address_with_auto_create_off_is_one_line(secured):
    b, admin = secured
    one_line_refusal(hermod("producer", *admin, "--address", "strict.none", "--count", "1"), "amqp:not-found")


def test_an_oversized_message_is_one_line(secured):
    b, admin = secured
    one_line_refusal(hermod("producer", *admin, "--address", "cli.big", "--count", "1", "--size", "100000"),
                     "amqp:")


def test_permission_denied_is_one_line(secured, tmp_path):
    b, _ = secured
    pw = tmp_path / "pw"
    one_line_refusal(hermod("producer", "--url", b.url, "--user", "reader", "--password-file", str(pw),
                            "--address", "cli.denied", "--count", "1"), "amqp:unauthorized-access", "send")
    one_line_refusal(hermod("queue", "purge", "--url", b.url, "--user", "reader", "--password-file", str(pw),
                            "cli.denied"))


def test_a_wrong_password_and_a_password_in_the_url_are_never_printed(secured):
    b, _ = secured
    host = b.url.split("://", 1)[1]
    for argv in (("queue", "stat", "--url", f"amqp://admin:{SECRET}x@{host}"),
                 ("producer", "--url", f"amqp://admin:{SECRET}@127.0.0.1:1", "--address", "a", "--count", "1"),
                 ("queue", "stat", "--url", f"amqp://admin:{SECRET}@127.0.0.1:1")):
        r = hermod(*argv)
        line = one_line_refusal(r)
        assert "admin" in line or "127.0.0.1" in line


def test_options_that_do_not_go_together_are_one_line(tmp_path):
    one_line_refusal(hermod("queue", "stat", "--url", "amqp://127.0.0.1:1", "--cert", "x.pem"), "--cert and --key")
    one_line_refusal(hermod("queue", "stat", "--url", "amqp://127.0.0.1:1", "--password-file", str(tmp_path / "no")),
                     "--password-file")


def test_tables_align_on_a_terminal_and_stay_single_spaced_when_piped():
    from hermod.broker.tools.table import aligned
    rows = [["address", "queue", "messages"], ["a", "a-long-name", 3], ["bb", "q", 12]]
    assert aligned(rows, pad=True) == ["address queue       messages", "a       a-long-name 3", "bb      q           12"]
    assert aligned(rows, pad=False) == ["address queue messages", "a a-long-name 3", "bb q 12"]
