"""Self-tests of tests/browser.py, the headless-Chromium harness the HTML report tests use:
tiny pages written to tmp_path, each opened in a fresh tab of one browser per module."""

from __future__ import annotations

import socket
import struct
import subprocess
import time
import zlib
from pathlib import Path

import pytest

import browser
from browser import Browser, BrowserError, JavaScriptError

pytestmark = pytest.mark.browser


def page_file(tmp_path: Path, body: str, name: str = "page.html") -> Path:
    path = tmp_path / name
    path.write_text(f"<!doctype html><html><head><meta charset='utf-8'><title>t</title></head>"
                    f"<body style='margin:0'>{body}</body></html>")
    return path


def closed_port() -> int:
    """A local TCP port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def png_pixels(path: Path) -> tuple[int, int, list[tuple[int, ...]]]:
    """Decodes a small 8-bit RGB/RGBA non-interlaced PNG: (width, height, row-major RGB pixels)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat += chunk
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, header
    bpp = 3 if colour == 2 else 4
    raw, stride, prev, pixels = zlib.decompress(idat), width * bpp, bytearray(width * bpp), []
    for y in range(height):
        start = y * (stride + 1)
        kind, row = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            a = row[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                row[i] = (row[i] + a) & 255
            elif kind == 2:
                row[i] = (row[i] + b) & 255
            elif kind == 3:
                row[i] = (row[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                row[i] = (row[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        pixels += [tuple(row[x * bpp:x * bpp + 3]) for x in range(width)]
        prev = row
    return width, height, pixels


# ----------------------------------------------------------------------------- what a page reports

def test_clean_svg_page_has_no_errors_and_counts_its_circles(chromium, tmp_path):
    circles = "".join(f"<circle cx='{10 + 20 * i}' cy='20' r='5' fill='steelblue'/>" for i in range(7))
    path = page_file(tmp_path, f"<svg width='200' height='40'>{circles}</svg>"
                               "<script>console.log('drawn', 7)</script>")
    with chromium.open(path) as page:
        assert page.console_errors == []
        assert page.console == [browser.ConsoleMessage("log", "drawn 7")]
        assert page.evaluate("document.querySelectorAll('svg circle').length") == 7
        assert page.requests == [path.resolve().as_uri()]
        assert page.external_requests == []


def test_an_inline_script_that_throws_is_reported(chromium, tmp_path):
    path = page_file(tmp_path, "<script>null.roofline</script><p>after</p>")
    with chromium.open(path) as page:
        assert len(page.exceptions) == 1
        assert "TypeError" in page.exceptions[0] and "roofline" in page.exceptions[0]
        assert page.console_errors == [f"uncaught: {page.exceptions[0]}"]


def test_console_error_and_failed_assert_are_reported_but_log_and_warn_are_not(chromium, tmp_path):
    path = page_file(tmp_path, "<script>console.log('fine'); console.warn('hmm');"
                               "console.error('timeline has', 0, 'bars'); console.assert(1 > 2, 'order')"
                               "</script>")
    with chromium.open(path) as page:
        assert page.console_errors == ["console.error: timeline has 0 bars", "console.assert: order"]
        assert [m.type for m in page.console] == ["log", "warning", "error", "assert"]


def test_errors_after_the_load_event_are_in_once_goto_returns(chromium, tmp_path):
    # Charts are often drawn in requestAnimationFrame / setTimeout, after the load event.
    path = page_file(tmp_path, "<script>"
                               "requestAnimationFrame(() => { throw new Error('in frame') });"
                               "setTimeout(() => { throw new Error('in timer') }, 0);"
                               "Promise.reject(new Error('rejected'));"
                               "</script>")
    with chromium.open(path) as page:
        text = "\n".join(page.exceptions)
        assert len(page.exceptions) == 3, text
        for message in ("in frame", "in timer", "rejected"):
            assert message in text


def test_a_missing_local_file_is_an_error_log_entry(chromium, tmp_path):
    path = page_file(tmp_path, "<img src='no-such-chart.png'>")
    with chromium.open(path) as page:
        assert len(page.log_errors) == 1
        assert "ERR_FILE_NOT_FOUND" in page.log_errors[0] and "no-such-chart.png" in page.log_errors[0]
        assert page.console_errors == [f"log: {page.log_errors[0]}"]


def test_an_external_resource_is_an_error_and_an_external_request(chromium, tmp_path):
    url = f"http://127.0.0.1:{closed_port()}/chart.js"
    path = page_file(tmp_path, f"<script src='{url}'></script>")
    with chromium.open(path) as page:
        assert page.external_requests == [url]
        assert len(page.log_errors) == 1 and "net::ERR_" in page.log_errors[0] and url in page.log_errors[0]


def test_external_requests_are_seen_even_when_they_succeed(chromium, tmp_path):
    # On a machine with a network a CDN script loads without any error: only the request shows it.
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        url = f"http://127.0.0.1:{server.getsockname()[1]}/lib.js"
        path = page_file(tmp_path, f"<script src='{url}'></script>")
        page = chromium.new_page()
        try:
            with pytest.raises(BrowserError, match="no load event"):
                page.goto(path, timeout=1.0)      # the server never answers: load never fires
            assert page.external_requests == [url]
            assert page.console_errors == []
        finally:
            page.close()
    # The browser is still usable after a page timed out.
    with chromium.open(page_file(tmp_path, "<p>ok</p>", "ok.html")) as page:
        assert page.evaluate("document.body.textContent") == "ok"


# ----------------------------------------------------------------------------- evaluate

def test_evaluate_returns_json_values_awaits_promises_and_raises_on_throw(chromium, tmp_path):
    with chromium.open(page_file(tmp_path, "<svg id='m'><rect width='3' height='4'/></svg>")) as page:
        assert page.evaluate("({n: 2, xs: [1.5, 'a', null], ok: true})") == {"n": 2, "xs": [1.5, "a", None], "ok": True}
        assert page.evaluate("undefined") is None
        assert page.evaluate("1/0") == "Infinity"
        assert page.evaluate("new Promise(r => setTimeout(() => r(42), 10))") == 42
        assert page.evaluate("document.getElementById('m').getBBox().width") == 3
        with pytest.raises(JavaScriptError, match="ReferenceError: drawRoofline is not defined"):
            page.evaluate("drawRoofline()")
        with pytest.raises(JavaScriptError, match="late"):
            page.evaluate("Promise.reject(new Error('late'))")
        assert page.console_errors == []   # evaluate's own errors are raised, not logged


def test_wait_for_polls_until_a_late_chart_appears(chromium, tmp_path):
    path = page_file(tmp_path, "<script>setTimeout(() => document.body.insertAdjacentHTML("
                               "'beforeend', '<svg><circle r=\"1\"/></svg>'), 300)</script>")
    with chromium.open(path) as page:
        assert page.evaluate("document.querySelectorAll('circle').length") == 0
        assert page.wait_for("document.querySelectorAll('circle').length", timeout=5) == 1
        with pytest.raises(BrowserError, match="still falsy"):
            page.wait_for("document.querySelector('canvas')", timeout=0.2)


# ----------------------------------------------------------------------------- screenshots

def test_viewport_screenshot_is_a_png_of_the_window_size(chromium, tmp_path):
    with chromium.open(page_file(tmp_path, "<p>short page</p>")) as page:
        out = tmp_path / "viewport.png"
        assert page.screenshot(out, full_page=False) == chromium.window
        assert browser.png_size(out) == chromium.window == browser.DEFAULT_WINDOW


def test_full_page_screenshot_covers_a_page_taller_than_the_window(chromium, tmp_path):
    width, height = chromium.window
    body = f"<div style='height:{height * 2 + 37}px; background:#eee'>tall</div>"
    with chromium.open(page_file(tmp_path, body)) as page:
        out = tmp_path / "full.png"
        assert page.screenshot(out) == (width, height * 2 + 37)
        assert browser.png_size(out) == (width, height * 2 + 37)


def test_a_screenshot_shows_what_was_drawn(chromium, tmp_path):
    body = ("<svg width='400' height='300' style='display:block'>"
            "<rect x='100' y='50' width='80' height='60' fill='rgb(255,0,0)'/></svg>")
    with chromium.open(page_file(tmp_path, body)) as page:
        out = tmp_path / "clip.png"
        assert page.screenshot(out, clip=(90, 40, 100, 80)) == (100, 80)
    width, height, pixels = png_pixels(out)
    assert (width, height) == (100, 80)
    assert pixels[40 * width + 50] == (255, 0, 0)     # page (140, 80): inside the rect
    assert pixels[5 * width + 5] == (255, 255, 255)   # page (95, 45): outside it
    assert sum(p == (255, 0, 0) for p in pixels) == 80 * 60


def test_keep_screenshot_writes_the_artifact_directory(chromium, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ACCELSIM_TEST_ARTIFACTS", str(tmp_path / "artifacts"))
    monkeypatch.setattr(browser, "KEPT", [])
    with chromium.open(page_file(tmp_path, "<h1>kept</h1>")) as page:
        kept = browser.keep_screenshot(page, "harness-self-test")
    assert kept == tmp_path / "artifacts" / "harness-self-test.png"
    assert browser.png_size(kept) == chromium.window
    assert browser.KEPT == [kept]
    assert str(kept) in capsys.readouterr().out


def test_artifacts_default_to_the_gitignored_build_directory(monkeypatch):
    monkeypatch.delenv("ACCELSIM_TEST_ARTIFACTS", raising=False)
    path = browser.artifact_path("x.png")
    assert path == browser.REPO / "build" / "test-artifacts" / "x.png"
    ignored = subprocess.run(["git", "check-ignore", "-q", str(path)], cwd=browser.REPO)
    assert ignored.returncode == 0, "build/test-artifacts/ must be gitignored"


# ----------------------------------------------------------------------------- launching, dying

def test_open_page_launches_and_closes_its_own_browser(chromium_path, tmp_path):
    started = time.monotonic()
    with browser.open_page(page_file(tmp_path, "<svg><circle r='2'/></svg>")) as page:
        assert page.evaluate("document.querySelectorAll('circle').length") == 1
        page.screenshot(tmp_path / "own.png")
        process = page.browser._proc
    assert process.poll() is not None                  # the browser is gone
    assert time.monotonic() - started < 20


def test_a_browser_that_dies_at_start_reports_its_stderr(tmp_path):
    fake = tmp_path / "fake-chromium"
    fake.write_text("#!/bin/sh\necho 'fake chromium: Missing X server or $DISPLAY' >&2\nexit 3\n")
    fake.chmod(0o755)
    with pytest.raises(BrowserError) as info:
        Browser(str(fake), timeout=10)
    assert "exit status 3" in str(info.value)
    assert "Missing X server" in str(info.value)


def test_a_browser_that_never_answers_times_out(tmp_path):
    fake = tmp_path / "silent-chromium"
    fake.write_text("#!/bin/sh\nexec sleep 60\n")
    fake.chmod(0o755)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        Browser(str(fake), timeout=0.5)
    assert time.monotonic() - started < 10             # and it was killed, not waited for


def test_commands_after_close_are_refused(chromium_path, tmp_path):
    running = Browser(chromium_path)
    running.close()
    running.close()                                    # twice is fine
    assert running._proc.poll() is not None
    with pytest.raises(BrowserError, match="closed"):
        running.new_page()


# ----------------------------------------------------------------------------- finding a browser

def test_no_browser_skips_locally(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("ACCELSIM_CHROMIUM", raising=False)
    monkeypatch.delenv("CI", raising=False)
    assert browser.find_chromium() is None
    with pytest.raises(pytest.skip.Exception):
        browser.require_chromium()


@pytest.mark.parametrize("ci", ["true", "1"])
def test_no_browser_fails_under_ci(monkeypatch, ci):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("ACCELSIM_CHROMIUM", raising=False)
    monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.fail.Exception, match="CI is set"):
        browser.require_chromium()


def test_the_override_variable_names_the_browser(monkeypatch, tmp_path):
    fake = tmp_path / "my-chrome"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("ACCELSIM_CHROMIUM", str(fake))
    assert browser.find_chromium() == str(fake)
    monkeypatch.setenv("ACCELSIM_CHROMIUM", str(tmp_path / "absent"))
    assert browser.find_chromium() is None
