"""A small W3C WebDriver client for the console tests: Debian's `chromedriver` driving headless
`chromium`, over the standard library's HTTP.

Why not Selenium: the tests need a dozen WebDriver commands (navigate, find, click, type, run a
script, screenshot), which are one JSON request each; the client adds no dependency to the test
extra and shows exactly what the browser is asked to do. chromedriver runs on port 0 and is
found by the port it prints.
"""
from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import threading
import urllib.error
import urllib.request

ELEMENT = "element-6066-11e4-a52e-4f735466cecf"  # the W3C key of an element reference
STARTED = re.compile(r"started successfully on port (\d+)")
CHROMIUM = "/usr/bin/chromium"


IMPLICIT_WAIT_MS = 10_000

class WebDriverError(AssertionError):
    pass


class Element:
    def __init__(self, browser: Browser, ref: str):
        self.browser = browser
        self.ref = ref

    def _cmd(self, method: str, what: str, body=None):
        return self.browser._cmd(method, f"/element/{self.ref}/{what}", body)

    def click(self) -> None:
        self._cmd("POST", "click", {})

    def type(self, text: str) -> None:
        self._cmd("POST", "value", {"text": text})

    def clear(self) -> None:
        self._cmd("POST", "clear", {})

    @property
    def text(self) -> str:
        return self._cmd("GET", "text")

    def attribute(self, name: str) -> str | None:
        return self._cmd("GET", f"attribute/{name}")


class Browser:
    def __init__(self, window: tuple[int, int] = (1400, 1000)):
        driver = shutil.which("chromedriver")
        if driver is None:
            raise WebDriverError("chromedriver is not installed: run `make console-deps` "
                                 "(Debian packages chromium and chromium-driver)")
        self.proc = subprocess.Popen([driver, "--port=0"], stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        port = self._port()
        self.base = f"http://127.0.0.1:{port}"
        args = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={window[0]},{window[1]}", "--hide-scrollbars"]
        answer = self._request("POST", "/session", {"capabilities": {"alwaysMatch": {
            "browserName": "chrome", "goog:chromeOptions": {"binary": CHROMIUM, "args": args},
            "goog:loggingPrefs": {"browser": "ALL"}}}})
        self.session = answer["sessionId"]
        # `find` waits (bounded, in the driver) for an element the page has not drawn yet: a
        # click that changes the view is followed by a lookup in the next one.
        self._cmd("POST", "/timeouts", {"implicit": IMPLICIT_WAIT_MS})

    def _port(self) -> int:
        found: list[int] = []
        done = threading.Event()

        def read():
            for line in self.proc.stdout:
                m = STARTED.search(line)
                if m and not found:
                    found.append(int(m.group(1)))
                    done.set()
            done.set()
        threading.Thread(target=read, daemon=True).start()
        if not done.wait(20) or not found:
            self.proc.kill()
            raise WebDriverError("chromedriver did not start")
        return found[0]

    def _request(self, method: str, path: str, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                payload = json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as e:
            payload = json.loads(e.read() or b"null")
            value = (payload or {}).get("value") or {}
            raise WebDriverError(f"{method} {path}: {value.get('error')}: {value.get('message', '')[:300]}") from None
        return payload["value"]  # every W3C answer is {"value": ...}

    def _cmd(self, method: str, path: str, body=None):
        return self._request(method, f"/session/{self.session}{path}", body)

    # -- commands ------------------------------------------------------------------------------------
    def get(self, url: str) -> None:
        self._cmd("POST", "/url", {"url": url})

    def find(self, css: str) -> Element:
        return Element(self, self._cmd("POST", "/element", {"using": "css selector", "value": css})[ELEMENT])

    def find_all(self, css: str) -> list[Element]:
        """Every element matching `css` (waits up to the implicit wait while there is none)."""
        found = self._cmd("POST", "/elements", {"using": "css selector", "value": css})
        return [Element(self, e[ELEMENT]) for e in found]

    def run(self, script: str, *args):
        """Run `script` (a function body; `arguments` holds args) in the page and answer its value."""
        return self._cmd("POST", "/execute/sync", {"script": script, "args": list(args)})

    def texts(self, css: str) -> list[str]:
        """The text of every element matching `css`, read in one round trip."""
        return self.run("return Array.from(document.querySelectorAll(arguments[0]), e => e.textContent)", css)

    def console_errors(self) -> list[str]:
        """The page's console errors since the last call (script errors, failed requests)."""
        entries = self._cmd("POST", "/se/log", {"type": "browser"})
        return [e["message"] for e in entries if e.get("level") == "SEVERE"]

    def value(self, css: str) -> str | None:
        """The current value of a form field (a property, not the attribute); None while the page
        has not drawn the field yet (a wait on the value then waits for the field too)."""
        return self.run("const field = document.querySelector(arguments[0]); return field ? field.value : null", css)

    def screenshot(self, path) -> None:
        with open(path, "wb") as f:
            f.write(base64.b64decode(self._cmd("GET", "/screenshot")))

    def quit(self) -> None:
        try:
            self._request("DELETE", f"/session/{self.session}")
        except (WebDriverError, OSError):
            pass  # the driver is killed next anyway
        finally:
            self.proc.kill()
            self.proc.wait()
