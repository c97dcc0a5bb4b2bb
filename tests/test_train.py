"""The training step from the CLI and the API: memory by category, time by pass, errors."""

from __future__ import annotations

import json

from conftest import run_cli

LLAMA3_8B = 8_030_261_248


def test_train_step_reports_memory_by_category_and_time_by_pass():
    result = run_cli("simulate", "--model", "llama-3-8b", "--device", "h100", "--phase", "train",
                     "--batch", "1", "--seq", "1024", "--json", "--no-ops")
    assert result.returncode == 0, result.stderr
    d = json.loads(result.stdout)
    m = d["memory"]
    # bf16 weights (2 B), fp32 master weights + Adam moments (12 B), fp32 gradients (4 B).
    assert m["parameter_bytes"] == 2 * LLAMA3_8B
    assert m["optimizer_state_bytes"] == 12 * LLAMA3_8B
    assert 0 < m["peak_gradient_bytes"] <= 4 * LLAMA3_8B
    assert d["peak_memory_bytes"] >= 18 * LLAMA3_8B
    assert d["fits"] is False  # 144 GB of state does not fit an 80 GB H100
    t = d["pass_time_s"]
    assert t["forward"] > 0 and t["optimizer"] > 0
    # Backward runs two GEMMs per forward GEMM: about twice the forward's time.
    assert 1.8 < t["backward"] / t["forward"] < 2.6
    assert abs(t["forward"] + t["backward"] + t["optimizer"] - d["latency_s"]) < 1e-9
    assert d["model_info"]["optimizer"] == "adamw" and d["model_info"]["master_weights"] is True
    assert d["model_info"]["kv_cache_bytes"] == 0


def test_train_text_report_and_optimizer_choice():
    result = run_cli("simulate", "--model", "gpt2", "--device", "a100", "--phase", "train",
                     "--batch", "8", "--seq", "1024", "--optimizer", "sgd", "--no-master-weights")
    assert result.returncode == 0, result.stderr
    assert "step         forward" in result.stdout
    assert "training step: sgd, gradients and states in fp32" in result.stdout
    ops = run_cli("simulate", "--model", "gpt2", "--device", "a100", "--phase", "train", "--seq", "256",
                  "--json")
    rows = json.loads(ops.stdout)["ops"]
    passes = {r["pass_name"] for r in rows}
    assert passes == {"forward", "backward", "optimizer"}
    assert any(r["op"] == "_fused_adamw_" for r in rows)


def test_train_usage_errors():
    bad = run_cli("simulate", "--model", "llama-3-8b", "--device", "h100", "--phase", "train",
                  "--kernels", "hf-eager")
    assert bad.returncode == 2 and "fused kernels only" in bad.stderr and "Traceback" not in bad.stderr
