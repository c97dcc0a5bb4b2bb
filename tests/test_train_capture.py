"""Training-step capture of a script: forward, loss, backward and optimizer under make_fx."""

from __future__ import annotations

import json
import textwrap
from importlib.resources import files

import pytest

from conftest import run_cli

TINY_GPT2 = textwrap.dedent('''
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    def get_model():
        config = GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=1000, n_positions=256)
        with torch.device("meta"):
            model = GPT2LMHeadModel(config)
        return model, {"input_ids": torch.empty(2, 64, dtype=torch.int64, device="meta")}
''')

TINY_CONFIG = {"model_type": "gpt2", "n_layer": 2, "n_embd": 128, "n_head": 4, "vocab_size": 1000,
               "n_positions": 256, "torch_dtype": "float32"}

CHECKPOINTED = textwrap.dedent('''
    import torch
    from torch.utils.checkpoint import checkpoint

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.up = torch.nn.Linear(256, 1024)
            self.down = torch.nn.Linear(1024, 256)

        def forward(self, x):
            return x + self.down(torch.nn.functional.gelu(self.up(x)))

    class Net(torch.nn.Module):
        def __init__(self, recompute):
            super().__init__()
            self.blocks = torch.nn.ModuleList(Block() for _ in range(4))
            self.recompute = recompute

        def forward(self, x):
            for b in self.blocks:
                x = checkpoint(b, x, use_reentrant=False) if self.recompute else b(x)
            return x

    def get_model():
        return Net(RECOMPUTE), torch.randn(512, 256)
''')


def _capture(tmp_path, source, *args):
    script = tmp_path / "model.py"
    script.write_text(source)
    out = tmp_path / "graph.json"
    result = run_cli("capture", str(script), "-o", str(out), "--train", *args)
    assert result.returncode == 0, result.stderr
    return json.loads(out.read_text())


def test_gpt2_step_has_every_pass_and_matches_the_builders_model_flops(tmp_path):
    g = _capture(tmp_path, TINY_GPT2)
    passes = {n.get("pass") for n in g["nodes"]}
    assert passes == {"forward", "backward", "optimizer"}
    kinds = [s["kind"] for s in g["storages"]]
    params = kinds.count("parameter")
    # One gradient per trainable parameter (the tied lm_head is the embedding), two Adam moments
    # and a step count each as optimizer states, one fused AdamW kernel.
    assert kinds.count("gradient") == params
    assert kinds.count("optimizer_state") == 3 * params
    assert [n["op"] for n in g["nodes"] if n.get("pass") == "optimizer"].count("_fused_adamw_") == 1
    assert any(n["op"] == "accel_sim::attention_backward" for n in g["nodes"] if n.get("pass") == "backward")
    assert g["metadata"]["training_step"]["loss"] == "the model's loss with labels = input_ids"
    # Backward GEMMs are attributed to the module whose forward they differentiate.
    backward_gemms = [n for n in g["nodes"] if n.get("pass") == "backward" and n["op"] == "mm"]
    assert backward_gemms and all(n["module"] for n in backward_gemms)
    assert any(n["module"].endswith("mlp.c_fc") for n in backward_gemms)

    graph = tmp_path / "graph.json"
    captured = json.loads(run_cli("simulate", str(graph), "--device", "h100", "--json", "--no-ops").stdout)
    config = tmp_path / "config.json"
    config.write_text(json.dumps(TINY_CONFIG))
    built = json.loads(run_cli("simulate", "--model", str(config), "--phase", "train", "--batch", "2", "--seq", "64",
                               "--device", "h100", "--no-master-weights", "--json", "--no-ops").stdout)
    # Same model, same step: the same model FLOPs (6 N T + 3 x forward attention).
    assert abs(captured["model_flops"] / built["model_flops"] - 1) < 1e-9
    assert captured["pass_time_s"]["backward"] > captured["pass_time_s"]["forward"] > 0
    assert captured["peak_op"]["pass"] in ("forward", "backward", "optimizer")


def test_checkpointed_blocks_are_recomputed_in_backward(tmp_path):
    def forward_gemms_in_backward(recompute):
        g = _capture(tmp_path, CHECKPOINTED.replace("RECOMPUTE", str(recompute)))
        # The backward's GEMMs: 2 per linear (dgrad, wgrad) plus the recomputed forward ones.
        return sum(1 for n in g["nodes"] if n.get("pass") == "backward" and n["op"] in ("addmm", "mm")), g

    plain, g_plain = forward_gemms_in_backward(False)
    recomputed, g_ckpt = forward_gemms_in_backward(True)
    # Each block's `up` linear runs again in backward; torch's non-reentrant checkpoint stops
    # recomputing once the values the backward needs exist, so `down` (whose output no backward
    # op reads) is not rerun: 4 more GEMMs.
    assert recomputed == plain + 4
    tmp = tmp_path / "a.json"
    tmp.write_text(json.dumps(g_plain))
    a = json.loads(run_cli("simulate", str(tmp), "--json", "--no-ops").stdout)
    tmp.write_text(json.dumps(g_ckpt))
    b = json.loads(run_cli("simulate", str(tmp), "--json", "--no-ops").stdout)
    assert b["memory"]["peak_activation_bytes"] < a["memory"]["peak_activation_bytes"]


def test_autocast_keeps_fp32_weights_and_gradients(tmp_path):
    g = _capture(tmp_path, TINY_GPT2, "--precision", "bf16-mixed")
    tensors = {t["id"]: t for t in g["tensors"]}
    storage_kind = {s["id"]: s["kind"] for s in g["storages"]}
    grads = [t for t in g["tensors"] if storage_kind[t["storage"]] == "gradient"]
    assert grads and all(t["dtype"] == "fp32" for t in grads)
    matmuls = [n for n in g["nodes"] if n["op"] in ("mm", "addmm") and n.get("pass") == "forward"]
    assert matmuls and all(tensors[n["outputs"][0]]["dtype"] == "bf16" for n in matmuls)
    assert g["metadata"]["training_step"]["precision"] == "bf16-mixed"


def test_training_capture_usage_errors(tmp_path):
    script = tmp_path / "model.py"
    script.write_text(TINY_GPT2)
    bad = run_cli("simulate", str(script), "--precision", "bf16-mixed")
    assert bad.returncode == 2 and "--train" in bad.stderr
    phase = run_cli("simulate", str(script), "--phase", "train")
    assert phase.returncode == 2 and "--train" in phase.stderr


def test_fit_a_scripts_training_step(tmp_path):
    script = tmp_path / "model.py"
    script.write_text(TINY_GPT2)
    result = run_cli("fit", str(script), "--devices", "t4", "--axis", "batch", "--train", "--max", "64", "--json")
    assert result.returncode == 0, result.stderr
    row = json.loads(result.stdout)["rows"][0]
    # A 1.7M-parameter model trains at batch 64 in a 16 GB T4: the search stops at its limit.
    assert row["largest"] == 64 and row["at_limit"]


def test_gradient_accumulation_runs_micro_batches_and_keeps_buffers(tmp_path):
    script = tmp_path / "model.py"
    script.write_text(TINY_GPT2)

    def run(*extra):
        result = run_cli("simulate", str(script), "--train", "--device", "h100", "--json", "--no-ops", *extra)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    one, four = run(), run("--grad-accum", "4")
    assert four["capture"]["training_step"]["gradient_accumulation"] is True
    # Forward and backward (plus the accumulation adds) 4 times, the optimizer once per step. The
    # accumulating graph starts with the buffers' zeroing, so its first kernels wait less for the
    # host (the launch queue runs ahead during it): forward within 3% of 4x, not exactly.
    assert abs(four["pass_time_s"]["forward"] / one["pass_time_s"]["forward"] - 4) < 0.12
    assert four["pass_time_s"]["backward"] > 4 * one["pass_time_s"]["backward"]
    assert abs(four["model_flops"] / one["model_flops"] - 4) < 1e-9
    # The fp32 accumulation buffers (one per parameter) are live through the micro-step.
    params = json.loads(run_cli("simulate", str(script), "--json", "--no-ops").stdout)["memory"]["parameter_bytes"]
    assert four["memory"]["peak_gradient_bytes"] >= params
    built = json.loads(run_cli("simulate", "--model", "gpt2", "--phase", "train", "--seq", "256", "--grad-accum", "2",
                               "--json", "--no-ops").stdout)
    assert built["model_info"]["gradients_kept_between_steps"] is True
    bad = run_cli("simulate", "--model", "gpt2", "--grad-accum", "2")
    assert bad.returncode == 2 and "--grad-accum" in bad.stderr


def test_falcon_step_counts_causal_attention_as_the_builder_does():
    """HF Falcon passes SDPA a causal mask it built (is_causal=False): the capture reads the
    mask back, so forward and backward attention count the causal pairs, and the step's model
    FLOPs equal the builder's fused Falcon step."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    import accel_sim
    from accel_sim.capture import capture_training_step
    from accel_sim.io.model_config import spec_from_hf_config

    config = json.loads(files("accel_sim.data.models").joinpath("falcon-180b.json").read_text())
    config.update(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_kv_heads=2, vocab_size=256)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(**config))
    graph = capture_training_step(model, {"input_ids": torch.empty(2, 32, dtype=torch.int64, device="meta")})
    backward = [n for n in graph["nodes"] if n["op"] == "accel_sim::attention_backward"]
    assert len(backward) == 2
    assert all(n["attrs"]["is_causal"] is True and len(n["inputs"]) == 5 for n in backward)  # dout, q, k, v, out
    captured = accel_sim.simulate(graph, device="h100")
    # batch 2 x 4 heads, head_dim 16, 32 * 33 / 2 causal pairs; backward: five matmuls over the
    # pairs against the forward's two (FlashAttention-2, sec. 3.2).
    pairs = 2 * 4 * 32 * 33 // 2
    assert sum(op.flops for op in captured.ops if op.op == "accel_sim::attention_backward") == 2 * (2 * pairs * 5 * 16)
    spec = spec_from_hf_config(config, "falcon-180b.json", dtype="bf16")
    built = accel_sim.simulate(accel_sim.build_model_graph(spec, phase="train", batch=2, seq=32), device="h100")
    assert captured.result.model_flops == built.result.model_flops
