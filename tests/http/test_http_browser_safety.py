"""Other web pages cannot act through a user's browser (issue 28, findings 2 and 19).

Every POST and DELETE needs `Content-Type: application/json` (else 400); a request whose `Origin`
is present and not the listener's own (or in `[http] allowed_origins`) gets 403; a `Host` that is
not the listener's host, the address the request arrived on, a loopback name or address, or in
`[http] allowed_hosts` gets 421 (`/health` answers any Host). Missing or wrong credentials get
401 with `WWW-Authenticate: Basic realm="hermod"`; a known user without the right gets 403.
Raw HTTP over real sockets: the headers are exactly what a browser would send."""
from __future__ import annotations

import base64
import http.client
import json
import subprocess
import sys
from urllib.parse import urlsplit

import pytest
from proton import Message

from hermod.broker.security.passwords import hash_password
from http_helpers import call, http_url, send

ADMIN_PW = "admin-secret"
USERS = f"""
[[security.user]]
name = "admin"
password_hash = "{hash_password(ADMIN_PW, iterations=64)}"
roles = ["admin"]
[[security.user]]
name = "guest"
password_hash = "{hash_password("guest-secret", iterations=64)}"
roles = ["guest"]
[[security.permission]]
match = "#"
send = ["admin", "anonymous"]
consume = ["admin"]
browse = ["admin"]
manage = ["admin"]
create_address = ["admin", "anonymous"]
create_durable_queue = ["admin", "anonymous"]
"""


def raw(base: str, method: str, path: str, headers: dict | None = None,
        body: bytes | None = None) -> tuple[int, dict, object]:
    """(status, headers, decoded answer): only the headers given are sent, `Host` included when
    given (else the URL's)."""
    u = urlsplit(base)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    headers = dict(headers or {})
    try:
        conn.putrequest(method, path, skip_host="Host" in headers, skip_accept_encoding=True)
        for k, v in headers.items():
            conn.putheader(k, v)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        resp = conn.getresponse()
        data = resp.read()
        answer = json.loads(data) if data and "json" in resp.headers.get("Content-Type", "") else data
        return resp.status, dict(resp.headers), answer
    finally:
        conn.close()


def basic(user: str, password: str) -> dict:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def own_host(base: str) -> str:
    return urlsplit(base).netloc


def filled(broker, base: str, queue: str = "victim", n: int = 6, headers: dict | None = None) -> None:
    send(broker.url, queue, *(Message(body=f"m{i}") for i in range(n)))
    assert call(base, "GET", f"/api/queues/{queue}", headers=headers)[1]["messages"] == n


# -- Content-Type ---------------------------------------------------------------------------------


def test_a_text_plain_post_from_another_page_purges_nothing(broker):
    """Finding 2 as reported: a form-like text/plain POST with a foreign Origin."""
    base = http_url(broker)
    filled(broker, base)
    status, _h, answer = raw(base, "POST", "/api/queues/victim/purge",
                             {"Content-Type": "text/plain", "Origin": "http://evil.example"}, b"{}")
    assert status in (400, 403), (status, answer)
    assert call(base, "GET", "/api/queues/victim")[1]["messages"] == 6


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded",
                                          "multipart/form-data; boundary=x", "application/jsonp"])
def test_post_and_delete_without_json_content_type_are_400_and_change_nothing(broker, content_type):
    base = http_url(broker)
    filled(broker, base)
    headers = {"Content-Type": content_type} if content_type else {}
    status, _h, answer = raw(base, "POST", "/api/queues/victim/purge", headers, b"{}")
    assert status == 400 and "Content-Type" in answer["error"], (status, answer)
    status, _h, answer = raw(base, "DELETE", "/api/queues/victim", headers)
    assert status == 400, (status, answer)
    status, _h, answer = raw(base, "POST", "/api/queues/victim/purge", headers)  # no body at all
    assert status == 400, (status, answer)
    assert call(base, "GET", "/api/queues/victim")[1]["messages"] == 6


def test_json_content_type_with_a_charset_is_accepted(broker):
    base = http_url(broker)
    filled(broker, base)
    status, _h, answer = raw(base, "POST", "/api/queues/victim/purge",
                             {"Content-Type": "Application/JSON; charset=utf-8"}, b"{}")
    assert (status, answer) == (200, {"removed": 6})
    assert raw(base, "DELETE", "/api/queues/victim", {"Content-Type": "application/json"})[0] == 204


# -- Origin ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("origin", ["http://evil.example", "null", "https://127.0.0.1.evil.example"])
def test_a_foreign_origin_gets_403_on_reads_and_writes(broker, origin):
    base = http_url(broker)
    filled(broker, base)
    json_post = {"Content-Type": "application/json", "Origin": origin}
    status, _h, answer = raw(base, "POST", "/api/queues/victim/purge", json_post, b"{}")
    assert status == 403 and "Origin" in answer["error"], (status, answer)
    assert raw(base, "GET", "/api/queues/victim/messages", {"Origin": origin})[0] == 403
    assert raw(base, "GET", "/metrics", {"Origin": origin})[0] == 403
    assert call(base, "GET", "/api/queues/victim")[1]["messages"] == 6


def test_the_listeners_own_origin_is_served(broker):
    base = http_url(broker)
    filled(broker, base)
    status, _h, answer = raw(base, "POST", "/api/queues/victim/purge",
                             {"Content-Type": "application/json", "Origin": base}, b"{}")
    assert (status, answer) == (200, {"removed": 6})


def test_allowed_origins_admits_a_listed_origin_only(start_broker):
    b = start_broker(config='[http]\nallowed_origins = ["https://console.example:8443"]\n')
    base = http_url(b)
    filled(b, base)
    assert raw(base, "GET", "/api/queues", {"Origin": "https://console.example:8443"})[0] == 200
    assert raw(base, "GET", "/api/queues", {"Origin": "https://console.example"})[0] == 403
    assert raw(base, "GET", "/api/queues", {"Origin": "http://evil.example"})[0] == 403


def test_with_users_cached_credentials_do_not_help_another_page(start_broker):
    b = start_broker(config=USERS)
    base = http_url(b)
    creds = basic("admin", ADMIN_PW)
    filled(b, base, headers=creds)
    status, _h, _a = raw(base, "POST", "/api/queues/victim/purge",
                         {**creds, "Content-Type": "text/plain", "Origin": "http://evil.example"}, b"{}")
    assert status in (400, 403)
    status, _h, _a = raw(base, "GET", "/api/queues/victim/messages", {**creds, "Host": "evil.example"})
    assert status == 421
    assert call(base, "GET", "/api/queues/victim", headers=creds)[1]["messages"] == 6


# -- Host (DNS rebinding) -------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8161", "127.0.0.1.nip.io", "10.9.8.7"])
def test_a_foreign_host_gets_421_and_no_message_bodies(broker, host):
    base = http_url(broker)
    filled(broker, base)
    status, _h, answer = raw(base, "GET", "/api/queues/victim/messages", {"Host": host})
    assert status == 421, (status, answer)
    assert b"m0" not in json.dumps(answer).encode()
    assert raw(base, "GET", "/metrics", {"Host": host})[0] == 421
    assert raw(base, "GET", "/", {"Host": host})[0] == 421
    assert raw(base, "POST", "/api/queues/victim/purge",
               {"Host": host, "Content-Type": "application/json"}, b"{}")[0] == 421
    assert call(base, "GET", "/api/queues/victim")[1]["messages"] == 6


@pytest.mark.parametrize("host", ["localhost", "LOCALHOST:1234", "127.0.0.1", "127.0.0.1:9", "[::1]",
                                  "[::1]:8161"])
def test_loopback_hosts_and_the_arrival_address_are_served(broker, host):
    base = http_url(broker)
    assert raw(base, "GET", "/api/queues", {"Host": host})[0] == 200
    assert raw(base, "GET", "/api/queues", {"Host": own_host(base)})[0] == 200


def test_health_answers_any_host(broker):
    base = http_url(broker)
    status, _h, answer = raw(base, "GET", "/health", {"Host": "evil.example"})
    assert (status, answer) == (200, {"status": "ok"})


def test_allowed_hosts_admits_a_listed_name(start_broker):
    b = start_broker(config='[http]\nallowed_hosts = ["hermod.internal"]\n')
    base = http_url(b)
    assert raw(base, "GET", "/api/queues", {"Host": "hermod.internal:8161"})[0] == 200
    assert raw(base, "GET", "/api/queues", {"Host": "other.internal"})[0] == 421


@pytest.mark.parametrize("text, what", [('allowed_hosts = "x"', "allowed_hosts"),
                                        ("allowed_origins = [1]", "allowed_origins"),
                                        ("allowed_origin = []", "allowed_origin")])
def test_bad_http_keys_are_config_errors(text, what, tmp_path):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(f"[http]\n{text}\n")
    p = subprocess.run([sys.executable, "-m", "hermod.broker", "run", "--port", "0", "--store", "memory",
                        "--config", str(cfg)], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and f"http.{what}" in p.stdout + p.stderr, p.stdout + p.stderr


# -- 401 and WWW-Authenticate (finding 19) --------------------------------------------------------


@pytest.mark.parametrize("creds", [None, ("admin", "wrong"), ("ghost", "whatever"), ("admin", "")])
def test_missing_or_wrong_credentials_get_401_with_a_basic_challenge(start_broker, creds):
    b = start_broker(config=USERS)
    base = http_url(b)
    headers = basic(*creds) if creds else {}
    for method, path, body in (("GET", "/api/queues", None), ("GET", "/metrics", None), ("GET", "/", None),
                               ("POST", "/api/addresses", b'{"name": "x"}')):
        extra = {"Content-Type": "application/json"} if body else {}
        status, h, _answer = raw(base, method, path, {**headers, **extra}, body)
        assert status == 401, (method, path, status)
        assert h.get("WWW-Authenticate") == 'Basic realm="hermod"', h
    assert "x" not in [a["name"] for a in call(base, "GET", "/api/addresses",
                                               headers=basic("admin", ADMIN_PW))[1]]


def test_a_known_user_without_the_right_gets_403_without_a_challenge(start_broker):
    b = start_broker(config=USERS)
    base = http_url(b)
    status, h, answer = raw(base, "GET", "/api/queues", basic("guest", "guest-secret"))
    assert status == 403 and "WWW-Authenticate" not in h, (status, h, answer)
