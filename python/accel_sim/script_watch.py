"""watch_script: a user script's run (its import, get_model() and the capture of its model) under
the command line's time limit (`--timeout`) and with a status line on stderr.

The time limit is kept by `_core.ExitWatchdog`, a native thread: past it, the process prints one
line naming the phase the run was in and exits with status 2, even when the script loops in
Python, sleeps, or sits in a C call that holds the GIL (where no Python thread could run). The
status line (accel_sim.progress.StatusTicker) says the phase, the ops traced so far and the
time taken, once the run has gone on for a few seconds.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from accel_sim.commands.flags import SECONDS
from accel_sim.progress import StatusTicker, eta_text
from accel_sim.errors import UsageError
from accel_sim.io import fields

DEFAULT_TIMEOUT_S = 600.0
# Seconds before the first status line; the environment variable lowers it (tests) or raises it.
STATUS_AFTER_ENV = "ACCEL_SIM_STATUS_AFTER_S"
DEFAULT_STATUS_AFTER_S = 3.0


def add_timeout_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--timeout", **SECONDS, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
        help="with a script: seconds its import, get_model() and capture may take (fit: each capture) before "
             f"the command stops with exit status 2, naming the phase it was in (default: {DEFAULT_TIMEOUT_S:g}; "
             "0: no limit)")


def _status_after_s() -> float:
    text = os.environ.get(STATUS_AFTER_ENV)
    if text is None:
        return DEFAULT_STATUS_AFTER_S
    value = fields.finite_text(text, STATUS_AFTER_ENV)
    if value < 0:
        raise UsageError(f"{STATUS_AFTER_ENV}: {text!r} is a negative number of seconds")
    return value


def _timeout_message(run, timeout_s: float) -> str:
    # On a terminal the status line may be on screen: the message starts by erasing it.
    erase = "\r\x1b[K" if sys.stderr.isatty() else ""
    return f"{erase}accel-sim: error: {run.time_limit_message(timeout_s)}; allow more with --timeout SECONDS (0: no limit)\n"


def _status_text(run, timeout_s: float) -> str:
    ops = run.ops_traced()
    parts = [f"capturing {os.path.basename(run.path)}"] + ([run.phase] if run.phase else [])
    if run.graph is not None:
        parts.append(f"{ops:,} op{'' if ops == 1 else 's'} traced")
    elapsed = eta_text(run.elapsed_s())
    parts.append(f"{elapsed} of {eta_text(timeout_s)} allowed" if timeout_s else elapsed)
    return " · ".join(parts)


@contextmanager
def watch_script(path: str, timeout_s: float, quiet: bool) -> Iterator[object]:
    """Runs the block as the ScriptRun of the script at `path`: the process ends with exit status 2
    and one line when the block takes longer than `timeout_s` (0: no limit), and unless `quiet` a
    status line shows how it is going."""
    from accel_sim import _core
    from accel_sim.script_run import ScriptRun

    try:  # PyTorch's import is accel-sim's start-up, not the script's time
        import accel_sim.capture  # noqa: F401
    except ImportError:
        pass  # load_target says what to install
    run = ScriptRun(path)
    watchdog = None
    if timeout_s:
        watchdog = _core.ExitWatchdog(timeout_s, _timeout_message(run, timeout_s))
        run.listeners.append(lambda r: watchdog.set_message(_timeout_message(r, timeout_s)))
    try:
        with StatusTicker(lambda: _status_text(run, timeout_s), quiet, _status_after_s(), topic=lambda: run.phase), run:
            yield run
    finally:
        if watchdog is not None:
            watchdog.cancel()
