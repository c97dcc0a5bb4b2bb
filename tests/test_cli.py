"""The command line as a user runs it: output, JSON and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli


def test_devices_lists_at_least_17(tmp_path: Path):
    result = run_cli("devices", "--json")
    assert result.returncode == 0
    assert len(json.loads(result.stdout)) >= 17
    text = run_cli("devices")
    assert "h100_sxm" in text.stdout and "989.4" in text.stdout


def test_simulate_graph_file_json(mlp_graph_file: Path):
    result = run_cli("simulate", str(mlp_graph_file), "--device", "a100", "--cost-model", "roofline", "--json")
    assert result.returncode == 0, result.stderr
    d = json.loads(result.stdout)
    # a100_80gb.yaml: fp32 19.5 TFLOP/s, 2039 GB/s, 4 us launch.
    mm = max(2 * 512 * 1024 * 4096 / 19.5e12, (2 + 16 + 8) * 1024**2 / 2039e9) + 4e-6  # x, W, h in MiB
    relu = 2 * 512 * 4096 * 4 / 2039e9 + 4e-6
    assert d["latency_s"] == pytest.approx(2 * mm + relu, rel=1e-9)
    assert d["peak_memory_bytes"] == 50 * 1024**2
    assert d["fits"] is True
    assert d["flops"] == 2 * 2 * 512 * 1024 * 4096 + 512 * 4096


def test_simulate_text_report(mlp_graph_file: Path):
    result = run_cli("simulate", str(mlp_graph_file), "--device", "h100")
    assert result.returncode == 0, result.stderr
    for text in ("latency", "peak memory", "✓ fits", "Time by op type", "mm"):
        assert text in result.stdout


def test_compare_table_and_verdict(mlp_graph_file: Path):
    result = run_cli("compare", str(mlp_graph_file), "--devices", "v100,a100,h100")
    assert result.returncode == 0, result.stderr
    assert "fastest:    h100_sxm" in result.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["simulate", "{graph}", "--device", "h1000"], "unknown device 'h1000'"),
        (["simulate", "missing.json", "--device", "h100"], "graph file not found"),
        (["simulate", "{graph}", "--device-file", "{bad}", "--device", "bad"], "missing required key"),
        (["compare", "{graph}", "--devices", "a100,nope"], "unknown device 'nope'"),
    ],
)
def test_usage_errors_are_one_line_exit_2(tmp_path: Path, mlp_graph_file: Path, args, message):
    bad = tmp_path / "bad.yaml"
    bad.write_text("id: bad\n")
    args = [a.format(graph=mlp_graph_file, bad=bad) for a in args]
    result = run_cli(*args)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_check_passes_then_fails_on_regression(tmp_path: Path, mlp_graph_file: Path):
    baseline = tmp_path / "baseline.json"
    assert run_cli("check", str(mlp_graph_file), "--device", "a100", "--baseline", str(baseline), "--write-baseline").returncode == 0
    ok = run_cli("check", str(mlp_graph_file), "--device", "a100", "--baseline", str(baseline), "--max-regression", "5%")
    assert ok.returncode == 0, ok.stderr
    # Pretend the baseline was 10% faster and 20% smaller: both metrics now regress.
    data = json.loads(baseline.read_text())
    data["latency_s"] /= 1.10
    data["peak_memory_bytes"] = int(data["peak_memory_bytes"] / 1.20)
    baseline.write_text(json.dumps(data))
    bad = run_cli("check", str(mlp_graph_file), "--device", "a100", "--baseline", str(baseline), "--max-regression", "5%")
    assert bad.returncode == 1
    assert "latency grew 10.0%" in bad.stderr
    assert "peak memory grew" in bad.stderr
    loose = run_cli("check", str(mlp_graph_file), "--device", "a100", "--baseline", str(baseline),
                    "--max-latency-regression", "15%", "--max-memory-regression", "25%")
    assert loose.returncode == 0


def test_check_without_baseline_is_a_usage_error(tmp_path: Path, mlp_graph_file: Path):
    result = run_cli("check", str(mlp_graph_file), "--device", "a100", "--baseline", str(tmp_path / "none.json"))
    assert result.returncode == 2
    assert "--write-baseline" in result.stderr


@pytest.mark.parametrize(
    "script, message",
    [
        ("import torch\n", "defines no get_model()"),
        ("def get_model():\n    raise RuntimeError('no weights here')\n", "RuntimeError: no weights here"),
    ],
)
def test_bad_scripts_are_one_line_exit_2(tmp_path: Path, script: str, message: str):
    path = tmp_path / "model.py"
    path.write_text(script)
    result = run_cli("simulate", str(path), "--device", "a100")
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("accel-sim: error:")]
    assert len(errors) == 1


def test_debug_shows_the_traceback(tmp_path: Path):
    path = tmp_path / "model.py"
    path.write_text("import torch\n")
    result = run_cli("--debug", "simulate", str(path))
    assert result.returncode != 0 and "Traceback" in result.stderr


@pytest.mark.parametrize("example", ["transformer_block.py", "gpt2.py", "bert_base.py", "llama3_8b.py"])
def test_examples_simulate_end_to_end(example: str):
    result = run_cli("simulate", f"examples/{example}", "--device", "h100", "--json", "--no-ops")
    assert result.returncode == 0, result.stderr
    d = json.loads(result.stdout)
    assert d["latency_s"] > 0 and d["uncovered_ops"] == []


def test_capture_then_simulate_the_saved_graph(tmp_path: Path):
    graph = tmp_path / "block.json"
    assert run_cli("capture", "examples/transformer_block.py", "-o", str(graph)).returncode == 0
    direct = json.loads(run_cli("simulate", "examples/transformer_block.py", "--device", "a100", "--json").stdout)
    saved = json.loads(run_cli("simulate", str(graph), "--device", "a100", "--json").stdout)
    assert saved["latency_s"] == direct["latency_s"]
    assert saved["peak_memory_bytes"] == direct["peak_memory_bytes"]


def test_saved_graph_simulates_without_torch(mlp_graph_file: Path):
    # Block the torch import: a saved graph needs only the core.
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "from accel_sim.cli.main import main\n"
        f"sys.exit(main(['simulate', {str(mlp_graph_file)!r}, '--device', 'h100', '--json', '--no-ops']))\n"
    )
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["peak_memory_bytes"] == 50 * 1024**2


def test_version_names_this_project():
    # The version of pyproject.toml, the compiled engine (imported, so a broken install fails here)
    # and the formats this accel-sim reads: what examples/ci/ checks before trusting the command.
    import re

    from conftest import REPO

    version = re.search(r'^version = "([^"]+)"$', (REPO / "pyproject.toml").read_text(encoding="utf-8"), re.M).group(1)
    result = run_cli("--version")
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout == (f"accel-sim {version} (engine accel_sim._core; graph format accel-sim-graph v1; "
                             "report schema 2)\n")
