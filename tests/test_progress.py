"""The shared progress line (accel_sim.progress): bar, counts, ETA, and its silence off a terminal."""

from __future__ import annotations

import io
import time

from accel_sim import progress as progress_module
from accel_sim.progress import Progress, eta_text


def test_eta_text():
    assert [eta_text(s) for s in (0, 44.6, 59.4, 60, 185, 3599, 3600, 7620)] == \
        ["0s", "45s", "59s", "1m00s", "3m05s", "59m59s", "1h00m", "2h07m"]


def test_eta_comes_from_the_rate_since_the_first_call(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(progress_module.time, "monotonic", lambda: clock[0])
    err = io.StringIO()
    monkeypatch.setattr(progress_module.sys, "stderr", err)
    p = Progress("sweep grid.yaml", quiet=False)
    p.quiet = False   # StringIO is no terminal
    p(4_000, 10_000)          # resumed: 4,000 points were done before this run
    clock[0] = 110.0
    p(5_000, 10_000)          # 1,000 points in 10 s: 5,000 left take 50 s
    assert err.getvalue() == "\rsweep grid.yaml [###############               ]  50.0% 5,000/10,000 ETA 50s"
    clock[0] = 130.0
    p(10_000, 10_000)         # done: no ETA, and the shorter line is padded over the longer one
    line = err.getvalue().split("\r")[-1]
    assert line.rstrip() == "sweep grid.yaml [##############################] 100.0% 10,000/10,000"
    assert len(line) == len("sweep grid.yaml [###############               ]  50.0% 5,000/10,000 ETA 50s")
    p.close()
    assert err.getvalue().endswith("\r" + " " * len(line) + "\r")


def test_quiet_first_second_and_trial_counts(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(progress_module.time, "monotonic", lambda: clock[0])
    err = io.StringIO()
    monkeypatch.setattr(progress_module.sys, "stderr", err)
    p = Progress("plan", quiet=False)
    p.quiet = False
    p(1, 0)
    assert err.getvalue() == ""   # nothing in the first second
    clock[0] = 2.0
    p(7, 0)
    assert err.getvalue() == "\rplan trial 7"
    q = Progress("plan", quiet=True)
    q(7, 0)
    q.close()
    assert err.getvalue() == "\rplan trial 7"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_status_ticker_redraws_in_place_on_a_terminal_and_erases_at_the_end(monkeypatch):
    err = _Terminal()
    monkeypatch.setattr(progress_module.sys, "stderr", err)
    with progress_module.StatusTicker(lambda: "capturing m.py · get_model() · 1s", quiet=False, after_s=0):
        time.sleep(0.6)   # redrawn every 0.25 s: at 0, 0.25 and 0.5 s
    draws = err.getvalue().split("\r")
    assert draws[0] == "" and draws[1] == "capturing m.py · get_model() · 1s" and len(draws) >= 4
    assert err.getvalue().endswith("\r" + " " * len("capturing m.py · get_model() · 1s") + "\r")


def test_status_ticker_off_a_terminal_prints_a_line_per_phase(monkeypatch):
    err = io.StringIO()
    monkeypatch.setattr(progress_module.sys, "stderr", err)
    phase = ["get_model()"]
    with progress_module.StatusTicker(lambda: f"capturing m.py · {phase[0]}", quiet=False, after_s=0,
                                      every_s=60, topic=lambda: phase[0]):
        time.sleep(0.4)
        phase[0] = "tracing the forward"
        time.sleep(0.4)
    # One line when it starts and one when the phase changes; no repeats within every_s, no "\r".
    assert err.getvalue() == "capturing m.py · get_model()\ncapturing m.py · tracing the forward\n"
    quiet = io.StringIO()
    monkeypatch.setattr(progress_module.sys, "stderr", quiet)
    with progress_module.StatusTicker(lambda: "x", quiet=True, after_s=0):
        time.sleep(0.3)
    assert quiet.getvalue() == ""
