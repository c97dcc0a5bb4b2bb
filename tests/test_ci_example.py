"""examples/ci/accel-sim-check.yml, the GitHub Actions example: its trigger; its install step,
which refuses to run without a source for this project and installs from that source only; its
check that the installed `accel-sim` is this project's; and its `accel-sim check` and job-summary
steps, run as the runner's bash runs them against a baseline the check passes, a regression it
must fail and a missing baseline, so the example cannot rot."""

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
    accel_line = next(i for i, line in enumerate(lines) if line.startswith("pip install") and "ACCEL_SIM_SOURCE" in line)
    assert torch_line < accel_line
    assert "--index-url https://download.pytorch.org/whl/cpu" in lines[torch_line]
    # The same torch the project tests with (scripts/test_all.sh): a capture depends on its version.
    pinned = re.search(r"torch==([0-9.]+)", (REPO / "scripts" / "test_all.sh").read_text()).group(1)
    assert f"torch=={pinned} " in lines[torch_line] + " "


REAL_ACCEL_SIM = 'accel-sim() { "$TEST_PYTHON" -m accel_sim.cli.main "$@"; }\n'


def _bash(script: str, env: dict, cwd: Path, accel_sim_command: str = REAL_ACCEL_SIM,
          pip_log: Path | None = None) -> subprocess.CompletedProcess:
    """One step's `run:` as GitHub's runner runs it (bash -eo pipefail), with `accel-sim` and
    `python` being the package and interpreter under test (or `accel_sim_command`, a stand-in),
    and, with `pip_log`, pip recording its arguments there instead of installing anything."""
    prelude = accel_sim_command
    if pip_log is not None:
        prelude += (f'pip() {{ echo "pip $*" >> {str(pip_log)!r}; }}\n'
                    'python() { if [ "$1" = -m ] && [ "$2" = pip ]; then shift 2; pip "$@"; '
                    'else "$TEST_PYTHON" "$@"; fi; }\n')
    else:
        prelude += 'python() { "$TEST_PYTHON" "$@"; }\n'
    package_root = str(Path(accel_sim.__file__).resolve().parent.parent)
    full_env = {**os.environ, **env, "TEST_PYTHON": sys.executable,
                "PYTHONPATH": os.pathsep.join([package_root, os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", prelude + script],
                          env=full_env, cwd=cwd, capture_output=True, text=True, timeout=300, check=False)


def _project_version() -> str:
    """[project] version of pyproject.toml (its first `version = "..."` line)."""
    return re.search(r'^version = "([^"]+)"$', (REPO / "pyproject.toml").read_text(encoding="utf-8"), re.M).group(1)


def test_install_refuses_to_guess_where_accel_sim_comes_from(workflow, tmp_path):
    # The PyPI name accel-sim is another project: with no source set, the step fails before pip runs.
    env = {k: str(v) for k, v in workflow["env"].items()}
    assert env["ACCEL_SIM_SOURCE"] == ""
    install = _step(workflow, "pip install torch")["run"]
    log = tmp_path / "pip.log"
    run = _bash(install, env, tmp_path, pip_log=log)
    assert run.returncode != 0
    assert "::error::ACCEL_SIM_SOURCE is not set" in run.stderr
    assert not log.exists()
    # Set, pip installs accel-sim from that URL only (a PEP 508 direct reference), torch first.
    source = "git+https://git.example.invalid/team/accel-sim.git@v0.1.0"
    run = _bash(install, {**env, "ACCEL_SIM_SOURCE": source}, tmp_path, pip_log=log)
    assert run.returncode == 0, run.stderr
    calls = log.read_text().splitlines()
    assert calls[1].startswith("pip install torch==") and calls[2] == f"pip install accel-sim[torch] @ {source}"


def test_version_step_accepts_this_project_and_refuses_another_package(workflow, tmp_path):
    env = {k: str(v) for k, v in workflow["env"].items()}
    verify = _step(workflow, 'installed="$(accel-sim --version)"')["run"]
    # The example names this project's version, and this project's command passes the step.
    assert env["ACCEL_SIM_VERSION"] == _project_version() == accel_sim.__version__
    ours = _bash(verify, env, tmp_path)
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout.strip() == (f"accel-sim {_project_version()} (engine accel_sim._core; "
                                   "graph format accel-sim-graph v1; report schema 2)")
    # Stand-ins for a package that is not this project: no --version at all, a bare version
    # string of the same number, and this project at another version than the one pinned.
    for stand_in in ('accel-sim() { echo "usage: accel-sim [-h] {run}" >&2; return 2; }\n',
                     f'accel-sim() {{ echo "accel-sim {_project_version()}"; }}\n'):
        other = _bash(verify, env, tmp_path, accel_sim_command=stand_in)
        assert other.returncode != 0 and "::error::" in other.stderr
    pinned_elsewhere = _bash(verify, {**env, "ACCEL_SIM_VERSION": "9.9.9"}, tmp_path)
    assert pinned_elsewhere.returncode != 0 and "expected 'accel-sim 9.9.9" in pinned_elsewhere.stderr


def test_check_step_passes_fails_and_summarizes(workflow, tmp_path):
    env = {k: str(v) for k, v in workflow["env"].items()}
    check = _step(workflow, "accel-sim check")["run"]
    summary = _step(workflow, "python - <<")["run"]
    (line,) = [ln for ln in check.splitlines() if ln.strip().startswith("accel-sim check")]
    assert "--json" in line and "--baseline" in line and "--max-regression 5%" in line
    result_file = tmp_path / re.search(r">\s*(\S+)", line).group(1)
    config = json.loads((REPO / "python" / "accel_sim" / "data" / "models" / "gpt2.json").read_text())
    (tmp_path / "model.json").write_text(json.dumps(config))
    small = {**env, "ACCEL_SIM_TARGET": "--model model.json --seq 128"}

    # The baseline, as examples/ci/README.md writes it: the same command line plus --write-baseline.
    write = _bash(line.replace("--json", "--json --write-baseline"), small, tmp_path)
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

    # A pull request that doubles the layers: the prefill's time grows by more than half (the
    # LM head stays one), so exit 1.
    (tmp_path / "model.json").write_text(json.dumps({**config, "n_layer": 2 * config["n_layer"]}))
    text = step(small, 1)
    result = json.loads(result_file.read_text())
    assert result["passed"] is False and result["checks"][0]["exceeded"] is True
    latency_row = next(r for r in text.splitlines() if r.startswith("| latency_s |"))
    assert latency_row.endswith("| regressed |") and "| 5.0% |" in latency_row and "**failed**" in text

    # No baseline: a usage error (exit 2) prints no JSON, and the summary says where to look.
    text = step({**small, "ACCEL_SIM_BASELINE": "missing.json"}, 2)
    assert result_file.read_text() == "" and "printed no result" in text

    # A command that exits 0 without a result (a script's os._exit(0), another package's `check`)
    # still fails the step: exit 0 counts only with a result that says passed.
    silent = _bash(check, small, tmp_path, accel_sim_command="accel-sim() { :; }\n")
    assert silent.returncode != 0 and result_file.read_text() == ""
