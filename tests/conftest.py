"""Shared fixtures: hand-built graph dicts whose costs are worked out by hand."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def mlp_graph() -> dict:
    """x [512, 1024] fp32 input; W1 [1024, 4096], W2 [4096, 1024] fp32 parameters.

        n0: h = mm(x, W1)     2*512*1024*4096 = 4.294967296e9 FLOPs
        n1: a = relu(h)       512*4096 = 2097152 FLOPs
        n2: y = mm(a, W2)     4.294967296e9 FLOPs
    """
    def storage(i, size, kind):
        return {"id": i, "size_bytes": size, "kind": kind}

    def tensor(i, storage_id, shape, name=""):
        strides = [shape[1], 1] if len(shape) == 2 else [1]
        t = {"id": i, "storage": storage_id, "dtype": "fp32", "shape": shape, "strides": strides, "offset": 0}
        if name:
            t["name"] = name
        return t

    return {
        "format": "accel-sim-graph",
        "version": 1,
        "name": "mlp",
        "metadata": {},
        "storages": [
            storage(0, 512 * 1024 * 4, "input"),
            storage(1, 1024 * 4096 * 4, "parameter"),
            storage(2, 4096 * 1024 * 4, "parameter"),
            storage(3, 512 * 4096 * 4, "activation"),
            storage(4, 512 * 4096 * 4, "activation"),
            storage(5, 512 * 1024 * 4, "activation"),
        ],
        "tensors": [
            tensor(0, 0, [512, 1024], "input.0"),
            tensor(1, 1, [1024, 4096], "fc1.weight"),
            tensor(2, 2, [4096, 1024], "fc2.weight"),
            tensor(3, 3, [512, 4096]),
            tensor(4, 4, [512, 4096]),
            tensor(5, 5, [512, 1024]),
        ],
        "nodes": [
            {"op": "mm", "overload": "default", "inputs": [0, 1], "outputs": [3], "attrs": {}, "module": "fc1", "module_type": "Linear", "source": "mlp.py:10"},
            {"op": "relu", "overload": "default", "inputs": [3], "outputs": [4], "attrs": {}, "module": "act", "module_type": "ReLU", "source": "mlp.py:11"},
            {"op": "mm", "overload": "default", "inputs": [4, 2], "outputs": [5], "attrs": {}, "module": "fc2", "module_type": "Linear", "source": "mlp.py:12"},
        ],
        "outputs": [5],
    }


@pytest.fixture
def mlp_graph_file(tmp_path: Path) -> Path:
    path = tmp_path / "mlp.json"
    path.write_text(json.dumps(mlp_graph()))
    return path


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Runs `accel-sim ARGS` as a user would, in a fresh interpreter."""
    return subprocess.run(
        [sys.executable, "-m", "accel_sim.cli.main", *args],
        capture_output=True,
        text=True,
        cwd=cwd or REPO,
        timeout=600,
    )


_VALIDATE_RUNS: dict[tuple[str, ...], subprocess.CompletedProcess] = {}


def run_validate(*args: str) -> subprocess.CompletedProcess:
    """`accel-sim validate ARGS` as run_cli runs it, once per test session for the same
    arguments: it reads only the shipped data, takes about 20 s, and several tests read the same
    report."""
    if args not in _VALIDATE_RUNS:
        _VALIDATE_RUNS[args] = run_cli("validate", *args)
    return _VALIDATE_RUNS[args]


# Headless Chromium (tests/browser.py). No browser: skipped on a developer machine, a failure
# when CI is set. One browser per test module, a fresh tab per page.

@pytest.fixture(scope="session")
def chromium_path() -> str:
    from browser import require_chromium

    return require_chromium()


@pytest.fixture(scope="module")
def chromium(chromium_path):
    """A running headless Chromium (browser.Browser); open pages with `chromium.open(path)`."""
    from browser import Browser

    with Browser(chromium_path) as running:
        yield running


def pytest_terminal_summary(terminalreporter):
    from browser import KEPT, artifact_dir

    if KEPT:
        terminalreporter.write_line(f"{len(KEPT)} browser screenshot(s) kept in {artifact_dir()}: "
                                    + ", ".join(p.name for p in KEPT))
