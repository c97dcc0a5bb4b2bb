"""The kernel command, the validation report against measured kernels, and calibration."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli, run_validate

DEVICES = Path(__file__).resolve().parent.parent / "python" / "accel_sim" / "data" / "devices"


def test_kernel_matmul_reports_time_tflops_bound_and_the_roofline():
    result = run_cli("kernel", "matmul", "--m", "8192", "--n", "8192", "--k", "8192", "--device", "h100", "--json")
    assert result.returncode == 0, result.stderr
    d = json.loads(result.stdout)
    assert d["flops"] == 2 * 8192**3
    # Roofline: 2 * 8192^3 FLOPs at the 989.4 TFLOP/s bf16 peak.
    assert d["roofline_time_s"] == pytest.approx(2 * 8192**3 / 989.4e12, rel=1e-12)
    # The kernel model sits above the roofline by at least the sustained fraction (MAMF 80.3%).
    assert d["time_s"] >= d["roofline_time_s"] / 0.803
    assert d["tflops"] == pytest.approx(d["flops"] / d["time_s"] / 1e12)
    assert d["bound"] == "compute" and d["calibrated"] is True


def test_a_t4_runs_long_gemm_streams_at_its_power_capped_rate():
    # Measured: cuBLAS FP16 4096^3 back to back on a T4 sustains about 24 TFLOP/s under its 70 W
    # power cap, 37% of the 65 TF peak (NVIDIA Developer Forums, "About GPU peak performance";
    # the T4 device file's kernel source). The kernel model lands within 10% of it, not at the
    # ~48 TF the default 75% efficiency gave.
    d = json.loads(run_cli("kernel", "matmul", "--m", "4096", "--n", "4096", "--k", "4096", "--device", "t4",
                           "--dtype", "fp16", "--json").stdout)
    assert d["flops"] == 2 * 4096**3
    assert d["tflops"] == pytest.approx(24.0, rel=0.10)


def test_kernel_attention_and_memory_forms():
    fwd = json.loads(run_cli("kernel", "attention", "--batch", "4", "--heads", "32", "--kv-heads", "8",
                             "--seq-q", "4096", "--head-dim", "128", "--causal", "--device", "h100", "--json").stdout)
    both = json.loads(run_cli("kernel", "attention", "--batch", "4", "--heads", "32", "--kv-heads", "8",
                              "--seq-q", "4096", "--head-dim", "128", "--causal", "--forward", "--backward",
                              "--device", "h100", "--json").stdout)
    # Causal forward: 4 * 4 * 32 heads * (4096 * 4097 / 2) pairs * 128; with backward 3.5x.
    assert fwd["flops"] == 4 * 4 * 32 * (4096 * 4097 // 2) * 128
    assert both["flops"] == pytest.approx(3.5 * fwd["flops"])
    assert both["time_s"] > fwd["time_s"]
    mem = json.loads(run_cli("kernel", "memory", "--op", "add", "--elements", "1e8", "--dtype", "bf16",
                             "--device", "a100", "--json").stdout)
    assert mem["bytes"] == 3 * 1e8 * 2 and mem["bound"] == "memory"
    slow = json.loads(run_cli("kernel", "matmul", "--m", "8192", "--n", "8192", "--k", "8192", "--device", "h100",
                              "--clock-mhz", "915", "--json").stdout)
    # Half the 1830 MHz clock: about twice the compute-bound time.
    big = json.loads(run_cli("kernel", "matmul", "--m", "8192", "--n", "8192", "--k", "8192", "--device", "h100",
                             "--json").stdout)
    assert slow["time_s"] == pytest.approx(2 * big["time_s"], rel=0.01)
    bad = run_cli("kernel", "memory", "--op", "frobnicate", "--elements", "10", "--device", "h100")
    assert bad.returncode == 2 and "unknown memory-bound op 'frobnicate'" in bad.stderr


def test_validate_reports_the_kernel_model_against_measurements():
    result = run_validate("--json")
    assert result.returncode == 0, result.stderr
    d = json.loads(result.stdout)
    lines = {(l["device"], l["class"]): l for l in d["lines"]}
    assert ("h100_sxm", "gemm") in lines and ("h100_sxm", "attention") in lines
    for (device, cls), line in lines.items():
        # On kernel rows never used for fitting, the kernel model beats the roofline everywhere.
        # Whole HF steps are not decided by kernel rates alone: a third of them are host-bound
        # decode steps (the H100 host's timings ran about 30 us per kernel), where the roofline's
        # flat launch cost per kernel lands nearer; their error is guarded by the limits below.
        if cls != "end-to-end":
            assert line["kernel"]["median_abs_error"] < line["roofline"]["median_abs_error"], (device, cls)
    # Regression guard at today's measured levels (README table), with the H100 and H200 sweeps
    # of validation/measured/ beside the published rows, kernels timed alone adding the device's
    # alone overhead: H100 GEMM 7.1%, attention 5.9%, memory-bound 7.4%; H200 GEMM 5.3%,
    # attention 6.5%, memory-bound 10.7% (ATen's softmax, norms and widening casts at their
    # fitted bandwidth shares; 12.0% and 16.2% without them); B200 GEMM 4.7%,
    # attention 8.9%; A100 memory-bound 9.1% (SXM) and 7.6% (PCIe); H100 NVL 12.4%.
    limits = {("h100_sxm", "gemm"): 0.08, ("h100_sxm", "attention"): 0.07, ("h100_sxm", "memory"): 0.085,
              ("h200", "gemm"): 0.065, ("h200", "attention"): 0.075, ("h200", "memory"): 0.12,
              ("b200", "gemm"): 0.06, ("b200", "attention"): 0.10, ("a100_80gb", "memory"): 0.10,
              ("a100_pcie_80gb", "memory"): 0.09, ("h100_nvl", "memory"): 0.135,
              # Whole HF steps, training built as HF's eager modules run it: 31.7% and 10.0%. The
              # H100's include the 2026-11-25 session's BERT-large and GPT-2 steps, host-bound on a
              # host that took 1.7x the stack's cost per kernel (host_stacks.csv of both sessions).
              ("h100_sxm", "end-to-end"): 0.33, ("h200", "end-to-end"): 0.115}
    for key, limit in limits.items():
        assert lines[key]["kernel"]["median_abs_error"] <= limit, key
    # At least 2x better than the roofline on H100 GEMMs and attention; 1.5x on A100 memory-bound
    # kernels, timed alone only, where the roofline adds the same fitted alone overhead (6.38 us;
    # 9.1% against 17.4%).
    for key, factor in ((("h100_sxm", "gemm"), 2.0), (("h100_sxm", "attention"), 2.0), (("a100_80gb", "memory"), 1.5)):
        assert lines[key]["kernel"]["median_abs_error"] * factor <= lines[key]["roofline"]["median_abs_error"], key
    text = run_validate()
    assert "kernel median" in text.stdout and "left out" in text.stdout
    # AMD and TPU parts appear, as uncalibrated.
    assert "mi300x" in d["uncalibrated_devices"] and "tpu_v5e" in d["uncalibrated_devices"]


def test_calibrate_needs_a_gpu_or_data():
    no_gpu = run_cli("calibrate", "--device", "h100")
    assert no_gpu.returncode == 2 and "local GPU" in no_gpu.stderr
    # As h100_sxm.yaml's sources.kernel says it was fitted: the MAMF matmul efficiency, the floors,
    # the tile overhead and the streaming efficiency held.
    keep = [a for c in ("matmul_efficiency", "kernel_floor_s", "stream_floor_s", "memory_efficiency",
                        "gemm_tile_overhead_s") for a in ("--keep", c)]
    fitted = run_cli("calibrate", "--device", "h100", "--data", *keep)
    assert fitted.returncode == 0, fitted.stderr
    # The shipped constants are the fit's fixed point: fitting again reproduces every fitted
    # value of the device file's kernel section.
    import yaml
    from accel_sim.device import resolve_device

    shipped = yaml.safe_load(open(resolve_device("h100", []).entry.path, encoding="utf-8"))["kernel"]
    printed = yaml.safe_load(fitted.stdout)["kernel"]
    for key, value in shipped.items():
        if key != "calibrated":
            assert printed[key] == pytest.approx(value, abs=1e-3), key
    none = run_cli("calibrate", "--device", "mi300x", "--data")
    assert none.returncode == 2 and "no fit-split measurements" in none.stderr


def test_device_file_kernel_section_is_checked(tmp_path):
    from accel_sim.errors import UsageError
    from accel_sim.io.device_file import load_device_file

    good = tmp_path / "chip.yaml"
    base = ("id: chip\nname: Chip\nvendor: Acme\nmemory_gib: 16\nmemory_bandwidth_gbs: 1000\n"
            "peak_tflops: {bf16: 100}\n")
    good.write_text(base + "kernel: {calibrated: true, matmul_efficiency: 0.7, kernel_floor_us: 2,\n"
                    "  gemm_memory_efficiency: 0.8, gemm_tile_overhead_us: 1.5}\n"
                    "sources: {peak_tflops: x, memory_gib: x, memory_bandwidth_gbs: x, kernel: fitted}\n")
    spec = load_device_file(good).spec
    assert spec.kernel.matmul_efficiency == 0.7 and spec.kernel.kernel_floor_s == pytest.approx(2e-6)
    assert spec.kernel.gemm_memory_efficiency == 0.8 and spec.kernel.gemm_tile_overhead_s == pytest.approx(1.5e-6)
    assert spec.kernel.calibrated is True
    (tmp_path / "negative").mkdir()
    negative = tmp_path / "negative" / "chip.yaml"
    negative.write_text(base + "kernel: {gemm_tile_overhead_us: -1}\n"
                        "sources: {peak_tflops: x, memory_gib: x, memory_bandwidth_gbs: x, kernel: fitted}\n")
    with pytest.raises(UsageError, match="'gemm_tile_overhead_us' must be at least 0, got -1"):
        load_device_file(negative)
    (tmp_path / "bad").mkdir()
    bad = tmp_path / "bad" / "chip.yaml"
    bad.write_text(base + "kernel: {matmul_efficiency: 1.7}\n"
                   "sources: {peak_tflops: x, memory_gib: x, memory_bandwidth_gbs: x, kernel: fitted}\n")
    with pytest.raises(UsageError, match="must be a fraction"):
        load_device_file(bad)
    (tmp_path / "unsourced").mkdir()
    unsourced = tmp_path / "unsourced" / "chip.yaml"
    unsourced.write_text(base + "kernel: {matmul_efficiency: 0.7}\n"
                         "sources: {peak_tflops: x, memory_gib: x, memory_bandwidth_gbs: x}\n")
    with pytest.raises(UsageError, match="sources.kernel"):
        load_device_file(unsourced)


def test_simulate_what_ifs_cuda_graphs_and_clock():
    def latency(*extra):
        r = run_cli("simulate", "--model", "llama-3-8b", "--device", "h100", "--json", "--no-ops", *extra)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)["latency_s"]

    # A batch-1 decode step is many short kernels: CUDA graphs remove the host's launch waits.
    decode = ("--phase", "decode", "--context", "1024")
    assert latency(*decode, "--cuda-graphs") < latency(*decode)
    # A prefill is compute-bound: half the clock, close to twice the time.
    prefill = ("--seq", "4096")
    assert 1.7 < latency(*prefill, "--clock-mhz", "915") / latency(*prefill) < 2.0
    roofline = latency(*prefill, "--cost-model", "roofline")
    assert roofline < latency(*prefill)


def test_latency_carries_an_error_band_from_the_measured_error():
    def band(device):
        r = run_cli("simulate", "--model", "llama-3-8b", "--device", device, "--json", "--no-ops")
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)["latency_band"]

    h100 = band("h100")
    assert h100["basis"] == "measured on this device" and 0 < h100["fraction"] < 0.2
    mi300x = band("mi300x")
    assert mi300x["basis"] == "uncalibrated" and mi300x["fraction"] > h100["fraction"]
    text = run_cli("compare", "--model", "llama-3-8b", "--devices", "h100,mi300x", "--phase", "decode")
    assert "*" in text.stdout and "uncalibrated" in text.stdout


def test_fusion_what_if_reports_what_torch_compile_style_fusion_would_save():
    def run(*extra):
        r = run_cli("simulate", "--model", "llama-3-8b", "--device", "h100", "--kernels", "hf-eager", "--seq", "512",
                    "--json", "--no-ops", *extra)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    eager, fused = run(), run("--fuse")
    assert fused["fused"] is True and fused["fusion_gain_s"] == 0
    assert fused["num_kernels"] < eager["num_kernels"]
    # The gain the unfused report states is exactly the fused run's saving.
    assert eager["fusion_gain_s"] == pytest.approx(eager["latency_s"] - fused["latency_s"], rel=1e-9)
    assert eager["fusion_gain_s"] > 0.05 * eager["latency_s"]
    # Fusion moves fewer bytes and does the same arithmetic.
    assert fused["bytes"] < eager["bytes"] and fused["flops"] == pytest.approx(eager["flops"])


def test_energy_is_reported_as_a_bounded_estimate():
    r = run_cli("simulate", "--model", "llama-3-8b", "--device", "h100", "--seq", "1024", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    # Never above the 700 W TDP for the run's time, never below the 15% idle draw.
    assert 0.15 * 700 * d["latency_s"] <= d["energy_j"] <= 700 * d["latency_s"] * (1 + 1e-9)
    assert sum(op["energy_j"] for op in d["ops"]) == pytest.approx(d["energy_j"])
    text = run_cli("simulate", "--model", "llama-3-8b", "--device", "h100", "--seq", "1024")
    assert "energy" in text.stdout and "estimate" in text.stdout


def test_calibration_sweep_produces_rows_the_validation_reads(tmp_path):
    torch = pytest.importorskip("torch")
    from accel_sim import kernel_rows
    from accel_sim.calibration import measure, split_of, write_rows

    rows = measure("h100_sxm", torch_device="cpu", quick=True)
    kinds = {r["kind"] for r in rows}
    assert kinds == {"gemm", "attention", "memory"}
    assert all(float(r["measured_s"]) > 0 and "torch" in r["source"] and r["split"] == split_of(r) for r in rows)
    assert {r["direction"] for r in rows if r["kind"] == "attention"} == {"forward", "backward"}
    path = tmp_path / "measurements.csv"
    write_rows(rows, path)
    loaded, skipped = kernel_rows.load_rows(path)
    assert len(loaded) == len(rows) and not skipped
    assert torch.__version__ in rows[0]["source"]
    assert {r["timing"] for r in rows} == {"events"} and all(r.query.timed_alone for r in loaded)


def test_fitted_device_file_loads_with_its_kernel_section(tmp_path):
    from accel_sim import _core
    from accel_sim.device import resolve_device
    from accel_sim.io.device_file import load_device_file
    from accel_sim.report.calibration import write_device_file

    k = _core.KernelConstants()  # a fresh object: the catalogue's device must stay untouched
    k.matmul_efficiency = 0.71
    path = write_device_file(resolve_device("h100", []).entry, k, 42, "calibration/measurements.csv", str(tmp_path))
    entry = load_device_file(path)
    assert entry.spec.id == "h100_sxm" and entry.spec.kernel.calibrated
    assert entry.spec.kernel.matmul_efficiency == pytest.approx(0.71)
    assert "42 rows" in entry.sources["kernel"]


def test_whole_model_measurements_feed_an_end_to_end_class(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from accel_sim.calibration import E2E_COLUMNS, measure_models, write_rows

    rows = measure_models("h100_sxm", torch_device="cpu", quick=True)
    assert rows and rows[0]["phase"] == "train" and float(rows[0]["measured_s"]) > 0
    # A row as a GPU run writes it: GPT-2 training step, batch 8, seq 1024, bf16, 0.1 s measured.
    row = {c: "" for c in E2E_COLUMNS}
    row.update(id="e0001", device="h100_sxm", model="gpt2", phase="train", batch=8, seq=1024, dtype="bf16",
               kernels="hf-eager", optimizer="adamw", measured_s="0.1", split="report", source="test")
    path = tmp_path / "end_to_end.csv"
    write_rows([row], path, E2E_COLUMNS)
    result = run_cli("validate", "--e2e-data", str(path), "--json")
    assert result.returncode == 0, result.stderr
    lines = [l for l in json.loads(result.stdout)["lines"] if l["class"] == "end-to-end"]
    assert len(lines) == 1 and lines[0]["rows"] == 1 and lines[0]["device"] == "h100_sxm"


def test_attention_implementation_what_if():
    def latency(impl):
        r = run_cli("simulate", "--model", "llama-3-8b", "--device", "h100", "--seq", "8192",
                    "--attention-impl", impl, "--json", "--no-ops")
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)["latency_s"]

    # H100's fitted constants: FlashAttention-3 (0.65 of peak) beats FlashAttention-2 (0.35);
    # eager attention materialises the 8192 x 8192 scores and is slowest.
    flash2, flash3, eager = latency("flash2"), latency("flash3"), latency("eager")
    assert flash3 < flash2 < eager


def test_malformed_measurement_files_give_one_line_errors(tmp_path):
    kernels = tmp_path / "kernels.csv"
    kernels.write_text("id,kind\nk1,gemm\n")
    bad = run_cli("calibrate", "--device", "h100", "--data", str(kernels))
    assert bad.returncode == 2 and "line 2 lacks the column 'dtype'" in bad.stderr and "Traceback" not in bad.stderr
    e2e = tmp_path / "e2e.csv"
    e2e.write_text("id,device\ne1,h100_sxm\n")
    bad = run_cli("validate", "--e2e-data", str(e2e))
    assert bad.returncode == 2 and "line 2 lacks model" in bad.stderr


def test_shipped_whole_model_steps_are_compared_in_time_and_memory():
    # validation/measured/: HF steps timed on an H100 SXM and an H200 (2026-11-24, 21 each) and the
    # H100 training steps of 2026-11-25 (amp_steps.csv, 17), gathered into the package's
    # end_to_end.csv. Their peak allocated bytes were measured by torch.cuda.
    result = run_validate("--json")
    assert result.returncode == 0, result.stderr
    d = json.loads(result.stdout)
    classes = {(l["device"], l["class"]) for l in d["lines"]}
    assert ("h100_sxm", "end-to-end") in classes and ("h200", "end-to-end") in classes
    memory = d["end_to_end_memory"]
    assert len(memory) == 59
    prefill = [m for m in memory if m["model"] == "llama-3-8b" and m["phase"] == "prefill"]
    # A Llama-3-8B prefill holds its 16.06e9 bf16 weights and one layer's activations: measured
    # 15.78 GiB at batch 1 x 2048 and 18.04 GiB at 8192 tokens.
    assert len(prefill) == 6 and all(abs(m["error"]) < 0.01 for m in prefill)
    # A 4-layer Llama-3-8B trained in pure bf16 with AdamW: 1.92e9 parameters x 8 bytes plus
    # activations, measured 19.87 GiB; the builder is within 10% (HF's unfused RMSNorm and
    # SwiGLU keep a few more tensors than the fused step it builds).
    four = [m for m in memory if m["overrides"] == '{"num_hidden_layers": 4}' and m["model"] == "llama-3-8b"
            and "2026-11-24" in m["id"]]
    assert four and all(abs(m["error"]) < 0.10 for m in four)
    # BERT-large (335M parameters) at batch 4 x 512 without checkpointing, in fp32, under fp16 or
    # bf16 autocast (fp32 weights, gradients and AdamW states: 16 B a parameter, 5.4 GB, plus
    # activations; measured 7.0-7.7 GiB) and in pure bf16 (8 B a parameter; 3.9 GiB): within 10%.
    bert = [m for m in memory if m["model"] == "bert-large" and m["batch"] == 4 and m["recompute"] == "none"]
    assert len(bert) == 6 and {m["precision"] for m in bert} == {"fp32", "amp-fp16", "amp-bf16", "bf16"}
    assert all(abs(m["error"]) < 0.10 for m in bert)


def test_the_allocator_replay_reserves_what_torch_cuda_reserved_on_the_measured_training_steps():
    # The same 29 H100 training steps (validation/measured/, torch.cuda.max_memory_reserved()
    # beside max_memory_allocated()): the caching allocator keeps 0.3-20% more than it hands out
    # (a 4-layer Llama-3-8B at 4,096 tokens: 21.69 GiB reserved for 19.87 allocated). The replay
    # of the builder's step through the allocator model (memory.h) reserves within 5% of it at the
    # median, the figure `train` gives as reserved_per_gpu_bytes and the README quotes (4.7%).
    import statistics

    from accel_sim import _core, validation
    from accel_sim.api import list_devices

    devices = {d.id: d.spec for d in list_devices()}
    rows = [r for r in validation.load_end_to_end() if r["phase"] == "train" and r["device"] == "h100_sxm"]
    assert len(rows) == 29
    errors = []
    for r in rows:
        memory = _core.simulate(validation._end_to_end_graph(r), devices["h100_sxm"], _core.SimulateOptions()).memory
        assert memory.peak_reserved_bytes >= memory.peak_allocated_bytes
        errors.append(abs(memory.peak_reserved_bytes / float(r["peak_reserved_bytes"]) - 1))
    assert statistics.median(errors) < 0.05


def test_calibrate_holds_the_constants_it_is_told_to_keep(tmp_path):
    # A copy of h100_sxm.yaml with floors of 1.5 us (library kernels) and 0.5 us (streaming
    # kernels), which the H100 rows move to 3.0 and 1.75 us unless they are held.
    text = (DEVICES / "h100_sxm.yaml").read_text(encoding="utf-8")
    text = text.replace("kernel_floor_us: 3.0\n", "kernel_floor_us: 1.5\n").replace("stream_floor_us: 1.75\n",
                                                                                    "stream_floor_us: 0.5\n")
    assert "kernel_floor_us: 1.5\n" in text and "stream_floor_us: 0.5\n" in text
    path = tmp_path / "h100_sxm.yaml"
    path.write_text(text, encoding="utf-8")
    kept = run_cli("calibrate", "--device", "h100_sxm", "--device-file", str(path), "--data",
                   "--keep", "kernel_floor_s", "--keep", "stream_floor_s")
    assert kept.returncode == 0, kept.stderr
    assert "kernel_floor_us: 1.50" in kept.stdout and "stream_floor_us: 0.50" in kept.stdout
    fitted = run_cli("calibrate", "--device", "h100_sxm", "--device-file", str(path), "--data")
    assert fitted.returncode == 0, fitted.stderr
    assert "kernel_floor_us: 1.50" not in fitted.stdout and "stream_floor_us: 0.50" not in fitted.stdout
    bad = run_cli("calibrate", "--device", "h100", "--data", "--keep", "kernel_floor_us")
    assert bad.returncode == 2 and "unknown kernel constant 'kernel_floor_us'" in bad.stderr


def test_host_overhead_sweep_runs_and_reports_seconds_per_kernel():
    pytest.importorskip("torch")
    from accel_sim.calibration import HOST_COLUMNS, measure_host

    rows = measure_host("h100_sxm", torch_device="cpu", quick=True)
    assert [r["mode"] for r in rows] == ["eager"]  # no CUDA graph without a GPU
    assert set(rows[0]) == set(HOST_COLUMNS) and 0 < float(rows[0]["seconds_per_kernel"]) < 1e-3


def test_host_cost_script_counts_kernels_and_wall_time(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import csv
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "validation" / "gpu" / "measure_host.py"
    r = subprocess.run([sys.executable, str(script), "--out", str(tmp_path), "--device", "cpu", "--quick"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(open(tmp_path / "host_stacks.csv", encoding="utf-8")))
    # Two frameworks x (forward, forward + backward) x three repeats.
    assert len(rows) == 12 and {r["framework"] for r in rows} == {"hf-transformers", "plain-pytorch (torchtitan-style)"}
    assert all(float(r["seconds_per_kernel"]) > 0 and "host CPU" in r["source"] for r in rows)


def _kernel_rows(tmp_path, timings):
    """One kernels.csv row per timing: the same decode GEMM (M = 1 against a 4,096 x 4,096 bf16
    weight) on the H100 SXM."""
    from accel_sim.calibration import COLUMNS as COLUMNS_READ  # kernels.csv's columns

    path = tmp_path / "kernels.csv"
    lines = [",".join(COLUMNS_READ)]
    for i, timing in enumerate(timings):
        row = dict.fromkeys(COLUMNS_READ, "") | {
            "id": f"t{i}", "kind": "gemm", "device": "h100_sxm", "dtype": "bf16", "op": "matmul", "m": "1",
            "n": "4096", "k": "4096", "batch": "1", "impl": "torch", "measured_s": "2e-05", "timing": timing,
            "split": "report", "source": "test"}
        lines.append(",".join(row[c] for c in COLUMNS_READ))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_kernel_timed_alone_is_predicted_with_the_devices_alone_overhead(tmp_path):
    from accel_sim import kernel_rows
    from accel_sim.device import resolve_device

    rows, _ = kernel_rows.load_rows(_kernel_rows(tmp_path, ["events", "graph", "loop", "profiler"]))
    alone, graph, loop, profiler = kernel_rows.predict(rows, resolve_device("h100_sxm", []).spec, "kernel")
    # Only the row timed alone between events adds the device's alone overhead of a library kernel.
    spec = resolve_device("h100_sxm", []).spec
    assert spec.kernel.alone_kernel_overhead_s > 0
    assert alone - graph == pytest.approx(spec.kernel.alone_kernel_overhead_s, rel=1e-9)
    assert graph == loop == profiler
    # Bad timing values are refused with the line they are on.
    bad = _kernel_rows(tmp_path, ["events", "stopwatch"])
    with pytest.raises(Exception, match="line 3: timing 'stopwatch' is not one of events, graph, loop, profiler"):
        kernel_rows.load_rows(bad)


def test_kernel_timed_alone_adds_the_devices_alone_overhead():
    args = ("kernel", "memory", "--op", "add", "--elements", "1000000", "--device", "h100", "--json")
    stream = json.loads(run_cli(*args).stdout)
    alone = json.loads(run_cli(*args, "--timed-alone").stdout)
    from accel_sim.device import resolve_device

    overhead = resolve_device("h100", []).spec.kernel.alone_stream_overhead_s
    assert overhead > 0
    assert alone["time_s"] - stream["time_s"] == pytest.approx(overhead, rel=1e-9)
    assert (stream["timing"], alone["timing"]) == ("stream", "alone")


def test_each_sustained_clock_is_the_fit_of_its_long_gemms():
    # The devices' kernel.sustained_clock_fraction is what validation/fit_sustained_clock.py fits
    # on the fit split's GEMMs of at least 3 ms (H100 6 rows, H200 4), not typed twice; the A100
    # SXM4 80GB, which has no such rows, has what validation/fit_training_clock.py fits on the
    # training runs' fit split (Korthikanti et al.'s eight A100 iterations), and the A100 SXM4
    # 40GB (the same GA100 at the same 400 W) the same; other devices have none. `train` and
    # `plan` then name the clock their steps run at: 0.922 x 1830 MHz = 1,687 MHz on a DGX H100,
    # the fitted fraction of 1,410 MHz on a DGX A100.
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "validation"))
    try:
        import fit_sustained_clock
        import fit_training_clock
    finally:
        sys.path.pop(0)
    from accel_sim.device import catalog

    fitted = fit_sustained_clock.fitted_fractions()
    assert {d: used for d, (_, used) in fitted.items()} == {"h100_sxm": 6, "h200": 4}
    runs = fit_training_clock.fit_rows()
    assert {d: len(r) for d, r in runs.items()} == {"a100_80gb": 8}
    a100_fraction = fit_training_clock.fit(runs["a100_80gb"])[0]
    fitted.update({"a100_80gb": (a100_fraction, 8), "a100_40gb": (a100_fraction, 8)})
    for entry in catalog().entries:
        expected = fitted.get(entry.spec.id, (0.0, 0))[0]
        assert entry.spec.kernel.sustained_clock_fraction == pytest.approx(expected, abs=5e-4), entry.spec.id
    train = ["train", "--model", "llama-3-8b", "--gpus", "8", "--dp", "8", "--global-batch", "8", "--seq", "2048"]
    h100 = run_cli(*train, "--system", "dgx_h100")
    assert h100.returncode == 0, h100.stderr
    assert "clock        1,687 MHz, the sustained clock under training load (0.922 of 1,830 MHz" in h100.stdout
    a100 = run_cli(*train, "--system", "dgx_a100", "--json")
    assert json.loads(a100.stdout)["clock_mhz"] == pytest.approx(a100_fraction * 1410)  # the datasheet's boost clock
    roofline = run_cli(*train, "--system", "dgx_h100", "--cost-model", "roofline", "--json")
    assert json.loads(roofline.stdout)["clock_mhz"] is None  # the roofline has no clock
    overridden = run_cli(*train, "--system", "dgx_h100", "--clock-mhz", "1500")
    assert "sustained clock" not in overridden.stdout and "at 1500 MHz (clock overridden" in overridden.stdout
