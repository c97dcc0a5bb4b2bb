"""The fuzz run of CI: mutated device, system, model-config, graph, serve-trace and grid files,
command-line values and resized model scripts (tests/fuzz_inputs.py, seeded: the same 1,500 cases
on every machine, however fast), each ending in exit 0 with finite, non-negative figures or exit 2
with one line; never a traceback, a signal or a hang. Run it longer by hand:
python tests/fuzz_inputs.py --cases 100000 --seconds 3600."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import REPO

CASES = 1500  # about 45 s on a 2-core machine; the same cases, in order, on every run (one seed)


def test_mutated_inputs_end_in_a_result_or_one_line(tmp_path):
    progress = tmp_path / "progress.txt"
    failures = REPO / "build" / "fuzz-failures"
    done = subprocess.run([sys.executable, str(REPO / "tests" / "fuzz_inputs.py"), "--cases", str(CASES), "--seconds", "0",
                           "--progress", str(progress), "--failures", str(failures)],
                          capture_output=True, text=True, timeout=600)
    if done.returncode < 0 or not done.stdout.strip():
        last = progress.read_text() if progress.exists() else "(none started)"
        raise AssertionError(f"the fuzz run died (status {done.returncode}) in case {last}\n{done.stderr[-3000:]}")
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["cases"] == CASES, summary  # every case ran: no time cap cut the run short
    assert set(summary["by_kind"]) == {"device", "system", "config", "graph", "trace", "grid", "cli", "script"}, summary
    # Both outcomes occur: mutations that stay valid run, the others are refused.
    assert summary["exit 0"] > 0 and summary["exit 2"] > 0, summary
    assert not summary["failures"], "\n".join(
        f"case {f['case']} ({f['kind']}): {f['why']} -- inputs and command in {f['saved']}" for f in summary["failures"])
