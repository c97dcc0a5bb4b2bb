"""Grid files (docs/formats/grid.md): validation that names the file and key, lazy points, and
rows that hold what the command itself reports."""

from __future__ import annotations

import json
import random
import resource
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from accel_sim.cli.main import main
from accel_sim.errors import UsageError
from accel_sim.grid import RangeValues, load_grid
from accel_sim.grid_points import run_points


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
    # Sections of the wrong kind, values of the wrong kind: named, not taken as empty or passed on.
    ("command: simulate\nfixed: []\ngrid: {batch: [1]}\n", "grid.yaml: fixed: must map parameter names to values"),
    ("command: simulate\nfixed: 0\ngrid: {batch: [1]}\n", "grid.yaml: fixed: must map parameter names to values"),
    ("command: simulate\nfixed: {model: gpt2}\ngrid: [batch]\n", "grid.yaml: grid: must map parameter names to lists"),
    ("command: simulate\nfixed: {model: gpt2}\npoints: {batch: 1}\n", "grid.yaml: points: must be a list"),
    ("command: [simulate]\ngrid: {batch: [1]}\n", "grid.yaml: command: must be one of"),
    ("command: simulate\n1: 2\ngrid: {batch: [1]}\n", "grid.yaml: unknown key '1'"),
    ("command: simulate\nfixed: {model: gpt2}\ngrid: {batch: [[1, 2]]}\n", "grid.yaml: grid.batch: batch takes one value (got a list"),
    ("command: simulate\nfixed: {model: gpt2, batch: [1, 2]}\ngrid: {seq: [8]}\n", "grid.yaml: fixed.batch: batch takes one value"),
    ("command: simulate\nfixed: {model: gpt2}\ngrid: {batch: [{a: 1}]}\n", "grid.yaml: grid.batch: batch takes one value (got a mapping"),
    ("command: simulate\nfixed: {model: gpt2, batch: }\ngrid: {seq: [8]}\n", "grid.yaml: fixed.batch: batch takes one value (got no value)"),
    ("command: simulate\nfixed: {model: gpt2}\ngrid: {batch: [2024-01-01]}\n", "grid.yaml: grid.batch: batch takes a number or a name (got a date"),
    ("command: simulate\nfixed: {model: gpt2}\ngrid: {batch: [true]}\n", "grid.yaml: grid.batch: batch takes whole numbers (got True)"),
    ("command: simulate\nfixed: {model: gpt2}\ngrid: {batch: ['1e3']}\n", "grid.yaml: grid.batch: batch takes whole numbers (got '1e3')"),
    ("command: serve\nfixed: {model: llama3-8b}\ngrid: {qps: [abc]}\n", "grid.yaml: grid.qps: qps: 'abc' is not a finite number"),
    ("command: simulate\nfixed: {model: gpt2}\ngrid: {memory_bandwidth_gbs: [.inf]}\n",
     "grid.yaml: grid.memory_bandwidth_gbs: memory_bandwidth_gbs takes a finite number (got inf)"),
    ("command: simulate\nfixed: {model: gpt2}\ngrid: {memory_bandwidth_gbs: [.nan]}\n", "takes a positive number (got nan)"),
    ("command: serve\nfixed: {model: llama3-8b}\ngrid: {qps: [.nan]}\n", "grid.yaml: grid.qps: qps takes a finite number (got nan)"),
    ("command: serve\nfixed: {model: llama3-8b}\ngrid: {qps: ['inf']}\n", "grid.yaml: grid.qps: qps: 'inf' is not a finite number"),
    ("command: simulate\nfixed: {model: gpt2}\ngrid: {batch: [1], batch: [2]}\n", "grid.yaml:3: 'batch' is given twice"),
    ("command: simulate\ncommand: train\nfixed: {model: gpt2}\ngrid: {batch: [1]}\n", "grid.yaml:2: 'command' is given twice"),
    ("command: simulate\nfixed: {model: gpt2}\ngrid: {grad-accum: [1], grad_accum: [2]}\n",
     "grid.yaml: grid.grad_accum: given twice (as grad-accum and grad_accum)"),
    ("command: simulate\nfixed: {model: gpt2}\ngrid: {batch: " + "[" * 100_000 + "]" * 100_000 + "}\n",
     "grid.yaml:3: nested more than 16 levels deep"),
    ("command: simulate\nfixed: {model: gpt2}\ngrid: {batch: &a [*a]}\n", "grid.yaml: grid.batch: batch takes one value"),
    ("command: simulate\x00\n", "grid.yaml: not valid YAML (unacceptable character #x0000"),
    ("command: simulate\nfixed: {model: gpt2}\ngrid: {batch: '1:3:5'}\n", "grid.yaml: grid.batch: the values repeat once rounded to whole numbers"),  # 1 2 2 2 3
    # A list's numbers repeat as a range's do, once kept to 12 significant digits (sweep.refuse_repeats).
    ("command: simulate\nfixed: {model: gpt2}\ngrid: {memory_bandwidth_gbs: [1000.0, 1000.00000000001]}\n",
     "grid.yaml: grid.memory_bandwidth_gbs: the values repeat (kept to 12 significant digits); ask for fewer points"),
    ("command: simulate\nfixed: {model: gpt2}\ngrid: {memory_bandwidth_gbs: '-1:10:3'}\n", "takes a positive number (got -1.0)"),
    # Beyond the core's int64: the file and the key, not the binding's "Invoked with types".
    ("command: simulate\nfixed: {model: gpt2}\ngrid: {batch: [9223372036854775808]}\n",
     "grid.yaml: grid.batch: batch: 9,223,372,036,854,775,808 is beyond the 64-bit integers the core takes"),
    ("command: simulate\nfixed: {model: gpt2, seq: 1.0e+30}\ngrid: {batch: [1]}\n",
     "grid.yaml: fixed.seq: seq: 1,000,000,000,000,000,019,884,624,838,656 is beyond the 64-bit integers"),
    ("command: simulate\nfixed: {model: gpt2}\ngrid: {batch: '1:1e19:3'}\n", "grid.yaml: grid.batch: batch: 10,000,000,000,000,000,000 is beyond"),
    ("command: plan\nfixed: {model: llama-3-8b, seq: 4096, global_batch: 64, system: dgx-h100}\n"
     "grid: {gpus: [99999999999999999999999]}\n", "grid.yaml: grid.gpus: gpus: expected whole numbers from 1 to 9,223,372,036,854,775,807"),
    # Each flag's own range, as the command line holds it (accel_sim.commands.flags), at load, not per point.
    ("command: train\nfixed: {model: llama-3-8b, system: dgx-h100, seq: 4096, global_batch: 64, gpus: 8}\n"
     "grid: {tp: [0, 8]}\n", "grid.yaml: grid.tp: tp takes a whole number from 1 to 2^63 - 1 (got 0)"),
    ("command: serve\nfixed: {model: llama3-8b, qps: 1}\ngrid: {watermark: [-5]}\n",
     "grid.yaml: grid.watermark: watermark takes a fraction in [0, 1) (got -5.0)"),
    ("command: simulate\nfixed: {model: gpt2}\ngrid: {batch: [-3, 1]}\n",
     "grid.yaml: grid.batch: batch takes a whole number from 1 to 2^63 - 1 (got -3)"),
    ("command: simulate\nfixed: {model: gpt2}\ngrid: {batch: '0:4:5'}\n",
     "grid.yaml: grid.batch: batch takes a whole number from 1 to 2^63 - 1 (got 0)"),
    ("command: simulate\nfixed: {target: model.py, timeout: -5}\ngrid: {batch: [1]}\n",
     "grid.yaml: fixed.timeout: timeout takes a finite number of seconds, at least 0 (got -5.0)"),
    ("command: simulate\nfixed: {model: gpt2, seq: 128}\ngrid: {clock_mhz: [1.0e-7, 1500.0]}\n",
     "grid.yaml: grid.clock_mhz: clock_mhz must be in [0.001, 100000] (core clock (MHz))"),
], ids=lambda v: v if len(v) < 80 else v[:60] + "...")
def test_bad_grid_files_name_the_file_and_key(tmp_path: Path, text: str, message: str):
    with pytest.raises(UsageError) as e:
        load_grid(_grid(tmp_path, text))
    assert message in str(e.value)
    assert "\n" not in str(e.value)


def test_a_clock_below_a_kilohertz_is_refused_by_the_grid_and_the_command_line(tmp_path: Path, capsys):
    """A clock of 1e-7 MHz scales every kernel's time by 1.98e9 / 1e-1 (H100 SXM: 1,980 MHz): GPT-2's
    prefill took 24,763,612 s, a figure no part reaches. Both refuse it as `train --clock-mhz` does."""
    with pytest.raises(UsageError, match=r"grid.yaml: fixed.clock_mhz: clock_mhz must be in \[0.001, 100000\]"):
        load_grid(_grid(tmp_path, "command: simulate\nfixed: {model: gpt2, seq: 128, clock_mhz: 1.0e-7}\n"
                                  "grid: {batch: [1]}\n"))
    with pytest.raises(SystemExit) as e:
        main(["simulate", "--model", "gpt2", "--seq", "128", "--clock-mhz", "1e-7"])
    assert e.value.code == 2
    assert "expected a clock in MHz from 0.001 to 100,000, got 1e-07" in capsys.readouterr().err


def test_numbers_yaml_reads_as_text_are_numbers_of_float_parameters(tmp_path: Path):
    """YAML 1.1 reads 1e3 and 1.5e3 (an exponent without a sign) as text: a device parameter
    refused them ("takes a positive number (got '1e3')"), where a float flag took them. Whole
    numbers stay whole: batch '1e3' is refused (above)."""
    grid = load_grid(_grid(tmp_path, "command: simulate\nfixed: {model: gpt2, seq: 128, clock_mhz: 1.5e3}\n"
                                     "grid: {memory_bandwidth_gbs: [1e3, 2.5e3]}\n"))
    assert dict(grid.fixed)["clock_mhz"] == 1500.0
    assert grid.axes == (("memory_bandwidth_gbs", (1000.0, 2500.0)),)
    grid = load_grid(_grid(tmp_path, "command: serve\nfixed: {model: llama3-8b}\ngrid: {qps: [1e1, 2.5e1]}\n"))
    assert grid.axes == (("qps", (10.0, 25.0)),)
    with pytest.raises(UsageError, match=r"grid.yaml: grid.memory_gb: memory_gb: '1e3x' is not a finite number$"):
        load_grid(_grid(tmp_path, "command: simulate\nfixed: {model: gpt2}\ngrid: {memory_gb: [1e3x]}\n"))


def test_bad_grid_exits_2_with_one_line(tmp_path: Path, capsys):
    path = _grid(tmp_path, "command: simulate\nfixed: {model: gpt2}\ngrid: {batchh: [1]}\n")
    assert main(["sweep", "--grid", str(path), "--out", str(tmp_path / "r.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("accel-sim: error: ") and str(path) in err and "\n" not in err


def _sweep_cli(tmp_path: Path, text: str) -> tuple[int, str, float]:
    """`accel-sim sweep --grid` on TEXT as a user runs it, with 2 GiB of address space (so that
    a sweep that would list its points fails fast instead of filling the machine): (exit
    status, stderr, seconds)."""
    path = _grid(tmp_path, text)

    def limited():
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "accel_sim.cli.main", "sweep", "--grid", str(path), "--out",
                           str(tmp_path / "r.csv")], capture_output=True, text=True, timeout=120, preexec_fn=limited)
    return done.returncode, done.stderr, time.monotonic() - start


def test_a_product_too_large_is_refused_before_anything_is_allocated(tmp_path: Path):
    """10^6 x 10^6 points: one line, exit 2, at once, where the sweep allocated a byte per point
    and ended in a MemoryError traceback."""
    code, err, seconds = _sweep_cli(tmp_path, "command: simulate\nfixed: {model: llama3-8b, device: h100}\n"
                                              "grid: {memory_bandwidth_gbs: '1000:2000:1000000', batch: '1:1000000:1000000'}\n")
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.strip() == (f"accel-sim: error: {tmp_path / 'grid.yaml'}: grid: 1,000,000,000,000 points "
                           "(memory_bandwidth_gbs 1,000,000 x batch 1,000,000) is more than the 10,000,000 a sweep takes "
                           "(docs/formats/grid.md): split it into 100,000 grid files that each take at most 10 of the "
                           "1,000,000 values of memory_bandwidth_gbs")   # 10 x 10^6 = 10^7 points a file
    assert seconds < 20   # the interpreter's start-up; the check itself takes no time


def test_a_range_too_large_is_refused_before_it_is_listed(tmp_path: Path):
    code, err, seconds = _sweep_cli(tmp_path, "command: simulate\nfixed: {model: llama3-8b, device: h100}\n"
                                              "grid: {memory_bandwidth_gbs: '1000:2000:1000000000000'}\n")
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert ("grid.yaml: grid.memory_bandwidth_gbs: a range of 1,000,000,000,000 values is more than the 10,000,000 "
            "points a sweep takes (docs/formats/grid.md): split it into 100,000 ranges of at most 10,000,000") in err
    assert seconds < 20


def test_the_largest_grid_is_read_without_listing_it(tmp_path: Path):
    """10^7 points, the limit, from two ranges: read in well under a second without listing an
    axis, the values computed from their index as `sweep --vary` lists them."""
    path = _grid(tmp_path, "command: simulate\nfixed: {model: llama3-8b}\n"
                           "grid: {batch: '1:1000000:1000000', memory_bandwidth_gbs: '1000:1900:10'}\n")
    tracemalloc.start()
    start = time.monotonic()
    grid = load_grid(path)
    seconds = time.monotonic() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(grid) == 10**7 and seconds < 1
    assert peak < 5e6   # the batch axis listed would be 10^6 ints: over 30 MB
    # Point i = (batch index i // 10, bandwidth index i % 10): batch 1 + i // 10, 1000 + 100 (i % 10).
    assert grid.point(123_457) == {"batch": 12_346, "memory_bandwidth_gbs": 1700.0}
    assert grid.point(len(grid) - 1) == {"batch": 1_000_000, "memory_bandwidth_gbs": 1900.0}
    assert dict(grid.columns())["batch"] == "int64" and dict(grid.columns())["memory_bandwidth_gbs"] == "float64"
    # One batch more is 10 points too many: two files of at most 10^6 batches (x 10 bandwidths) each.
    with pytest.raises(UsageError, match=r"grid: 10,000,010 points \(batch 1,000,001 x memory_bandwidth_gbs 10\) is more "
                                         r"than the 10,000,000 a sweep takes \(docs/formats/grid.md\): split it into 2 "
                                         r"grid files that each take at most 1,000,000 of the 1,000,001 values of batch$"):
        load_grid(_grid(tmp_path, "command: simulate\nfixed: {model: gpt2}\n"
                                  "grid: {batch: '1:1000001:1000001', memory_bandwidth_gbs: '1000:1900:10'}\n"))


def test_range_values_and_repeats_are_those_of_the_listed_range():
    """A range's values from their index are `sweep --vary`'s list, and repeats() (decided from
    the spacing where it can be) agrees with listing them, for ranges of every kind."""
    from accel_sim.design_sweep import parse_vary

    assert list(RangeValues(2000.0, 8000.0, 7, False, False)) == parse_vary("memory_bandwidth_gbs=2000:8000:7")[1]
    assert list(RangeValues(1.0, 64.0, 7, True, True)) == [1, 2, 4, 8, 16, 32, 64]
    assert list(RangeValues(1.5, 4.5, 4, False, True)) == [2, 2, 4, 4]   # halves round to even
    rng = random.Random(7)
    for _ in range(20_000):
        n, log, integer = rng.randint(2, 40), rng.random() < 0.4, rng.random() < 0.6
        if log:
            a = 10 ** rng.uniform(-3, 8)
            b = a * 10 ** rng.uniform(-3, 3)
        else:
            a = rng.choice([float(rng.randint(-50, 1000)), rng.uniform(-100, 1e6), round(rng.uniform(0, 100), 1)])
            b = a + rng.choice([float(rng.randint(-100, 100)), rng.uniform(-1e3, 1e3), (n - 1) * rng.choice([1, 2, 0.5])])
        r = RangeValues(a, b, n, log, integer)
        values = list(r)
        assert r.repeats() == (len(set(values)) != len(values)), (a, b, n, log, integer)


def test_a_grid_file_larger_than_1_mib_is_refused_unread(tmp_path: Path):
    path = _grid(tmp_path, "command: simulate\nfixed: {model: gpt2}\npoints:\n" + "  - {batch: 1}\n" * 80_000)
    with pytest.raises(UsageError, match=r"grid.yaml: a grid file is at most 1 MiB"):
        load_grid(path)


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


def test_flags_that_take_lists_take_a_points_value(tmp_path: Path, capsys):
    """A repeatable flag (device_file) and plan's comma lists (tp, pp, ...) take a point's one
    value as the list of it: a device file was read as the files named by its letters, and a plan
    grid varying tp failed every point with the binding's TypeError."""
    import yaml

    from accel_sim.io.device_file import builtin_device_files

    stock = next(p for p in builtin_device_files() if p.stem == "h100_sxm")
    data = yaml.safe_load(stock.read_text()) | {"id": "h100_96gib", "name": "H100 96 GiB", "aliases": [],
                                                 "memory_gib": 96}
    device_file = tmp_path / "h100_96gib.yaml"
    device_file.write_text(yaml.safe_dump(data, sort_keys=False))
    train = load_grid(_grid(tmp_path, "command: train\nfixed: {model: llama-3-8b, system: dgx-h100, gpus: 8, dp: 8, "
                                      f"global_batch: 8, seq: 4096, device: h100_96gib, device_file: {device_file}}}\n"
                                      "grid: {recompute: [none, full]}\n"))
    row = run_points(train, [0])[0]
    d = _json(capsys, "train", "--model", "llama-3-8b", "--system", "dgx-h100", "--gpus", "8", "--dp", "8",
              "--global-batch", "8", "--seq", "4096", "--device", "h100_96gib", "--device-file", str(device_file),
              "--json")
    # About 88 GB a GPU: over the stock part's 80 GiB, within the 96 GiB of the file's.
    assert row["error"] is None and row["fits"] and row["memory_per_gpu_bytes"] == d["memory_per_gpu_bytes"]
    plan = load_grid(_grid(tmp_path, "command: plan\nfixed: {model: llama-3-8b, seq: 4096, global_batch: 64, "
                                     "system: dgx-h100, gpus: 8}\ngrid: {tp: [1, 2]}\n"))
    rows = run_points(plan, [0, 1])
    assert [r["error"] for r in rows] == [None, None]
    assert rows[0]["best"].startswith("TP1 ") and rows[1]["best"].startswith("TP2 ")
    p = _json(capsys, "plan", "--model", "llama-3-8b", "--seq", "4096", "--global-batch", "64", "--system", "dgx-h100",
              "--gpus", "8", "--tp", "2", "--top", "1", "--threads", "1", "--json")
    assert rows[1]["step_s"] == p["best"][0]["step_s"] and rows[1]["candidates"] == p["candidates"]


def test_a_grid_reads_its_system_and_device_files_once(tmp_path: Path, monkeypatch):
    """A train grid on a system file whose device_overrides vary a device of a --device-file:
    the files are parsed for the first point only (parsing them again was nine tenths of each
    point's time), and a file changed between sweeps is read again."""
    import yaml

    from accel_sim.io.device_file import builtin_device_files

    root = Path(__file__).resolve().parents[1] / "python" / "accel_sim" / "data"
    device = yaml.safe_load(next(p for p in builtin_device_files() if p.stem == "h100_sxm").read_text())
    device_file = tmp_path / "h100_big.yaml"
    device_file.write_text(yaml.safe_dump(device | {"id": "h100_big", "name": "H100 big", "aliases": []}))
    system = yaml.safe_load((root / "systems" / "dgx_h100.yaml").read_text())
    system.update(id="dgx_big", name="DGX big", device="h100_big",
                  device_overrides={"id": "h100_big_96gib", "name": "H100 big 96 GiB", "memory_gib": 96})
    system["sources"]["device_overrides.memory_gib"] = "the part's datasheet"
    system_file = tmp_path / "dgx_big.yaml"
    system_file.write_text(yaml.safe_dump(system))
    grid = load_grid(_grid(tmp_path, f"command: train\nfixed: {{model: llama-3-8b, system: {system_file}, "
                                     f"device_file: {device_file}, seq: 4096, global_batch: 8, gpus: 8}}\n"
                                     "points: [{tp: 1, dp: 8}, {tp: 2, dp: 4}, {tp: 4, dp: 2}, {tp: 8, dp: 1}]\n"))
    first = run_points(grid, [0])[0]
    assert first["error"] is None and first["fits"]   # about 88 GB a GPU, within 96 GiB
    from accel_sim.io import fields

    parsed = []
    parse_yaml = fields.parse_yaml
    monkeypatch.setattr(fields, "parse_yaml", lambda text, *rest: parsed.append(text) or parse_yaml(text, *rest))
    rows = run_points(grid, range(4))
    assert [r["error"] for r in rows] == [None] * 4 and rows[0] == first and parsed == []
    # The variant with 60 GiB of its own: the same layout no longer fits, read from the new file.
    system["device_overrides"]["memory_gib"] = 60
    system_file.write_text(yaml.safe_dump(system))
    again = run_points(grid, [0])[0]
    assert len(parsed) == 2 and again["error"] is None and not again["fits"]   # the system file, its base device's


def test_the_lean_path_gives_the_rows_of_the_general_one(tmp_path: Path):
    """Points without device or system parameters skip the report objects; their rows must be
    what sweep.run_point reports for them."""
    import accel_sim.grid as G
    import accel_sim.grid_points as P

    # A decode step takes context where prefill and training take seq: a grid of each.
    for shape, phases in (("seq: 256", "[prefill, train]"), ("context: 256", "[decode]")):
        grid = load_grid(_grid(tmp_path, f"command: simulate\nfixed: {{model: llama3-8b, {shape}}}\n"
                                         f"grid:\n  phase: {phases}\n  device: [a100, mi300x]\n  batch: [1, 3]\n"))
        lean = run_points(grid, range(len(grid)))
        general = [{"point": i, **grid.point(i), **P._simulate_general(grid, grid.point(i))} for i in range(len(grid))]
        assert all(row["error"] is None for row in lean)
        for a, b in zip(lean, general):
            for key in (n for n, _ in G.FIGURES["simulate"]):
                assert a[key] == b[key], (a["point"], key)
        if shape.startswith("seq"):   # the shape not varied holds at every point, whatever the point before set
            assert lean[0]["tokens_per_s"] == pytest.approx(256 / lean[0]["latency_s"])


def test_a_script_target_is_resized_to_each_points_batch(tmp_path: Path, capsys):
    """batch on a script target resizes its example inputs as `simulate --batch` does: three rows
    of three shapes, not three copies of the script's own (a Linear of 1024 x 1024 on batch 2)."""
    script = tmp_path / "s1.py"
    script.write_text("import torch\n\ndef get_model():\n"
                      "    return torch.nn.Linear(1024, 1024), (torch.randn(2, 1024),)\n")
    grid = load_grid(_grid(tmp_path, f"command: simulate\nfixed: {{target: {script}, device: h100}}\n"
                                     "grid: {batch: [1, 4, 64]}\n"))
    rows = run_points(grid, range(3))
    assert [r["error"] for r in rows] == [None] * 3
    # A GEMM of 2 x batch x 1024 x 1024 FLOPs: 64 sequences take longer than 1.
    assert rows[0]["latency_s"] < rows[2]["latency_s"] and len({r["latency_s"] for r in rows}) == 3
    d = _json(capsys, "simulate", str(script), "--batch", "4", "--device", "h100", "--json", "--no-ops")
    assert rows[1]["latency_s"] == d["latency_s"]


@pytest.mark.parametrize("text, message", [
    # A decode step has no seq: every point would be the same row.
    ("command: simulate\nfixed: {model: gpt2, phase: decode}\ngrid: {seq: [128, 256]}\n",
     "grid.yaml: point 0 (seq 128): --seq applies to prefill and training"),
    ("command: simulate\nfixed: {model: gpt2, seq: 128, cost_model: roofline}\ngrid: {clock_mhz: [1000, 1500]}\n",
     "grid.yaml: point 0 (clock_mhz 1000.0): --clock-mhz applies to the kernel cost model"),
    ("command: simulate\nfixed: {model: gpt2, seq: 128}\ngrid: {link_bandwidth_gbs: [100, 200]}\n",
     "grid.yaml: point 0 (link_bandwidth_gbs 100.0): link_bandwidth_gbs varies the scale-up bandwidth of --system"),
    ("command: simulate\nfixed: {model: gpt2, seq: 128}\ngrid: {grad_accum: [1, 4]}\n",
     "grid.yaml: point 0 (grad_accum 1): --grad-accum applies to a training step"),
    ("command: simulate\nfixed: {target: g.json}\ngrid: {batch: [1, 2]}\n",
     "grid.yaml: point 0 (batch 1): --batch does not apply to the saved graph g.json"),
    # Only the decode points give a seq they would not use: the first of them is named.
    ("command: simulate\nfixed: {model: gpt2, seq: 128}\ngrid: {phase: [prefill, decode], batch: [1, 2]}\n",
     "grid.yaml: point 2 (phase decode, batch 1): --seq applies to prefill and training"),
    ("command: simulate\nfixed: {model: gpt2}\npoints: [{phase: prefill, seq: 128}, {phase: decode, seq: 128}]\n",
     "grid.yaml: point 1 (phase decode, seq 128): --seq applies to prefill and training"),
    ("command: train\nfixed: {model: llama-3-8b, system: dgx-h100, seq: 4096, global_batch: 64, gpus: 8, tp: 8}\n"
     "grid: {zero: [1, 2]}\n", "grid.yaml: point 0 (zero 1): --zero 1 shards optimizer states"),
    ("command: serve\nfixed: {model: llama3-8b, qps: 4}\ngrid: {burstiness: [1, 2]}\n",
     "grid.yaml: point 0 (burstiness 1.0): --burstiness is the gaps' coefficient of variation of --arrival gamma"),
    ("command: plan\nfixed: {model: llama-3-8b, seq: 4096, global_batch: 64, system: dgx-h100}\n"
     "grid: {gpus: [8], train_tokens: [1T, 2T]}\n", "grid.yaml: grid: train_tokens chooses output"),
], ids=lambda v: v if len(v) < 80 else v[:60] + "...")
def test_flags_a_point_would_not_use_are_refused_when_the_grid_is_read(tmp_path: Path, text: str, message: str):
    """The command line's refusals of a typed flag its run would not use hold for a grid's points:
    a sweep along such a flag gave identical rows."""
    with pytest.raises(UsageError) as e:
        load_grid(_grid(tmp_path, text))
    assert message in str(e.value) and "\n" not in str(e.value)


def test_flags_a_points_model_would_not_use_fail_that_point(tmp_path: Path):
    """What only the model tells (Llama-3-8B is dense) is refused per point, as `simulate` refuses
    it once the model is read."""
    grid = load_grid(_grid(tmp_path, "command: simulate\nfixed: {model: llama3-8b, seq: 128}\n"
                                     "grid: {moe_impl: [grouped, sequential], device: [a100, h100]}\n"))
    rows = run_points(grid, range(4))
    assert {r["error"] for r in rows} == {"--moe-impl applies to mixture-of-experts models; llama-3-8b is dense"}


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
