"""A headless Debian `chromium`, driven over the DevTools protocol (a websocket), for page tests.

`make test` installs the browser (scripts/install-browser.sh). Without it,
`require_chromium()` skips the test with a message, or fails it when
VCBUS_REQUIRE_BROWSER=1 or VCBUS_REQUIRE_K8S=1 (CI, .ci/run): a CI run must not
pass without having looked at the page.

`Chromium` starts the browser with a private profile and a random DevTools
port, opens one page and attaches to it (flat sessions); every console error,
uncaught exception and browser log error of the page is kept in `errors`.
Clicks and wheel turns are real input events (Input.dispatchMouseEvent), not
JavaScript `click()` calls. Used by tests/test_replay_html_browser.py and
scripts/replay_screenshot.py.
"""

from __future__ import annotations

import base64
import json
import os
import pathlib
import shutil
import subprocess
import tempfile
import threading
import time

CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
DEADLINE = 60.0


def find_chromium() -> str | None:
    explicit = os.environ.get("VCBUS_CHROMIUM")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    for path in CANDIDATES:
        if os.access(path, os.X_OK):
            return path
    return shutil.which("chromium")


def require_chromium() -> str:
    """The browser's path; else skip (or fail when a browser is required)."""
    import pytest

    path = find_chromium()
    missing = None
    if path is None:
        missing = "no chromium (Debian package `chromium`; `make browser` or scripts/install-browser.sh installs it)"
    else:
        try:
            import websocket  # noqa: F401 - websocket-client, a dev dependency
        except ImportError:
            missing = "no websocket-client (pip install -e '.[dev]')"
    if missing is None:
        return path  # type: ignore[return-value]
    if os.environ.get("VCBUS_REQUIRE_BROWSER") == "1" or os.environ.get("VCBUS_REQUIRE_K8S") == "1":
        pytest.fail(f"{missing}, and VCBUS_REQUIRE_BROWSER/VCBUS_REQUIRE_K8S say the browser tests must run")
    pytest.skip(missing)


class PageError(AssertionError):
    pass


class Chromium:
    def __init__(self, executable: str, *, width: int = 1400, height: int = 900) -> None:
        import websocket

        self.profile = tempfile.mkdtemp(prefix="vcbus-chromium-")
        args = [executable, "--headless", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
                "--disable-extensions", "--disable-dev-shm-usage", "--remote-debugging-port=0",
                f"--user-data-dir={self.profile}", f"--window-size={width},{height}", "about:blank"]
        if os.geteuid() == 0:
            args.insert(1, "--no-sandbox")  # chromium refuses to run as root with its sandbox
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.stderr: list[str] = []
        url = self._devtools_url()
        self.ws = websocket.create_connection(url, timeout=DEADLINE, suppress_origin=True)
        self.next_id = 0
        self.events: list[dict] = []
        self.errors: list[str] = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable", session=True)
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session=True)

    def _devtools_url(self) -> str:
        found: list[str] = []
        done = threading.Event()

        def read() -> None:
            for raw in self.proc.stderr:  # type: ignore[union-attr]
                line = raw.decode("utf-8", "replace").rstrip()
                self.stderr.append(line)
                if "DevTools listening on " in line and not found:
                    found.append(line.split("DevTools listening on ", 1)[1].strip())
                    done.set()
            done.set()

        threading.Thread(target=read, daemon=True).start()
        if not done.wait(DEADLINE) or not found:
            self.close()
            raise RuntimeError("chromium did not start its DevTools server:\n" + "\n".join(self.stderr[-20:]))
        return found[0]

    # ------------------------------------------------------------ protocol
    def call(self, method: str, params: dict | None = None, *, session: bool = False) -> dict:
        self.next_id += 1
        msg: dict = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self.session
        self.ws.send(json.dumps(msg))
        while True:
            reply = self._receive()
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def _receive(self) -> dict:
        reply = json.loads(self.ws.recv())
        if "method" in reply:
            self._event(reply)
        return reply

    def _event(self, ev: dict) -> None:
        self.events.append(ev)
        method, p = ev["method"], ev.get("params", {})
        if method == "Runtime.exceptionThrown":
            d = p["exceptionDetails"]
            self.errors.append(f"uncaught: {d.get('exception', {}).get('description') or d.get('text')}")
        elif method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            self.errors.append("console." + p["type"] + ": " + " ".join(
                str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
        elif method == "Log.entryAdded" and p["entry"].get("level") == "error":
            self.errors.append(f"log: {p['entry'].get('text')} {p['entry'].get('url', '')}")

    def wait_event(self, method: str, deadline: float = DEADLINE) -> dict:
        seen = len(self.events)
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            for ev in self.events[seen:]:
                if ev["method"] == method:
                    return ev
            seen = len(self.events)
            self._receive()
        raise TimeoutError(f"no {method} within {deadline}s")

    # ------------------------------------------------------------ page
    def open(self, path: pathlib.Path) -> None:
        mark = len(self.events)
        self.call("Page.navigate", {"url": path.resolve().as_uri()}, session=True)
        if not any(e["method"] == "Page.loadEventFired" for e in self.events[mark:]):
            self.wait_event("Page.loadEventFired")

    def js(self, expression: str):
        res = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True},
                        session=True)
        if "exceptionDetails" in res:
            raise PageError(f"{expression[:80]}: {res['exceptionDetails']}")
        return res["result"].get("value")

    def wait_for(self, expression: str, deadline: float = DEADLINE):
        end = time.monotonic() + deadline
        while True:
            value = self.js(expression)
            if value:
                return value
            if time.monotonic() > end:
                raise TimeoutError(f"{expression} stayed false for {deadline}s")
            time.sleep(0.05)

    def center(self, selector: str) -> tuple[float, float]:
        box = self.js(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)}); if (!e) return null;"
            " e.scrollIntoView({block: 'center', inline: 'center'}); const r = e.getBoundingClientRect();"
            " return [r.left + r.width / 2, r.top + r.height / 2]; })()")
        if box is None:
            raise PageError(f"no element {selector}")
        return box[0], box[1]

    def click(self, selector: str) -> None:
        x, y = self.center(selector)
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent",
                      {"type": kind, "x": x, "y": y, "button": "left" if kind != "mouseMoved" else "none",
                       "clickCount": 1}, session=True)

    def type_text(self, selector: str, text: str) -> None:
        """Replace what the input at `selector` holds by `text`, as typed: a click to focus it, its text selected,
        then `text` inserted (none: Backspace), so the page sees real input events."""
        self.click(selector)
        self.js(f"document.querySelector({json.dumps(selector)}).select()")
        if text:
            self.call("Input.insertText", {"text": text}, session=True)
            return
        for kind in ("keyDown", "keyUp"):
            self.call("Input.dispatchKeyEvent", {"type": kind, "key": "Backspace", "code": "Backspace",
                                                 "windowsVirtualKeyCode": 8}, session=True)

    def wheel(self, selector: str, delta_y: float) -> None:
        x, y = self.center(selector)
        self.call("Input.dispatchMouseEvent",
                  {"type": "mouseWheel", "x": x, "y": y, "deltaX": 0, "deltaY": delta_y}, session=True)

    def screenshot(self, path: pathlib.Path, *, full_page: bool = False) -> None:
        if full_page:
            height = self.js("Math.ceil(document.documentElement.scrollHeight)")
            width = self.js("window.innerWidth")
            self.call("Emulation.setDeviceMetricsOverride",
                      {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session=True)
        data = self.call("Page.captureScreenshot", {"format": "png"}, session=True)["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        try:
            if getattr(self, "ws", None) is not None:
                self.ws.close()
        finally:
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=DEADLINE)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            shutil.rmtree(self.profile, ignore_errors=True)
