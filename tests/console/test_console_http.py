"""The console over plain HTTP: its assets (the page, scripts with a Content-Security-Policy,
credentials when [security] has users), and the paged queue list and overview it reads."""
from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request

from proton import Message

from console_helpers import open_view, wait_counts
from http_helpers import call, http_url, q, send
from test_http_security import CONFIG, PW, basic  # tests/http: the same users and roles


def fetch(url: str, headers: dict | None = None, method: str = "GET") -> tuple[int, dict, bytes]:
    req = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def test_the_page_and_its_modules_are_served_with_a_strict_policy(broker):
    base = http_url(broker)
    status, headers, body = fetch(base + "/")
    assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
    assert b'<script type="module" src="/console/app.js">' in body
    assert "script-src 'self'" in headers["Content-Security-Policy"] and headers["X-Content-Type-Options"] == "nosniff"
    status, headers, body = fetch(base + "/console/app.js")
    assert status == 200 and headers["Content-Type"].startswith("text/javascript") and b"import" in body
    scripts = b"".join(fetch(base + f"/console/{name}")[2] for name in
                       ("app.js", "dom.js", "queues.js", "queue.js", "body.js", "explain.js", "confirm.js",
                        "connections.js", "send.js", "overview.js", "addresses.js", "chart.js", "api.js"))
    for sink in (b".innerHTML", b".outerHTML", b"insertAdjacentHTML", b"document.write", b"eval("):
        assert sink not in scripts  # text nodes and attributes only: hostile names stay text
    assert fetch(base + "/console/nothing.js")[0] == 404
    assert fetch(base + "/console/../api.py")[0] == 404
    assert fetch(base + "/console/%2e%2e%2f__init__.py")[0] == 404
    assert fetch(base + "/", method="POST")[0] == 405


def test_queue_list_pages_searches_and_sorts_on_the_server(broker):
    base = http_url(broker)
    for name, n in (("a.one", 1), ("b.two", 3), ("c.one", 2)):
        send(broker.url, name, *[Message(body="x") for _ in range(n)])
    status, headers, body = fetch(base + "/api/queues?search=ONE&limit=1")
    assert status == 200 and headers["X-Total-Count"] == "2"
    assert [x["name"] for x in json.loads(body)] == ["a.one"]
    assert [x["name"] for x in call(base, "GET", "/api/queues?search=one&offset=1&limit=1")[1]] == ["c.one"]
    assert [x["name"] for x in call(base, "GET", "/api/queues?sort=messages")[1]][:3] == ["b.two", "c.one", "a.one"]
    assert [x["name"] for x in call(base, "GET", "/api/queues")[1]][:3] == ["a.one", "b.two", "c.one"]
    assert call(base, "GET", "/api/queues?sort=colour")[0] == 400
    assert call(base, "GET", "/api/queues?offset=-1")[0] == 400
    assert call(base, "GET", "/api/queues?limit=x")[0] == 400
    status, overview = call(base, "GET", "/api/overview")
    assert status == 200 and overview["queues"] >= 3 and overview["messages"] == 6
    assert overview["connections"] == 0 and overview["version"]


def test_with_users_the_console_needs_credentials_and_works_with_them(start_broker, browser):
    broker = start_broker(config=CONFIG)
    base = http_url(broker)
    status, headers, _ = fetch(base + "/")
    assert status == 401 and headers["WWW-Authenticate"] == 'Basic realm="hermod"'  # the browser prompts
    assert fetch(base + "/console/app.js", basic("nobody", PW["nobody"]))[0] == 403
    assert fetch(base + "/", basic("reader", PW["reader"]))[0] == 200
    token = base64.b64encode(f"admin:{PW['admin']}".encode()).decode()
    assert call(base, "POST", "/api/queues", {"name": "secured"}, headers={"Authorization": f"Basic {token}"})[0] == 201
    # what the user typed at the prompt, given in the URL: the page's own requests carry it too
    host = base.split("://", 1)[1]
    open_view(browser, f"http://reader:{q(PW['reader'])}@{host}", "queues")
    wait_counts(browser, {"secured": "0"})
