"""The C++ model builder against HF transformers: parameters, FLOPs, bytes and peak memory."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

import accel_sim
from accel_sim import _core
from accel_sim.io.model_config import BUILDER_MODEL_TYPES, load_model_spec, shipped_models, spec_from_hf_config
from conftest import run_cli

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

BUILDER_MODELS = [m for m in shipped_models() if m.family in BUILDER_MODEL_TYPES]


def _config(file: str) -> dict:
    return json.loads((resources.files("accel_sim") / "data" / "models" / file).read_text())


def _hf_model(config: dict):
    """The HF model on the meta device, in its config's dtype (fp32 when the config has none)."""
    architecture = getattr(transformers, (config.get("architectures") or ["AutoModelForCausalLM"])[0])
    with torch.device("meta"):
        model = architecture(transformers.AutoConfig.for_model(**config))
    if str(config.get("torch_dtype")) == "bfloat16":
        model = model.to(torch.bfloat16)
    return model.eval()


@pytest.mark.parametrize("entry", BUILDER_MODELS, ids=lambda e: e.id)
def test_builder_parameter_count_equals_hf(entry):
    hf = _hf_model(_config(entry.file)).num_parameters()
    assert _core.parameter_count(load_model_spec(entry.id)) == hf


def test_llama3_8b_parameter_count_is_the_published_one():
    assert _core.parameter_count(load_model_spec("llama3-8b")) == 8_030_261_248


SMALL = {"num_hidden_layers": 3, "hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 8,
         "num_key_value_heads": 2, "vocab_size": 1024, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0}


SMALL_MOE = {
    "mixtral-8x7b.json": {"num_local_experts": 4, "num_experts_per_tok": 2},
    "qwen1.5-moe-a2.7b.json": {"num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 128,
                               "shared_expert_intermediate_size": 512},
    "qwen3-30b-a3b.json": {"num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 128},
    "deepseek-v3.json": {"first_k_dense_replace": 1, "moe_intermediate_size": 64, "num_key_value_heads": 8,
                         "q_lora_rank": 96, "kv_lora_rank": 64, "qk_rope_head_dim": 16, "qk_nope_head_dim": 32,
                         "v_head_dim": 32, "n_routed_experts": 8, "n_shared_experts": 1, "num_experts_per_tok": 2,
                         "n_group": 2, "topk_group": 1},
}


SMALL_GPT2 = {"n_layer": 3, "n_embd": 256, "n_head": 8, "vocab_size": 1024, "n_positions": 256}
SMALL_GPTJ = {"n_layer": 3, "n_embd": 256, "n_head": 8, "rotary_dim": 16, "vocab_size": 1024, "n_positions": 256}
SMALL_FALCON = {"num_hidden_layers": 3, "hidden_size": 256, "num_attention_heads": 8, "num_kv_heads": 2,
                "vocab_size": 1024}
SMALL_BERT = {"num_hidden_layers": 3, "hidden_size": 256, "intermediate_size": 1024, "num_attention_heads": 8,
              "vocab_size": 1024}


def _small(file: str) -> dict:
    """A shipped config cut down to 3 layers of width 256 (its structure kept)."""
    small = {"gpt2.json": SMALL_GPT2, "gpt-j-6b.json": SMALL_GPTJ, "falcon-180b.json": SMALL_FALCON,
             "bert-base-uncased.json": SMALL_BERT}
    if file in small:
        return {**_config(file), **small[file]}
    return {**_config(file), **SMALL, **SMALL_MOE.get(file, {})}


@pytest.mark.parametrize("file", ["llama-3-8b.json", "mistral-7b.json", "qwen2.5-7b.json", "qwen3-8b.json",
                                  "mixtral-8x7b.json", "qwen1.5-moe-a2.7b.json", "qwen3-30b-a3b.json", "gpt2.json",
                                  "gpt-j-6b.json", "bert-base-uncased.json", "deepseek-v3.json", "gemma-3-27b.json"])
def test_builder_matches_a_captured_hf_forward(file):
    config = _small(file)
    if "head_dim" in config:
        config["head_dim"] = 32
    batch, seq = 2, 128
    model = _hf_model(config)
    captured = accel_sim.simulate(model, {"input_ids": torch.empty(batch, seq, dtype=torch.int64, device="meta")},
                                  device="h100")
    spec = spec_from_hf_config(config, file, dtype="bf16" if str(config.get("torch_dtype")) == "bfloat16" else "fp32")
    assert _core.parameter_count(spec) == model.num_parameters()
    built = accel_sim.simulate(
        accel_sim.build_model_graph(spec, phase="prefill", batch=batch, seq=seq, kernels="hf-eager"), device="h100")
    assert built.flops == pytest.approx(captured.flops, rel=0.01)
    assert built.bytes == pytest.approx(captured.bytes, rel=0.03)
    assert built.peak_memory_bytes == pytest.approx(captured.peak_memory_bytes, rel=0.03)


def test_decode_reports_the_kv_cache_and_its_hand_worked_size():
    result = run_cli("simulate", "--model", "llama-3-8b", "--device", "h100", "--phase", "decode",
                     "--batch", "4", "--context", "1000", "--json", "--no-ops")
    assert result.returncode == 0, result.stderr
    d = json.loads(result.stdout)
    # K and V: 2 * 32 layers * 8 KV heads * 128 dims * 2 bytes = 131,072 B per token; 4 x 1001 tokens.
    assert d["model_info"]["kv_cache_bytes"] == 131_072 * 4 * 1001
    assert d["model_info"]["parameters"] == 8_030_261_248
    assert d["fits"] is True


def test_a_context_that_does_not_fit_says_so():
    # l4: 24 GiB. Weights 16.06 GB + KV 131,072 B x 16 x 8193 = 17.2 GB.
    result = run_cli("simulate", "--model", "llama-3-8b", "--device", "l4", "--phase", "decode",
                     "--batch", "16", "--context", "8192")
    assert result.returncode == 0, result.stderr
    assert "✗ OOM" in result.stdout and "out of memory" in result.stdout


def test_models_lists_the_shipped_configs():
    result = run_cli("models", "--json")
    assert result.returncode == 0, result.stderr
    rows = {r["id"]: r for r in json.loads(result.stdout)}
    assert len(rows) >= 21
    assert rows["llama-3-8b"]["parameters"] == 8_030_261_248 and rows["llama-3-8b"]["builder"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--model", "{t5}"], "model_type 't5' is not supported by the model builder yet"),
        (["--model", "no-such-model"], "unknown model 'no-such-model'"),
        (["examples/gpt2.py", "--model", "llama-3-8b"], "not both"),
        (["--model", "llama-3-8b", "--tp", "3"], "not divisible by the tensor-parallel degree 3"),
    ],
)
def test_model_usage_errors(tmp_path: Path, args, message):
    t5 = tmp_path / "t5.json"
    t5.write_text(json.dumps({"model_type": "t5", "d_model": 512}))
    result = run_cli("simulate", *[a.format(t5=t5) for a in args], "--device", "h100")
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr


def test_a_config_json_path_works(tmp_path: Path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**_config("llama-3-8b.json"), **SMALL}))
    result = run_cli("compare", "--model", str(path), "--devices", "a100,h100", "--phase", "decode", "--json")
    assert result.returncode == 0, result.stderr
    d = json.loads(result.stdout)
    assert [r["device"]["id"] for r in d["devices"]] == ["a100_80gb", "h100_sxm"]
    # The config's shapes, counted by hand: per layer q and o 256 x 256, k and v 256 x 64 (2 KV heads
    # of 32), gate, up and down 256 x 512, two norms of 256 (557,568); three layers, the embedding
    # and the untied head 1,024 x 256 each, the final norm 256.
    assert d["devices"][0]["model_info"]["parameters"] == 3 * 557_568 + 2 * 1024 * 256 + 256
    # A decode of 2.2 M parameters is a few hundred kernels of a few microseconds each, launch-bound
    # on both devices: neither may be more than 25% faster than the other.
    a100, h100 = (r["latency_s"] for r in d["devices"])
    assert 0.8 < a100 / h100 < 1.25


def test_moe_decode_reports_active_parameters_and_the_routing_assumption():
    result = run_cli("simulate", "--model", "mixtral-8x7b", "--device", "h200", "--phase", "decode",
                     "--batch", "1", "--context", "0", "--json", "--no-ops")
    assert result.returncode == 0, result.stderr
    d = json.loads(result.stdout)
    info = d["model_info"]
    assert info["parameters"] == 46_702_792_704 and info["active_parameters"] == 12_879_925_248
    assert info["moe"]["expected_experts_touched_per_layer"] == 2.0
    assert "uniformly at random" in info["moe"]["routing_assumption"]
    # One token reads its 2 experts' weights, not all 8: traffic is the active weights less the
    # embedding table (one row read) — 2 * (12,879,925,248 - 32000*4096) bytes — plus a little.
    weights = 2 * (12_879_925_248 - 32000 * 4096)
    assert weights <= d["bytes"] <= weights * 1.005


def test_vit_builder_matches_a_captured_hf_forward():
    config = {**_config("vit-era5.json"), "num_hidden_layers": 2, "hidden_size": 128, "intermediate_size": 512,
              "num_attention_heads": 4, "image_size": [32, 64], "patch_size": 4, "num_channels": 3}
    with torch.device("meta"):
        model = transformers.ViTModel(transformers.AutoConfig.for_model(**config)).to(torch.float16).eval()
    pixels = torch.empty(2, 3, 32, 64, dtype=torch.float16, device="meta")
    captured = accel_sim.simulate(model, {"pixel_values": pixels}, device="h100")
    spec = spec_from_hf_config(config, "vit-era5.json")
    assert _core.parameter_count(spec) == model.num_parameters()
    built = accel_sim.simulate(accel_sim.build_model_graph(spec, batch=2, kernels="hf-eager"), device="h100")
    assert built.flops == pytest.approx(captured.flops, rel=0.01)
    assert built.bytes == pytest.approx(captured.bytes, rel=0.03)
    assert built.peak_memory_bytes == pytest.approx(captured.peak_memory_bytes, rel=0.03)


def test_parallel_flags_give_one_ranks_graph_with_its_collectives():
    result = run_cli("simulate", "--model", "llama-3-8b", "--device", "h100", "--tp", "2", "--sp",
                     "--seq", "2048", "--json", "--no-ops")
    assert result.returncode == 0, result.stderr
    d = json.loads(result.stdout)
    # Per layer two all-gathers and two reduce-scatters, plus the embedding's and lm_head's.
    assert d["num_collectives"] == 4 * 32 + 2
    assert any(h["kind"] == "communication_not_timed" for h in d["hints"])
    assert d["model_info"]["sequence_parallel"] is True
    bad = run_cli("simulate", "--model", "llama-3-8b", "--device", "h100", "--ep", "2")
    assert bad.returncode == 2 and "expert parallelism needs a mixture-of-experts model" in bad.stderr


def _matmul_flops(report) -> float:
    return sum(op.flops for op in report.ops if op.op_class == "matmul")


@pytest.mark.parametrize("file", ["llama-3-8b.json", "mistral-7b.json", "qwen2.5-7b.json", "qwen3-8b.json",
                                  "gpt2.json", "gpt-j-6b.json", "falcon-180b.json", "bert-base-uncased.json"])
def test_training_step_gemms_match_hf_autograd(file):
    """The builder's training step against HF's own forward + loss + backward on the meta device,
    counted by PyTorch's FlopCounterMode: every GEMM (forward, dgrad, wgrad) is accounted for."""
    from torch.utils.flop_counter import FlopCounterMode

    config = _small(file)
    if "head_dim" in config:
        config["head_dim"] = 32
    batch, seq = 2, 128
    model = _hf_model(config).train()
    ids = torch.zeros(batch, seq, dtype=torch.int64, device="meta")
    with FlopCounterMode(display=False) as counter:
        model(input_ids=ids, labels=ids).loss.backward()
    counts = {str(op): flops for op, flops in counter.get_flop_counts()["Global"].items()}
    # Linear layers only: attention (bmm or SDPA) is counted there over the full square of
    # scores, here over the causal half with FlashAttention's backward.
    hf = counts.get("aten.mm", 0) + counts.get("aten.addmm", 0)
    spec = spec_from_hf_config(config, file, dtype="bf16" if str(config.get("torch_dtype")) == "bfloat16" else "fp32")
    built = accel_sim.simulate(accel_sim.build_model_graph(spec, phase="train", batch=batch, seq=seq), device="h100")
    # FlopCounterMode counts addmm without its bias add (one FLOP per output): within 1%.
    assert _matmul_flops(built) == pytest.approx(hf, rel=0.01)


def test_gpt_oss_reads_its_window_pattern_and_refuses_others():
    """gpt-oss's layer_types (sliding, full, sliding, ...) become a window on every layer but each
    second; a pattern that is not every-p-th-layer-full is refused with the field named."""
    config = _config("gpt-oss-120b.json")
    spec = spec_from_hf_config(config, "gpt-oss-120b.json")
    assert (spec.sliding_window, spec.sliding_window_period, spec.attention_sinks) == (128, 2, True)
    assert spec.moe.router_bias and spec.moe.expert_bias and (spec.moe.num_experts, spec.moe.top_k) == (128, 4)
    odd = dict(config, layer_types=["full_attention"] + config["layer_types"][1:])
    with pytest.raises(accel_sim.errors.UsageError, match="layer_types"):
        spec_from_hf_config(odd, "odd.json")
    short = dict(config, layer_types=config["layer_types"][:4])
    with pytest.raises(accel_sim.errors.UsageError, match="one attention type per layer"):
        spec_from_hf_config(short, "short.json")
