"""Accuracy of the counts and of the memory model against hand-worked figures and a real run."""

from __future__ import annotations

import json
from importlib import resources

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import accel_sim  # noqa: E402


def _llama3_8b_config():
    text = (resources.files("accel_sim") / "data" / "models" / "llama-3-8b.json").read_text()
    return transformers.LlamaConfig(**json.loads(text))


@pytest.mark.slow
def test_llama3_8b_forward_flops_match_the_hand_count():
    cfg = _llama3_8b_config()
    h, layers, heads, kv, ffn, vocab = (cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads,
                                        cfg.num_key_value_heads, cfg.intermediate_size, cfg.vocab_size)
    assert (h, layers, heads, kv, ffn, vocab) == (4096, 32, 32, 8, 14336, 128256)
    batch, seq = 1, 2048
    head_dim = h // heads  # 128
    # Weights used in matmuls, per layer: q, o (h x h); k, v (h x kv*head_dim); gate, up, down (h x ffn).
    per_layer = 2 * h * h + 2 * h * kv * head_dim + 3 * h * ffn  # 218,103,808
    matmul_params = layers * per_layer + h * vocab  # + lm_head (untied): 7,504,658,432
    assert matmul_params == 7_504_658_432
    tokens = batch * seq
    matmul_flops = 2 * matmul_params * tokens  # 30,739,080,937,472
    # Causal attention: QK^T and PV over the 2048*2049/2 visible pairs of each of 32 heads.
    pairs = seq * (seq + 1) // 2
    attention_flops = layers * batch * heads * 4 * pairs * head_dim  # 1,100,048,498,688
    hand = matmul_flops + attention_flops

    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16)
    ids = torch.zeros(batch, seq, dtype=torch.long, device="meta")
    r = accel_sim.simulate(model, (ids,), device="h100")
    matrix = sum(op.flops for op in r.ops if op.op_class in ("matmul", "attention"))
    assert matrix == pytest.approx(hand, rel=1e-9)
    # Everything else (norms, RoPE, SiLU, residual adds) is a small remainder.
    assert r.flops == pytest.approx(hand, rel=0.01)
    assert sum(1 for op in r.ops if op.op == "accel_sim::attention") == layers


def _measured_cpu_peak_bytes(model, inputs) -> int:
    """Peak bytes allocated during one real forward on the CPU, from the PyTorch profiler's
    memory events, plus what was already resident (weights and inputs)."""
    resident = sum(p.numel() * p.element_size() for p in model.parameters())
    resident += sum(b.numel() * b.element_size() for b in model.buffers())
    resident += sum(t.numel() * t.element_size() for t in inputs)
    with torch.no_grad(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                                 profile_memory=True) as prof:
        model(*inputs)
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    events.sort(key=lambda e: e.start_ns())
    live = peak = 0
    for e in events:
        live += e.nbytes()
        peak = max(peak, live)
    return resident + peak


def test_peak_memory_matches_a_real_cpu_run_within_10_percent():
    import importlib.util

    from conftest import REPO

    spec = importlib.util.spec_from_file_location("transformer_block", REPO / "examples" / "transformer_block.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    torch.manual_seed(0)
    model = example.TransformerBlock(d_model=512, num_heads=8).eval()
    x = torch.randn(8, 256, 512)
    measured = _measured_cpu_peak_bytes(model, (x,))
    predicted = accel_sim.simulate(model, (x,), device="h100").peak_memory_bytes
    assert predicted == pytest.approx(measured, rel=0.10), (predicted, measured)
