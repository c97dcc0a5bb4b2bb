"""ScriptRun: one run of a user's model script (its import, get_model() and the capture of its
model) as the code running it reports it: the phase it is in, how long it has run, how many ops
the tracer has recorded so far, whether a Ctrl-C arrived, and its time limit.

The caller enters a run around that work (`with ScriptRun(path, timeout_s=60): ...`);
load_script and the captures report to the run entered in their thread through `enter_phase`
and `tracing`, which do nothing when no run is entered. Listeners (a status line, a watchdog)
are called on every phase change.

Time limit: with `timeout_s`, a run still going that many seconds after it was entered is
stopped with a UsageError naming its phase. A timer thread raises an exception in the running
thread (PyThreadState_SetAsyncExc), which takes effect at the thread's next Python bytecode: a
loop in Python stops at once, a C call that releases the GIL (a sleep, a read) stops when it
returns, and a C call that holds the GIL starves the timer. The command line, which must end even
then, watches from a native thread instead (`_core.ExitWatchdog`, accel_sim.script_watch).

Ctrl-C: a KeyboardInterrupt that the script raises itself is the script's error (a UsageError,
like any other exception from it), while one that comes from a SIGINT stays a KeyboardInterrupt.
Entered in the main thread with Python's default SIGINT handler, a run records SIGINTs to tell
the two apart (`interrupted_by_signal`).
"""

from __future__ import annotations

import ctypes
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from accel_sim.errors import UsageError

_ACTIVE = threading.local()


class _TimeUp(BaseException):
    """Raised into the running thread when its run's time is up. A BaseException, so that the
    `except Exception` of the script and of the capture let it through; the run turns it into a
    UsageError when it ends."""


def _raise_in_thread(thread_id: int, exception: type[BaseException] | None) -> None:
    """Schedules `exception` in the thread (None clears a scheduled one); CPython's C API."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id),
                                               ctypes.py_object(exception) if exception else None)


class ScriptRun:
    """Where the run of the script at `path` stands; a context manager (see the module)."""

    def __init__(self, path: str, timeout_s: float | None = None) -> None:
        if timeout_s is not None and not (0 < timeout_s < float("inf")):
            raise UsageError(f"a script's time limit must be a positive number of seconds (got {timeout_s})")
        self.path = path
        self.timeout_s = timeout_s
        self.phase: str | None = None          # what the capture code last said it is doing (None: nothing yet)
        self.started_s = time.monotonic()
        self.graph: Any = None                 # the torch.fx Graph the tracer is filling
        self._graph_inputs = 0                 # its nodes before the first op: the placeholders
        self.listeners: list[Callable[[ScriptRun], None]] = []
        self.interrupted_by_signal = False
        self.timed_out_in: str | None = None   # the phase the time limit found it in
        self._lock = threading.Lock()
        self._finished = threading.Event()
        self._thread_id = 0
        self._raised = False
        self._previous_sigint: Any = None
        self._outer: ScriptRun | None = None

    # -- what the capture code reports ---------------------------------------------------------
    def enter_phase(self, phase: str) -> None:
        self.phase = phase
        for listener in self.listeners:
            listener(self)

    def trace_into(self, graph: Any) -> None:
        """The tracer fills `graph` from now on (None: it is done); its nodes so far are inputs."""
        if graph is None:
            self.graph, self._graph_inputs = None, 0
        else:
            self._graph_inputs = len(graph.nodes)
            self.graph = graph

    def time_limit_message(self, timeout_s: float) -> str:
        """The one line that says the run outlived its time limit, naming the phase it was in
        (the API raises it; the command line adds how to allow more)."""
        phase = self.timed_out_in or self.phase
        return f"{self.path}{': ' + phase if phase else ''} was still running after its {timeout_s:g} s time limit"

    def ops_traced(self) -> int:
        graph = self.graph
        return max(0, len(graph.nodes) - self._graph_inputs) if graph is not None else 0

    def elapsed_s(self) -> float:
        return time.monotonic() - self.started_s

    # -- entering and leaving ------------------------------------------------------------------
    def __enter__(self) -> ScriptRun:
        self.started_s = time.monotonic()
        self._thread_id = threading.get_ident()
        self._outer = getattr(_ACTIVE, "run", None)
        _ACTIVE.run = self
        if threading.current_thread() is threading.main_thread() and \
                signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self._previous_sigint = signal.signal(signal.SIGINT, self._on_sigint)
        if self.timeout_s is not None:
            threading.Thread(target=self._watch, name="accel-sim script time limit", daemon=True).start()
        return self

    def __exit__(self, kind: Any, error: Any, traceback: Any) -> None:
        # Once finished is set under the lock, the timer raises nothing more; an exception it
        # raised before and that has not been delivered yet is cleared, or caught here if it
        # lands while this runs (the run then ended in time).
        while True:
            try:
                with self._lock:
                    self._finished.set()
                    if self._raised:
                        _raise_in_thread(self._thread_id, None)
                break
            except _TimeUp:
                continue
        if self._previous_sigint is not None:
            signal.signal(signal.SIGINT, self._previous_sigint)
        _ACTIVE.run = self._outer
        if kind is not None and issubclass(kind, _TimeUp):
            raise UsageError(self.time_limit_message(self.timeout_s)) from None

    def _on_sigint(self, signum: int, frame: Any) -> None:
        self.interrupted_by_signal = True
        signal.default_int_handler(signum, frame)

    def _watch(self) -> None:
        if self._finished.wait(self.timeout_s):
            return
        while True:
            with self._lock:
                if self._finished.is_set():
                    return
                self.timed_out_in = self.timed_out_in or self.phase
                self._raised = True
                _raise_in_thread(self._thread_id, _TimeUp)
            if self._finished.wait(1.0):   # again each second, should the script swallow it
                return


def active() -> ScriptRun | None:
    """The run entered in this thread, if any."""
    return getattr(_ACTIVE, "run", None)


def enter_phase(phase: str) -> None:
    """Tells the run entered in this thread (if any) what it is doing now."""
    run = active()
    if run is not None:
        run.enter_phase(phase)


def tracing(graph: Any) -> None:
    """Tells the run entered in this thread (if any) which FX graph the tracer is filling."""
    run = active()
    if run is not None:
        run.trace_into(graph)


def raised_by_script(error: BaseException) -> bool:
    """Whether `error`, raised while the script's code ran, is the script's own failure: any
    exception but a KeyboardInterrupt that a Ctrl-C (SIGINT) caused."""
    if isinstance(error, KeyboardInterrupt):
        run = active()
        return not (run is not None and run.interrupted_by_signal)
    return isinstance(error, (Exception, SystemExit))


def describe(error: BaseException) -> str:
    """What the script's code did, in one line: "raised ValueError: ...", or "called
    sys.exit(0)" for a SystemExit."""
    if isinstance(error, SystemExit):
        return f"called sys.exit({error.code!r})" if error.code is not None else "called sys.exit()"
    message = " ".join(str(error).split())
    if len(message) > 300:
        message = message[:297] + "..."
    return f"raised {type(error).__name__}: {message}" if message else f"raised {type(error).__name__}"
