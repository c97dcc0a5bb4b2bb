"""compare ranks like with like: a device that ran the model's matrix ops in a narrower format
than the model's dtype (fp32 on a TPU's bf16 units) is shown with what it ran, and left out of
the verdict."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import REPO

BLOCK = str(REPO / "examples" / "transformer_block.py")  # fp32; 4 linears and one SDPA


def _compare(*extra: str) -> tuple[dict, str]:
    argv = [sys.executable, "-m", "accel_sim.cli.main", "compare", BLOCK, "--devices", "v100,a100,h100,tpu-v4", "--quiet"]
    as_json = subprocess.run(argv + ["--json", *extra], capture_output=True, text=True, timeout=600)
    as_text = subprocess.run(argv + list(extra), capture_output=True, text=True, timeout=600)
    assert as_json.returncode == 0 and as_text.returncode == 0, as_json.stderr + as_text.stderr
    return json.loads(as_json.stdout), as_text.stdout


@pytest.mark.torch
def test_fp32_compare_does_not_rank_the_tpus_bf16_run():
    d, text = _compare()
    by_id = {dev["device"]["id"]: dev for dev in d["devices"]}
    tpu = by_id["tpu_v4"]
    # TPU v4's device file lists bf16 and int8 peaks only: its fp32 matrix ops (the 4 linears
    # and the attention) ran on bf16 units, whose 8 significand bits do not hold fp32's 24.
    assert tpu["precision"]["narrower"] is True
    matrix = [s for s in tpu["precision"]["substitutions"] if s["matrix"]]
    assert [{k: v for k, v in s.items() if k != "time_s"} for s in matrix] == [
        {"dtype": "fp32", "matrix": True, "unit": "bf16_matrix", "narrower": True, "ops": 5}]
    # Their time is the time of the TPU's matmul and attention ops.
    ops = subprocess.run([sys.executable, "-m", "accel_sim.cli.main", "simulate", BLOCK, "--device", "tpu-v4", "--json",
                          "--quiet"], capture_output=True, text=True, timeout=600)
    rows = json.loads(ops.stdout)["ops"]
    assert matrix[0]["time_s"] == pytest.approx(sum(r["time_s"] for r in rows if r["op_class"] in ("matmul", "attention")))
    assert tpu["verdict"]["ranked"] is False
    # The GPUs ran fp32 as fp32 and are ranked; the fastest of them wins, not the TPU.
    gpus = [by_id[i] for i in ("v100_sxm2_16gb", "a100_80gb", "h100_sxm")]
    assert all(g["precision"]["narrower"] is False and g["verdict"]["ranked"] for g in gpus)
    fastest_gpu = min(gpus, key=lambda g: g["latency_s"])["device"]["id"]
    assert tpu["latency_s"] < by_id[fastest_gpu]["latency_s"]  # why the old verdict named the TPU
    assert d["fastest"] == fastest_gpu and d["best_value"] != "tpu_v4"
    assert "fp32 as bf16 †" in text and "not ranked: tpu_v4" in text
    assert f"fastest:    {fastest_gpu}" in text


@pytest.mark.torch
def test_bf16_compare_ranks_every_device():
    d, text = _compare("--dtype", "bf16")
    assert all(dev["verdict"]["ranked"] and not dev["precision"]["narrower"] for dev in d["devices"])
    # The V100 has no bf16 tensor units: it runs bf16 exactly on its fp32 units, slower; ranked.
    v100 = next(dev for dev in d["devices"] if dev["device"]["id"] == "v100_sxm2_16gb")
    assert {(s["dtype"], s["unit"], s["narrower"]) for s in v100["precision"]["substitutions"] if s["matrix"]} == {
        ("bf16", "fp32", False)}
    assert "not ranked" not in text and "†" not in text
