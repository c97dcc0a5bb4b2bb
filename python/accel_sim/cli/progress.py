"""A one-line progress bar on stderr for work longer than a second (`plan`, `serve`)."""

from __future__ import annotations

import sys
import time


class Progress:
    """Called as progress(done, total) from the core; a total of 0 shows a count ("trial N")."""

    def __init__(self, label: str, quiet: bool) -> None:
        self.label, self.quiet, self.start, self.shown = label, quiet or not sys.stderr.isatty(), time.monotonic(), False

    def __call__(self, done: int, total: int) -> None:
        if self.quiet or time.monotonic() - self.start < 1.0:
            return
        if total > 0:
            frac = min(1.0, done / total)
            text = f"[{'#' * int(30 * frac):<30}] {frac * 100:5.1f}%"
        else:
            text = f"trial {done}"
        sys.stderr.write(f"\r{self.label} {text}")
        sys.stderr.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            sys.stderr.write("\r" + " " * (len(self.label) + 45) + "\r")
            sys.stderr.flush()
