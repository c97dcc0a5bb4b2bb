"""A one-line progress bar on stderr for work longer than a second (`plan`, `serve`, `sweep`), and
a status line for work that reports no progress of its own (a user script's capture)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any


def eta_text(seconds: float) -> str:
    """A remaining time as a person reads it: 45s, 3m05s, 2h07m."""
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class Progress:
    """Called as progress(done, total) from the core; a total of 0 shows a count ("trial N").

    With a total, the line also shows done/total and, once the work has gone on for a second,
    an ETA from the rate since the first call (so work already done when the first call came,
    as in a resumed sweep, does not count towards the rate)."""

    def __init__(self, label: str, quiet: bool) -> None:
        self.label, self.quiet, self.start, self.shown = label, quiet or not sys.stderr.isatty(), time.monotonic(), False
        self.first: tuple[int, float] | None = None   # (done, time) at the first call
        self.width = 0

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if self.first is None:
            self.first = (done, now)
        if self.quiet or now - self.start < 1.0:
            return
        self.show(self.text(done, total, now))

    def text(self, done: int, total: int, now: float) -> str:
        if total <= 0:
            return f"{self.label} trial {done}"
        frac = min(1.0, done / total)
        text = f"{self.label} [{'#' * int(30 * frac):<30}] {frac * 100:5.1f}% {done:,}/{total:,}"
        first_done, first_time = self.first if self.first is not None else (done, now)
        elapsed = now - first_time
        if done > first_done and elapsed >= 1.0 and done < total:
            text += f" ETA {eta_text((total - done) * elapsed / (done - first_done))}"
        return text

    def show(self, text: str) -> None:
        sys.stderr.write("\r" + text.ljust(self.width))
        sys.stderr.flush()
        self.width = max(self.width, len(text))
        self.shown = True

    def close(self) -> None:
        if self.shown:
            sys.stderr.write("\r" + " " * self.width + "\r")
            sys.stderr.flush()


class StatusTicker:
    """A status line drawn by a background thread while the block runs, for work that reports no
    progress of its own (a user script's import, get_model() and capture): nothing for the first
    `after_s` seconds, then `text()` on stderr, redrawn in place four times a second on a terminal
    (Progress.show); off a terminal (a CI log) printed as a line whenever `topic()` (the phase)
    changes and every `every_s` seconds in between. The line is erased when the block ends.
    Nothing when `quiet`."""

    def __init__(self, text: Callable[[], str], quiet: bool, after_s: float, every_s: float = 5.0,
                 topic: Callable[[], Any] | None = None) -> None:
        self.text, self.quiet, self.after_s, self.every_s, self.topic = text, quiet, after_s, every_s, topic
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._line = Progress("", quiet)

    def __enter__(self) -> StatusTicker:
        if not self.quiet:
            self._thread = threading.Thread(target=self._draw, name="accel-sim status line", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._line.close()

    def _draw(self) -> None:
        if self._stop.wait(self.after_s):
            return
        in_place = sys.stderr.isatty()
        last: tuple[Any, float] | None = None   # (topic, time) of the last line printed
        while True:
            if in_place:
                self._line.show(self.text())
            else:
                now, topic = time.monotonic(), self.topic() if self.topic else None
                if last is None or topic != last[0] or now - last[1] >= self.every_s:
                    print(self.text(), file=sys.stderr, flush=True)
                    last = (topic, now)
            if self._stop.wait(0.25):
                return
