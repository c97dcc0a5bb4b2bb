"""A small headless-Chromium driver for tests: the Chrome DevTools Protocol over a pipe.

No dependencies beyond the standard library. Chromium is started with
``--remote-debugging-pipe``: it reads commands from its fd 3 and writes replies and events to
its fd 4, each message one JSON object ended by a NUL byte. One browser serves many pages; each
page is a fresh tab reached through a flattened session (``Target.attachToTarget`` with
``flatten``), so its events carry its ``sessionId``.

    with open_page("report.html") as page:          # launches a browser, closes it after
        assert page.console_errors == []
        page.evaluate("document.querySelectorAll('svg circle').length")
        page.wait_for("document.querySelector('svg')")   # for charts drawn after load
        keep_screenshot(page, "report")              # build/test-artifacts/report.png

    with Browser() as browser:                      # or: one browser, a tab per page
        with browser.open("a.html") as page: ...

A page records, from before its navigation starts:
  * ``console``     every console call, as ConsoleMessage(type, text);
  * ``exceptions``  uncaught exceptions (Runtime.exceptionThrown), and unhandled rejections;
  * ``log_errors``  Log.entryAdded entries of level "error": a resource that failed to load
                    (a missing file, or a network address an offline report must not reach),
                    blocked content, ...;
  * ``requests``    every URL the page requested; ``external_requests`` those beyond file:,
                    data:, blob: and about: (a CDN script loads without error on a machine
                    with a network, so an offline report is checked by its requests too);
and ``console_errors`` joins what DevTools would show in red: console.error / console.assert,
the exceptions and the error log entries.

``find_chromium()`` looks for ``$ACCELSIM_CHROMIUM``, then chromium, chromium-browser,
google-chrome(-stable) on PATH. Test policy (``require_chromium``): with no browser a test is
skipped on a developer machine but FAILS when the environment variable CI is set, so CI cannot
skip the browser tests silently. Screenshots kept as test artifacts go under
build/test-artifacts/ (``keep_screenshot``, ``artifact_path``; ``$ACCELSIM_TEST_ARTIFACTS``
moves it); tests/conftest.py lists them at the end of the run.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

REPO = Path(__file__).resolve().parent.parent
DEFAULT_WINDOW = (1280, 800)
DEFAULT_TIMEOUT = 30.0
BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")

# Chromium wants the pipe on exactly fds 3 and 4. subprocess can keep fds open but not renumber
# them, so a tiny Python trampoline moves them (out of the way first, in case one of them
# already is 3 or 4) and execs the browser: same pid, no preexec_fn (unsafe with threads).
_TRAMPOLINE = """\
import fcntl, os, sys
cmd, res = int(sys.argv[1]), int(sys.argv[2])
hi_cmd, hi_res = fcntl.fcntl(cmd, fcntl.F_DUPFD, 10), fcntl.fcntl(res, fcntl.F_DUPFD, 10)
os.dup2(hi_cmd, 3)
os.dup2(hi_res, 4)
for fd in {cmd, res, hi_cmd, hi_res} - {3, 4}:
    os.close(fd)
os.execv(sys.argv[3], sys.argv[3:])
"""


class BrowserError(RuntimeError):
    """Chromium failed to start, died, timed out, or a DevTools command failed."""


class BrowserTimeout(BrowserError, TimeoutError):
    """No answer, or no load event, in time."""


class JavaScriptError(BrowserError):
    """The expression given to Page.evaluate threw."""


@dataclass(frozen=True)
class ConsoleMessage:
    type: str   # log, info, warning, error, assert, debug, ...
    text: str


# ----------------------------------------------------------------------------- finding a browser

def find_chromium() -> str | None:
    """The path of a Chromium-family browser: $ACCELSIM_CHROMIUM, else the first on PATH."""
    override = os.environ.get("ACCELSIM_CHROMIUM")
    if override:
        return shutil.which(override) or (override if os.access(override, os.X_OK) else None)
    for name in BROWSER_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def require_chromium() -> str:
    """For tests: the browser's path; with none, skip locally and fail under CI."""
    import pytest

    path = find_chromium()
    if path:
        return path
    message = ("no headless browser found (looked for $ACCELSIM_CHROMIUM, "
               + ", ".join(BROWSER_NAMES) + "); scripts/test_all.sh installs Debian's chromium")
    if in_ci():
        pytest.fail(message + " -- CI is set, so the browser tests may not be skipped", pytrace=False)
    pytest.skip(message)


def artifact_dir() -> Path:
    """Where tests keep files for a person to look at afterwards (created; gitignored)."""
    path = Path(os.environ.get("ACCELSIM_TEST_ARTIFACTS") or REPO / "build" / "test-artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


def artifact_path(name: str) -> Path:
    return artifact_dir() / name


# ----------------------------------------------------------------------------- the browser

class Browser:
    """One headless Chromium process, driven over the DevTools pipe."""

    def __init__(self, executable: str | None = None, *, window: tuple[int, int] = DEFAULT_WINDOW,
                 timeout: float = DEFAULT_TIMEOUT, extra_args: tuple[str, ...] = ()):
        self.executable = executable or find_chromium()
        if not self.executable:
            raise BrowserError("no Chromium found: install Debian's chromium or set $ACCELSIM_CHROMIUM")
        self.window = window
        self.timeout = timeout
        self._next_id = 0
        self._buffer = b""
        self._pages: dict[str, Page] = {}
        self._closed = False
        self._profile = tempfile.TemporaryDirectory(prefix="accel-sim-chromium-")
        self._stderr = tempfile.TemporaryFile()
        cmd_read, self._cmd_write = os.pipe()     # we write commands, chromium reads fd 3
        self._res_read, res_write = os.pipe()     # chromium writes fd 4, we read
        args = [
            self.executable,
            "--headless",                          # the new headless mode (a real browser)
            "--remote-debugging-pipe",
            f"--user-data-dir={self._profile.name}",
            f"--window-size={window[0]},{window[1]}",
            "--force-device-scale-factor=1",
            "--hide-scrollbars",
            "--disable-gpu",
            "--disable-dev-shm-usage",             # containers often have a 64 MB /dev/shm
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-default-apps",
            "--disable-sync",
            "--no-first-run",
            "--no-default-browser-check",
            "--mute-audio",
            "--password-store=basic",
            *(["--no-sandbox"] if os.geteuid() == 0 else []),   # the sandbox refuses root
            *extra_args,
            "about:blank",
        ]
        self.args = args
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-c", _TRAMPOLINE, str(cmd_read), str(res_write), *args],
                pass_fds=(cmd_read, res_write), stdin=subprocess.DEVNULL,
                stdout=self._stderr, stderr=self._stderr, start_new_session=True)
        finally:
            os.close(cmd_read)
            os.close(res_write)
        try:
            self.version = self.send("Browser.getVersion", timeout=timeout)
        except BrowserTimeout:
            tail = self.stderr_tail()
            self._kill()
            raise BrowserTimeout(f"{self.executable} did not answer on the DevTools pipe within "
                                 f"{timeout:g} s; its output ends:\n{tail}") from None
        except BaseException:
            self._kill()
            raise

    # -- context manager
    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- pages
    def new_page(self) -> "Page":
        """A fresh tab recording console, exceptions, log and requests; nothing loaded yet."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, target, session)
        self._pages[session] = page
        for domain in ("Runtime", "Log", "Page", "Network", "Inspector"):
            page.send(f"{domain}.enable")
        page.send("Emulation.setDeviceMetricsOverride", {
            "width": self.window[0], "height": self.window[1], "deviceScaleFactor": 1, "mobile": False})
        return page

    @contextmanager
    def open(self, location: str | os.PathLike, *, timeout: float | None = None) -> Iterator["Page"]:
        """A new tab showing LOCATION (a file path or a URL) once its load event fired; closed after."""
        page = self.new_page()
        try:
            page.goto(location, timeout=timeout)
            yield page
        finally:
            page.close()

    # -- the protocol
    def send(self, method: str, params: dict | None = None, *, session: str | None = None,
             timeout: float | None = None) -> dict:
        """Sends one command and returns its result, handing the events that arrive meanwhile to
        their pages. Raises BrowserError on a protocol error, a dead browser or a timeout."""
        if self._closed:
            raise BrowserError(f"{method}: the browser is closed")
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        data = json.dumps(message).encode() + b"\0"
        try:
            while data:
                data = data[os.write(self._cmd_write, data):]
        except (BrokenPipeError, OSError) as e:
            raise self._died(f"{method}: cannot write to the browser ({e})") from None
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            reply = self._read(deadline, method)
            if reply.get("id") == message["id"]:
                if "error" in reply:
                    err = reply["error"]
                    raise BrowserError(f"{method}: {err.get('message')} ({err.get('code')}) {err.get('data', '')}".rstrip())
                return reply.get("result", {})
            self._dispatch(reply)

    def pump(self, seconds: float) -> None:
        """Handles events for SECONDS (e.g. to let late console messages arrive)."""
        deadline = time.monotonic() + seconds
        while True:
            try:
                self._dispatch(self._read(deadline, "pump"))
            except BrowserTimeout:
                return

    def _read(self, deadline: float, what: str) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserTimeout(f"{what}: no answer from the browser in time")
            ready, _, _ = select.select([self._res_read], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._res_read, 1 << 20)
            if not chunk:
                raise self._died(f"{what}: the browser closed its pipe")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def _dispatch(self, message: dict) -> None:
        page = self._pages.get(message.get("sessionId", ""))
        if page is not None and "method" in message:
            page._on_event(message["method"], message.get("params", {}))

    # -- shutting down
    def stderr_tail(self, limit: int = 4000) -> str:
        try:
            self._stderr.seek(0, os.SEEK_END)
            size = self._stderr.tell()
            self._stderr.seek(max(0, size - limit))
            return self._stderr.read().decode(errors="replace")
        except (OSError, ValueError):
            return ""

    def _died(self, what: str) -> BrowserError:
        try:
            code = self._proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            code = None
        tail = self.stderr_tail()
        hint = ""
        if "sandbox" in tail.lower() and "--no-sandbox" not in self.args:
            hint = "\n(the sandbox cannot start here: pass extra_args=('--no-sandbox',))"
        return BrowserError(f"{what}; exit status {code}; chromium's stderr ends:\n{tail}{hint}")

    def close(self) -> None:
        """Browser.close, then SIGTERM / SIGKILL to the browser's process group if it lingers."""
        if self._closed:
            return
        try:
            self.send("Browser.close", timeout=5)
        except (BrowserError, OSError):
            pass
        self._closed = True
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._kill()
        self._cleanup()

    def _kill(self) -> None:
        self._closed = True
        for sig, wait in ((signal.SIGTERM, 3), (signal.SIGKILL, 5)):
            if self._proc.poll() is not None:
                break
            try:
                os.killpg(self._proc.pid, sig)   # our own session: the browser and its children
            except ProcessLookupError:
                break
            try:
                self._proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                pass
        self._cleanup()

    def _cleanup(self) -> None:
        for fd in (self._cmd_write, self._res_read):
            try:
                os.close(fd)
            except OSError:
                pass
        self._cmd_write = self._res_read = -1
        self._stderr.close()
        self._profile.cleanup()


# ----------------------------------------------------------------------------- a page (a tab)

def _remote_object_text(obj: dict) -> str:
    if "value" in obj:
        value = obj["value"]
        return value if isinstance(value, str) else json.dumps(value)
    return str(obj.get("unserializableValue") or obj.get("description") or obj.get("type", ""))


# Resolves after the next animation frame and a timer turn after it (a timer alone if frames
# do not come, as in a hidden tab).
_SETTLE = """new Promise(resolve => {
  let done = false;
  const next = () => { if (!done) { done = true; setTimeout(resolve, 0); } };
  requestAnimationFrame(next);
  setTimeout(next, 200);
})"""


class Page:
    def __init__(self, browser: Browser, target_id: str, session_id: str):
        self.browser = browser
        self.target_id = target_id
        self.session_id = session_id
        self.console: list[ConsoleMessage] = []
        self.exceptions: list[str] = []
        self.log_errors: list[str] = []
        self.requests: list[str] = []
        self.url: str | None = None
        self._loaded = False
        self._crashed = False
        self._closed = False

    def __enter__(self) -> "Page":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def console_errors(self) -> list[str]:
        """What DevTools would show in red: console.error/assert, uncaught exceptions, error logs."""
        return ([f"console.{m.type}: {m.text}" for m in self.console if m.type in ("error", "assert")]
                + [f"uncaught: {e}" for e in self.exceptions]
                + [f"log: {e}" for e in self.log_errors])

    @property
    def external_requests(self) -> list[str]:
        """URLs the page asked for beyond the local file system (an offline report makes none),
        whether or not they loaded: on a machine with a network a CDN script loads fine."""
        local = ("file:", "data:", "blob:", "about:")
        return [url for url in self.requests if not url.startswith(local)]

    def send(self, method: str, params: dict | None = None, *, timeout: float | None = None) -> dict:
        if self._crashed:
            raise BrowserError(f"{method}: the page crashed")
        return self.browser.send(method, params, session=self.session_id, timeout=timeout)

    def goto(self, location: str | os.PathLike, *, timeout: float | None = None, settle: bool = True) -> None:
        """Navigates to a file path or URL and waits for the load event; with SETTLE, also for
        the next animation frame and timer turn, so that charts drawn in requestAnimationFrame
        or setTimeout(0), and errors those throw (or unhandled rejections), are in."""
        text = str(location)
        url = text if "://" in text or text.startswith(("about:", "data:")) else Path(text).resolve().as_uri()
        self.url = url
        self._loaded = False
        limit = self.browser.timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        result = self.send("Page.navigate", {"url": url}, timeout=limit)
        if result.get("errorText"):
            raise BrowserError(f"cannot load {url}: {result['errorText']}")
        while not self._loaded:
            if self._crashed:
                raise BrowserError(f"the page crashed while loading {url}")
            try:
                self.browser._dispatch(self.browser._read(deadline, f"loading {url}"))
            except BrowserTimeout:
                raise BrowserTimeout(f"{url}: no load event within {limit:g} s") from None
        if settle:
            self.evaluate(_SETTLE, timeout=max(1.0, deadline - time.monotonic()))

    def evaluate(self, expression: str, *, timeout: float | None = None) -> Any:
        """The JSON value of a JavaScript expression (a promise is awaited)."""
        result = self.send("Runtime.evaluate", {
            "expression": expression, "returnByValue": True, "awaitPromise": True,
            "userGesture": False}, timeout=timeout)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            description = details.get("exception", {}).get("description") or details.get("text")
            raise JavaScriptError(f"{expression!r} threw: {description}")
        remote = result.get("result", {})
        if remote.get("type") == "undefined":
            return None
        if "unserializableValue" in remote:   # NaN, Infinity, -0, bigints
            return remote["unserializableValue"]
        return remote.get("value")

    def wait_for(self, expression: str, *, timeout: float = 10.0, interval: float = 0.05) -> Any:
        """Polls until EXPRESSION is truthy (for charts drawn after the load event); returns it."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() >= deadline:
                raise BrowserError(f"{expression!r} still falsy after {timeout:g} s")
            self.browser.pump(interval)

    def screenshot(self, path: str | os.PathLike, *, full_page: bool = True,
                   clip: tuple[float, float, float, float] | None = None) -> tuple[int, int]:
        """Writes a PNG of the page: the whole scrollable page by default, else the viewport, or
        the CLIP rectangle (x, y, width, height) of the page; returns its (width, height) in CSS
        pixels (device pixels too: the scale factor is forced to 1)."""
        params: dict[str, Any] = {"format": "png"}
        if clip is not None:
            x, y, width, height = clip
            params.update(captureBeyondViewport=True,
                          clip={"x": x, "y": y, "width": width, "height": height, "scale": 1})
        elif full_page:
            metrics = self.send("Page.getLayoutMetrics")
            size = metrics.get("cssContentSize") or metrics["contentSize"]
            width = max(1, int(-(-size["width"] // 1)))
            height = max(1, int(-(-size["height"] // 1)))
            params.update(captureBeyondViewport=True,
                          clip={"x": 0, "y": 0, "width": width, "height": height, "scale": 1})
        else:
            width, height = self.browser.window
        data = base64.b64decode(self.send("Page.captureScreenshot", params)["data"])
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return width, height

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.browser._pages.pop(self.session_id, None)
        if not self.browser._closed:
            try:
                self.browser.send("Target.closeTarget", {"targetId": self.target_id}, timeout=5)
            except BrowserError:
                pass

    def _on_event(self, method: str, params: dict) -> None:
        if method == "Runtime.consoleAPICalled":
            text = " ".join(_remote_object_text(a) for a in params.get("args", []))
            self.console.append(ConsoleMessage(params.get("type", "log"), text))
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            exc = details.get("exception", {})
            text = (exc.get("description") or _remote_object_text(exc)) if exc else details.get("text", "")
            where = details.get("url", "")
            if where:
                text += f" ({where}:{details.get('lineNumber', 0) + 1})"
            self.exceptions.append(text)
        elif method == "Log.entryAdded":
            entry = params.get("entry", {})
            if entry.get("level") == "error":
                text = entry.get("text", "")
                if entry.get("url") and entry["url"] not in text:
                    text += f" ({entry['url']})"
                self.log_errors.append(text)
        elif method == "Network.requestWillBeSent":
            self.requests.append(params.get("request", {}).get("url", ""))
        elif method == "Page.loadEventFired":
            self._loaded = True
        elif method == "Inspector.targetCrashed":
            self._crashed = True


@contextmanager
def open_page(location: str | os.PathLike, *, browser: Browser | None = None,
              window: tuple[int, int] = DEFAULT_WINDOW, timeout: float = DEFAULT_TIMEOUT) -> Iterator[Page]:
    """LOCATION loaded in a tab of BROWSER, or of a browser launched for it and closed after."""
    if browser is not None:
        with browser.open(location, timeout=timeout) as page:
            yield page
        return
    with Browser(window=window, timeout=timeout) as own:
        with own.open(location, timeout=timeout) as page:
            yield page


KEPT: list[Path] = []   # screenshots kept this session, listed at the end by tests/conftest.py


def keep_screenshot(page: Page, name: str) -> Path:
    """A full-page screenshot kept as a test artifact, build/test-artifacts/NAME.png; prints
    its path (pytest shows it with -s, or -rA, or when the test fails)."""
    path = artifact_path(name if name.endswith(".png") else name + ".png")
    page.screenshot(path)
    KEPT.append(path)
    print(f"screenshot kept: {path}")
    return path


def png_size(path: str | os.PathLike) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk; ValueError if the file is not a PNG."""
    head = Path(path).read_bytes()[:24]
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        raise ValueError(f"{path} is not a PNG")
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


if __name__ == "__main__":   # python tests/browser.py PAGE.html [OUT.png]: what a test would see
    target = sys.argv[1]
    started = time.monotonic()
    with open_page(target) as page:
        print(f"loaded {page.url} in {time.monotonic() - started:.2f} s")
        for message in page.console:
            print(f"console.{message.type}: {message.text}")
        for line in page.exceptions + page.log_errors:
            print(line)
        out = sys.argv[2] if len(sys.argv) > 2 else artifact_path(Path(target).stem + ".png")
        print("screenshot", out, page.screenshot(out))
    sys.exit(1 if page.console_errors else 0)
