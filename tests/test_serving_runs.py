"""The published serving measurements (python/accel_sim/data/validation/serving_runs.csv) that
validation/extract_serving.py keeps: each names a shipped model and device, and the file is what
the extractor writes from validation/published.csv."""

from __future__ import annotations

import csv
import json
import math
import statistics
import subprocess
import sys
from collections import Counter

import pytest
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "python" / "accel_sim" / "data"
RUNS = DATA / "validation" / "serving_runs.csv"
PUBLISHED = ROOT / "validation" / "published.csv"


def _rows() -> list[dict]:
    with open(RUNS, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_rows_name_shipped_models_and_devices():
    models = {p.stem for p in (DATA / "models").glob("*.json")}
    devices = {p.stem for p in (DATA / "devices").glob("*.yaml")}
    for r in _rows():
        assert r["model"] in models and r["device"] in devices, r["id"]
        assert int(r["tp"]) >= 1 and int(r["batch"]) >= 1 and int(r["input_len"]) >= 1 and int(r["output_len"]) >= 1
        assert r["split"] == "report"


def test_kinds_and_the_tensorrt_llm_decisions():
    rows = _rows()
    # TensorRT-LLM v0.6.1 Peak Throughput: 16 H100 FP8 rows and 13 A100 FP16 rows; v0.5 Low
    # Latency: 8 + 8 TTFT rows; vLLM benchmark_latency: 10 AMD + 9 Oracle; AMD offline: 2 x 8.
    assert Counter(r["kind"] for r in rows) == {"static_throughput": 29, "ttft": 16, "batch_latency": 19,
                                                "offline_throughput": 16}
    by_id = {r["id"]: r for r in rows}
    # The first H100 row: GPT-J 6B, batch 1024, 128 in / 128 out, fp8 with an fp8 KV cache, 26,150 tok/s/GPU.
    first = by_id["s001"]
    assert (first["model"], first["device"], first["batch"], first["input_len"], first["output_len"]) == (
        "gpt-j-6b", "h100_sxm", "1024", "128", "128")
    assert (first["precision"], first["kv_cache_dtype"], float(first["measured"]), first["per_gpu"]) == (
        "fp8", "fp8", 26150.0, "1")
    a100 = [r for r in rows if r["device"] == "a100_80gb"]
    assert len(a100) == 13 + 8
    assert all(r["precision"] == r["kv_cache_dtype"] == "fp16" for r in a100)
    assert all(r["per_gpu"] == "1" for r in a100 if r["kind"] == "static_throughput")
    assert {r["model"] for r in rows if r["kind"] == "ttft"} == {"gpt-j-6b", "llama-2-7b", "llama-2-70b", "falcon-180b"}


def test_each_row_names_the_serving_stack_it_ran():
    # TensorRT-LLM's tables ran its 0.5/0.6 runtime (masked multi-head attention: XQA was opt-in),
    # AMD's vLLM 0.8.5-0.10.2 rows the V1 engine, Oracle's 2024 rows V0.
    from accel_sim.io.stack_file import resolve_stack

    rows = _rows()
    assert Counter(r["stack"] for r in rows) == {"tensorrt-llm-0.6": 45, "vllm": 26, "vllm-0.6": 9}
    for r in rows:
        assert resolve_stack(r["stack"], kind="serving").kind == "serving"
    assert all(r["stack"] == "vllm-0.6" for r in rows if "oracle.com" in r["source"])


def test_the_file_is_what_the_extractor_writes(tmp_path):
    out = tmp_path / "serving_runs.csv"
    subprocess.run([sys.executable, str(ROOT / "validation" / "extract_serving.py"), str(PUBLISHED), str(out)],
                   check=True, capture_output=True)
    assert out.read_bytes() == RUNS.read_bytes()


def test_serve_reproduces_the_published_static_batch_throughputs():
    # `accel-sim validate` predicts every row; the TensorRT-LLM static-batch throughput table is
    # reproduced within 15% median (the target), every row completes without rejection.
    import json

    from conftest import run_validate

    d = json.loads(run_validate("--json").stdout)
    serving = d["serving"]
    assert len(serving) == len(_rows())
    assert all(r["predicted"] > 0 for r in serving)
    assert d["serving_summary"]["static_throughput"]["rows"] == 29
    assert d["serving_summary"]["static_throughput"]["median_abs_error"] < 0.15


def test_published_bert_inference_runs_are_reported():
    from conftest import run_validate

    # The 84 report-split BERT SQuAD inference rows of NVIDIA DeepLearningExamples' TensorFlow 1
    # tables (validation/extract_encoder.py), each a forward pass of the encoder without the MLM
    # head under the tensorflow1-xla stack. In fp32 the step is the GEMMs at the fp32 rate, or the
    # host's issue of its kernels at small batches: those rows (V100 32GB, A100) come within 15% of
    # what was measured at the median, and each within 60%.
    d = json.loads(run_validate("--json").stdout)
    runs = d["encoder_runs"]
    assert len(runs) == 84 and {r["split"] for r in runs} == {"report"}
    assert all(r["predicted_s"] > 0 and math.isfinite(r["error"]) for r in runs)
    fp32 = [r for r in runs if r["precision"] == "fp32" and r["device"] != "t4"]
    assert len(fp32) == 32 and all(abs(r["error"]) < 0.6 for r in fp32)
    assert statistics.median(abs(r["error"]) for r in fp32) < 0.15
    assert {g["device"] for g in d["encoder_runs_by_device"]} == {"a100_40gb", "t4", "v100_sxm2_32gb"}
    fit = json.loads(run_validate("--split", "fit", "--json").stdout)["encoder_runs"]
    assert len(fit) == 17 and {r["device"] for r in fit} == {"v100_sxm2_16gb"}


def test_the_encoder_host_cost_is_the_fit_of_its_fit_split():
    # The tensorflow1-xla stack's host cost per kernel is what validation/fit_encoder_host.py fits
    # on the fit split (the DGX-1 V100 16GB table), read from the stack file, not typed twice.
    sys.path.insert(0, str(ROOT / "validation"))
    try:
        import fit_encoder_host
    finally:
        sys.path.pop(0)
    from accel_sim.io.stack_file import resolve_stack

    us, median = fit_encoder_host.fit()
    assert resolve_stack("tensorflow1-xla").host_overhead_per_kernel_s == pytest.approx(us * 1e-6)
    assert median < 0.15


def test_the_encoder_runs_name_shipped_devices_and_split_by_table():
    # (tests/test_self_contained.py checks the file is what validation/extract_encoder.py writes.)
    with open(DATA / "validation" / "encoder_runs.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    # DGX-1 16 GB 17 + 32 GB 22, DGX-2 21 (as the 32 GB SXM2 part), DGX A100 24, T4 17.
    assert Counter(r["device"] for r in rows) == {"v100_sxm2_16gb": 17, "v100_sxm2_32gb": 43, "a100_40gb": 24, "t4": 17}
    # The DGX-1 16 GB table is the fit split, every other table the report split.
    assert all(r["split"] == ("fit" if r["device"] == "v100_sxm2_16gb" else "report") for r in rows)


def test_amd_offline_throughput_counts_output_tokens():
    # AMD's "Throughput" column is read as output tokens/s (validation/extract_serving.py,
    # Decisions): every offline row says which tokens it counts, and AMD's say output.
    rows = [r for r in _rows() if r["kind"] == "offline_throughput"]
    assert len(rows) == 16
    assert all(r["counts"] == "output" for r in rows if "amd.com" in r["source"])
    assert all(r["counts"] in ("output", "total") for r in rows)


def test_offline_throughput_of_total_tokens_is_prompt_plus_output():
    # Every request runs to its fixed lengths, so the same simulated run's total tokens/s over its
    # output tokens/s is (input + output) / output: 2,048 + 2,048 over 2,048 = 2 for s049 and
    # 128 + 2,048 over 2,048 = 1.0625 for s046.
    from accel_sim import validation

    by_id = {r["id"]: r for r in _rows()}
    for rid, ratio in (("s049", 2.0), ("s046", 2176 / 2048)):
        out = validation.predict_serving_run(by_id[rid])
        total = validation.predict_serving_run({**by_id[rid], "counts": "total"})
        assert out["rejected"] == 0 and out["completed"] == int(by_id[rid]["num_requests"])
        assert total["predicted"] / out["predicted"] == pytest.approx(ratio, rel=1e-9)


def test_an_offline_row_that_does_not_say_which_tokens_it_counts_is_refused():
    from accel_sim import validation
    from accel_sim.errors import UsageError

    row = {**next(r for r in _rows() if r["kind"] == "offline_throughput"), "counts": "unstated"}
    with pytest.raises(UsageError, match="counts 'unstated'"):
        validation.predict_serving_run(row)
