"""`accel-sim sweep`: parameter specs, the physics of bandwidth and peak sweeps, plots and JSON.

Hand-worked figures use Llama 3 8B (models/llama3_8b config: 32 layers, hidden 4096, 32 heads,
8 KV heads of 128, MLP 14336, vocabulary 128256, bf16) and h100_sxm.yaml's dense bf16 peak of
989.4 TFLOP/s.
"""

from __future__ import annotations

import json
import pickle
import re
import sys
from pathlib import Path

import pytest

from accel_sim.report.json_report import SCHEMA_VERSION

from conftest import run_cli

PEAK_BF16 = 989.4e12  # h100_sxm.yaml, peak_tflops.bf16
LAYERS, HIDDEN, KV_HEADS, HEAD_DIM, MLP, VOCAB = 32, 4096, 8, 128, 14336, 128256
# Weights of one block's GEMMs: q and o (4096 x 4096), k and v (4096 x 1024), gate, up, down.
BLOCK_GEMM_PARAMS = LAYERS * (2 * HIDDEN * HIDDEN + 2 * HIDDEN * KV_HEADS * HEAD_DIM + 3 * HIDDEN * MLP)
GEMM_PARAMS = BLOCK_GEMM_PARAMS + HIDDEN * VOCAB  # and the LM head
KV_BYTES_PER_TOKEN = 2 * LAYERS * KV_HEADS * HEAD_DIM * 2  # K and V, bf16
GIB = 1024**3


def sweep_json(*args: str) -> dict:
    result = run_cli("sweep", "--model", "llama3-8b", *args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def column(points: list[dict], key: str, device: str | None = None) -> list:
    return [p[key] for p in points if device is None or p["device"] == device]


# --- specs -----------------------------------------------------------------------------------

@pytest.mark.parametrize("text, name, values", [
    ("memory_bandwidth_gbs=2000:8000:7", "memory_bandwidth_gbs", [2000, 3000, 4000, 5000, 6000, 7000, 8000]),
    ("peak_tflops=250:2000:4:log", "peak_tflops", [250, 500, 1000, 2000]),
    ("batch=1:64:7:log", "batch", [1, 2, 4, 8, 16, 32, 64]),
    ("batch=1, 2,4", "batch", [1, 2, 4]),
    ("memory_gb=0.5:1.5:3", "memory_gb", [0.5, 1.0, 1.5]),
    ("context=0,128", "context", [0, 128]),
])
def test_vary_specs(text: str, name: str, values: list[float]):
    from accel_sim.design_sweep import parse_vary

    assert parse_vary(text) == (name, values)


@pytest.mark.parametrize("args, message", [
    (["--vary", "bandwidth=1,2"], "unknown sweep parameter 'bandwidth' (known: peak_tflops, memory_bandwidth_gbs,"),
    (["--vary", "memory_bandwidth_gbs"], "--vary takes NAME=SPEC"),
    (["--vary", "batch=1:8"], "a range is start:stop:n or start:stop:n:log"),
    (["--vary", "batch=1:8:4:lin"], "a range is start:stop:n or start:stop:n:log"),
    (["--vary", "batch=1:8:x"], "is not an integer"),
    (["--vary", "batch=1:8:1"], "at least 2 points"),
    (["--vary", "batch=1.5,2"], "batch takes whole numbers"),
    (["--vary", "batch=1:4:10"], "repeat once rounded"),
    # Repeats are refused for every parameter, as a grid file's range refuses them (sweep.RangeValues).
    (["--vary", "memory_bandwidth_gbs=1000:1000.0000000001:3"], "the values repeat (kept to 12 significant digits)"),
    (["--vary", "memory_bandwidth_gbs=2000,2000"], "the values repeat; ask for fewer points"),
    # The range's count is checked before its values are listed (this one used to fill the memory).
    (["--vary", "memory_bandwidth_gbs=1000:2000:1000000000000"],
     "a range of 1,000,000,000,000 values is more than the 100,000 a one-parameter sweep takes"),
    (["--vary", "batch=0,1"], "batch must be at least 1"),
    (["--vary", "memory_bandwidth_gbs=0:100:3"], "must be positive"),
    (["--vary", "peak_tflops=-1:10:3:log"], "a log range needs positive ends"),
    (["--vary", "memory_bandwidth_gbs=1,abc"], "'abc' is not a finite number"),
    (["--vary", "batch=1,2", "--vary", "seq=1,2"], "give --vary once"),
    (["--vary", "seq=128,256", "--phase", "decode"], "vary context"),
    (["--vary", "context=128,256"], "context is the cached tokens of a decode step"),
    (["--vary", "link_bandwidth_gbs=100,200", "--tp", "2"], "give --system"),
    (["--vary", "clock_mhz=1000,2000", "--clock-mhz", "1500"], "not both"),
    (["--vary", "batch=1,2", "--plot", "out.pdf"], "--plot writes .png, .svg or .html"),
    (["--vary", "batch=1,2", "--devices", "a100,nope"], "unknown device 'nope'"),
    (["--vary", "tp=1,3"], "not divisible by the tensor-parallel degree 3"),
    (["--vary", "batch=1,1e30"], "batch must be at most 2^63 - 1"),  # was a nanobind TypeError traceback
    (["--vary", "seq=128:1e19:2"], "seq must be at most 2^63 - 1"),
])
def test_bad_sweeps_are_one_line_exit_2(args: list[str], message: str):
    result = run_cli("sweep", "--model", "llama3-8b", *args)
    assert result.returncode == 2, result.stdout
    assert result.stderr.startswith("accel-sim: error: ")
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args, message", [
    (["--batch", "4"], "--batch comes from the grid file (put it under fixed:)"),
    (["--device", "a100"], "--device comes from the grid file (put it under fixed:)"),
    (["--cost-model", "roofline"], "--cost-model comes from the grid file (put it under fixed:)"),
    (["--devices", "a100,h100"], "--devices comes from the grid file (put it under fixed:)"),
    (["--no-launch-overhead"], "--no-launch-overhead comes from the grid file (put it under fixed:)"),
    (["--model", "gpt2"], "--model comes from the grid file (put it under fixed:)"),
    (["model.py"], "the target model.py comes from the grid file (put it under fixed: as target)"),
    (["--metric", "mfu"], "--metric picks what a one-parameter sweep's --plot draws"),
])
def test_a_grid_sweep_refuses_the_simulation_flags_it_would_drop(tmp_path: Path, args: list[str], message: str):
    """`sweep --grid g.yaml --out x.csv --batch 4 --device a100` ran the grid's own values and
    dropped the flags typed beside it."""
    grid = tmp_path / "g.yaml"
    grid.write_text("command: simulate\nfixed: {model: gpt2, seq: 128}\ngrid: {batch: [1, 2]}\n")
    result = run_cli("sweep", "--grid", str(grid), "--out", str(tmp_path / "x.csv"), "--workers", "1", *args)
    assert result.returncode == 2 and result.stderr.startswith("accel-sim: error: ") and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x.csv").exists()


def test_device_parameters_are_held_to_the_bounds_the_file_readers_hold():
    """A swept device or system value is held to the bounds of the device and system files and of
    --clock-mhz, taken from their readers (a bound changed there changes here): a kibibyte to
    10^6 GiB of memory, a kilobyte per second to a petabyte per second, a kiloFLOP/s to an
    exaFLOP/s, a kilohertz to 100 GHz."""
    from accel_sim.commands.flags import CLOCK_MHZ
    from accel_sim.io import device_file, system_file
    from accel_sim.design_sweep import PARAMETERS

    bounds = {name: p.bounds for name, p in PARAMETERS.items() if p.bounds is not None}
    assert bounds == {"peak_tflops": (device_file.PEAK_MIN_TFLOPS, device_file.PEAK_MAX_TFLOPS),
                      "memory_bandwidth_gbs": device_file.BOUNDS["memory_bandwidth_gbs"][::2],
                      "memory_gb": device_file.BOUNDS["memory_gib"][::2],
                      "clock_mhz": device_file.CLOCK_MHZ_RANGE,
                      "link_bandwidth_gbs": (system_file.MIN_GBS, system_file.MAX_GBS)}
    assert bounds == {"peak_tflops": (1e-9, 1e6), "memory_bandwidth_gbs": (1e-6, 1e6), "memory_gb": (1024 / GIB, 1e6),
                      "clock_mhz": (1e-3, 1e5), "link_bandwidth_gbs": (1e-6, 1e6)}
    assert CLOCK_MHZ["check"](1e-3) is None and CLOCK_MHZ["check"](1e5) is None
    assert CLOCK_MHZ["check"](0.9e-3) == CLOCK_MHZ["check"](1.1e5) == "a clock in MHz from 0.001 to 100,000"


def test_workload_parameters_need_a_model(mlp_graph_file: Path):
    result = run_cli("sweep", str(mlp_graph_file), "--vary", "batch=1,2")
    assert result.returncode == 2
    assert "give --model NAME" in result.stderr


# --- physics ---------------------------------------------------------------------------------

def test_decode_latency_falls_in_inverse_proportion_to_bandwidth_until_compute_bound():
    # Roofline, no launch overhead, batch 256, context 128. A decode GEMM [256, K] x [K, N] in
    # bf16 does 2*256*K*N FLOP on 2(KN + 256K + 256N) bytes: 256 KN / (KN + 256K + 256N) FLOP/B,
    # from 195 (k and v projections, N = 1024) to 240 (LM head). The ridge point is 989.4e12 /
    # bandwidth: 247 FLOP/B at 4,000 GB/s (every GEMM memory-bound) and 165 at 6,000 (every GEMM
    # compute-bound); the crossings lie between 4,120 and 5,070 GB/s.
    d = sweep_json("--device", "h100", "--vary", "memory_bandwidth_gbs=2000:8000:7", "--phase", "decode",
                   "--batch", "256", "--context", "128", "--cost-model", "roofline", "--no-launch-overhead")
    pts = {p["memory_bandwidth_gbs"]: p for p in d["points"]}
    assert list(pts) == [2000, 3000, 4000, 5000, 6000, 7000, 8000]
    # Memory-bound: every op streams its bytes, so latency x bandwidth is the bytes moved, the
    # same at each point; at least the GEMM weights and the KV cache.
    moved = [pts[bw]["latency_s"] * bw * 1e9 for bw in (2000, 3000, 4000)]
    assert max(moved) / min(moved) - 1 < 1e-9
    weights_and_cache = 2 * GEMM_PARAMS + 256 * 128 * KV_BYTES_PER_TOKEN
    assert weights_and_cache < moved[0] < 1.25 * weights_and_cache
    assert all(pts[bw]["bound"] == "memory" and pts[bw]["compute_bound_time_s"] == 0 for bw in (2000, 3000, 4000))
    # Compute-bound GEMMs: they take their FLOPs at the peak, 2 x 256 x the GEMM parameters /
    # 989.4e12 = 3.88 ms whatever the bandwidth; only the rest (attention over the cache,
    # norms) still speeds up, in inverse proportion.
    floor_s = 2 * 256 * GEMM_PARAMS / PEAK_BF16
    for bw in (6000, 7000, 8000):
        assert pts[bw]["compute_bound_time_s"] == pytest.approx(floor_s, rel=1e-6)
        assert pts[bw]["bound"] == "compute"
    rest = [pts[bw]["memory_bound_time_s"] * bw for bw in (6000, 7000, 8000)]
    assert max(rest) / min(rest) - 1 < 1e-9
    # So doubling the bandwidth from 4,000 to 8,000 GB/s no longer halves the latency: it
    # approaches the compute floor instead.
    assert pts[8000]["latency_s"] > 1.5 * pts[4000]["latency_s"] / 2
    assert floor_s < pts[8000]["latency_s"] < pts[7000]["latency_s"] < pts[6000]["latency_s"]


def test_batch_one_decode_moves_the_weights_once_per_token():
    # Batch 1: every op is memory-bound at every bandwidth, so latency x bandwidth = the bytes of
    # the GEMM weights (the embedding is a gather of one row) and of the 2,048-token KV cache.
    d = sweep_json("--device", "h100", "--vary", "memory_bandwidth_gbs=2000:8000:4", "--phase", "decode",
                   "--cost-model", "roofline", "--no-launch-overhead")
    moved = [p["latency_s"] * p["memory_bandwidth_gbs"] * 1e9 for p in d["points"]]
    assert max(moved) / min(moved) - 1 < 1e-9
    assert moved[0] == pytest.approx(2 * GEMM_PARAMS + 2048 * KV_BYTES_PER_TOKEN, rel=5e-3)


def test_kernel_model_decode_latency_falls_with_bandwidth():
    d = sweep_json("--device", "h100", "--vary", "memory_bandwidth_gbs=2000:8000:7", "--phase", "decode")
    latency = column(d["points"], "latency_s")
    assert all(a > b for a, b in zip(latency, latency[1:]))
    # Launch and kernel floors do not follow the bandwidth: less than inverse proportion.
    assert latency[-1] > latency[0] * 2000 / 8000


def test_peak_sweep_scales_the_compute_bound_time():
    # Prefill of 2,048 tokens, roofline: compute-bound ops take FLOPs / peak. The GEMM FLOPs are
    # 2 x 2,048 x the block GEMM parameters plus the LM head on the last token only
    # (2 x 4096 x 128256), and causal attention 2 x 2 x 2048^2 / 2 x 4096 per layer.
    d = sweep_json("--device", "h100", "--vary", "peak_tflops=250,500,1000", "--phase", "prefill", "--seq", "2048",
                   "--cost-model", "roofline", "--no-launch-overhead")
    flops = 2 * 2048 * BLOCK_GEMM_PARAMS + 2 * HIDDEN * VOCAB + LAYERS * 2 * 2048**2 * HIDDEN
    for p in d["points"]:
        assert p["compute_bound_time_s"] == pytest.approx(flops / (p["peak_tflops"] * 1e12), rel=1e-3)
    memory = column(d["points"], "memory_bound_time_s")  # the bandwidth is untouched
    assert max(memory) / min(memory) - 1 < 1e-9


def test_peak_of_a_graph_files_fp32_matmuls(mlp_graph_file: Path):
    # conftest's MLP in fp32 on h100_sxm (3,350 GB/s): its matmuls run on the fp32 units, so
    # peak_tflops=10 sets that rate. mm: 2 x 512 x 1024 x 4096 / 10e12 = 429.5 us (compute; its
    # 26 MiB take 8 us); relu: 2 x 512 x 4096 x 4 B / 3350e9 = 5.0 us (memory).
    result = run_cli("sweep", str(mlp_graph_file), "--vary", "peak_tflops=10", "--cost-model", "roofline",
                     "--no-launch-overhead", "--json")
    assert result.returncode == 0, result.stderr
    (p,) = json.loads(result.stdout)["points"]
    mm = 2 * 512 * 1024 * 4096 / 10e12
    relu = 2 * 512 * 4096 * 4 / 3350e9
    assert p["latency_s"] == pytest.approx(2 * mm + relu, rel=1e-9)
    assert p["tokens_per_s"] is None  # a graph file does not say how many tokens it holds


def test_capacity_sweep_flips_fits_at_the_weights():
    # The bf16 weights alone are 2 x 8.03e9 B = 14.96 GiB: 12 GiB cannot hold them, 20 GiB can.
    d = sweep_json("--device", "h100", "--vary", "memory_gb=12,20", "--phase", "decode")
    assert column(d["points"], "fits") == [False, True]
    assert column(d["points"], "latency_s")[0] == column(d["points"], "latency_s")[1]
    assert column(d["points"], "memory_capacity_bytes") == [12 * GIB, 20 * GIB]


def test_link_bandwidth_sweep_times_the_tensor_parallel_collectives():
    # TP 8 on a DGX H100: each all-reduce of the [2048, 4096] bf16 activations (16.8 MB) runs NVLS
    # (dgx_h100.yaml: NCCL), 23 us fixed plus the 10.6 us launch plus the bytes at 0.60 of the link:
    # twice the link bandwidth halves the bandwidth term only; compute is untouched.
    d = sweep_json("--device", "h100", "--system", "dgx-h100", "--tp", "8", "--vary", "link_bandwidth_gbs=100,200",
                   "--phase", "prefill", "--seq", "2048")
    slow, fast = d["points"]
    assert slow["communication_time_s"] > 0
    fixed, size = 23e-6 + 10.6e-6, 2048 * 4096 * 2
    expected = (fixed + size / (0.6 * 100e9)) / (fixed + size / (0.6 * 200e9))
    assert slow["communication_time_s"] / fast["communication_time_s"] == pytest.approx(expected, rel=0.02)
    assert slow["compute_bound_time_s"] == fast["compute_bound_time_s"]


def test_batch_sweep_rebuilds_the_graph():
    d = sweep_json("--device", "h100", "--vary", "batch=1,4,16,64", "--phase", "decode")
    tokens = column(d["points"], "tokens_per_s")
    assert all(a < b for a, b in zip(tokens, tokens[1:]))
    # Each more sequence holds its 2,049-token KV cache (0.25 GiB at 2,048 tokens).
    grown = d["points"][-1]["required_bytes"] - d["points"][0]["required_bytes"]
    assert 63 * 2048 * KV_BYTES_PER_TOKEN < grown < 1.05 * 63 * 2048 * KV_BYTES_PER_TOKEN


def test_tp_sweep_splits_the_weights():
    # One rank of TP 2 holds half of every weight matrix (the embedding and LM head split by
    # vocabulary) and half of the KV heads: 2 B x (GEMM weights + embedding) / 2 + the cache / 2.
    d = sweep_json("--device", "h100", "--vary", "tp=1,2", "--phase", "decode")
    saved = d["points"][0]["peak_memory_bytes"] - d["points"][1]["peak_memory_bytes"]
    assert saved == pytest.approx(GEMM_PARAMS + HIDDEN * VOCAB + 2048 * KV_BYTES_PER_TOKEN / 2, rel=1e-3)


# --- output ----------------------------------------------------------------------------------

def test_json_schema_and_one_series_per_device():
    d = sweep_json("--devices", "a100,h100", "--vary", "batch=1,8", "--phase", "decode")
    assert d["schema"] == "accel-sim/sweep" and d["schema_version"] == SCHEMA_VERSION
    assert d["parameter"] == {"name": "batch", "kind": "workload", "label": "batch (sequences)", "values": [1, 8]}
    assert d["devices"] == ["a100_80gb", "h100_sxm"]
    assert d["metric"] == "latency_s" and d["cost_model"] == "kernel"
    assert d["workload"]["model"] == "llama-3-8b" and d["workload"]["phase"] == "decode"
    assert [(p["device"], p["batch"]) for p in d["points"]] == [
        ("a100_80gb", 1), ("a100_80gb", 8), ("h100_sxm", 1), ("h100_sxm", 8)]
    for key in ("latency_s", "tokens_per_s", "peak_memory_bytes", "required_bytes", "memory_capacity_bytes", "fits",
                "compute_bound_time_s", "memory_bound_time_s", "communication_time_s", "bound", "mfu"):
        assert key in d["points"][0]
    # The slower memory of the A100 (2,039 vs 3,350 GB/s) makes its decode slower.
    assert d["points"][0]["latency_s"] > d["points"][2]["latency_s"]


def test_table_is_aligned():
    result = run_cli("sweep", "--model", "llama3-8b", "--vary", "batch=1,16", "--phase", "decode")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.lstrip().startswith("device"))
    rows = lines[header: header + 4]
    assert len({len(line) for line in rows[:2]}) == 1  # the rule under the header spans it
    assert "batch (sequences)" in lines[0]
    assert rows[2].split()[:2] == ["h100_sxm", "1"] and rows[3].split()[:2] == ["h100_sxm", "16"]


def test_html_plot_is_self_contained(tmp_path: Path):
    out = tmp_path / "batch.html"
    result = run_cli("sweep", "--model", "llama3-8b", "--devices", "a100,h100", "--vary", "batch=1,2,4,8,16,32,64",
                     "--phase", "decode", "--plot", str(out))
    assert result.returncode == 0, result.stderr
    page = out.read_text()
    assert page.startswith("<!doctype html>") and "<svg" in page
    # Nothing to fetch: no linked stylesheet or script, no address but the SVG namespace.
    assert not re.search(r"""(src|href)\s*=""", page) and "<link" not in page and "url(" not in page
    assert set(re.findall(r"https?://[^\s\"'<>]*", page)) == {"http://www.w3.org/2000/svg"}
    assert page.count('<polyline class="series"') == 2  # one line per device
    assert page.count('<circle class="pt"') == 14 and page.count("<title>") == 1 + 14  # the page's, one per point
    assert "batch (sequences)" in page and "latency (ms)" in page
    assert "a100_80gb" in page and "h100_sxm" in page
    assert page.count("<tr>") == 1 + 14  # the table: its header and every point


def test_svg_marks_points_that_do_not_fit(tmp_path: Path):
    out = tmp_path / "mem.svg"
    result = run_cli("sweep", "--model", "llama3-8b", "--vary", "memory_gb=12,20", "--phase", "decode",
                     "--plot", str(out), "--metric", "memory")
    assert result.returncode == 0, result.stderr
    svg = out.read_text()
    assert svg.startswith("<svg") and "<style>" in svg  # draws on its own, without the report page
    assert svg.count('class="pt hollow"') == 1 and svg.count('<circle class="pt"') == 1
    assert "does not fit in memory" in svg and "memory needed (GiB)" in svg


@pytest.mark.browser
def test_html_plot_in_a_browser(tmp_path: Path, chromium):
    from browser import keep_screenshot

    out = tmp_path / "sweep.html"
    result = run_cli("sweep", "--model", "llama3-8b", "--devices", "a100,h100", "--vary", "memory_gb=12,40,80",
                     "--phase", "decode", "--batch", "64", "--plot", str(out))
    assert result.returncode == 0, result.stderr
    with chromium.open(out) as page:
        assert page.console_errors == [] and page.external_requests == []
        assert page.evaluate("document.body.getAttribute('data-report-ready')") == "1"
        assert page.evaluate("document.querySelectorAll('svg.sweep polyline.series').length") == 2
        # 12 GiB holds neither device's 31.7 GiB: one open marker per device, drawn with a width.
        assert page.evaluate("document.querySelectorAll('svg.sweep circle.pt.hollow').length") == 2
        assert page.evaluate("document.querySelector('svg.sweep circle.pt.hollow').getBoundingClientRect().width") > 4
        assert page.evaluate("document.querySelectorAll('svg.sweep circle.pt').length") == 6
        # The table sorts by latency.
        page.evaluate("document.querySelectorAll('table.sweep-points th')[2].click()")
        devices = page.evaluate("Array.from(document.querySelectorAll('table.sweep-points tbody tr')).map(r => r.cells[0].textContent)")
        assert devices == ["h100_sxm"] * 3 + ["a100_80gb"] * 3
        keep_screenshot(page, "report-sweep")


def test_png_plot(tmp_path: Path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "bw.png"
    result = run_cli("sweep", "--model", "llama3-8b", "--device", "h100", "--vary", "memory_bandwidth_gbs=2000:8000:7",
                     "--phase", "decode", "--plot", str(out))
    assert result.returncode == 0, result.stderr
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_png_without_matplotlib_says_how_to_get_it(tmp_path: Path, monkeypatch, capsys):
    from accel_sim.cli.main import main

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    code = main(["sweep", "--model", "llama3-8b", "--vary", "batch=1,2", "--phase", "decode",
                 "--plot", str(tmp_path / "x.png")])
    assert code == 2
    err = capsys.readouterr().err
    assert 'pip install "accel-sim[plot]"' in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x.png").exists()


def test_run_point_is_plain_data():
    # The work of one point: picklable inputs and a JSON-ready row, for a pool of processes.
    from accel_sim.design_sweep import SweepSetup, run_point

    setup = SweepSetup(build={"model": "llama3-8b", "phase": "decode", "context": 2048},
                       simulate={"cost_model": "roofline", "launch_overhead": False})
    setup = pickle.loads(pickle.dumps(setup))
    row = run_point(setup, {"device": "h100", "memory_bandwidth_gbs": 2000, "batch": 1})
    assert json.loads(json.dumps(row)) == row
    assert row["device"] == "h100_sxm" and row["batch"] == 1
    assert row["latency_s"] * 2000e9 == pytest.approx(2 * GEMM_PARAMS + 2048 * KV_BYTES_PER_TOKEN, rel=5e-3)
