"""A headless Chromium driven over the DevTools protocol, for the tests of what a person sees of ``review``'s page.

The browser speaks the protocol on a pipe (``--remote-debugging-pipe``: it reads commands on its descriptor 3 and
writes answers and events on 4, each a JSON message ended by a NUL byte), so nothing listens on a port and only the
standard library is needed. Each page runs in its own target; the events it raises (requests, exceptions, console
messages, log entries such as a Content-Security-Policy refusal) are kept for the test to look at.

``chromium_path()`` finds the browser (``$DEDUP_CHROMIUM``, else ``chromium``, ``chromium-browser``,
``google-chrome`` on the PATH); ``.ci/run`` installs Debian's ``chromium``.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

NAMES = ("chromium", "chromium-browser", "google-chrome")


def chromium_path() -> str | None:
    """The browser to drive, or None when this machine has none."""
    named = os.environ.get("DEDUP_CHROMIUM")
    if named:
        return named
    return next((found for found in map(shutil.which, NAMES) if found), None)


def _above(descriptor: int, lowest: int) -> int:
    """``descriptor`` moved to a number ``lowest`` or more."""
    moved = fcntl.fcntl(descriptor, fcntl.F_DUPFD, lowest)
    os.close(descriptor)
    return moved


class BrowserError(RuntimeError):
    """The browser answered a command with an error, or did not answer in time."""


class Browser:
    """One headless Chromium process; use as a context manager."""

    def __init__(self, executable: str, width: int = 1400, height: int = 1000, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self.width, self.height = width, height
        self._profile = tempfile.TemporaryDirectory(prefix="dedup-chromium-")
        to_browser, self._commands = os.pipe()
        self._answers, from_browser = os.pipe()
        # Above 4, so that putting one on descriptor 3 or 4 never closes the other.
        to_browser, from_browser = (_above(to_browser, 10), _above(from_browser, 10))
        arguments = ["--headless", "--remote-debugging-pipe", "--disable-gpu", "--no-first-run",
                     "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
                     "--disable-component-update", "--disable-sync", "--disable-default-apps", "--mute-audio",
                     f"--user-data-dir={self._profile.name}", f"--window-size={width},{height}", "about:blank"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            arguments.insert(0, "--no-sandbox")  # Chromium refuses to start its sandbox as root
        # bash puts the two pipe ends on descriptors 3 and 4, where the browser looks for them (a POSIX sh may not
        # name a descriptor above 9).
        script = f'exec "$@" 3<&{to_browser} 4>&{from_browser} {to_browser}<&- {from_browser}>&-'
        self.process = subprocess.Popen([shutil.which("bash") or "bash", "-c", script, "bash", executable, *arguments],
                                        pass_fds=(to_browser, from_browser), stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser)
        os.close(from_browser)
        self._buffer = b""
        self._next = 0
        self._session: str | None = None
        self.events: list[dict[str, Any]] = []

    # --- the protocol ------------------------------------------------------------------------------------------

    def _send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> int:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        return self._next

    def _receive(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._answers], [], [], left)[0]:
                raise BrowserError(f"the browser did not answer within {self.timeout:g} s")
            chunk = os.read(self._answers, 1 << 20)
            if not chunk:
                raise BrowserError("the browser closed its pipe (did it start?)")
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(message)

    def call(self, method: str, params: dict[str, Any] | None = None, page: bool = True) -> dict[str, Any]:
        """Send a command (to the page's session, or to the browser) and return its result; events that arrive
        meanwhile are kept in :attr:`events`."""
        number = self._send(method, params, self._session if page else None)
        deadline = time.monotonic() + self.timeout
        while True:
            message = self._receive(deadline)
            if message.get("id") == number:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error']}")
                return message.get("result", {})
            if "method" in message:
                self.events.append(message)

    def wait_for(self, method: str, since: int = 0) -> dict[str, Any]:
        """The first event ``method`` among those from position ``since`` on, waiting for it."""
        deadline = time.monotonic() + self.timeout
        while True:
            for event in self.events[since:]:
                if event["method"] == method:
                    return event
            message = self._receive(deadline)
            if "method" in message:
                self.events.append(message)

    # --- what a test does ----------------------------------------------------------------------------------------

    def open(self, path: Path, fragment: str = "") -> None:
        """A new tab showing ``path`` (a file), its events recorded from the start, once loaded."""
        self.events.clear()
        target = self.call("Target.createTarget", {"url": "about:blank"}, page=False)["targetId"]
        self._session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True},
                                  page=False)["sessionId"]
        for domain in ("Page", "Network", "Runtime", "Log"):
            self.call(f"{domain}.enable")
        self.call("Emulation.setDeviceMetricsOverride", {"width": self.width, "height": self.height,
                                                         "deviceScaleFactor": 1, "mobile": False})
        since = len(self.events)
        self.call("Page.navigate", {"url": path.resolve().as_uri() + fragment})
        self.wait_for("Page.loadEventFired", since)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (awaited when it is a promise)."""
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True})
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def click(self, selector: str) -> None:
        """A left click of the mouse in the middle of the first element ``selector`` finds, scrolled into view."""
        box = self.evaluate(f"(() => {{ const found = document.querySelector({json.dumps(selector)}); "
                            "found.scrollIntoView({block: 'center'}); const box = found.getBoundingClientRect(); "
                            "return [box.x + box.width / 2, box.y + box.height / 2]; })()")
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", {"type": kind, "x": box[0], "y": box[1], "button": "left",
                                                   "clickCount": 0 if kind == "mouseMoved" else 1})

    def type_into(self, selector: str, text: str) -> None:
        """Focus ``selector``, select what it holds, and type ``text`` over it, as a keyboard would."""
        self.evaluate(f"(() => {{ const box = document.querySelector({json.dumps(selector)}); box.focus(); "
                      "box.select(); })()")
        if text:
            self.call("Input.insertText", {"text": text})
            return
        for kind in ("keyDown", "keyUp"):  # nothing to type: the selection deleted, as Backspace does
            self.call("Input.dispatchKeyEvent", {"type": kind, "key": "Backspace", "code": "Backspace",
                                                 "windowsVirtualKeyCode": 8})

    def screenshot(self, full_page: bool = False) -> bytes:
        """A PNG of the viewport (or of the whole page)."""
        return base64.b64decode(self.call("Page.captureScreenshot", {"format": "png",
                                                                    "captureBeyondViewport": full_page})["data"])

    def requests(self) -> list[str]:
        """The URL of every request the page made, its own file included."""
        return [event["params"]["request"]["url"] for event in self.events
                if event["method"] == "Network.requestWillBeSent"]

    def problems(self) -> list[str]:
        """Exceptions thrown, console errors and warnings, and log entries of warning level or above."""
        found = []
        for event in self.events:
            params = event.get("params", {})
            if event["method"] == "Runtime.exceptionThrown":
                found.append(json.dumps(params["exceptionDetails"])[:500])
            elif event["method"] == "Runtime.consoleAPICalled" and params.get("type") in ("error", "warning"):
                found.append(json.dumps(params.get("args"))[:500])
            elif event["method"] == "Log.entryAdded" and params["entry"]["level"] in ("warning", "error"):
                found.append(params["entry"]["text"])
        return found

    def __enter__(self) -> Browser:
        self.call("Browser.getVersion", page=False)  # the browser is up
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        try:
            self.call("Browser.close", page=False)
        except (BrowserError, OSError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._commands)
        os.close(self._answers)
        self._profile.cleanup()
