"""examples/ci/accel-sim-check.yml, the GitHub Actions example: its trigger, its install order, and
its `accel-sim check` and job-summary steps run as the runner's bash runs them, against a baseline
the check passes, a regression it must fail and a missing baseline, so the example cannot rot."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import accel_sim
from conftest import REPO

WORKFLOW = REPO / "examples" / "ci" / "accel-sim-check.yml"


@pytest.fixture(scope="module")
def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))


def _steps(workflow: dict) -> list[dict]:
    (job,) = workflow["jobs"].values()
    return job["steps"]


def _step(workflow: dict, command: str) -> dict:
    """The one step whose `run:` has a line starting with `command`."""
    (step,) = [s for s in _steps(workflow)
               if any(line.strip().startswith(command) for line in s.get("run", "").splitlines())]
    return step


def test_triggers_on_pull_requests(workflow):
    # YAML 1.1 (PyYAML) reads the bare key `on` as the boolean True; GitHub reads it as "on".
    trigger = workflow.get("on", workflow.get(True))
    assert isinstance(trigger, dict) and "pull_request" in trigger
    uses = [s.get("uses", "").split("@")[0] for s in _steps(workflow)]
    assert uses[:2] == ["actions/checkout", "actions/setup-python"] and "actions/upload-artifact" in uses
    upload = next(s for s in _steps(workflow) if s.get("uses", "").startswith("actions/upload-artifact"))
    summary = _step(workflow, "python - <<")
    assert upload.get("if") == "always()" and summary.get("if") == "always()"  # shown when the check fails too


def test_installs_the_pinned_cpu_torch_before_accel_sim(workflow):
    lines = [line.strip() for line in _step(workflow, "pip install torch")["run"].splitlines()]
    torch_line = next(i for i, line in enumerate(lines) if "torch==" in line)
    accel_line = next(i for i, line in enumerate(lines) if "ACCEL_SIM_PACKAGE" in line)
    assert torch_line < accel_line
    assert "--index-url https://download.pytorch.org/whl/cpu" in lines[torch_line]
    # The same torch the project tests with (scripts/test_all.sh): a capture depends on its version.
    pinned = re.search(r"torch==([0-9.]+)", (REPO / "scripts" / "test_all.sh").read_text()).group(1)
    assert f"torch=={pinned} " in lines[torch_line] + " "


def _bash(script: str, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    """One step's `run:` as GitHub's runner runs it (bash -eo pipefail), with `accel-sim` and
    `python` being the package and interpreter under test."""
    prelude = ('accel-sim() { "$TEST_PYTHON" -m accel_sim.cli.main "$@"; }\n'
               'python() { "$TEST_PYTHON" "$@"; }\n')
    package_root = str(Path(accel_sim.__file__).resolve().parent.parent)
    full_env = {**os.environ, **env, "TEST_PYTHON": sys.executable,
                "PYTHONPATH": os.pathsep.join([package_root, os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", prelude + script],
                          env=full_env, cwd=cwd, capture_output=True, text=True, timeout=300, check=False)


def test_check_step_passes_fails_and_summarizes(workflow, tmp_path):
    env = {k: str(v) for k, v in workflow["env"].items()}
    check = _step(workflow, "accel-sim check")["run"]
    summary = _step(workflow, "python - <<")["run"]
    (line,) = [ln for ln in check.splitlines() if ln.strip().startswith("accel-sim check")]
    assert "--json" in line and "--baseline" in line and "--max-regression 5%" in line
    result_file = tmp_path / re.search(r">\s*(\S+)", line).group(1)
    small = {**env, "ACCEL_SIM_TARGET": "--model gpt2 --seq 128"}

    # The baseline, as examples/ci/README.md writes it: the same command line plus --write-baseline.
    write = _bash(check.replace("--json", "--json --write-baseline"), small, tmp_path)
    assert write.returncode == 0, write.stderr
    baseline = json.loads((tmp_path / env["ACCEL_SIM_BASELINE"]).read_text())
    assert baseline["schema"] == "accel-sim/simulate" and baseline["device"]["id"] == "h100_sxm"

    def step(target_env: dict, code: int) -> str:
        run = _bash(check, target_env, tmp_path)
        assert run.returncode == code, run.stderr
        shown = tmp_path / "summary.md"
        shown.unlink(missing_ok=True)
        rendered = _bash(summary, {"GITHUB_STEP_SUMMARY": str(shown)}, tmp_path)
        assert rendered.returncode == 0, rendered.stderr
        return shown.read_text()

    text = step(small, 0)
    assert json.loads(result_file.read_text())["passed"] is True
    assert "| latency_s |" in text and "| ok |" in text and "regressed" not in text and text.rstrip().endswith("passed")

    # A pull request that doubles the sequence: the prefill's time about doubles, so exit 1.
    text = step({**env, "ACCEL_SIM_TARGET": "--model gpt2 --seq 256"}, 1)
    result = json.loads(result_file.read_text())
    assert result["passed"] is False and result["checks"][0]["exceeded"] is True
    latency_row = next(r for r in text.splitlines() if r.startswith("| latency_s |"))
    assert latency_row.endswith("| regressed |") and "| 5.0% |" in latency_row and "**failed**" in text

    # No baseline: a usage error (exit 2) prints no JSON, and the summary says where to look.
    text = step({**small, "ACCEL_SIM_BASELINE": "missing.json"}, 2)
    assert result_file.read_text() == "" and "printed no result" in text
