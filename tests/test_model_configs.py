"""The shipped model configs (python/accel_sim/data/models) and their index, models.yaml.

Every config builds in transformers on the meta device (no memory, well under a second even for
the 1T-parameter GPT) with exactly the parameter count models.yaml records, and that count agrees
with the figure the model's authors published. A published figure is usually rounded or truncated,
so each carries the tolerance its precision allows; the few that are nominal sizes rather than
counts say so and get a looser bound with the reason next to it.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import pytest
import yaml

MODELS_DIR = Path(__file__).resolve().parent.parent / "python" / "accel_sim" / "data" / "models"
INDEX = yaml.safe_load((MODELS_DIR / "models.yaml").read_text(encoding="utf-8"))["models"]
ENTRIES = {m["id"]: m for m in INDEX}

B = 10**9
M = 10**6

_FOUNDRY = ("llm-foundry scripts/train/benchmarking/README.md (commit 8c8dd48), "
            "NumParams of the seq_len 2048 rows")
_GPT3_SMALL = "Brown et al. 2020 (arXiv 2005.14165) Table 2.1 (nominal)"
# id: (published total, tolerance, source). Tolerance 0 = the exact count is published.
PUBLISHED = {
    "gpt2": (124_439_808, 0, "HF openai-community/gpt2 (124M)"),
    "bert-base-uncased": (109_514_298, 0, "BertForMaskedLM on HF google-bert/bert-base-uncased"),
    # Devlin et al. 2019, sec. 3: "BERT_LARGE (L=24, H=1024, A=16, Total Parameters=340M)", a
    # nominal size: the MLM model has 335.2M (BertModel alone 335.1M).
    "bert-large-uncased": (340 * M, 0.015 * 340 * M, "Devlin et al. 2019 (arXiv 1810.04805)"),
    # Brown et al. 2020 Table 2.1 "175.0B": nominal; 12*L*d^2 + 13*L*d + (V + S)*d = 174.6B.
    "gpt3-175b": (175 * B, 0.005 * 175 * B, "Brown et al. 2020 (arXiv 2005.14165) Table 2.1"),
    # NeMo's names are nominal sizes: 5.05B and 20.26B with the padded vocabulary.
    "gpt3-5b": (5 * B, 0.02 * 5 * B, "NeMo GPTConfig5B (nominal)"),
    "gpt3-20b": (20 * B, 0.02 * 20 * B, "NeMo GPTConfig20B (nominal)"),
    "gpt3-1t": (1008 * B, 0.05 * B, "Narayanan et al. 2021 (arXiv 2104.04473) Table 1: 1008.0B"),
    "llama-2-7b": (6_738_415_616, 0, "HF meta-llama/Llama-2-7b-hf"),
    "llama-2-13b": (13 * B, 0.05 * B, "Touvron et al. 2023 (arXiv 2307.09288): 13B"),
    # "70B" is the nominal size; the model has 68.98B.
    "llama-2-70b": (70 * B, 0.02 * 70 * B, "Touvron et al. 2023 (arXiv 2307.09288): 70B (nominal)"),
    # The model card's table gives 6,053,381,344; transformers builds 2,498,560 (0.04%) fewer and
    # the card does not say what its figure counts, so the bound is 0.05%.
    "gpt-j-6b": (6_053_381_344, 0.0005 * 6_053_381_344, "HF EleutherAI/gpt-j-6b model card"),
    "llama-3-8b": (8_030_261_248, 0, "HF meta-llama/Meta-Llama-3-8B"),
    "llama-3-70b": (70.6 * B, 0.05 * B, "HF meta-llama/Meta-Llama-3-70B: 70.6B"),
    # Meta: "405B" (the hub shows 406B; the count is 405.85B).
    "llama-3.1-405b": (405 * B, 0.005 * 405 * B, "Llama 3 Herd of Models (arXiv 2407.21783): 405B"),
    # "180B" is the nominal size (model card, and Almazrouei et al. 2023, arXiv 2311.16867); the
    # tied-embedding model has 178.56B.
    "falcon-180b": (180 * B, 0.01 * 180 * B, "HF tiiuae/falcon-180B model card: 180B (nominal)"),
    "mistral-7b": (7_241_732_096, 0, "HF mistralai/Mistral-7B-v0.1"),
    "mixtral-8x7b": (46_702_792_704, 0, "HF mistralai/Mixtral-8x7B-v0.1"),
    "mixtral-8x22b": (141 * B, 0.5 * B, "Mistral AI, 'Cheaper, Better, Faster, Stronger' (2024-04): 141B"),
    # Qwen's model cards truncate: 7,615,616,512 is given as "7.61B".
    "qwen2.5-7b": (7.61 * B, 0.01 * B, "Qwen/Qwen2.5-7B model card: 7.61B"),
    "qwen2.5-72b": (72.7 * B, 0.05 * B, "Qwen/Qwen2.5-72B model card: 72.7B"),
    "qwen3-8b": (8.2 * B, 0.05 * B, "Qwen/Qwen3-8B model card: 8.2B"),
    "qwen3-30b-a3b": (30.5 * B, 0.05 * B, "Qwen/Qwen3-30B-A3B model card: 30.5B"),
    "qwen3-235b-a22b": (235 * B, 0.5 * B, "Qwen/Qwen3-235B-A22B model card: 235B"),
    "qwen1.5-moe-a2.7b": (14.3 * B, 0.05 * B, "Qwen blog 'Qwen1.5-MoE' (2024-03): 14.3B"),
    # Main model only: the hub's 685B adds the 14B multi-token-prediction module, which
    # transformers' DeepseekV3ForCausalLM does not build.
    "deepseek-v3": (671 * B, 0.5 * B, "DeepSeek-V3 technical report (arXiv 2412.19437): 671B"),
    "gpt-oss-120b": (116.83 * B, 0.005 * B, "gpt-oss model card (arXiv 2508.10925): 116.83B"),
    # Gemma Team 2024 (arXiv 2408.00118) Table 1: 917,504,000 embedding and 8,324,201,984
    # non-embedding parameters.
    "gemma-2-9b": (9_241_705_984, 0, "Gemma 2 report (arXiv 2408.00118) Table 1"),
    # Gemma 3 report (arXiv 2503.19786) Table 1, 27B: 1,416M embedding + 25,600M non-embedding
    # (the 417M vision encoder is not part of the text model); rounded to millions.
    "gemma-3-27b": (27_016 * M, 0.01 * 27_016 * M, "Gemma 3 report (arXiv 2503.19786) Table 1"),
    # Meta, "The Llama 4 herd" (ai.meta.com/blog/llama-4-multimodal-intelligence, 2025-04-05):
    # Scout 109B total and Maverick 400B total, nominal; Scout's figure includes the vision
    # encoder the text model leaves out (107.77B here).
    "llama-4-scout": (109 * B, 0.015 * 109 * B, "Meta, 'The Llama 4 herd' (2025-04): 109B total (nominal)"),
    "llama-4-maverick": (400 * B, 0.005 * 400 * B, "Meta, 'The Llama 4 herd' (2025-04): 400B total (nominal)"),
    # llm-foundry's benchmark tables give NumParams exactly; these are their seq_len 2048 rows.
    # Brown et al. 2020 Table 2.1's nominal sizes; flash-attention's training scripts pad the vocab
    # to 50264 and give the 2.7B head dim 128, within 2% of them.
    "gpt3-125m": (125 * M, 0.02 * 125 * M, _GPT3_SMALL),
    "gpt3-355m": (350 * M, 0.02 * 350 * M, _GPT3_SMALL),
    "gpt3-760m": (760 * M, 0.02 * 760 * M, _GPT3_SMALL),
    "gpt3-1.3b": (1.3 * B, 0.02 * 1.3 * B, _GPT3_SMALL),
    "gpt3-2.7b-hd128": (2.7 * B, 0.02 * 2.7 * B, _GPT3_SMALL),
    "mpt-125m": (125_311_488, 0, _FOUNDRY),
    "mpt-350m": (355_985_408, 0, _FOUNDRY),
    "mpt-760m": (760_470_528, 0, _FOUNDRY),
    "mpt-1b": (1_315_950_592, 0, _FOUNDRY),
    "mpt-3b": (2_651_837_440, 0, _FOUNDRY),
    "mpt-7b": (6_658_859_008, 0, _FOUNDRY),
    "mpt-13b": (12_853_954_560, 0, _FOUNDRY),
    "mpt-30b": (29_975_214_080, 0, _FOUNDRY),
    "mpt-70b": (64_862_437_376, 0, _FOUNDRY),
}

# id: (published activated parameters per token, tolerance, source); figures are truncated.
PUBLISHED_ACTIVE = {
    "mixtral-8x7b": (12.9 * B, 0.05 * B, "Mixtral of Experts (arXiv 2401.04088): 12.9B active"),
    "mixtral-8x22b": (39 * B, 0.5 * B, "Mistral AI (2024-04): 39B active"),
    "qwen3-30b-a3b": (3.3 * B, 0.1 * B, "Qwen/Qwen3-30B-A3B model card: 3.3B activated"),
    "qwen3-235b-a22b": (22 * B, 0.5 * B, "Qwen/Qwen3-235B-A22B model card: 22B activated"),
    "qwen1.5-moe-a2.7b": (2.7 * B, 0.05 * B, "Qwen blog 'Qwen1.5-MoE': 2.7B activated"),
    "deepseek-v3": (37 * B, 1 * B, "DeepSeek-V3 technical report: 37B activated"),
    "llama-4-scout": (17 * B, 0.5 * B, "Meta, 'The Llama 4 herd' (2025-04): 17B active"),
    "llama-4-maverick": (17 * B, 0.5 * B, "Meta, 'The Llama 4 herd' (2025-04): 17B active"),
}

# id: published non-embedding parameters (Qwen model cards), tolerance.
PUBLISHED_NON_EMBEDDING = {
    "gemma-2-9b": (8_324_201_984, 0),  # Gemma 2 report (arXiv 2408.00118) Table 1
    "gemma-3-27b": (25_600 * M, 0.5 * M),  # Gemma 3 report (arXiv 2503.19786) Table 1
    "qwen2.5-7b": (6.53 * B, 0.01 * B),
    "qwen3-8b": (6.95 * B, 0.01 * B),
    "qwen3-30b-a3b": (29.9 * B, 0.05 * B),
    "qwen3-235b-a22b": (234 * B, 0.5 * B),
}


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _config(model_id: str) -> dict:
    return json.loads((MODELS_DIR / ENTRIES[model_id]["file"]).read_text(encoding="utf-8"))


# --- the index and the files, no torch needed ----------------------------------------------------


def test_index_lists_every_config_file_once():
    files = sorted(p.name for p in MODELS_DIR.glob("*.json"))
    listed = [m["file"] for m in INDEX]
    assert sorted(listed) == files
    assert len(set(listed)) == len(listed)


@pytest.mark.parametrize("model_id", list(ENTRIES))
def test_index_entry_matches_its_file(model_id):
    entry = ENTRIES[model_id]
    assert entry["file"] == f"{model_id}.json"
    config = _config(model_id)
    assert entry["family"] == config["model_type"]
    assert isinstance(config.get("architectures"), list) and len(config["architectures"]) == 1
    assert isinstance(entry["params"], int) and entry["params"] > 0
    assert isinstance(entry["hub_id"], str) and entry["source"]
    assert all(isinstance(a, str) for a in entry["aliases"])
    assert "quantization_config" not in config and "auto_map" not in config
    if not entry["hub_id"]:  # not a hub model: the file says where its numbers come from
        assert config["_accel_sim_note"]


def test_normalised_names_belong_to_one_model_only():
    owner: dict[str, str] = {}
    for m in INDEX:
        for name in {m["id"], *m["aliases"], *([m["hub_id"]] if m["hub_id"] else [])}:
            key = _key(name)
            assert owner.setdefault(key, m["id"]) == m["id"], f"{name!r} names {owner[key]} and {m['id']}"


@pytest.mark.parametrize("model_id", list(PUBLISHED))
def test_params_agree_with_published_figure(model_id):
    published, tolerance, source = PUBLISHED[model_id]
    params = ENTRIES[model_id]["params"]
    assert abs(params - published) <= tolerance, f"{model_id}: {params:,} vs {published:,.0f} ({source})"


def test_every_hub_model_has_a_published_figure():
    assert {m["id"] for m in INDEX if m["hub_id"]} <= set(PUBLISHED)


# --- built in transformers on the meta device -----------------------------------------------------


@functools.lru_cache(maxsize=None)
def _counts(model_id: str) -> tuple[int, int, int]:
    """(total, activated per token, embedding) parameters of the HF model, built on meta."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    config = _config(model_id)
    hf_config = transformers.AutoConfig.for_model(**config)
    model_class = getattr(transformers, config["architectures"][0])
    with torch.device("meta"):
        model = model_class(hf_config)
    total = model.num_parameters()
    # Routed experts are stored fused, [num_experts, ...] per projection; a token uses top-k of them.
    experts = config.get("num_local_experts") or config.get("num_experts") or config.get("n_routed_experts")
    inactive = 0
    for name, p in model.named_parameters():
        if ".experts." in name:
            assert p.shape[0] == experts, name
            inactive += p.numel() // experts * (experts - config["num_experts_per_tok"])
    tables = {model.get_input_embeddings(), model.get_output_embeddings()}
    weights = {id(m.weight): m.weight for m in tables if isinstance(m, (torch.nn.Embedding, torch.nn.Linear))}
    embedding = sum(w.numel() for w in weights.values())  # a tied table once
    return total, total - inactive, embedding


@pytest.mark.parametrize("model_id", list(ENTRIES))
def test_hf_num_parameters_equals_index(model_id):
    total, _, _ = _counts(model_id)
    assert total == ENTRIES[model_id]["params"]


@pytest.mark.parametrize("model_id", list(PUBLISHED_ACTIVE))
def test_moe_activated_parameters_agree_with_published_figure(model_id):
    published, tolerance, source = PUBLISHED_ACTIVE[model_id]
    _, active, _ = _counts(model_id)
    assert abs(active - published) <= tolerance, f"{model_id}: {active:,} active vs {published:,.0f} ({source})"


@pytest.mark.parametrize("model_id", list(PUBLISHED_NON_EMBEDDING))
def test_non_embedding_parameters_agree_with_model_card(model_id):
    published, tolerance = PUBLISHED_NON_EMBEDDING[model_id]
    total, _, embedding = _counts(model_id)
    assert abs(total - embedding - published) <= tolerance


@pytest.mark.parametrize("model_id", ["gpt3-175b", "gpt3-1t", "gpt3-5b", "gpt3-20b"] + [m for m in ENTRIES if m.startswith("mpt-")])
def test_gpt3_counts_follow_the_megatron_formula(model_id):
    """P = L*(12 d^2 + 13 d) + (V + S) d + 2 d (Narayanan et al. 2021, eq. for GPT, tied head)."""
    c = _config(model_id)
    L, d, V, S = c["n_layer"], c["n_embd"], c["vocab_size"], c["n_positions"]
    assert _counts(model_id)[0] == L * (12 * d * d + 13 * d) + (V + S) * d + 2 * d


def test_deepseek_v3_count_by_hand():
    """MLA attention, 3 dense layers, 58 MoE layers of 256 routed + 1 shared expert, no MTP layer."""
    c = _config("deepseek-v3")
    h, n = c["hidden_size"], c["num_attention_heads"]
    qk = c["qk_nope_head_dim"] + c["qk_rope_head_dim"]
    attention = (
        h * c["q_lora_rank"] + c["q_lora_rank"] + c["q_lora_rank"] * n * qk  # q_a, q_a_norm, q_b
        + h * (c["kv_lora_rank"] + c["qk_rope_head_dim"]) + c["kv_lora_rank"]  # kv_a (+rope key), norm
        + c["kv_lora_rank"] * n * (c["qk_nope_head_dim"] + c["v_head_dim"])  # kv_b
        + n * c["v_head_dim"] * h  # o_proj
    )
    expert = 3 * h * c["moe_intermediate_size"]
    moe = (c["n_routed_experts"] + c["n_shared_experts"]) * expert + c["n_routed_experts"] * h  # + router
    dense = 3 * h * c["intermediate_size"]
    k, layers = c["first_k_dense_replace"], c["num_hidden_layers"]
    total = layers * (attention + 2 * h) + k * dense + (layers - k) * moe + 2 * c["vocab_size"] * h + h
    assert total == 671_026_404_352 == _counts("deepseek-v3")[0]


def test_gpt_oss_active_parameters_are_the_model_cards():
    """The card's 5.13B active parameters count every weight a token uses except the input
    embedding table: attention (with sinks and biases), the router, 4 of 128 experts with their
    biases, the norms and the unembedding."""
    c = _config("gpt-oss-120b")
    h, heads, kv, d = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    f, k = c["intermediate_size"], c["num_experts_per_tok"]
    attention = h * heads * d + heads * d + 2 * (h * kv * d + kv * d) + heads * d * h + h + heads
    experts = k * (h * 2 * f + 2 * f + f * h + h) + c["num_local_experts"] * (h + 1)
    layer = attention + experts + 2 * h
    active = c["num_hidden_layers"] * layer + h + c["vocab_size"] * h
    assert abs(active - 5.13 * B) <= 0.005 * B
    total, with_embedding, embedding = _counts("gpt-oss-120b")
    assert with_embedding == active + embedding // 2  # input and output tables, untied


def test_vit_era5_is_the_nersc_study_transformer():
    """models.py of transformer-perf-estimates: vit_era5 = {l: 64800*4, e: 4096, h: 64, depth: 32}, f = 4e."""
    c = _config("vit-era5")
    e, depth = c["hidden_size"], c["num_hidden_layers"]
    assert (e, c["num_attention_heads"], depth, c["intermediate_size"]) == (4096, 64, 32, 4 * 4096)
    height, width = c["image_size"]
    assert (height // c["patch_size"]) * (width // c["patch_size"]) == 64800 * 4
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    with torch.device("meta"):
        model = transformers.ViTModel(transformers.AutoConfig.for_model(**c))
    blocks = sum(p.numel() for name, p in model.named_parameters() if name.startswith(("encoder.", "layers.")))
    assert blocks == depth * (12 * e * e + 13 * e)  # qkv, proj, fc1, fc2 with biases; two LayerNorms
    assert model.embeddings.position_embeddings.shape[1] == 64800 * 4 + 1


def test_gpt_j_count_by_hand():
    """GPT-J: per layer one LayerNorm (2d), q/k/v/out without biases (4d^2), fc_in and fc_out
    with biases (2 * 4d^2 + 4d + d); the embedding, ln_f and an untied lm_head with a bias."""
    c = _config("gpt-j-6b")
    d, L, V = c["n_embd"], c["n_layer"], c["vocab_size"]
    layer = 2 * d + 4 * d * d + 8 * d * d + 5 * d
    # 28 * 201,355,264 + 206,438,400 + 8,192 + 206,488,800
    assert L * layer + V * d + 2 * d + V * d + V == 6_050_882_784 == _counts("gpt-j-6b")[0]


def test_falcon_180b_count_by_hand():
    """Falcon new decoder architecture: per layer a fused QKV of (232 + 2 * 8) heads of 64, the
    output projection, a 4d GELU MLP, no biases, two LayerNorms (ln_attn, ln_mlp: 4d); a tied
    embedding and ln_f."""
    c = _config("falcon-180b")
    d, L, V = c["hidden_size"], c["num_hidden_layers"], c["vocab_size"]
    head = d // c["num_attention_heads"]
    qkv = d * (c["num_attention_heads"] + 2 * c["num_kv_heads"]) * head
    layer = qkv + d * d + 2 * d * 4 * d + 4 * d
    # 80 * 2,219,894,784 + 965,476,352 + 29,696
    assert L * layer + V * d + 2 * d == 178_557_088_768 == _counts("falcon-180b")[0]
