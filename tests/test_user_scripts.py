"""User scripts that exit, interrupt themselves, loop or take long: the command line ends with one
line and exit status 2 (never a silent exit 0, never a hang), `check` reads its baseline before it
runs the script, and a long capture shows a status line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO

LINEAR = "import torch\n\n\ndef get_model():\n    return torch.nn.Linear(4, 4), torch.randn(2, 4)\n"


def _cli(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "accel_sim.cli.main", *args], capture_output=True, text=True,
                          cwd=REPO, env={**os.environ, **(env or {})}, timeout=timeout)


def _script(tmp_path: Path, text: str, name: str = "model.py") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _one_error_line(result: subprocess.CompletedProcess) -> str:
    """With --quiet, stderr is exactly the one error line."""
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("accel-sim: error: "), result.stderr
    return lines[0]


@pytest.fixture
def baseline(tmp_path: Path) -> str:
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps({"latency_s": 1.0, "peak_memory_bytes": 1e9}))  # any real baseline
    return str(path)


@pytest.mark.parametrize("body, expected", [
    # get_model() calling sys.exit(0): the check used to exit 0 with no output, nothing compared.
    ("import sys\ndef get_model():\n    sys.exit(0)\n", "get_model() called sys.exit(0)"),
    ("def get_model():\n    raise KeyboardInterrupt\n", "get_model() raised KeyboardInterrupt"),
    ("import sys\nsys.exit(0)\n", "importing it called sys.exit(0)"),
    ("raise KeyboardInterrupt\n", "importing it raised KeyboardInterrupt"),
    # The model's forward ending the process while it is traced.
    ("import sys, torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        sys.exit(0)\n"
     "def get_model():\n    return M(), torch.randn(2)\n", "the model's code called sys.exit(0)"),
    ("import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        raise KeyboardInterrupt\n"
     "def get_model():\n    return M(), torch.randn(2)\n", "the model's code raised KeyboardInterrupt"),
    # sys.exit() in model code that runs outside the trace: main() refuses it as well.
    ("import sys, torch\nclass M(torch.nn.Module):\n    def named_parameters(self, *a, **k):\n        sys.exit(0)\n"
     "def get_model():\n    return M(), torch.randn(2)\n", "stopped by sys.exit(0)"),
])
def test_check_never_passes_when_the_script_exits(tmp_path: Path, baseline: str, body: str, expected: str):
    result = _cli("check", _script(tmp_path, body), "--device", "a100", "--baseline", baseline, "--quiet")
    assert result.returncode == 2
    assert expected in _one_error_line(result)
    assert result.stdout == ""


def test_training_step_capture_refuses_sys_exit_too(tmp_path: Path):
    body = ("import sys, torch\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.w = torch.nn.Linear(2, 2)\n    def forward(self, x):\n        sys.exit(0)\n"
            "def get_model():\n    return M(), torch.randn(2, 2)\n")
    result = _cli("simulate", _script(tmp_path, body), "--train", "--quiet")
    assert result.returncode == 2 and "the model's code called sys.exit(0)" in _one_error_line(result)


def test_api_turns_sys_exit_into_a_usage_error(tmp_path: Path):
    import accel_sim

    with pytest.raises(accel_sim.UsageError, match=r"get_model\(\) called sys.exit\(0\)"):
        accel_sim.load_target(_script(tmp_path, "import sys\ndef get_model():\n    sys.exit(0)\n"))


@pytest.mark.parametrize("content, expected", [
    (None, "not found"),
    ("{", "not a JSON baseline"),
    ("[1, 2]", "baseline.json must be a mapping of keys to values, got a list"),
    ('{"latency_s": NaN, "peak_memory_bytes": 1}', "not a JSON baseline (NaN is not a JSON number)"),
    ('{"latency_s": Infinity, "peak_memory_bytes": 1}', "not a JSON baseline (Infinity is not a JSON number)"),
    ('{"latency_s": 0, "peak_memory_bytes": 1}', "'latency_s' must be greater than 0, got 0"),
    ('{"latency_s": true, "peak_memory_bytes": 1}', "'latency_s' must be a number, got True"),
    ('{"peak_memory_bytes": 1}', "'latency_s' must be a number, got None"),
    ('{"latency_s": 0.001, "peak_memory_bytes": -1}', "'peak_memory_bytes' must be at least 0, got -1"),
    ('{"latency_s": 0.001, "peak_memory_bytes": 1, "device": "a100"}', "'device' must be a mapping"),
    ('{"latency_s": 0.001, "peak_memory_bytes": 1, "device": {"id": 3}}', "'device.id' must be a string, got 3"),
    ('{"latency_s": 0.001, "peak_memory_bytes": 1, "capture": []}', "'capture' must be a mapping"),
    ('{"latency_s": 0.001, "peak_memory_bytes": 1, "device": {"id": "h100_sxm"}}', "written for device 'h100_sxm'"),
])
def test_check_reads_the_baseline_before_running_the_script(tmp_path: Path, content, expected):
    # get_model() leaves a mark: a baseline that cannot be compared with must stop the check
    # before the (possibly long) capture runs the script.
    mark = tmp_path / "ran"
    script = _script(tmp_path, f"from pathlib import Path\nPath({str(mark)!r}).touch()\n" + LINEAR)
    path = tmp_path / "baseline.json"
    if content is not None:
        path.write_text(content)
    result = _cli("check", script, "--device", "a100", "--baseline", str(path), "--quiet")
    assert result.returncode == 2
    assert expected in _one_error_line(result)
    assert not mark.exists()


def test_check_write_baseline_into_a_missing_directory_fails_before_the_script(tmp_path: Path):
    mark = tmp_path / "ran"
    script = _script(tmp_path, f"from pathlib import Path\nPath({str(mark)!r}).touch()\n" + LINEAR)
    result = _cli("check", script, "--baseline", str(tmp_path / "no" / "b.json"), "--write-baseline", "--quiet")
    assert result.returncode == 2 and "no directory" in _one_error_line(result)
    assert not mark.exists()


@pytest.mark.parametrize("limit", ["nan", "inf", "nan%"])
def test_check_refuses_a_limit_that_passes_everything(mlp_graph_file: Path, baseline: str, limit: str):
    # A NaN limit compares as "not exceeded" whatever the change; an infinite one allows any growth.
    result = _cli("check", str(mlp_graph_file), "--baseline", baseline, f"--max-regression={limit}")
    assert result.returncode == 2 and "finite" in result.stderr


def test_check_keeps_its_verdict_when_the_reader_leaves(tmp_path: Path, mlp_graph_file: Path):
    path = tmp_path / "baseline.json"
    assert _cli("check", str(mlp_graph_file), "--device", "a100", "--baseline", str(path),
                "--write-baseline").returncode == 0
    data = json.loads(path.read_text())
    data["latency_s"] /= 2  # this run is twice as slow as the baseline: a regression
    path.write_text(json.dumps(data))
    # `accel-sim check ... | head -c 0`: stdout is a pipe whose reader has already gone.
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run([sys.executable, "-m", "accel_sim.cli.main", "check", str(mlp_graph_file), "--device",
                               "a100", "--baseline", str(path), "--json"], stdout=write, stderr=subprocess.PIPE,
                              text=True, cwd=REPO, timeout=300)
    finally:
        os.close(write)
    assert proc.returncode == 1, proc.stderr
    assert "latency grew 100.0%" in proc.stderr


LOOPS = "def get_model():\n    while True:\n        pass\n"
# A C call that holds the GIL for hours: no Python thread can run while it does.
HOLDS_THE_GIL = "def get_model():\n    return sum(range(10**13))\n"


@pytest.mark.parametrize("body", [LOOPS, HOLDS_THE_GIL], ids=["python-loop", "c-call-holding-the-gil"])
@pytest.mark.parametrize("command", [["simulate", "--device", "a100"], ["check", "--baseline", "{baseline}"],
                                     ["capture", "-o", "{out}"]])
def test_a_script_that_never_returns_stops_at_its_timeout(tmp_path: Path, baseline: str, body: str, command: list):
    args = [a.format(baseline=baseline, out=tmp_path / "g.json") for a in command]
    start = time.monotonic()
    result = _cli(args[0], _script(tmp_path, body), *args[1:], "--timeout", "2", "--quiet", timeout=120)
    took_s = time.monotonic() - start
    assert result.returncode == 2
    line = _one_error_line(result)
    assert "get_model() was still running after its 2 s time limit; allow more with --timeout" in line
    # 2 s of the script plus the interpreter's and PyTorch's start (about 3 s here, more on a
    # busy machine); without the limit it would run for hours.
    assert took_s < 60


def test_fit_has_the_timeout_too(tmp_path: Path):
    result = _cli("fit", _script(tmp_path, LOOPS), "--devices", "a100", "--axis", "batch", "--timeout", "2",
                  "--quiet", timeout=120)
    assert result.returncode == 2 and "get_model() was still running" in _one_error_line(result)


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "ten"])
def test_timeout_must_be_a_finite_non_negative_number(tmp_path: Path, value: str):
    result = _cli("simulate", _script(tmp_path, LINEAR), f"--timeout={value}")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and "argument --timeout" in lines[0], result.stderr


def test_timeout_zero_is_no_limit_and_a_quick_script_is_unaffected(tmp_path: Path):
    for timeout in ("0", "600"):
        result = _cli("simulate", _script(tmp_path, LINEAR), "--device", "a100", "--json", "--timeout", timeout)
        assert result.returncode == 0, result.stderr
        # Linear(4, 4) on 2 x 4 fp32: 2 * 2 * 4 * 4 = 64 FLOPs of the matmul plus 2 * 4 of the bias.
        assert json.loads(result.stdout)["flops"] == 2 * 2 * 4 * 4 + 2 * 4


def test_the_command_line_and_the_api_say_a_time_limit_alike():
    from accel_sim.script_watch import _timeout_message
    from accel_sim.script_run import ScriptRun

    run = ScriptRun("model.py")
    run.enter_phase("get_model()")
    assert _timeout_message(run, 2) == ("accel-sim: error: model.py: get_model() was still running after its 2 s time "
                                        "limit; allow more with --timeout SECONDS (0: no limit)\n")
    assert run.time_limit_message(2) == "model.py: get_model() was still running after its 2 s time limit"


def test_status_line_names_no_phase_before_the_capture_enters_one():
    from accel_sim.script_watch import _status_text
    from accel_sim.script_run import ScriptRun

    run = ScriptRun("model.py")
    run.started_s = time.monotonic() - 5
    assert _status_text(run, 0) == "capturing model.py · 5s"
    assert ScriptRun("model.py").time_limit_message(1) == "model.py was still running after its 1 s time limit"


SLEEPS = "import time, torch\n\n\ndef get_model():\n    time.sleep(2)\n    return torch.nn.Linear(4, 4), torch.randn(2, 4)\n"


def test_a_long_capture_shows_its_phase_and_time(tmp_path: Path):
    # The first status line comes after ACCEL_SIM_STATUS_AFTER_S (3 s unless set); off a terminal
    # it is a plain line every few seconds.
    env = {"ACCEL_SIM_STATUS_AFTER_S": "0.2"}
    result = _cli("simulate", _script(tmp_path, SLEEPS), "--device", "a100", "--json", env=env)
    assert result.returncode == 0, result.stderr
    status = [line for line in result.stderr.splitlines() if "get_model()" in line]
    assert status and status[0].startswith("capturing model.py · get_model() · ")
    assert status[0].endswith("of 10m00s allowed")
    assert json.loads(result.stdout)["flops"] == 2 * 2 * 4 * 4 + 2 * 4
    quiet = _cli("simulate", _script(tmp_path, SLEEPS), "--device", "a100", "--json", "--quiet", env=env)
    assert quiet.returncode == 0 and quiet.stderr == ""


def test_status_line_counts_the_ops_traced(tmp_path: Path):
    # A forward that sleeps 6 s between its two matmuls. Off a terminal a line comes when the
    # phase changes and every 5 s after: one falls in the sleep, when one op (x @ x) is traced.
    body = ("import time, torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        y = x @ x\n"
            "        time.sleep(6)\n        return y @ x\n"
            "def get_model():\n    return M(), torch.randn(4, 4)\n")
    result = _cli("capture", _script(tmp_path, body), "-o", str(tmp_path / "g.json"),
                  env={"ACCEL_SIM_STATUS_AFTER_S": "0"})
    assert result.returncode == 0, result.stderr
    assert "capturing model.py · tracing the forward · 1 op traced · " in result.stderr


def test_ctrl_c_is_an_interruption_not_the_scripts_error(tmp_path: Path):
    # A real SIGINT while get_model() runs: exit 130 ("interrupted"), not a usage error about the script.
    # The child gets SIGINT's default disposition: a test run started as a background job of a
    # non-interactive shell inherits SIGINT ignored, and Python then installs no handler for it.
    proc = subprocess.Popen([sys.executable, "-m", "accel_sim.cli.main", "simulate", _script(tmp_path, LOOPS),
                             "--timeout", "0"], stderr=subprocess.PIPE, text=True, cwd=REPO,
                            env={**os.environ, "ACCEL_SIM_STATUS_AFTER_S": "0"},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        for line in proc.stderr:
            if "· get_model() ·" in line:
                break
        proc.send_signal(signal.SIGINT)
        rest = proc.stderr.read()
        assert proc.wait(timeout=60) == 130
    finally:
        proc.kill()
    assert "accel-sim: interrupted" in rest and "error" not in rest and "Traceback" not in rest


def test_api_load_target_timeout(tmp_path: Path):
    import accel_sim

    start = time.monotonic()
    with pytest.raises(accel_sim.UsageError, match=r"get_model\(\) was still running after its 1 s time limit"):
        accel_sim.load_target(_script(tmp_path, LOOPS), timeout_s=1)
    assert time.monotonic() - start < 30
    # A script that finishes in time is captured as without a limit, and nothing is raised later.
    graph = accel_sim.load_target(_script(tmp_path, LINEAR, "linear.py"), timeout_s=120)
    assert [n["op"] for n in graph["nodes"]] == ["t", "addmm"]  # Linear: the weight transposed, then x W^T + b
    time.sleep(1.5)
