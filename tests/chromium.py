"""Headless Chromium driven over the DevTools protocol on a pipe, for the report page's test.

Why the protocol rather than `--dump-dom` and `--screenshot`: one browser session answers what
the test asks — whether each section is laid out and visible (the DOM alone cannot say), every
console message and uncaught exception as it happens (not scraped from the browser's log), every
request the page makes (a self-contained page makes none), a screenshot of the whole page and
the page as printed — and the client is the standard library: `--remote-debugging-pipe` reads
JSON commands on fd 3 and writes replies and events on fd 4, each message ended by a NUL byte.

The flags are those that work in a container: no sandbox (root), no GPU, nothing fetched in
the background, a fresh profile per browser.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--mute-audio", "--hide-scrollbars")
BINARIES = ("chromium", "chromium-browser", "google-chrome")
REPLY_S = 120.0  # the longest a command may take (a full-page screenshot on a loaded machine)
EVENTS = ("Runtime.consoleAPICalled", "Runtime.exceptionThrown", "Log.entryAdded",
          "Network.requestWillBeSent", "Network.loadingFailed")
"""What the test reads from a page's life: messages, exceptions and requests."""


def find() -> str | None:
    """The Chromium binary on PATH, if any."""
    return next((path for name in BINARIES if (path := shutil.which(name))), None)


class Browser:
    """One headless Chromium, started with a fresh profile under `profile`."""

    def __init__(self, binary: str, profile: Path) -> None:
        to_browser, self._commands = os.pipe()
        self._replies, from_browser = os.pipe()

        def onto_3_and_4() -> None:  # in the child, before exec: fds 3 and 4 are the pipe
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_browser, from_browser)]
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        profile.mkdir(parents=True, exist_ok=True)
        self.log = profile / "chromium.log"  # a file: a pipe left unread would fill and block
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [binary, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe",
                 "about:blank"], pass_fds=(3, 4), preexec_fn=onto_3_and_4,
                stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        os.close(to_browser)
        os.close(from_browser)
        self._buffer = b""
        self._next = 0
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        """Run one command and return its result; AssertionError with the browser's error."""
        self._next += 1
        message = {"id": self._next, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        reply = self._until(lambda m: m.get("id") == self._next, f"the reply to {method}")
        assert "error" not in reply, f"{method}: {reply['error']}"
        return reply.get("result", {})

    def wait_event(self, method: str, session: str) -> dict:
        return self._until(lambda m: m.get("method") == method and m.get("sessionId") == session,
                           f"the event {method}")

    def _until(self, wanted, what: str) -> dict:
        ends = time.monotonic() + REPLY_S
        while True:
            while b"\0" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\0", 1)
                message = json.loads(raw)
                if "method" in message:
                    self.events.append(message)
                if wanted(message):
                    return message
            left = ends - time.monotonic()
            ready, _, _ = select.select([self._replies], [], [], max(left, 0))
            if not ready:
                raise AssertionError(f"Chromium sent no {what} in {REPLY_S:g} s")
            chunk = os.read(self._replies, 1 << 20)
            if not chunk:
                err = self.log.read_text(errors="replace")[-2000:]
                raise AssertionError(f"Chromium closed the pipe waiting for {what}: {err}")
            self._buffer += chunk

    def open(self, url: str, width: int, height: int = 900) -> Page:
        """A new tab `width` CSS pixels wide showing `url`, loaded."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target,
                                                      "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable", session=session)
        self.send("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=session)
        start = len(self.events)
        self.send("Page.navigate", {"url": url}, session=session)
        self.wait_event("Page.loadEventFired", session)
        return Page(self, session, target, start)

    def close(self) -> None:
        for fd in (self._commands, self._replies):
            os.close(fd)
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class Page:
    """A loaded tab: evaluate script in it, read what it logged and requested, capture it."""

    def __init__(self, browser: Browser, session: str, target: str, first_event: int) -> None:
        self.browser, self.session, self.target, self._first = browser, session, target, \
            first_event

    def evaluate(self, expression: str) -> Any:
        result = self.browser.send("Runtime.evaluate", {
            "expression": expression, "returnByValue": True}, session=self.session)
        assert "exceptionDetails" not in result, result["exceptionDetails"]
        return result["result"].get("value")

    def problems(self, own_url: str) -> list[str]:
        """Everything the page logged, threw, requested beyond its own file, or failed to
        load since it was opened: a self-contained page without script has none."""
        out = []
        for e in self.browser.events[self._first:]:
            if e.get("sessionId") != self.session or e["method"] not in EVENTS:
                continue
            p = e["params"]
            if e["method"] == "Runtime.consoleAPICalled":
                out.append(f"console.{p['type']}: {[a.get('value') for a in p['args']]}")
            elif e["method"] == "Runtime.exceptionThrown":
                out.append(f"exception: {p['exceptionDetails'].get('text')}")
            elif e["method"] == "Log.entryAdded":
                out.append(f"log {p['entry']['level']}: {p['entry']['text']}")
            elif e["method"] == "Network.requestWillBeSent":
                if p["request"]["url"] != own_url:
                    out.append(f"request: {p['request']['url']}")
            else:
                out.append(f"failed to load: {p.get('errorText')}")
        return out

    def print_media(self, on: bool) -> None:
        self.browser.send("Emulation.setEmulatedMedia", {"media": "print" if on else ""},
                          session=self.session)

    def screenshot(self, path: Path) -> Path:
        """The whole page (not only the viewport) as a PNG at `path`."""
        size = self.browser.send("Page.getLayoutMetrics", session=self.session)["cssContentSize"]
        shot = self.browser.send("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"],
                     "scale": 1}}, session=self.session)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    def pdf(self, path: Path) -> Path:
        """The page printed (A4, backgrounds on) as a PDF at `path`."""
        printed = self.browser.send("Page.printToPDF", {
            "printBackground": True, "paperWidth": 8.27, "paperHeight": 11.69},
            session=self.session)
        path.write_bytes(base64.b64decode(printed["data"]))
        return path

    def close(self) -> None:
        self.browser.send("Target.closeTarget", {"targetId": self.target})
