"""Grid files (docs/formats/grid.md): validation that names the file and key, lazy points, and
rows that hold what the command itself reports."""

from __future__ import annotations

import json
import sys
import tracemalloc
from pathlib import Path

import pytest

from accel_sim.cli.main import main
from accel_sim.errors import UsageError
from accel_sim.grid import load_grid, run_points


def _grid(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "grid.yaml"
    path.write_text(text)
    return path


def _json(capsys, *args: str) -> dict:
    assert main(list(args)) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("text, message", [
    ("command: simulat\ngrid: {batch: [1]}\n", "grid.yaml: command: must be one of simulate, train, plan, serve"),
    ("command: simulate\nfixed: {model: gpt2}\ngrid: {batchh: [1]}\n", "grid.yaml: grid: simulate has no parameter 'batchh'"),
    ("command: simulate\nfixed: {model: gpt2}\ngrid: {batch: [1, 1.5]}\n", "grid.yaml: grid.batch: batch takes whole numbers"),
    ("command: simulate\nfixed: {model: gpt2}\ngrid: {phase: [prefill, warmup]}\n",
     "grid.yaml: grid.phase: phase must be one of prefill, decode, train"),
    ("command: simulate\nfixed: {model: gpt2, json: true}\ngrid: {batch: [1]}\n", "grid.yaml: fixed: json chooses output"),
    ("command: simulate\nfixed: {model: gpt2}\n", "give grid (a product of value lists) or points"),
    ("command: simulate\nfixed: {model: gpt2}\ngrid: {batch: []}\n", "grid.yaml: grid.batch: no values"),
    ("command: simulate\nfixed: {model: gpt2, batch: 2}\ngrid: {batch: [1]}\n", "grid.batch: also in fixed"),
    ("command: simulate\ngrid: {batch: [1, 2]}\n", "simulate needs 'model'"),
    ("command: train\nfixed: {model: gpt2}\ngrid: {seq: [1024]}\n", "train needs 'system'"),
    ("command: simulate\nfixed: {model: gpt2}\ngrid: {memory_bandwidth_gbs: '1:2'}\n", "a range is start:stop:n"),
    ("command: simulate\nfixed: {model: gpt2}\npoints: [{batch: 1}, 3]\n", "grid.yaml: points[1]: must map"),
    ("command: simulate\nfixed: {model: gpt2}\ngrid: {sp: [1]}\n", "grid.yaml: grid.sp: sp is a switch"),
    ("command: simulate\ngrid: [1, 2\n", "grid.yaml:3: not valid YAML"),
    ("command: simulate\nextra: 1\ngrid: {batch: [1]}\n", "grid.yaml: unknown key 'extra'"),
])
def test_bad_grid_files_name_the_file_and_key(tmp_path: Path, text: str, message: str):
    with pytest.raises(UsageError) as e:
        load_grid(_grid(tmp_path, text))
    assert message in str(e.value)
    assert "\n" not in str(e.value)


def test_bad_grid_exits_2_with_one_line(tmp_path: Path, capsys):
    path = _grid(tmp_path, "command: simulate\nfixed: {model: gpt2}\ngrid: {batchh: [1]}\n")
    assert main(["sweep", "--grid", str(path), "--out", str(tmp_path / "r.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("accel-sim: error: ") and str(path) in err and "\n" not in err


def test_a_million_points_are_decoded_not_listed(tmp_path: Path):
    path = _grid(tmp_path, "command: simulate\nfixed: {model: gpt2}\ngrid:\n"
                           "  batch: [" + ", ".join(str(b) for b in range(1, 101)) + "]\n"
                           "  memory_bandwidth_gbs: '1000:8000:100'\n  peak_tflops: '100:1000:100'\n")
    tracemalloc.start()
    grid = load_grid(path)
    assert len(grid) == 100**3
    # The last axis varies fastest: point 10203 = (1, 2, 3) in mixed radix 100.
    assert grid.point(10203) == {"batch": 2, "memory_bandwidth_gbs": pytest.approx(1000 + 2 * 7000 / 99),
                                 "peak_tflops": pytest.approx(100 + 3 * 900 / 99)}
    assert grid.point(len(grid) - 1) == {"batch": 100, "memory_bandwidth_gbs": 8000.0, "peak_tflops": 1000.0}
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 5e6  # a listed million points would take hundreds of MB
    assert sys.getsizeof(grid) < 1000


def test_simulate_rows_match_the_command(tmp_path: Path, capsys):
    path = _grid(tmp_path, "command: simulate\nfixed: {model: llama3-8b, phase: decode, context: 1024}\n"
                           "grid:\n  device: [a100, h100]\n  batch: [1, 16]\n  memory_bandwidth_gbs: [2000, 4000]\n")
    grid = load_grid(path)
    assert [n for n, _ in grid.columns()][:6] == ["point", "model", "phase", "context", "device", "batch"]
    rows = run_points(grid, range(len(grid)))
    assert [r["point"] for r in rows] == list(range(8)) and all(r["error"] is None for r in rows)
    # Point 7 = (h100, 16, 4000): what `accel-sim sweep --vary` reports for it.
    d = _json(capsys, "sweep", "--model", "llama3-8b", "--phase", "decode", "--context", "1024", "--batch", "16",
              "--device", "h100", "--vary", "memory_bandwidth_gbs=4000", "--json")
    assert rows[7]["latency_s"] == d["points"][0]["latency_s"]
    # Point 2 = (a100, 16, 2000) without a device parameter change would be `simulate` itself:
    plain = _json(capsys, "simulate", "--model", "llama3-8b", "--phase", "decode", "--context", "1024",
                  "--batch", "16", "--device", "a100", "--json", "--no-ops")
    assert rows[2]["peak_memory_bytes"] == plain["peak_memory_bytes"]
    assert rows[2]["tokens_per_s"] == pytest.approx(16 / rows[2]["latency_s"])


def test_train_plan_and_serve_rows(tmp_path: Path, capsys):
    train = load_grid(_grid(tmp_path, "command: train\nfixed: {model: llama-3-8b, system: dgx-h100, seq: 4096, "
                                      "microbatch: 1, global_batch: 64}\npoints:\n  - {gpus: 16, tp: 2, pp: 4, dp: 2}\n"
                                      "  - {gpus: 8, tp: 3, pp: 1, dp: 1}\n"))
    ok, bad = run_points(train, [0, 1])
    d = _json(capsys, "train", "--model", "llama-3-8b", "--system", "dgx-h100", "--seq", "4096", "--microbatch", "1",
              "--global-batch", "64", "--gpus", "16", "--tp", "2", "--pp", "4", "--dp", "2", "--json")
    assert ok["step_s"] == d["step_s"] and ok["mfu"] == d["mfu"] and ok["error"] is None
    assert bad["step_s"] is None and bad["error"] == "--gpus 8 is not tp x pp x dp x cp = 3"
    plan = load_grid(_grid(tmp_path, "command: plan\nfixed: {model: llama-3-8b, seq: 4096, global_batch: 64}\n"
                                     "grid: {system: [dgx-h100], gpus: [8]}\n"))
    (row,) = run_points(plan, [0])
    p = _json(capsys, "plan", "--model", "llama-3-8b", "--seq", "4096", "--global-batch", "64", "--system", "dgx-h100",
              "--gpus", "8", "--top", "1", "--threads", "1", "--json")
    assert row["gpus"] == 8 and row["step_s"] == p["best"][0]["step_s"] and row["candidates"] == p["candidates"]
    serve = load_grid(_grid(tmp_path, "command: serve\nfixed: {model: llama3-8b, requests: 100}\ngrid: {qps: [2, 4]}\n"))
    rows = run_points(serve, [0, 1])
    s = _json(capsys, "serve", "--model", "llama3-8b", "--requests", "100", "--qps", "4", "--json")
    assert rows[1]["ttft_p99_s"] == s["results"][0]["ttft_s"]["p99"]
    assert rows[1]["completed"] == 100 and rows[0]["requests_per_s"] < rows[1]["requests_per_s"]


def test_the_lean_path_gives_the_rows_of_the_general_one(tmp_path: Path):
    """Points without device or system parameters skip the report objects; their rows must be
    what sweep.run_point reports for them."""
    import accel_sim.grid as G

    grid = load_grid(_grid(tmp_path, "command: simulate\nfixed: {model: llama3-8b, seq: 256}\n"
                                     "grid:\n  phase: [prefill, decode, train]\n  device: [a100, mi300x]\n"
                                     "  batch: [1, 3]\n"))
    lean = run_points(grid, range(len(grid)))
    general = [{"point": i, **grid.point(i), **G._simulate_general(grid, grid.point(i))} for i in range(len(grid))]
    for a, b in zip(lean, general):
        for key in (n for n, _ in G.FIGURES["simulate"]):
            assert a[key] == b[key], (a["point"], key)
    # The shape not varied (seq 256) holds at every point, whatever the point before set.
    assert lean[0]["tokens_per_s"] == pytest.approx(256 / lean[0]["latency_s"])


def test_a_killed_command_line_sweep_resumes_where_it_stopped(tmp_path: Path):
    """`accel-sim sweep --grid` killed mid-run (SIGKILL, as a lost machine): run again, it keeps
    the journaled points, computes only the rest, and writes the table an uninterrupted run
    writes."""
    import os
    import signal
    import subprocess
    import time

    import pyarrow.parquet as pq

    path = _grid(tmp_path, "command: simulate\nfixed: {model: llama3-8b, phase: decode}\n"
                           "grid:\n  batch: '1:40:40'\n  context: '128:8192:40'\n")
    out = tmp_path / "r.parquet"
    cmd = [sys.executable, "-m", "accel_sim.cli.main", "sweep", "--grid", str(path), "--out", str(out),
           "--workers", "1", "--batch-size", "40", "--quiet", "--json"]
    journal = tmp_path / "r.parquet.partial.jsonl"
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not journal.exists() or journal.read_bytes().count(b"\n") < 4):
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    kept = journal.read_bytes().count(b"\n") - 1  # the header line, then a row per line
    assert 0 < kept < 1600 and not out.exists()
    again = subprocess.run(cmd, capture_output=True, text=True, check=True)
    summary = json.loads(again.stdout)
    assert summary["resumed"] >= kept and summary["computed"] == 1600 - summary["resumed"] and summary["complete"]
    whole = tmp_path / "whole.parquet"
    subprocess.run(cmd[:6] + ["--out", str(whole)] + cmd[8:], capture_output=True, check=True)
    assert pq.read_table(out).to_pylist() == pq.read_table(whole).to_pylist()
